// Package browsertest drives a real headless Chromium (Debian's chromium)
// from Go tests with chromedp: rtcd's one browser driver, for the web
// dashboard's tests and the web client SDK's.
//
// A Page is one person: a tab in its own browser context (its own storage,
// so two people can sign in side by side). It fails its test on any browser
// console error, uncaught exception, failed request or HTTP error the test
// did not declare with Allow; Visit saves a screenshot of the page at a
// phone's and a desktop's width and runs axe-core's accessibility checks on
// it. Actions find elements the way a person does: by a label's text or a
// button's words, not by CSS paths.
package browsertest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"rtcd/internal/testtools"
)

// Bounds of the harness.
const (
	// actionTimeout bounds one action or wait of a test (a page draw, a
	// request round trip, a refresh).
	actionTimeout = 15 * time.Second
	// pollInterval is how often a wait checks its condition.
	pollInterval = 50 * time.Millisecond
	// PhoneWidth and DesktopWidth are the widths Visit captures.
	PhoneWidth   = 375
	DesktopWidth = 1280
	viewHeight   = 900
)

// Browser is one Chromium process for a test.
type Browser struct {
	t      testing.TB
	alloc  context.Context
	root   context.Context
	cancel context.CancelFunc
	shots  *shotDir // this test's screenshots
	axeJS  string
}

// shotDir is one test's screenshot directory, shared by the browsers the
// test starts (a second browser with other flags must not empty the
// directory again, nor number its files from 1 again).
type shotDir struct {
	path string
	mu   sync.Mutex
	seq  int // screenshots taken, for their order in file names
}

// shotDirs are the screenshot directories of the tests running, by test.
var shotDirs = struct {
	mu sync.Mutex
	m  map[testing.TB]*shotDir
}{m: map[testing.TB]*shotDir{}}

// Options configure a Browser.
type Options struct {
	// ExtraFlags are more Chromium switches, such as
	// "use-fake-device-for-media-stream".
	ExtraFlags []string
}

// ChromiumPath finds Debian's chromium (or $CHROMIUM_BIN); without it the
// test is skipped loudly, or fails in CI.
func ChromiumPath(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("CHROMIUM_BIN"); p != "" {
		return p
	}
	return testtools.RequireOnPath(t, "chromium", "apt-get install chromium (Debian's package; .ci/run installs it)")
}

// Start launches a headless Chromium that lives until the test ends.
func Start(t testing.TB, opts Options) *Browser {
	t.Helper()
	exe := ChromiumPath(t)
	root := ModuleRoot(t)
	axe, err := os.ReadFile(filepath.Join(root, "node_modules", "axe-core", "axe.min.js"))
	if err != nil {
		testtools.SkipUnlessCI(t, fmt.Sprintf("axe-core is not installed (%v): run `make web-deps` (npm ci) at the repository root", err))
	}
	flags := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(exe),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.Flag("mute-audio", true),
		chromedp.Flag("lang", "en-US"),
		chromedp.WindowSize(DesktopWidth, viewHeight),
	}
	for _, f := range opts.ExtraFlags {
		name, value, hasValue := strings.Cut(f, "=")
		if hasValue {
			flags = append(flags, chromedp.Flag(name, value))
		} else {
			flags = append(flags, chromedp.Flag(name, true))
		}
	}
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), flags...)
	browserCtx, cancelBrowser := chromedp.NewContext(alloc)
	// Start the browser now, on a context without a timeout (a timeout on
	// the first Run would end the browser with it).
	if err := chromedp.Do(browserCtx); err != nil {
		cancelBrowser()
		cancelAlloc()
		t.Fatalf("starting chromium (%s): %v", exe, err)
	}
	b := &Browser{
		t: t, alloc: alloc, root: browserCtx, axeJS: string(axe),
		cancel: func() { cancelBrowser(); cancelAlloc() },
		shots:  screenshotDir(t, root),
	}
	t.Cleanup(b.cancel)
	return b
}

