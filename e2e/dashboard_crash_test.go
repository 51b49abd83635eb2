package e2e

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
)

// TestDashboardKill9 runs the real binary: every acknowledged dashboard
// write (a session, a workspace, a project, an invitation, a logout)
// survives kill -9.
func TestDashboardKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the rtcd binary")
	}
	bin := binBuild(t)
	dir := t.TempDir()

	var stdout, stderr bytes.Buffer
	cmd := exec.Command(bin, "init", "--data-dir", dir, "--owner-email", "Ops@Example.com", "--log-level", "error")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("rtcd init: %v\n%s", err, stderr.String())
	}
	var boot bootstrap
	if err := json.Unmarshal(stdout.Bytes(), &boot); err != nil {
		t.Fatalf("rtcd init printed %q: %v", stdout.String(), err)
	}
	if boot.OwnerEmail != "ops@example.com" {
		t.Fatalf("rtcd init printed owner_email %q, want the normalized ops@example.com", boot.OwnerEmail)
	}

	p := binServe(t, bin, dir, boot.APIKey)
	c := binClient(false)
	mailbox := &env{t: t, dataDir: dir} // reads <data-dir>/outbox like e.nextMail
	call := func(p *binProc, method, path, key string, body any, want int) binResult {
		t.Helper()
		r, err := binCall(c, method, p.Base+path, key, body)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		if r.status != want {
			t.Fatalf("%s %s: %d, want %d: %s", method, path, r.status, want, r.raw)
		}
		return r
	}
	signIn := func(p *binProc, email string) string {
		t.Helper()
		call(p, "POST", "/v1/auth/email/start", "", map[string]any{"email": email}, 202)
		_, token := mailbox.mailLink(email, "token")
		return call(p, "POST", "/v1/auth/email/verify", "", map[string]any{"token": token}, 200).str("token")
	}

	owner := signIn(p, "ops@example.com")
	kept := signIn(p, "ops@example.com")
	ended := signIn(p, "ops@example.com")
	other := signIn(p, "someone@example.com") // a sign-up: a user and a workspace
	prj := call(p, "POST", "/v1/accounts/"+boot.AccountID+"/projects", owner, map[string]any{"name": "Kept"}, 201).str("id")
	inv := call(p, "POST", "/v1/accounts/"+boot.AccountID+"/invitations", owner,
		map[string]any{"email": "guest@example.com", "role": "admin"}, 201).str("id")
	// Mail leaves after its write is durable, from memory: wait for it, so
	// the kill tests the invitation's record, not the mail queue.
	_, invToken := mailbox.mailLink("guest@example.com", "invitation_token")
	call(p, "POST", "/v1/auth/logout", ended, nil, 204)
	p.kill() // SIGKILL right after the last acknowledgement

	p = binServe(t, bin, dir, boot.APIKey)
	me := call(p, "GET", "/v1/me", kept, nil, 200)
	if !strings.Contains(string(me.raw), prj) {
		t.Fatalf("the acknowledged project %s is gone after kill -9: %s", prj, me.raw)
	}
	if r, _ := binCall(c, "GET", p.Base+"/v1/me", ended, nil); r.status != 401 {
		t.Fatalf("a session signed out before kill -9 works again: %d", r.status)
	}
	if m := call(p, "GET", "/v1/me", other, nil, 200); !strings.Contains(string(m.raw), `"role":"owner"`) {
		t.Fatalf("the sign-up's workspace is gone: %s", m.raw)
	}
	list := call(p, "GET", "/v1/accounts/"+boot.AccountID+"/invitations", owner, nil, 200)
	if !strings.Contains(string(list.raw), inv) {
		t.Fatalf("the acknowledged invitation %s is gone: %s", inv, list.raw)
	}
	// The new project's own actor recovered: a session reaches it.
	if r, err := binCall(c, "GET", p.Base+"/v1/rooms", kept, nil, "X-Project-Id: "+prj); err != nil || r.status != 200 {
		t.Fatalf("the new project after kill -9: %v %d %s", err, r.status, r.raw)
	}
	// The invitation still works after the restart.
	call(p, "POST", "/v1/auth/email/start", "", map[string]any{"email": "guest@example.com", "invitation_token": invToken}, 202)
	_, token := mailbox.mailLink("guest@example.com", "token")
	v := call(p, "POST", "/v1/auth/email/verify", "", map[string]any{"token": token}, 200)
	if joined, _ := v.json["joined_account"].(map[string]any); joined == nil || joined["id"] != boot.AccountID || joined["role"] != "admin" {
		t.Fatalf("the invitation after kill -9: %s", v.raw)
	}
}
