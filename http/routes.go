package http

import (
	"sync"

	"rtcd/actors"
	"rtcd/apierr"
	sc "rtcd/scopes"
)

// listed adapts a list operation: it parses the limit query parameter
// (pagination rules) before calling list.
func listed(list func(rc *reqCtx, limit int) ([]byte, *apierr.Error)) func(rc *reqCtx) {
	return func(rc *reqCtx) {
		limit, err := rc.limit()
		if err != nil {
			rc.fail(err)
			return
		}
		rc.respondBody(list(rc, limit))
	}
}

// created adapts a create operation that takes an Idempotency-Key: it reads
// the header and strictly decodes the body into a fresh T (an empty body is
// {} when emptyOK) before calling create.
func created[T any](emptyOK bool, create func(rc *reqCtx, p *T, idem *actors.IdempotencyRequest) (actors.Result, *apierr.Error)) func(rc *reqCtx) {
	return func(rc *reqCtx) {
		var p T
		idem, err := rc.idempotency()
		if err == nil {
			err = rc.decode(&p, emptyOK)
		}
		if err != nil {
			rc.fail(err)
			return
		}
		rc.respond(create(rc, &p, idem))
	}
}

// decoded adapts an operation with a JSON body and no Idempotency-Key: it
// strictly decodes the body into a fresh T (an empty body is {} when
// emptyOK) and answers status with the operation's body.
func decoded[T any](emptyOK bool, status int, op func(rc *reqCtx, p *T) ([]byte, *apierr.Error)) func(rc *reqCtx) {
	return func(rc *reqCtx) {
		var p T
		if err := rc.decode(&p, emptyOK); err != nil {
			rc.fail(err)
			return
		}
		body, err := op(rc, &p)
		if err != nil {
			rc.fail(err)
			return
		}
		rc.ok(status, body)
	}
}

// route registers h for method and path behind wrap (authentication, the
// scopes required, metrics, request id); path is also the route's label in
// metrics.
func (s *Server) route(method, path string, mode authMode, h func(rc *reqCtx), required ...sc.Scope) {
	s.router.Handle(method, path, s.wrap(path, mode, h, required...))
}

// The public API's paths (docs/api.md).
const (
	roomsPath        = "/v1/rooms"
	roomPath         = roomsPath + "/{room_id}"
	participantsPath = roomPath + "/participants"
	participantPath  = participantsPath + "/{participant_id}"
	connectPath      = "/v1/connect"
	apiKeysPath      = "/v1/api-keys"
	apiKeyPath       = apiKeysPath + "/{key_id}"
	endpointsPath    = "/v1/webhook-endpoints"
	endpointPath     = endpointsPath + "/{endpoint_id}"
	deliveriesPath   = endpointPath + "/deliveries"
	retryPath        = deliveriesPath + "/{delivery_id}/retry"
)

