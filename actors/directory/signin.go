package directory

import (
	"time"

	"rtcd/actors/core"
	"rtcd/apierr"
)

var ErrBadSession = apierr.New(apierr.AuthenticationFailed, "the session is missing, malformed, expired or signed out; sign in again")

var ErrBadLink = apierr.New(apierr.AuthenticationFailed, "the sign-in link is invalid, expired or already used; request a new one").
	WithDetails("reason", "sign_in_link_invalid")

// startSignIn records a link and, when the address is deliverable and
// under its hourly limit, answers with the mail to send (SignInMail). A
// link is recorded (and the answer waits for its write) even when no mail
// goes out, so the answer takes the same path, and the same time, whatever
// the address.
func (a *directoryActor) startSignIn(c StartSignIn, req *core.Envelope) {
	now := a.env.Clock.Now()
	if len(a.state.SignInLinks) >= maxPendingSignInLinks {
		req.Respond(core.Reply{}) // the same 202; logged by the sweep's counters, not per request
		return
	}
	sends := recentWithin(a.signInSends[c.Email], now, time.Hour)
	underLimit := len(sends) < SignInMailsPerAddressPerHour
	send := c.Deliverable && underLimit && (len(sends) > 0 || len(a.signInSends) < maxTrackedSignInAddresses)
	if send {
		a.signInSends[c.Email] = append(sends, now)
	}
	if c.Deliverable && !underLimit {
		a.env.Metrics.RateLimits.Rejected("sign_in_mails_per_address_per_hour") // the answer is the same 202; only this counts it
	}
	link := SignInLink{Hash: c.Hash, Email: c.Email, InvitationHash: c.InvitationHash, CreatedAt: now, ExpiresAt: now.Add(SignInLinkTTL)}
	b := a.env.Store.NewBatch()
	a.record(b, directoryEvent{SignInLinkCreated: &link})
	answer := core.Reply{}
	if send {
		answer.Value = SignInMail{To: c.Email, ExpiresAt: link.ExpiresAt}
	}
	a.env.Store.Commit(b, func() { req.Respond(answer) })
}

// SignInLinkView is the answer of POST /v1/auth/email/peek.
type SignInLinkView struct {
	Object     string          `json:"object"`
	Email      string          `json:"email"`
	ExpiresAt  string          `json:"expires_at"`
	Invitation *InvitationPeek `json:"invitation"`
}

// InvitationPeek names the workspace a sign-in link will join.
type InvitationPeek struct {
	AccountID   string `json:"account_id"`
	AccountName string `json:"account_name"`
	Role        string `json:"role"`
}

// GoogleIdentity is what a verified Google sign-in established.
type GoogleIdentity struct {
	Subject string
	Email   string
	Name    string
}

// MeView is GET /v1/me: the user, and each workspace with the user's role
// and its projects.
type MeView struct {
	Object   string        `json:"object"`
	User     UserView      `json:"user"`
	Accounts []AccountView `json:"accounts"`
}

func (a *directoryActor) me(userID string) []byte {
	u := a.state.Users[userID]
	v := MeView{Object: "me", User: u.view(), Accounts: []AccountView{}}
	for acct := range a.state.userAccounts[userID] {
		w := a.state.Workspaces[acct]
		v.Accounts = append(v.Accounts, a.accountView(w, w.Members[userID].Role))
	}
	sortAccounts(v.Accounts)
	return core.MustJSON(v)
}

func sortAccounts(vs []AccountView) {
	for i := 1; i < len(vs); i++ { // few workspaces: insertion sort by creation, then id
		for j := i; j > 0 && (vs[j].CreatedAt < vs[j-1].CreatedAt || vs[j].CreatedAt == vs[j-1].CreatedAt && vs[j].ID < vs[j-1].ID); j-- {
			vs[j], vs[j-1] = vs[j-1], vs[j]
		}
	}
}
