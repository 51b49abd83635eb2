package e2e

// The dashboard's removals and the invitation's accept page, in a real
// Chromium: a participant removed from its room, a webhook endpoint
// disabled, an invitation revoked, an invitation accepted by a person
// already signed in (the /invitations/accept page), a member removed by
// the owner, and a member leaving on their own. Each goes through the
// page's two-step confirmation and is checked against the API.

import (
	"testing"

	"rtcd/internal/browsertest"
)

func TestDashboardBrowserRemovals(t *testing.T) {
	e := start(t, "--webhook-allow-private")
	k := e.Boot.APIKey
	b := browsertest.Start(t, browsertest.Options{})
	owner := b.NewPage(t, "owner")
	e.browserSignIn(owner, e.Boot.OwnerEmail, false)
	projects := "/p/" + e.Boot.ProjectID

	// A participant removed from its room.
	room := e.createRoom(map[string]any{"name": "removals"})
	pid, _ := e.createParticipant(room, map[string]any{"name": "zed"})
	owner.Go(e.Base + projects + "/rooms/" + room)
	owner.WaitTextIn("created", "zed")
	owner.Click("Remove", "zed")
	owner.WaitText("Remove zed?")
	owner.Visit("participant-remove-confirm")
	owner.Click("Yes, remove", "zed")
	owner.WaitTextIn("removed", "zed")
	owner.Visit("participant-removed")
	if s := e.participantStatus(room, pid); s != "removed" {
		t.Fatalf("participant is %s after the page removed it", s)
	}

	// A webhook endpoint disabled.
	ep := e.do("POST", "/v1/webhook-endpoints", k, map[string]any{"url": "http://127.0.0.1:1/hook"}).must(t, 201).Str("id")
	owner.Go(e.Base + projects + "/webhooks")
	owner.WaitTextIn("enabled", ep)
	owner.Click("Disable", ep)
	owner.Click("Yes, disable", ep)
	owner.WaitTextIn("disabled", ep)
	owner.Visit("webhook-disabled")
	for _, x := range e.do("GET", "/v1/webhook-endpoints", k, nil).must(t, 200).Data() {
		if x["id"] == ep && x["status"] != "disabled" {
			t.Fatalf("endpoint is %v after the page disabled it", x["status"])
		}
	}

	// An invitation revoked.
	team := "/a/" + e.Boot.AccountID + "/team"
	owner.Go(e.Base + team)
	owner.Fill("E-mail address", "gone@example.com")
	owner.Click("Send invitation")
	owner.WaitTextIn("pending", "gone@example.com")
	owner.Click("Revoke", "gone@example.com")
	owner.Click("Yes, revoke", "gone@example.com")
	owner.WaitTextIn("revoked", "gone@example.com")
	owner.Visit("invitation-revoked")

	// Bob has a workspace of his own and is signed in; the invitation's
	// page accepts it with his session.
	bob := b.NewPage(t, "bob")
	e.browserSignIn(bob, "bob@example.com", false)
	owner.Fill("E-mail address", "bob@example.com")
	owner.Click("Send invitation")
	owner.WaitTextIn("pending", "bob@example.com")
	link, _ := e.mailLink("bob@example.com", "invitation_token")
	bob.Go(link)
	bob.WaitText("Accept the invitation")
	bob.Visit("invitation-accept")
	bob.Click("Accept the invitation")
	bob.WaitURL(pathRE(e, projects+"/rooms"))
	bob.WaitText("Rooms")

	// Carol joins too, then leaves on her own.
	carol := b.NewPage(t, "carol")
	owner.Fill("E-mail address", "carol@example.com")
	owner.Click("Send invitation")
	owner.WaitTextIn("pending", "carol@example.com")
	link, _ = e.mailLink("carol@example.com", "invitation_token")
	carol.Go(link)
	carol.Fill("E-mail address", "carol@example.com")
	carol.Click("E-mail me a sign-in link")
	carol.WaitText("Check your mail")
	signIn, _ := e.mailLink("carol@example.com", "token")
	carol.Go(signIn)
	carol.Click("Sign in")
	carol.WaitURL(pathRE(e, projects+"/rooms"))
	carol.Go(e.Base + team)
	carol.Click("Leave", "carol@example.com")
	carol.Click("Yes, leave", "carol@example.com")
	// Her only workspace is gone: the dashboard leaves it.
	carol.WaitNoText("carol@example.com (you)")

	// The owner removes bob. Bob's page still shows the rooms and refreshes
	// them while any is live: once he is removed that refresh is refused.
	bob.Allow(404, "/v1/rooms")
	owner.Go(e.Base + team)
	owner.WaitText("Role of bob@example.com")
	owner.Click("Remove", "Role of bob@example.com")
	owner.Click("Yes, remove", "Remove bob@example.com from the workspace?")
	// His row leaves the members (his accepted invitation stays listed).
	owner.WaitNoText("Role of bob@example.com")
	owner.Visit("member-removed")

	session := e.signIn(e.Boot.OwnerEmail)
	members := e.do("GET", "/v1/accounts/"+e.Boot.AccountID+"/members", session, nil).must(t, 200).Data()
	if len(members) != 1 || members[0]["email"] != e.Boot.OwnerEmail {
		t.Fatalf("members after the removals: %v", members)
	}
}