// routes registers every route of the public API with the scope it needs
// (docs/api.md). The billing and dashboard routes are in billingRoutes and
// dashboardRoutes.
func (s *Server) routes() {
	s.route("POST", roomsPath, apiKey, created(true, s.createRoom), sc.RoomsWrite)
	s.route("GET", roomsPath, apiKey, listed(s.listRooms), sc.RoomsRead)
	s.route("GET", roomPath, apiKey, s.getRoom, sc.RoomsRead)
	s.route("DELETE", roomPath, apiKey, s.deleteRoom, sc.RoomsWrite)

	s.route("POST", participantsPath, apiKey, created(true, s.createParticipant), sc.ParticipantsWrite)
	s.route("GET", participantsPath, apiKey, listed(s.listParticipants), sc.ParticipantsRead)
	s.route("GET", participantPath, apiKey, s.getParticipant, sc.ParticipantsRead)
	s.route("DELETE", participantPath, apiKey, s.removeParticipant, sc.ParticipantsWrite)

	s.route("POST", connectPath, noAuth, s.connect) // the participant token in the body is the credential
	s.preflight(connectPath, connectAllowedHeaders) // web clients call it from any origin (cors.go)

	s.route("POST", apiKeysPath, apiKey, created(false, s.createAPIKey), sc.APIKeysWrite)
	s.route("GET", apiKeysPath, apiKey, listed(s.listAPIKeys), sc.APIKeysRead)
	s.route("DELETE", apiKeyPath, apiKey, s.revokeAPIKey, sc.APIKeysWrite)

	s.route("GET", "/v1/project/limits", apiKey, s.projectLimits, sc.ProjectRead)
	s.route("GET", "/v1/audit-logs", apiKey, listed(s.listAuditLogs), sc.AuditLogsRead)
	s.route("GET", "/v1/usage/summary", apiKey, s.usageSummary, sc.UsageRead)
	s.route("GET", "/v1/usage/daily", apiKey, s.usageDaily, sc.UsageRead)

	s.route("GET", "/v1/billing/balance", apiKey, s.balance, sc.BillingRead)
	s.route("GET", "/v1/billing/pricing", apiKey, s.pricing, sc.BillingRead)
	s.route("GET", "/v1/billing/ledger", apiKey, listed(s.ledger), sc.BillingRead)
	s.route("GET", "/v1/billing/topups", apiKey, listed(s.listTopups), sc.BillingRead)
	s.route("GET", "/v1/billing/topups/{payment_id}", apiKey, s.getTopup, sc.BillingRead)

	s.route("POST", endpointsPath, apiKey, created(false, s.createEndpoint), sc.WebhooksWrite)
	s.route("GET", endpointsPath, apiKey, listed(s.listEndpoints), sc.WebhooksRead)
	s.route("DELETE", endpointPath, apiKey, s.disableEndpoint, sc.WebhooksWrite)
	s.route("GET", deliveriesPath, apiKey, listed(s.listDeliveries), sc.WebhooksRead)
	s.route("POST", retryPath, apiKey, s.retryDelivery, sc.WebhooksWrite)

	s.route("GET", "/v1/system/info", apiKeyNo, s.getSystemInfo)
}

// --- rooms ---------------------------------------------------------------

func (s *Server) createRoom(rc *reqCtx, p *actors.RoomParams, idem *actors.IdempotencyRequest) (actors.Result, *apierr.Error) {
	return s.engine.CreateRoom(rc.caller, p, idem)
}

func (s *Server) listRooms(rc *reqCtx, limit int) ([]byte, *apierr.Error) {
	return s.engine.ListRooms(rc.caller, limit)
}

func (s *Server) getRoom(rc *reqCtx) {
	rc.respondBody(s.engine.GetRoom(rc.caller, rc.param("room_id")))
}

func (s *Server) deleteRoom(rc *reqCtx) {
	rc.respond(s.engine.DeleteRoom(rc.caller, rc.param("room_id")))
}

// --- participants --------------------------------------------------------

func (s *Server) createParticipant(rc *reqCtx, p *actors.ParticipantParams, idem *actors.IdempotencyRequest) (actors.Result, *apierr.Error) {
	return s.engine.CreateParticipant(rc.caller, rc.param("room_id"), p, idem)
}

func (s *Server) listParticipants(rc *reqCtx, limit int) ([]byte, *apierr.Error) {
	return s.engine.ListParticipants(rc.caller, rc.param("room_id"), limit)
}

func (s *Server) getParticipant(rc *reqCtx) {
	rc.respondBody(s.engine.GetParticipant(rc.caller, rc.param("room_id"), rc.param("participant_id")))
}

func (s *Server) removeParticipant(rc *reqCtx) {
	rc.respond(s.engine.RemoveParticipant(rc.caller, rc.param("room_id"), rc.param("participant_id")))
}

// --- connect -------------------------------------------------------------

// connect is POST /v1/connect. Its outcome, a body refused before the
// engine sees it included, is counted here and only here, in
// rtcd_connect_results_total ("ok" or the error code).
//
// It is the API's hot path (issue 15): the body is read in one pass
// (decodeConnect), the engine decides on this goroutine and appends the
// answer into a pooled buffer, and the counter of an ok is resolved once.
func (s *Server) connect(rc *reqCtx) {
	var p actors.ConnectParams
	err := decodeConnect(rc.ctx.PostBody(), rc.ctx.Request.Header.ContentType(), &p)
	if err == nil {
		buf := connectBuffers.Get().(*[]byte)
		var body []byte
		body, err = s.engine.AppendConnect((*buf)[:0], &p, s.sourceIP(rc.ctx))
		if err == nil {
			rc.ok(200, body) // copied into the response
			*buf = body[:0]  // keeps what the buffer grew to
			connectBuffers.Put(buf)
			if s.connectOK != nil {
				s.connectOK.Inc()
			}
			return
		}
		connectBuffers.Put(buf)
	}
	if s.metrics != nil {
		s.metrics.ConnectResults.WithLabelValues(string(err.Code)).Inc()
	}
	rc.fail(err)
}

