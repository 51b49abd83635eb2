package http

import (
	"strings"
	"testing"

	"rtcd/actors"
	"rtcd/payments"
)

// On a cluster node the directory's routes are placed on the directory's
// node: every dashboard session route and every sign-in route, and no
// other (a project route with a session runs on its project's node).
func TestDirectoryRoutesAreTheDashboardRoutes(t *testing.T) {
	s := New(&actors.Engine{}, nil, "test", false, Payments{Sandbox: &payments.Sandbox{}})
	dashboard := map[string]bool{}
	for _, paths := range s.Routes() {
		for _, p := range paths {
			concrete := strings.NewReplacer("{account_id}", "acct_x", "{project_id}", "prj_x", "{user_id}", "usr_x",
				"{invitation_id}", "inv_x").Replace(p)
			if strings.Contains(concrete, "{") {
				concrete = strings.ReplaceAll(strings.ReplaceAll(concrete, "{", "x"), "}", "x")
			}
			want := strings.HasPrefix(p, "/v1/auth/") || strings.HasPrefix(p, "/v1/me") ||
				strings.HasPrefix(p, "/v1/accounts") || strings.HasPrefix(p, "/v1/invitations/")
			if want {
				dashboard[p] = true
			}
			if got := s.directoryRoutes.match([]byte(concrete)); got != want {
				t.Errorf("%s (as %s): placed on the directory's node %v, want %v", p, concrete, got, want)
			}
		}
	}
	if len(dashboard) < 15 {
		t.Fatalf("only %d dashboard routes found: %v", len(dashboard), dashboard)
	}
	for _, path := range []string{"/v1/me/", "/v1/me/x", "/v1/accounts/acct_x/projects/prj_x/extra", "/v1/accounts//projects", "/v1", "/", ""} {
		if s.directoryRoutes.match([]byte(path)) {
			t.Errorf("%q matches a directory route", path)
		}
	}
}
