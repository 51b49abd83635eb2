package dispatch

import (
	"testing"

	"rtcd/actors/core"
	"rtcd/clock"
	"rtcd/webhooksig"
)

// The signing secret is opened once per endpoint, not for every attempt,
// and opened again when the endpoint is published with another sealed
// secret. The test proves the cache by taking the opening key away: the
// secret opened before still signs, and only a newly sealed one is opened.
func TestSigningSecretOpenedOncePerEndpoint(t *testing.T) {
	sender := &recordingSender{}
	tw := newTestWorld(t, clock.NewFake(testStart), sender, Settings{})
	ep := tw.endpoint("we_1", "whsec_first")

	signedWith := func(c call, secret string) bool {
		ts := c.headers[webhooksig.HeaderTimestamp]
		body := tw.deliveries(ep.ID)[c.event.ID].Event
		return webhooksig.Verify(secret, body, ts, c.headers[webhooksig.HeaderSignature], 0, testStart) == nil
	}
	deliverOne := func(seq int) call {
		t.Helper()
		before := len(sender.recorded())
		tw.roomEvent("room_1", seq)
		tw.d.Step()
		calls := sender.recorded()
		if len(calls) != before+1 {
			t.Fatalf("%d attempts after event %d, want %d", len(calls), seq, before+1)
		}
		return calls[before]
	}

	if c := deliverOne(1); !signedWith(c, "whsec_first") {
		t.Fatal("the first delivery is not signed with the endpoint's secret")
	}
	// Another master key: the sealed secret can no longer be opened.
	other, err := core.NewSecrets(testKeys(t, 7))
	if err != nil {
		t.Fatal(err)
	}
	tw.env.Secrets = other
	if c := deliverOne(2); !signedWith(c, "whsec_first") {
		t.Fatal("the secret was not kept: the second delivery is not signed with it")
	}
	// The same endpoint, republished (another endpoint of the project
	// changed): the same sealed bytes, still no opening.
	same := *ep
	tw.publish(&same)
	if c := deliverOne(3); !signedWith(c, "whsec_first") {
		t.Fatal("a republished endpoint with the same secret lost it")
	}
	// A new sealed secret for the endpoint is opened, and signs from then on.
	rotated := *ep
	rotated.SecretSealed = other.SealWebhookSecret(ep.ID, "whsec_second")
	tw.publish(&rotated)
	if c := deliverOne(4); !signedWith(c, "whsec_second") || signedWith(c, "whsec_first") {
		t.Fatal("after the endpoint's secret changed, the delivery is not signed with the new one only")
	}
}