// connectBuffers hold connect answers while they are built (about 540
// bytes each).
var connectBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// --- API keys ------------------------------------------------------------

func (s *Server) createAPIKey(rc *reqCtx, p *actors.APIKeyParams, idem *actors.IdempotencyRequest) (actors.Result, *apierr.Error) {
	return s.engine.CreateAPIKey(rc.caller, p, idem)
}

func (s *Server) listAPIKeys(rc *reqCtx, limit int) ([]byte, *apierr.Error) {
	return s.engine.ListAPIKeys(rc.caller, limit)
}

func (s *Server) revokeAPIKey(rc *reqCtx) {
	rc.respond(s.engine.RevokeAPIKey(rc.caller, rc.param("key_id")))
}

// --- project, audit log, usage -------------------------------------------

func (s *Server) projectLimits(rc *reqCtx) {
	rc.respondBody(s.engine.ProjectLimits(rc.caller))
}

func (s *Server) listAuditLogs(rc *reqCtx, limit int) ([]byte, *apierr.Error) {
	return s.engine.ListAuditLogs(rc.caller, limit)
}

func (s *Server) usageSummary(rc *reqCtx) {
	args := rc.ctx.QueryArgs()
	rc.respondBody(s.engine.UsageSummary(rc.caller, string(args.Peek("from")), string(args.Peek("to"))))
}

func (s *Server) usageDaily(rc *reqCtx) {
	args := rc.ctx.QueryArgs()
	rc.respondBody(s.engine.UsageDaily(rc.caller, string(args.Peek("from")), string(args.Peek("to"))))
}

// --- billing (reads; top-ups and provider callbacks are in billing.go) ---

func (s *Server) balance(rc *reqCtx) {
	rc.respondBody(s.engine.Balance(rc.caller))
}

func (s *Server) pricing(rc *reqCtx) {
	rc.respondBody(s.engine.Pricing(rc.caller))
}

func (s *Server) ledger(rc *reqCtx, limit int) ([]byte, *apierr.Error) {
	return s.engine.Ledger(rc.caller, limit)
}

func (s *Server) listTopups(rc *reqCtx, limit int) ([]byte, *apierr.Error) {
	return s.engine.ListTopups(rc.caller, limit)
}

func (s *Server) getTopup(rc *reqCtx) {
	rc.respondBody(s.engine.GetTopup(rc.caller, rc.param("payment_id")))
}

// --- webhook endpoints and deliveries ------------------------------------

func (s *Server) createEndpoint(rc *reqCtx, p *actors.EndpointParams, idem *actors.IdempotencyRequest) (actors.Result, *apierr.Error) {
	return s.engine.CreateEndpoint(rc.caller, p, idem)
}

func (s *Server) listEndpoints(rc *reqCtx, limit int) ([]byte, *apierr.Error) {
	return s.engine.ListEndpoints(rc.caller, limit)
}

func (s *Server) disableEndpoint(rc *reqCtx) {
	rc.respond(s.engine.DisableEndpoint(rc.caller, rc.param("endpoint_id")))
}

func (s *Server) listDeliveries(rc *reqCtx, limit int) ([]byte, *apierr.Error) {
	return s.engine.ListDeliveries(rc.caller, rc.param("endpoint_id"), limit)
}

func (s *Server) retryDelivery(rc *reqCtx) {
	rc.respond(s.engine.RetryDelivery(rc.caller, rc.param("endpoint_id"), rc.param("delivery_id")))
}

// --- system --------------------------------------------------------------

func (s *Server) getSystemInfo(rc *reqCtx) {
	rc.ok(200, s.systemInfo)
}