// ScreenshotDir is where this test's screenshots go.
func (b *Browser) ScreenshotDir() string { return b.shots.path }

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// screenshotDir is $RTCD_SCREENSHOT_DIR (default .cache/screenshots under
// the module root) / the test's name, emptied when the test's first
// browser starts.
func screenshotDir(t testing.TB, root string) *shotDir {
	shotDirs.mu.Lock()
	defer shotDirs.mu.Unlock()
	if d := shotDirs.m[t]; d != nil {
		return d
	}
	base := os.Getenv("RTCD_SCREENSHOT_DIR")
	if base == "" {
		base = filepath.Join(root, ".cache", "screenshots")
	}
	dir := filepath.Join(base, unsafeName.ReplaceAllString(t.Name(), "_"))
	_ = os.RemoveAll(dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("screenshot dir: %v", err)
	}
	d := &shotDir{path: dir}
	shotDirs.m[t] = d
	t.Cleanup(func() {
		shotDirs.mu.Lock()
		defer shotDirs.mu.Unlock()
		delete(shotDirs.m, t)
	})
	return d
}

// ModuleRoot walks up from the working directory to the module's go.mod
// (the repository root, where node_modules is).
func ModuleRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			if _, err := os.Stat(filepath.Join(dir, "package.json")); err == nil {
				return dir
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no repository root (go.mod beside package.json) above the test's working directory")
		}
		dir = parent
	}
}

// allowance is an HTTP error status a test expects for URLs containing a
// path fragment.
type allowance struct {
	status int
	path   string
}

// Page is one person's tab, in a browser context of its own.
type Page struct {
	t       testing.TB
	b       *Browser
	name    string
	ctx     context.Context
	cancel  context.CancelFunc
	mu      sync.Mutex
	allowed []allowance
	// mayFail are URL fragments whose requests may fail at the network
	// level (AllowFailed); failing holds the ids of requests to them that
	// are under way, so a failure is forgiven by its request's URL.
	mayFail []string
	failing map[network.RequestID]bool
	errs    []string
}

// NewPage opens a tab in a fresh browser context (no shared storage or
// cookies with other pages). name labels its screenshots and errors.
func (b *Browser) NewPage(t testing.TB, name string) *Page {
	t.Helper()
	p := &Page{t: t, b: b, name: name}
	p.ctx, p.cancel = chromedp.NewContext(b.root, chromedp.WithNewBrowserContext(), chromedp.WithListener(p.onEvent))
	if err := chromedp.Do(p.ctx); err != nil {
		t.Fatalf("%s: opening a tab: %v", name, err)
	}
	p.actLikeAPerson()
	t.Cleanup(func() {
		p.cancel()
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, e := range p.errs {
			t.Errorf("%s: browser problem: %s", p.name, e)
		}
	})
	return p
}

// actLikeAPerson gives the tab what a person's own window has: focus
// (every tab counts as focused, so two people can act side by side) and
// the clipboard a real click may write to (the harness's clicks carry no
// user gesture), which Clipboard reads back.
func (p *Page) actLikeAPerson() {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, actionTimeout)
	defer cancel()
	if _, err := chromedp.Call(ctx, emulation.SetFocusEmulationEnabled, emulation.SetFocusEmulationEnabledParams{Enabled: true}); err != nil {
		p.t.Fatalf("%s: focus emulation: %v", p.name, err)
	}
	contextID := chromedp.FromContext(p.ctx).BrowserContextID
	for _, perm := range []string{"clipboard-read", "clipboard-write"} {
		if _, err := chromedp.CallBrowser(ctx, browser.SetPermission, browser.SetPermissionParams{
			Permission: &browser.PermissionDescriptor{Name: perm}, Setting: browser.PermissionSettingGranted, BrowserContextID: contextID,
		}); err != nil {
			p.t.Fatalf("%s: granting %s: %v", p.name, perm, err)
		}
	}
}

// Allow declares that responses with status for URLs containing path are
// expected (a refusal the test provokes and checks on the page).
func (p *Page) Allow(status int, path string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.allowed = append(p.allowed, allowance{status, path})
}

// AllowFailed declares that requests to URLs containing path may fail at
// the network level (no HTTP answer: connection refused while the test
// restarts the server it calls, a request the page abandons).
func (p *Page) AllowFailed(path string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mayFail = append(p.mayFail, path)
}

