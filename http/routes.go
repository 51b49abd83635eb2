package http

import (
	"github.com/goccy/go-json"
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

// routes registers every route with the scope it needs (docs/api.md).
func (s *Server) routes() {
	r := s.router
	e := s.engine

	r.POST("/v1/rooms", s.wrap("/v1/rooms", apiKey, created(true, func(rc *reqCtx, p *actors.RoomParams, idem *actors.IdempotencyRequest) (actors.Result, *apierr.Error) {
		return e.CreateRoom(rc.caller, p, idem)
	}), sc.RoomsWrite))
	r.GET("/v1/rooms", s.wrap("/v1/rooms", apiKey, listed(func(rc *reqCtx, limit int) ([]byte, *apierr.Error) {
		return e.ListRooms(rc.caller, limit)
	}), sc.RoomsRead))
	r.GET("/v1/rooms/{room_id}", s.wrap("/v1/rooms/{room_id}", apiKey, func(rc *reqCtx) {
		rc.respondBody(e.GetRoom(rc.caller, rc.param("room_id")))
	}, sc.RoomsRead))
	r.DELETE("/v1/rooms/{room_id}", s.wrap("/v1/rooms/{room_id}", apiKey, func(rc *reqCtx) {
		rc.respond(e.DeleteRoom(rc.caller, rc.param("room_id")))
	}, sc.RoomsWrite))

	const participants = "/v1/rooms/{room_id}/participants"
	const participant = participants + "/{participant_id}"
	r.POST(participants, s.wrap(participants, apiKey, created(true, func(rc *reqCtx, p *actors.ParticipantParams, idem *actors.IdempotencyRequest) (actors.Result, *apierr.Error) {
		return e.CreateParticipant(rc.caller, rc.param("room_id"), p, idem)
	}), sc.ParticipantsWrite))
	r.GET(participants, s.wrap(participants, apiKey, listed(func(rc *reqCtx, limit int) ([]byte, *apierr.Error) {
		return e.ListParticipants(rc.caller, rc.param("room_id"), limit)
	}), sc.ParticipantsRead))
	r.GET(participant, s.wrap(participant, apiKey, func(rc *reqCtx) {
		rc.respondBody(e.GetParticipant(rc.caller, rc.param("room_id"), rc.param("participant_id")))
	}, sc.ParticipantsRead))
	r.DELETE(participant, s.wrap(participant, apiKey, func(rc *reqCtx) {
		rc.respond(e.RemoveParticipant(rc.caller, rc.param("room_id"), rc.param("participant_id")))
	}, sc.ParticipantsWrite))

	r.POST("/v1/connect", s.wrap("/v1/connect", noAuth, func(rc *reqCtx) {
		var p actors.ConnectParams
		if err := rc.decode(&p, false); err != nil {
			e.CountConnectResult(err.Code)
			rc.fail(err)
			return
		}
		rc.respond(e.Connect(&p, s.sourceIP(rc.ctx)))
	}))

	r.POST("/v1/api-keys", s.wrap("/v1/api-keys", apiKey, created(false, func(rc *reqCtx, p *actors.APIKeyParams, idem *actors.IdempotencyRequest) (actors.Result, *apierr.Error) {
		return e.CreateAPIKey(rc.caller, p, idem)
	}), sc.APIKeysWrite))
	r.GET("/v1/api-keys", s.wrap("/v1/api-keys", apiKey, listed(func(rc *reqCtx, limit int) ([]byte, *apierr.Error) {
		return e.ListAPIKeys(rc.caller, limit)
	}), sc.APIKeysRead))
	r.DELETE("/v1/api-keys/{key_id}", s.wrap("/v1/api-keys/{key_id}", apiKey, func(rc *reqCtx) {
		rc.respond(e.RevokeAPIKey(rc.caller, rc.param("key_id")))
	}, sc.APIKeysWrite))

	r.GET("/v1/project/limits", s.wrap("/v1/project/limits", apiKey, func(rc *reqCtx) {
		rc.respondBody(e.ProjectLimits(rc.caller))
	}, sc.ProjectRead))
	r.GET("/v1/audit-logs", s.wrap("/v1/audit-logs", apiKey, listed(func(rc *reqCtx, limit int) ([]byte, *apierr.Error) {
		return e.ListAuditLogs(rc.caller, limit)
	}), sc.AuditLogsRead))
	r.GET("/v1/usage/summary", s.wrap("/v1/usage/summary", apiKey, func(rc *reqCtx) {
		args := rc.ctx.QueryArgs()
		rc.respondBody(e.UsageSummary(rc.caller, string(args.Peek("from")), string(args.Peek("to"))))
	}, sc.UsageRead))
	r.GET("/v1/usage/daily", s.wrap("/v1/usage/daily", apiKey, func(rc *reqCtx) {
		args := rc.ctx.QueryArgs()
		rc.respondBody(e.UsageDaily(rc.caller, string(args.Peek("from")), string(args.Peek("to"))))
	}, sc.UsageRead))

	r.GET("/v1/billing/balance", s.wrap("/v1/billing/balance", apiKey, func(rc *reqCtx) {
		rc.respondBody(e.Balance(rc.caller))
	}, sc.BillingRead))
	r.GET("/v1/billing/pricing", s.wrap("/v1/billing/pricing", apiKey, func(rc *reqCtx) {
		rc.respondBody(e.Pricing(rc.caller))
	}, sc.BillingRead))
	r.GET("/v1/billing/ledger", s.wrap("/v1/billing/ledger", apiKey, listed(func(rc *reqCtx, limit int) ([]byte, *apierr.Error) {
		return e.Ledger(rc.caller, limit)
	}), sc.BillingRead))
	r.GET("/v1/billing/topups", s.wrap("/v1/billing/topups", apiKey, listed(func(rc *reqCtx, limit int) ([]byte, *apierr.Error) {
		return e.ListTopups(rc.caller, limit)
	}), sc.BillingRead))
	r.GET("/v1/billing/topups/{payment_id}", s.wrap("/v1/billing/topups/{payment_id}", apiKey, func(rc *reqCtx) {
		rc.respondBody(e.GetTopup(rc.caller, rc.param("payment_id")))
	}, sc.BillingRead))

	r.POST("/v1/webhook-endpoints", s.wrap("/v1/webhook-endpoints", apiKey, created(false, func(rc *reqCtx, p *actors.EndpointParams, idem *actors.IdempotencyRequest) (actors.Result, *apierr.Error) {
		return e.CreateEndpoint(rc.caller, p, idem)
	}), sc.WebhooksWrite))
	r.GET("/v1/webhook-endpoints", s.wrap("/v1/webhook-endpoints", apiKey, listed(func(rc *reqCtx, limit int) ([]byte, *apierr.Error) {
		return e.ListEndpoints(rc.caller, limit)
	}), sc.WebhooksRead))
	r.DELETE("/v1/webhook-endpoints/{endpoint_id}", s.wrap("/v1/webhook-endpoints/{endpoint_id}", apiKey, func(rc *reqCtx) {
		rc.respond(e.DisableEndpoint(rc.caller, rc.param("endpoint_id")))
	}, sc.WebhooksWrite))
	const deliveries = "/v1/webhook-endpoints/{endpoint_id}/deliveries"
	r.GET(deliveries, s.wrap(deliveries, apiKey, listed(func(rc *reqCtx, limit int) ([]byte, *apierr.Error) {
		return e.ListDeliveries(rc.caller, rc.param("endpoint_id"), limit)
	}), sc.WebhooksRead))
	const retry = deliveries + "/{delivery_id}/retry"
	r.POST(retry, s.wrap(retry, apiKey, func(rc *reqCtx) {
		rc.respond(e.RetryDelivery(rc.caller, rc.param("endpoint_id"), rc.param("delivery_id")))
	}, sc.WebhooksWrite))

	info, _ := json.Marshal(s.serverInfo)
	r.GET("/v1/system/info", s.wrap("/v1/system/info", apiKeyNo, func(rc *reqCtx) {
		rc.ok(200, info)
	}))
}
