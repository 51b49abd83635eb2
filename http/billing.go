package http

import (
	"context"
	nethttp "net/http"
	"strings"
	"time"

	"github.com/valyala/fasthttp"
	"rtcd/actors"
	"rtcd/apierr"
	"rtcd/ids"
	"rtcd/money"
	"rtcd/payments"
	sc "rtcd/scopes"
)

// Payments is the payment provider the billing routes use; Sandbox is set
// only when the provider is the embedded sandbox (it serves its pages).
type Payments struct {
	Provider payments.Provider
	Sandbox  *payments.Sandbox
	// Now is the clock callbacks are verified against.
	Now func() time.Time
}

// providerCallTimeout bounds a call to the payment provider made while a
// request waits (checkout creation, the sandbox's callback; the receipt
// lookup has payments.ReceiptFetchTimeout).
const providerCallTimeout = 15 * time.Second

// billingRoutes registers top-up creation, provider callbacks and the
// sandbox's checkout and receipt pages.
func (s *Server) billingRoutes(p Payments) {
	s.payments = p
	r, e := s.router, s.engine
	checkout := func(ctx context.Context, paymentID, accountID string, amount money.Micros, currency, method string, expiresAt time.Time) (actors.Checkout, error) {
		co, err := p.Provider.CreateCheckout(ctx, payments.CheckoutRequest{
			PaymentID: paymentID, AccountID: accountID, Amount: amount, Currency: currency,
			Method: payments.Method(method), ExpiresAt: expiresAt,
		})
		return actors.Checkout{Provider: p.Provider.Name(), ProviderRef: co.ProviderRef, AuthorizeURL: co.AuthorizeURL}, err
	}
	r.POST("/v1/billing/topups", s.wrap("/v1/billing/topups", apiKey, func(rc *reqCtx) {
		var params actors.TopupParams
		if err := rc.decode(&params, false); err != nil {
			rc.fail(err)
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), providerCallTimeout)
		defer cancel()
		rc.respond(e.CreateTopup(ctx, rc.caller, &params, checkout))
	}, sc.BillingWrite))

	// Provider callbacks authenticate by the provider's signature, not by
	// an API key. Every verified callback the wallet applied is answered
	// 200 (so the provider stops retrying); a bad signature 400; one not
	// applied, or applied without the receipt it should bring, 5xx (so the
	// provider delivers it again).
	receipt := payments.ReceiptLookup(p.Provider)
	const webhook = paymentCallbackRoute
	r.POST(webhook, s.wrap(webhook, noAuth, func(rc *reqCtx) {
		if rc.param("provider") != p.Provider.Name() {
			rc.fail(apierr.New(apierr.InvalidRequest, "no payment provider %q is configured", rc.param("provider")).WithStatus(404))
			return
		}
		events, err := s.parseCallback(rc.ctx)
		if err != nil {
			rc.fail(apierr.New(apierr.InvalidRequest, "the callback's signature or body did not verify"))
			return
		}
		for _, ev := range events {
			u := actors.PaymentUpdate{
				Provider:        p.Provider.Name(),
				ProviderEventID: ev.ProviderEventID, PaymentID: ev.PaymentID, ProviderRef: ev.ProviderRef,
				Status: string(ev.Type), Amount: int64(ev.Amount), ReceiptURL: ev.ReceiptURL, At: ev.At,
			}
			if aerr := e.ApplyPayment(context.Background(), u, receipt); aerr != nil && aerr.Code != apierr.InvalidRequest {
				rc.fail(aerr) // a non-2xx makes the provider deliver it again
				return
			}
		}
		rc.ok(200, []byte(`{"received":true}`))
	}))

	// Where hosted checkouts created before the dashboard sent the payer
	// back: now a redirect to the dashboard's page of the top-up, which
	// shows its state and receipt; without a valid payment id, a plain page
	// (no API key: a browser has none).
	r.GET("/v1/billing/return", s.wrap("/v1/billing/return", noAuth, func(rc *reqCtx) {
		if id := string(rc.ctx.QueryArgs().Peek("payment_id")); ids.Valid(id, ids.Payment) {
			to := TopupReturnPath + id
			if string(rc.ctx.QueryArgs().Peek("canceled")) == "1" {
				to += "?canceled=1"
			}
			rc.ctx.Response.Header.Set("Location", to)
			rc.ctx.Response.Header.Set("Cache-Control", "no-store")
			rc.ctx.SetStatusCode(303)
			return
		}
		rc.ctx.SetStatusCode(200)
		rc.ctx.SetContentType("text/html; charset=utf-8")
		rc.ctx.Response.Header.Set("Cache-Control", "no-store")
		rc.ctx.SetBodyString(returnPage)
	}))

	if p.Sandbox == nil {
		return
	}
	page := func(rc *reqCtx, html []byte, status int) {
		rc.ctx.SetStatusCode(status)
		rc.ctx.SetContentType(payments.PageContentType)
		rc.ctx.Response.Header.Set("Content-Security-Policy", payments.PageContentSecurityPolicy)
		rc.ctx.Response.Header.Set("Cache-Control", payments.PageCacheControl)
		rc.ctx.SetBody(html)
	}
	const checkoutPage = payments.SandboxCheckoutPath + "{payment_id}"
	r.GET(checkoutPage, s.wrap(checkoutPage, noAuth, func(rc *reqCtx) {
		html, status := p.Sandbox.CheckoutPage(rc.param("payment_id"), string(rc.ctx.QueryArgs().Peek("t")))
		page(rc, html, status)
	}))
	r.POST(checkoutPage, s.wrap(checkoutPage, noAuth, func(rc *reqCtx) {
		ctx, cancel := context.WithTimeout(context.Background(), providerCallTimeout)
		defer cancel()
		html, status := p.Sandbox.Complete(ctx, rc.param("payment_id"), string(rc.ctx.QueryArgs().Peek("t")),
			string(rc.ctx.PostArgs().Peek("outcome")))
		page(rc, html, status)
	}))
	const receiptPage = payments.SandboxReceiptPath + "{payment_id}"
	r.GET(receiptPage, s.wrap(receiptPage, noAuth, func(rc *reqCtx) {
		html, status := p.Sandbox.ReceiptPage(rc.param("payment_id"), string(rc.ctx.QueryArgs().Peek("t")))
		page(rc, html, status)
	}))
}

// returnPage is shown to a payer coming back from a hosted checkout.
const returnPage = `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Payment</title></head>
<body style="font-family:system-ui,sans-serif;max-width:32rem;margin:4rem auto">
<h1>Thank you</h1><p>Your payment is being confirmed. The balance is credited as soon as the payment
provider confirms it; you can close this window.</p></body></html>`

// parseCallback verifies and reads the payment provider's callback in ctx.
func (s *Server) parseCallback(ctx *fasthttp.RequestCtx) ([]payments.Event, error) {
	p := s.payments
	header := nethttp.Header{}
	ctx.Request.Header.VisitAll(func(k, v []byte) { header.Add(string(k), string(v)) })
	return p.Provider.ParseCallback(header, ctx.PostBody(), p.Now())
}

// paymentCallbackRoute is where the payment provider posts its callbacks.
const paymentCallbackRoute = "/v1/billing/providers/{provider}/webhook"

// paymentCallbackPath is paymentCallbackRoute for one provider.
func paymentCallbackPath(provider string) string {
	return strings.Replace(paymentCallbackRoute, "{provider}", provider, 1)
}
