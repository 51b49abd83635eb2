package http

import "testing"

// Configured origins compare with the Origin header a browser sends:
// lower case, no default port, no path.
func TestNormalizeOrigin(t *testing.T) {
	for in, want := range map[string]string{
		"https://App.Example.com/":        "https://app.example.com",
		"https://app.example.com:443/x":   "https://app.example.com",
		"http://app.example.com:80":       "http://app.example.com",
		"http://127.0.0.1:8080":           "http://127.0.0.1:8080",
		"https://app.example.com:8443/v1": "https://app.example.com:8443",
		"http://[::1]:8080/":              "http://[::1]:8080",
		"ftp://app.example.com":           "",
		"app.example.com":                 "",
		"":                                "",
	} {
		if got := NormalizeOrigin(in); got != want {
			t.Errorf("NormalizeOrigin(%q) = %q, want %q", in, got, want)
		}
	}
}

// Which routes answer which browsers.
func TestCORSPolicyOfRoutes(t *testing.T) {
	for _, c := range []struct {
		route string
		mode  authMode
		want  corsPolicy
	}{
		{connectPath, noAuth, corsAnyOrigin},
		{roomsPath, apiKey, corsDashboard}, // a session with X-Project-Id; never for an API key (corsOrigin)
		{"/v1/system/info", apiKeyNo, corsDashboard},
		{"/v1/me", session, corsDashboard},
		{"/v1/auth/email/start", noAuth, corsDashboard},
		{"/v1/billing/providers/{provider}/webhook", noAuth, corsNone},
		{"/v1/billing/sandbox/checkout/{payment_id}", noAuth, corsNone},
		{"dashboard_page", noAuth, corsNone},
		{"unmatched", noAuth, corsNone},
	} {
		if got := corsOf(c.route, c.mode); got != c.want {
			t.Errorf("corsOf(%s) = %v, want %v", c.route, got, c.want)
		}
	}
}