// noteRequest remembers a request that AllowFailed covers.
func (p *Page) noteRequest(id network.RequestID, url string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, path := range p.mayFail {
		if strings.Contains(url, path) {
			if p.failing == nil {
				p.failing = map[network.RequestID]bool{}
			}
			p.failing[id] = true
			return
		}
	}
}

// mayHaveFailed reports whether a failed request was covered by
// AllowFailed, and forgets it (a request ends once).
func (p *Page) mayHaveFailed(id network.RequestID) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	ok := p.failing[id]
	delete(p.failing, id)
	return ok
}

// requestDone forgets a request that ended with an answer.
func (p *Page) requestDone(id network.RequestID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.failing, id)
}

func (p *Page) problem(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.errs = append(p.errs, fmt.Sprintf(format, args...))
}

func (p *Page) isAllowed(status int, url string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, a := range p.allowed {
		if a.status == status && strings.Contains(url, a.path) {
			return true
		}
	}
	return false
}

// onEvent runs on chromedp's reader goroutine: it only records.
func (p *Page) onEvent(ev any) {
	switch e := ev.(type) {
	case *runtime.EventConsoleAPICalled:
		if e.Type == runtime.ConsoleAPICalledTypeError || e.Type == runtime.ConsoleAPICalledTypeAssert {
			p.problem("console.%s: %s", e.Type, consoleArgs(e.Args))
		}
	case *runtime.EventExceptionThrown:
		msg := e.ExceptionDetails.Text
		if e.ExceptionDetails.Exception != nil && e.ExceptionDetails.Exception.Description != "" {
			msg += " " + e.ExceptionDetails.Exception.Description
		}
		p.problem("uncaught exception: %s", msg)
	case *log.EventEntryAdded:
		// Network errors are judged by the response events below, where
		// the expected ones can be told apart; everything else at error
		// level (a CSP violation, a blocked resource) is a problem.
		if e.Entry.Level == log.EntryLevelError && e.Entry.Source != log.EntrySourceNetwork {
			p.problem("%s log: %s %s", e.Entry.Source, e.Entry.Text, e.Entry.URL)
		}
	case *network.EventRequestWillBeSent:
		if e.Request != nil {
			p.noteRequest(e.RequestID, e.Request.URL)
		}
	case *network.EventResponseReceived:
		if r := e.Response; r != nil && r.Status >= 400 && !p.isAllowed(int(r.Status), r.URL) {
			p.problem("HTTP %d for %s", r.Status, r.URL)
		}
	case *network.EventLoadingFinished:
		p.requestDone(e.RequestID)
	case *network.EventLoadingFailed:
		if !e.Canceled && !p.mayHaveFailed(e.RequestID) {
			p.problem("request failed: %s %s %v", e.Type, e.ErrorText, e.BlockedReason)
		}
	}
}

func consoleArgs(args []*runtime.RemoteObject) string {
	var parts []string
	for _, a := range args {
		switch {
		case len(a.Value) > 0:
			parts = append(parts, string(a.Value))
		case a.Description != "":
			parts = append(parts, a.Description)
		default:
			parts = append(parts, string(a.Type))
		}
	}
	return strings.Join(parts, " ")
}

// Errors returns the problems recorded so far (they also fail the test at
// its end).
func (p *Page) Errors() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.errs...)
}

// run runs one action within actionTimeout.
func (p *Page) run(what string, a chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, actionTimeout)
	defer cancel()
	if err := chromedp.Do(ctx, a); err != nil {
		p.t.Fatalf("%s: %s: %v\npage text:\n%s", p.name, what, err, p.textForError())
	}
}

