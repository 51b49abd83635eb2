package directory

import (
	"sort"
	"time"

	"rtcd/actors/core"
	"rtcd/apierr"
	"rtcd/persistence"
)

func (a *directoryActor) memberView(w *Workspace, userID string) MemberView {
	u, m := a.state.Users[userID], w.Members[userID]
	return MemberView{Object: "member", UserID: userID, Email: u.Email, Name: u.Name, Role: m.Role, JoinedAt: core.Timestamp(m.JoinedAt)}
}

func errNoMember(id string) *apierr.Error {
	return apierr.New(apierr.InvalidRequest, "no member %q in this workspace", id).WithDetails("reason", "member_not_found").WithStatus(404)
}

var errLastOwner = apierr.New(apierr.Conflict, "a workspace always keeps an owner; make another member owner first").
	WithDetails("reason", "last_owner")

// dropInvitationsBy revokes the pending invitations userID sent in w: an
// invitation carries its sender's authority, which ends when they leave or
// become a plain member. It returns the events and adds the audits to b.
func (a *directoryActor) dropInvitationsBy(b *persistence.Batch, w *Workspace, userID string, u *core.DashboardUser) []directoryEvent {
	now := a.env.Clock.Now()
	var ids []string
	for id, inv := range w.Invitations {
		if inv.InvitedBy == userID && inv.StatusAt(now) == InvitationPending {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids) // a deterministic journal
	events := make([]directoryEvent, 0, len(ids))
	for _, id := range ids {
		events = append(events, directoryEvent{InvitationClosed: &invitationClosed{AccountID: w.ID, InvitationID: id, Status: InvitationRevoked, At: now, By: u.UserID}})
		a.env.Audit.Account(b, w.ID, u, "invitation.revoked", core.AuditTarget{Type: "invitation", ID: id},
			map[string]any{"email": w.Invitations[id].Email, "reason": "inviter_lost_role"})
	}
	return events
}

// invitationRate is the 429 of an hourly invitation limit, with the wait
// until the oldest creation in the window leaves it.
func invitationRate(what string, limit int, times []time.Time, now time.Time) *apierr.Error {
	oldest := times[0]
	for _, t := range times {
		if t.Before(oldest) {
			oldest = t
		}
	}
	wait := int(oldest.Add(time.Hour).Sub(now)/time.Second) + 1
	err := apierr.New(apierr.RateLimited, "rate limit for %s exceeded (%d per hour)", what, limit).
		WithDetails("limit_name", what, "limit_per_hour", limit, "retry_after_seconds", wait)
	err.RetryAfterSeconds = wait
	err.RateLimit = limit
	return err
}

// InvitationAcceptance answers POST /v1/invitations/accept.
type InvitationAcceptance struct {
	Object        string      `json:"object"`
	InvitationID  string      `json:"invitation_id"`
	JoinedAccount AccountView `json:"joined_account"`
}

var ErrBadInvitation = apierr.New(apierr.InvalidRequest, "the invitation is invalid, expired, revoked or already used").
	WithDetails("reason", "invitation_invalid").WithStatus(404)
