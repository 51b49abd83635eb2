package server

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/goccy/go-json"
	"github.com/valyala/fasthttp"
	"rtcd/actors"
	"rtcd/apierr"
	"rtcd/media"
	"rtcd/money"
)

// The private listener (--metrics-listen) serves what must never be public:
// /metrics, /healthz, and the operator routes under /admin/, which need the
// admin token from <data-dir>/admin.token (created 0600 on first start).
// Operator commands (rtcd billing adjust) run against a live server through
// it, because Pebble admits one process at a time.

const (
	adminTokenFile  = "admin.token"
	adminTokenBytes = 32
	// maxAdminBodyBytes bounds an operator request's body.
	maxAdminBodyBytes = 4096
)

// LoadOrCreateAdminToken returns the operator token of the data directory.
func LoadOrCreateAdminToken(dataDir string) (string, error) {
	path := filepath.Join(dataDir, adminTokenFile)
	b, err := os.ReadFile(path)
	if err == nil {
		return strings.TrimSpace(string(b)), nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	raw := make([]byte, adminTokenBytes)
	if _, err := rand.Read(raw); err != nil {
		return "", err
	}
	token := hex.EncodeToString(raw)
	if err := os.WriteFile(path, []byte(token+"\n"), 0o600); err != nil {
		return "", err
	}
	return token, nil
}

// AdjustRequest is the body of POST /admin/billing/adjust.
type AdjustRequest struct {
	AccountID string `json:"account_id"`
	Amount    string `json:"amount"` // signed decimal, up to six decimals
	Reason    string `json:"reason"`
	Operator  string `json:"operator"` // who runs the command, for the audit log
}

// privateFail answers an operator route with the API's error envelope.
func privateFail(ctx *fasthttp.RequestCtx, err *apierr.Error) {
	body, _ := json.Marshal(map[string]any{"error": map[string]any{"code": err.Code, "message": err.Message, "details": err.Details}})
	ctx.SetStatusCode(apierr.StatusOf(err))
	ctx.SetContentType("application/json")
	ctx.SetBody(body)
}

// adminAuthorized checks an operator route's method (POST) and admin token,
// and answers the request when either is wrong.
func adminAuthorized(ctx *fasthttp.RequestCtx, adminToken string) bool {
	if !ctx.IsPost() {
		privateFail(ctx, apierr.New(apierr.InvalidRequest, "use POST").WithStatus(405))
		return false
	}
	got := []byte(strings.TrimPrefix(string(ctx.Request.Header.Peek("Authorization")), "Bearer "))
	if subtle.ConstantTimeCompare(got, []byte(adminToken)) != 1 {
		privateFail(ctx, apierr.New(apierr.AuthenticationFailed, "send the admin token of the data directory as a bearer credential"))
		return false
	}
	return true
}

func privateHandler(engine *actors.Engine, metricsHandler fasthttp.RequestHandler, adminToken string, mediaReports fasthttp.RequestHandler,
	adjust fasthttp.RequestHandler) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		switch string(ctx.Path()) {
		case "/metrics":
			metricsHandler(ctx)
		case "/healthz":
			ctx.SetContentType("text/plain")
			ctx.SetBodyString("ok\n")
		case media.ReportsPath:
			mediaReports(ctx)
		case adjustPath:
			if !adminAuthorized(ctx, adminToken) {
				return
			}
			adjust(ctx)
		default:
			ctx.SetStatusCode(404)
		}
	}
}

// adjustPath is the operator route of `rtcd billing adjust`.
const adjustPath = "/admin/billing/adjust"

// adjustHandler applies an authorized POST /admin/billing/adjust here,
// where the workspace's wallet runs.
func adjustHandler(engine *actors.Engine) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		req, aerr := readAdjust(ctx)
		if aerr != nil {
			privateFail(ctx, aerr)
			return
		}
		amount, _ := money.Parse(req.Amount, money.MaxDecimals) // checked by readAdjust
		operator := req.Operator
		if operator == "" {
			operator = "operator"
		}
		body, aerr := engine.AdjustBalance(req.AccountID, amount, req.Reason, operator)
		if aerr != nil {
			privateFail(ctx, aerr)
			return
		}
		ctx.SetContentType("application/json")
		ctx.SetBody(body)
	}
}

// readAdjust reads and checks the body of POST /admin/billing/adjust.
func readAdjust(ctx *fasthttp.RequestCtx) (AdjustRequest, *apierr.Error) {
	var req AdjustRequest
	if len(ctx.PostBody()) > maxAdminBodyBytes || json.Unmarshal(ctx.PostBody(), &req) != nil {
		return req, apierr.New(apierr.InvalidRequest, "body must be {account_id, amount, reason, operator}")
	}
	if _, err := money.Parse(req.Amount, money.MaxDecimals); err != nil {
		return req, apierr.Invalid("amount", "amount must be a signed decimal with at most six decimals")
	}
	return req, nil
}

// AdjustBalance is the client side of `rtcd billing adjust`.
func AdjustBalance(privateAddr, adminToken string, req AdjustRequest) ([]byte, error) {
	body, _ := json.Marshal(req)
	r := fasthttp.AcquireRequest()
	defer fasthttp.ReleaseRequest(r)
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseResponse(resp)
	r.SetRequestURI("http://" + privateAddr + adjustPath)
	r.Header.SetMethod("POST")
	r.Header.Set("Authorization", "Bearer "+adminToken)
	r.Header.SetContentType("application/json")
	r.SetBody(body)
	if err := fasthttp.Do(r, resp); err != nil {
		return nil, fmt.Errorf("is rtcd serve running with --metrics-listen %s? %w", privateAddr, err)
	}
	out := append([]byte(nil), resp.Body()...)
	if resp.StatusCode() != 200 {
		return out, fmt.Errorf("the server refused the adjustment (%d): %s", resp.StatusCode(), out)
	}
	return out, nil
}
