package e2e

// The web dashboard in a real Chromium (internal/browsertest): a person
// signs in from the link in the outbox mail and uses the pages. Every page
// visited is saved as a screenshot at 375 px and at 1280 px and checked by
// axe-core; any console error or unexpected failed request fails the test.

import (
	"strings"
	"testing"

	"rtcd/internal/browsertest"
)

// browserSignIn signs email in through the dashboard's pages: the sign-in
// form, "check your mail", the mailed link's page, its button.
func (e *env) browserSignIn(p *browsertest.Page, email string, visit bool) {
	e.t.Helper()
	p.Go(e.Base + "/")
	p.WaitText("E-mail me a sign-in link")
	if visit {
		p.Visit("sign-in")
	}
	p.Fill("E-mail address", email)
	p.Click("E-mail me a sign-in link")
	p.WaitText("Check your mail")
	if visit {
		p.Visit("check-your-mail")
	}
	link, _ := e.mailLink(email, "token")
	p.Go(link)
	p.WaitText("Sign in as " + email)
	if strings.Contains(p.URL(), "token=") {
		e.t.Errorf("the sign-in token is still in the address bar: %s", p.URL())
	}
	if visit {
		p.Visit("sign-in-link")
	}
	p.Click("Sign in")
	p.WaitText("Rooms")
}

func TestDashboardBrowserPages(t *testing.T) {
	e := start(t)
	b := browsertest.Start(t, browsertest.Options{})
	p := b.NewPage(t, "owner")
	e.browserSignIn(p, e.Boot.OwnerEmail, true)
	p.WaitText("No rooms yet")
	p.Visit("rooms-empty")
	t.Logf("screenshots in %s", b.ScreenshotDir())
}
