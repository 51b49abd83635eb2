package payments

import (
	"bytes"
	"html/template"
	"net/http"
)

// Headers the HTTP layer should send with every sandbox page. The pages
// are self-contained (inline style, no scripts, no external assets), so the
// policy can forbid everything else; frame-ancestors 'none' keeps the Pay
// button out of other sites' frames, and no-store keeps tokens out of
// shared caches.
const (
	PageContentType           = "text/html; charset=utf-8"
	PageContentSecurityPolicy = "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
	PageCacheControl          = "no-store"
)

type checkoutView struct {
	PaymentID string
	Amount    string
	Currency  string
	Method    string
	ExpiresAt string
	Action    string // the page's own address, relative, the form posts to
}

type resultView struct {
	Outcome    string
	Amount     string
	Currency   string
	PaymentID  string
	ReceiptURL string
	ReturnURL  string // back to the dashboard's page of this top-up, or ""
}

type receiptView struct {
	PaymentID string
	Amount    string
	Currency  string
	PaidAt    string
}

type errorView struct {
	Title   string
	Message string
}

// pages holds every sandbox page; html/template escapes each value for the
// place it lands in (text, attribute, URL).
var pages = template.Must(template.New("pages").Parse(`
{{define "head"}}<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>{{.}} · rtcd sandbox payments</title>
<style>
body{font-family:system-ui,sans-serif;background:#f4f5f7;color:#1d2330;margin:0;padding:2rem 1rem}
main{max-width:26rem;margin:0 auto;background:#fff;border-radius:8px;padding:1.5rem 2rem;box-shadow:0 1px 3px rgba(0,0,0,.15)}
h1{font-size:1.3rem;margin-top:0}
.amount{font-size:2rem;font-weight:600;margin:.5rem 0 1rem}
.note{color:#5b6372;font-size:.85rem}
dl{display:grid;grid-template-columns:auto 1fr;gap:.25rem 1rem;font-size:.9rem}
dt{color:#5b6372}
dd{margin:0;word-break:break-all}
form{display:inline}
button{font-size:1rem;padding:.6rem 1.2rem;margin:.25rem .25rem .25rem 0;border:0;border-radius:6px;cursor:pointer}
.pay{background:#1f7a3d;color:#fff}
.fail{background:#b3261e;color:#fff}
.cancel{background:#dfe2e8;color:#1d2330}
</style></head><body><main>{{end}}
{{define "foot"}}<p class="note">Sandbox provider: no money moves.</p></main></body></html>{{end}}

{{define "checkout"}}{{template "head" "Checkout"}}
<h1>Top up prepaid credit</h1>
<div class="amount">{{.Amount}} {{.Currency}}</div>
<dl><dt>Payment</dt><dd>{{.PaymentID}}</dd><dt>Method</dt><dd>{{.Method}}</dd><dt>Expires</dt><dd>{{.ExpiresAt}}</dd></dl>
<form method="post" action="{{.Action}}"><input type="hidden" name="outcome" value="succeeded"><button class="pay" type="submit">Pay</button></form>
<form method="post" action="{{.Action}}"><input type="hidden" name="outcome" value="failed"><button class="fail" type="submit">Fail</button></form>
<form method="post" action="{{.Action}}"><input type="hidden" name="outcome" value="canceled"><button class="cancel" type="submit">Cancel</button></form>
{{template "foot"}}{{end}}

{{define "result"}}{{template "head" "Payment result"}}
<h1>Payment {{.Outcome}}</h1>
<div class="amount">{{.Amount}} {{.Currency}}</div>
<dl><dt>Payment</dt><dd>{{.PaymentID}}</dd></dl>
{{if .ReceiptURL}}<p><a href="{{.ReceiptURL}}">View receipt</a></p>{{end}}
{{if .ReturnURL}}<p><a class="back" href="{{.ReturnURL}}">Back to the dashboard</a></p>{{else}}<p>You can close this page.</p>{{end}}
{{template "foot"}}{{end}}

{{define "receipt"}}{{template "head" "Receipt"}}
<h1>Receipt</h1>
<div class="amount">{{.Amount}} {{.Currency}}</div>
<dl><dt>Payment</dt><dd>{{.PaymentID}}</dd><dt>Paid</dt><dd>{{.PaidAt}}</dd></dl>
{{template "foot"}}{{end}}

{{define "error"}}{{template "head" .Title}}
<h1>{{.Title}}</h1>
<p>{{.Message}}</p>
{{template "foot"}}{{end}}
`))

// renderPage executes one named page. The templates are fixed and the views
// hold only strings, so execution cannot fail short of a programming error,
// which the tests would catch; a plain fallback still keeps the answer HTML.
func renderPage(name string, view any) []byte {
	var buf bytes.Buffer
	if err := pages.ExecuteTemplate(&buf, name, view); err != nil {
		return []byte("<!doctype html><title>Error</title><p>The sandbox page could not be rendered.</p>")
	}
	return buf.Bytes()
}

func errorPage(title, message string) []byte {
	return renderPage("error", errorView{Title: title, Message: message})
}

// checkoutErrorPage explains a refused checkout link by its status.
func checkoutErrorPage(status int) []byte {
	if status == http.StatusGone {
		return errorPage("Checkout expired", "This checkout has expired. Start a new top-up.")
	}
	return errorPage("Invalid checkout link", "This checkout link is not valid.")
}