// textForError is the page's visible text, for failure messages.
func (p *Page) textForError() string {
	ctx, cancel := context.WithTimeout(p.ctx, 2*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText : ""`))
	if err != nil {
		return "(unreadable: " + err.Error() + ")"
	}
	if len(s) > 3000 {
		s = s[:3000] + "…"
	}
	return s
}

// Go loads url and waits for the page's load event.
func (p *Page) Go(url string) {
	p.t.Helper()
	p.run("navigate to "+url, chromedp.Navigate(url))
}

// Eval evaluates a JavaScript expression (awaiting a promise) and decodes
// its JSON value into out (nil: ignore it).
func (p *Page) Eval(expr string, out any) {
	p.t.Helper()
	raw, err := p.evalRaw(expr)
	if err != nil {
		p.t.Fatalf("%s: evaluating %q: %v\npage text:\n%s", p.name, abbreviate(expr), err, p.textForError())
	}
	if out != nil && len(raw) > 0 {
		if err := json.Unmarshal(raw, out); err != nil {
			p.t.Fatalf("%s: decoding %s: %v", p.name, raw, err)
		}
	}
}

// evalRaw evaluates expr within actionTimeout and returns its JSON value.
func (p *Page) evalRaw(expr string) (json.RawMessage, error) {
	ctx, cancel := context.WithTimeout(p.ctx, actionTimeout)
	defer cancel()
	return chromedp.Run(ctx, chromedp.Evaluate[json.RawMessage](expr, chromedp.EvalAwaitPromise))
}

func abbreviate(s string) string {
	if len(s) > 200 {
		return s[:200] + "…"
	}
	return s
}

// helpersJS finds elements as a person does. Each function returns the
// element or null; all ignore hidden elements.
const helpersJS = `
const visible = (el) => !!el && !!(el.offsetWidth || el.offsetHeight || el.getClientRects().length);
const norm = (s) => (s || "").replace(/\s+/g, " ").trim();
const within = (scope) => {
  if (!scope) return document;
  const rows = [...document.querySelectorAll("tr, li, form, section, [role=region], .panel, .card, .delivery")]
    .filter((el) => visible(el) && norm(el.innerText).includes(scope));
  rows.sort((a, b) => a.innerText.length - b.innerText.length);
  return rows[0] || null;
};
const byLabel = (label, scope) => {
  const root = within(scope);
  if (!root) return null;
  for (const l of root.querySelectorAll("label")) {
    if (!visible(l)) continue;
    const own = norm([...l.childNodes].filter((n) => n.nodeType === 3 || (n.tagName !== "INPUT" && n.tagName !== "SELECT" && n.tagName !== "TEXTAREA")).map((n) => n.textContent).join(" "));
    if (own !== label && norm(l.textContent) !== label) continue;
    const el = l.htmlFor ? document.getElementById(l.htmlFor) : l.querySelector("input, select, textarea");
    if (el) return el;
  }
  for (const el of root.querySelectorAll("input, select, textarea")) {
    if (visible(el) && el.getAttribute("aria-label") === label) return el;
  }
  return null;
};
const byText = (text, scope) => {
  const root = within(scope);
  if (!root) return null;
  const all = [...root.querySelectorAll("button, a, [role=button], summary")].filter(visible);
  return all.find((el) => norm(el.innerText) === text) || all.find((el) => el.getAttribute("aria-label") === text) || null;
};
`

// find evaluates fn(helpers) until it returns true or the wait times out;
// body is a JavaScript expression over the helpers that yields a boolean.
func (p *Page) waitJS(what, body string) {
	p.t.Helper()
	p.waitJSWithin(what, body, actionTimeout)
}

// waitJSWithin is waitJS with its own bound.
func (p *Page) waitJSWithin(what, body string, within time.Duration) {
	p.t.Helper()
	deadline := time.Now().Add(within)
	expr := "(() => {" + helpersJS + "return !!(" + body + ");})()"
	for {
		// A page that navigates away while the condition is evaluated
		// (a link followed, a form posted) fails that one evaluation: the
		// wait tries again on the next document.
		raw, err := p.evalRaw(expr)
		if err == nil && string(raw) == "true" {
			return
		}
		if time.Now().After(deadline) {
			if err != nil {
				what += fmt.Sprintf(" (last evaluation: %v)", err)
			}
			p.t.Fatalf("%s: waited %v for %s\npage text:\n%s", p.name, within, what, p.textForError())
		}
		time.Sleep(pollInterval)
	}
}

// do runs body (JavaScript over the helpers, returning "" on success or a
// reason) once the element it needs exists, within the wait.
func (p *Page) do(what, find, act string) {
	p.t.Helper()
	p.waitJS(what, find)
	var res string
	p.Eval("(() => {"+helpersJS+"const el = "+find+"; if (!el) return 'gone'; "+act+"; return '';})()", &res)
	if res != "" {
		p.t.Fatalf("%s: %s: %s", p.name, what, res)
	}
}

func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// Fill types value into the field labelled label (scope, when not "",
// narrows the search to the smallest row, form or section whose text holds
// it).
func (p *Page) Fill(label, value string, scope ...string) {
	p.t.Helper()
	find := fmt.Sprintf("byLabel(%s, %s)", jsString(label), jsString(first(scope)))
	p.do("the field "+label, find,
		fmt.Sprintf(`el.focus(); const proto = el.tagName === "TEXTAREA" ? HTMLTextAreaElement.prototype : HTMLInputElement.prototype;
		Object.getOwnPropertyDescriptor(proto, "value").set.call(el, %s);
		el.dispatchEvent(new Event("input", {bubbles: true})); el.dispatchEvent(new Event("change", {bubbles: true}))`, jsString(value)))
}

// Select picks the option whose value or text is choice in the select
// labelled label.
func (p *Page) Select(label, choice string, scope ...string) {
	p.t.Helper()
	find := fmt.Sprintf("byLabel(%s, %s)", jsString(label), jsString(first(scope)))
	p.do("the select "+label, find, fmt.Sprintf(`const o = [...el.options].find((o) => o.value === %[1]s || norm(o.textContent) === %[1]s);
		if (!o) return "no option " + %[1]s + " in " + [...el.options].map((o) => o.value).join(",");
		el.value = o.value; el.dispatchEvent(new Event("change", {bubbles: true}))`, jsString(choice)))
}

// Check sets the checkbox labelled label.
func (p *Page) Check(label string, on bool, scope ...string) {
	p.t.Helper()
	find := fmt.Sprintf("byLabel(%s, %s)", jsString(label), jsString(first(scope)))
	p.do("the checkbox "+label, find, fmt.Sprintf(`if (el.checked !== %v) el.click()`, on))
}

// Click presses the button or follows the link whose text is text.
func (p *Page) Click(text string, scope ...string) {
	p.t.Helper()
	find := fmt.Sprintf("byText(%s, %s)", jsString(text), jsString(first(scope)))
	p.do("the button or link "+text+inScope(scope), find, `if (el.disabled) return "it is disabled"; el.click()`)
}

// Has reports whether a button or link with text is shown now (no wait).
func (p *Page) Has(text string, scope ...string) bool {
	p.t.Helper()
	var ok bool
	p.Eval(fmt.Sprintf("(() => {"+helpersJS+"return !!byText(%s, %s);})()", jsString(text), jsString(first(scope))), &ok)
	return ok
}

// Buttons lists the visible buttons' words (and links styled as buttons).
func (p *Page) Buttons() []string {
	p.t.Helper()
	var out []string
	p.Eval("(() => {"+helpersJS+`return [...document.querySelectorAll("main button")].filter(visible).map((b) => norm(b.innerText));})()`, &out)
	return out
}

// Actions lists, in document order, the data-action names of the visible
// elements of the page and of the options of its visible selects: the
// actions the page offers, as it names them (the dashboard marks each
// control that asks the server to change something with data-action; see
// web/dashboard/src/ui.tsx).
func (p *Page) Actions() []string {
	p.t.Helper()
	var out []string
	p.Eval("(() => {"+helpersJS+`return [...document.querySelectorAll("[data-action]")]
		.filter((el) => el.tagName === "OPTION" ? visible(el.closest("select")) : visible(el))
		.map((el) => el.getAttribute("data-action"));})()`, &out)
	return out
}

// UnnamedButtons lists the words of the visible buttons that carry no
// data-action (Cancel, Refresh, Menu, …), so a test can tell that every
// other button is a named action.
func (p *Page) UnnamedButtons() []string {
	p.t.Helper()
	var out []string
	p.Eval("(() => {"+helpersJS+`return [...document.querySelectorAll("button, [role=button]")]
		.filter((b) => visible(b) && !b.hasAttribute("data-action")).map((b) => norm(b.innerText));})()`, &out)
	return out
}

// WaitText waits until the page's visible text holds text.
func (p *Page) WaitText(text string) {
	p.t.Helper()
	p.waitJS(fmt.Sprintf("the text %q", text), fmt.Sprintf("document.body && norm(document.body.innerText).includes(norm(%s))", jsString(text)))
}

// WaitTextIn waits until the smallest row, form, section or panel whose
// text holds scope also holds text (a status in the row of a named thing).
func (p *Page) WaitTextIn(text, scope string) {
	p.t.Helper()
	p.waitJS(fmt.Sprintf("the text %q%s", text, inScope([]string{scope})),
		fmt.Sprintf("(() => { const r = within(%s); return !!r && norm(r.innerText).includes(norm(%s)); })()", jsString(scope), jsString(text)))
}

// WaitNoText waits until the page's visible text no longer holds text.
func (p *Page) WaitNoText(text string) {
	p.t.Helper()
	p.waitJS(fmt.Sprintf("the text %q to go", text), fmt.Sprintf("document.body && !norm(document.body.innerText).includes(norm(%s))", jsString(text)))
}

// WaitJS waits until expr, a JavaScript expression, is true on the page:
// for state that is not visible text (an image's text alternative).
func (p *Page) WaitJS(what, expr string) {
	p.t.Helper()
	p.waitJS(what, expr)
}

// WaitURL waits until the address matches re (a regular expression).
func (p *Page) WaitURL(re string) {
	p.t.Helper()
	p.waitJS("an address matching "+re, fmt.Sprintf("new RegExp(%s).test(location.href)", jsString(re)))
}

// WaitTrue waits until the JavaScript expression expr (over the page's
// own globals) is true, for at most within: a state of the page's script,
// such as an SDK's log of events, that may take longer than one action.
func (p *Page) WaitTrue(what, expr string, within time.Duration) {
	p.t.Helper()
	p.waitJSWithin(what, expr, within)
}

// SetPermission sets a browser permission (a PermissionDescriptor name:
// "camera", "microphone", "display-capture", …) of this page's browser
// context to "granted", "denied" or "prompt", as a person's answer to the
// browser's prompt would; it holds for the context's later requests.
func (p *Page) SetPermission(name string, setting browser.PermissionSetting) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, actionTimeout)
	defer cancel()
	if _, err := chromedp.CallBrowser(ctx, browser.SetPermission, browser.SetPermissionParams{
		Permission:       &browser.PermissionDescriptor{Name: name},
		Setting:          setting,
		BrowserContextID: chromedp.FromContext(p.ctx).BrowserContextID,
	}); err != nil {
		p.t.Fatalf("%s: setting permission %s to %s: %v", p.name, name, setting, err)
	}
}

// URL is the page's address.
func (p *Page) URL() string {
	var s string
	p.Eval("location.href", &s)
	return s
}

// Text is the visible text of the page.
func (p *Page) Text() string {
	var s string
	p.Eval(`document.body ? document.body.innerText : ""`, &s)
	return s
}

// Value reads the value of the field labelled label.
func (p *Page) Value(label string, scope ...string) string {
	p.t.Helper()
	p.waitJS("the field "+label, fmt.Sprintf("byLabel(%s, %s)", jsString(label), jsString(first(scope))))
	var s string
	p.Eval(fmt.Sprintf("(() => {"+helpersJS+"return byLabel(%s, %s).value;})()", jsString(label), jsString(first(scope))), &s)
	return s
}

// Clipboard returns the text on the clipboard (what a copy button put
// there).
func (p *Page) Clipboard() string {
	p.t.Helper()
	var s string
	p.Eval(`navigator.clipboard.readText()`, &s)
	return s
}

// Storage returns localStorage and sessionStorage as one map (keys
// prefixed "local:" and "session:"), to check what the page keeps.
func (p *Page) Storage() map[string]string {
	out := map[string]string{}
	p.Eval(`(() => { const o = {}; for (const [n, s] of [["local", localStorage], ["session", sessionStorage]]) for (let i = 0; i < s.length; i++) o[n + ":" + s.key(i)] = s.getItem(s.key(i)); return o; })()`, &out)
	return out
}

// Visit records the page as a person sees it: a full-page screenshot at
// PhoneWidth and at DesktopWidth (files NN-name-375.png, NN-name-1280.png),
// and axe-core's accessibility check at each width, failing the test on any
// violation or when the page is wider than the window (it scrolls
// sideways).
func (p *Page) Visit(name string) {
	p.t.Helper()
	shots := p.b.shots
	shots.mu.Lock()
	shots.seq++
	n := shots.seq
	shots.mu.Unlock()
	for _, w := range []int64{PhoneWidth, DesktopWidth} {
		p.run("set the viewport", chromedp.EmulateViewport(w, viewHeight))
		// Two animation frames: the layout at the new width is drawn.
		p.Eval(`new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(() => r(true))))`, nil)
		ctx, cancel := context.WithTimeout(p.ctx, actionTimeout)
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		cancel()
		if err != nil {
			p.t.Fatalf("%s: screenshot %s: %v", p.name, name, err)
		}
		file := filepath.Join(shots.path, fmt.Sprintf("%02d-%s-%s-%d.png", n, unsafeName.ReplaceAllString(p.name, "_"), unsafeName.ReplaceAllString(name, "_"), w))
		if err := os.WriteFile(file, png, 0o644); err != nil {
			p.t.Fatalf("writing %s: %v", file, err)
		}
		p.axe(fmt.Sprintf("%s at %d px", name, w))
		p.overflow(fmt.Sprintf("%s at %d px", name, w))
	}
}

// overflowJS finds whether the page is wider than the window (it scrolls
// sideways), and then the elements that stick out, outside any box that
// scrolls or clips them.
const overflowJS = `(() => {
  const w = document.documentElement.clientWidth;
  const sw = document.documentElement.scrollWidth;
  if (sw <= w) return null;
  // Clipped by a box that scrolls or clips, between the element's
  // containing block and the page (an absolutely positioned element
  // escapes the boxes below its positioned ancestor).
  const inBox = (el) => {
    const pos = getComputedStyle(el).position;
    if (pos === "fixed") return false;
    for (let a = pos === "absolute" ? el.offsetParent : el.parentElement; a && a !== document.body; a = a.parentElement) {
      if (getComputedStyle(a).overflowX !== "visible") return true;
    }
    return false;
  };
  const out = [...document.body.querySelectorAll("*")]
    .filter((el) => el.getBoundingClientRect().right > w + 0.5 && !inBox(el))
    .slice(0, 5)
    .map((el) => el.tagName.toLowerCase() + (typeof el.className === "string" && el.className ? "." + el.className.trim().split(/\s+/).join(".") : "") +
      " (right edge at " + Math.round(el.getBoundingClientRect().right) + " px)");
  return {width: sw, culprits: out};
})()`

// overflow fails the test when the page is wider than the window: a page
// that scrolls sideways is broken on a phone.
func (p *Page) overflow(what string) {
	p.t.Helper()
	var res *struct {
		Width    int      `json:"width"`
		Culprits []string `json:"culprits"`
	}
	p.Eval(overflowJS, &res)
	if res != nil {
		p.t.Errorf("%s: %s: the page is %d px wide, wider than the window: it scrolls sideways (sticking out: %s)",
			p.name, what, res.Width, strings.Join(res.Culprits, "; "))
	}
}

// axeViolation is the part of an axe-core result a failure shows.
type axeViolation struct {
	ID    string `json:"id"`
	Help  string `json:"help"`
	Nodes []struct {
		Target []any  `json:"target"`
		HTML   string `json:"html"`
	} `json:"nodes"`
}

// axe runs axe-core (WCAG 2.1 A and AA, and best practices) on the page.
func (p *Page) axe(what string) {
	p.t.Helper()
	var loaded bool
	p.Eval(`typeof window.axe !== "undefined"`, &loaded)
	if !loaded {
		p.Eval(p.b.axeJS+";true", nil)
	}
	var violations []axeViolation
	p.Eval(`axe.run(document, {runOnly: {type: "tag", values: ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "best-practice"]}, resultTypes: ["violations"]}).then((r) => r.violations)`, &violations)
	for _, v := range violations {
		var where []string
		for _, n := range v.Nodes {
			where = append(where, fmt.Sprintf("%v %s", n.Target, abbreviate(n.HTML)))
		}
		p.t.Errorf("%s: accessibility (axe) on %s: %s: %s\n  %s", p.name, what, v.ID, v.Help, strings.Join(where, "\n  "))
	}
}

func first(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

func inScope(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return " in “" + s[0] + "”"
}
