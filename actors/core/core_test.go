package core

import (
	"errors"
	"sync"
	"testing"
	"time"

	"rtcd/auth"
	"rtcd/clock"
)

var t0 = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

// Recovery waits for every actor counted, never blocks one that reports,
// and returns the first error whatever the order.
func TestRecoveryReportsTheFirstErrorWithoutBlocking(t *testing.T) {
	var r Recovery
	const actors = 100
	for i := 0; i < actors; i++ {
		r.Add()
	}
	first := errors.New("first")
	var wg sync.WaitGroup
	r.Done(first)
	for i := 1; i < actors; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if i%10 == 0 {
				r.Done(errors.New("later"))
			} else {
				r.Done(nil)
			}
		}()
	}
	done := make(chan error, 1)
	go func() { done <- r.Wait() }()
	select {
	case err := <-done:
		if err != first {
			t.Fatalf("Wait returned %v, want the first error", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Wait did not return once every actor reported")
	}
	wg.Wait()
}

// Creation instants are strictly increasing, even within one clock tick
// and across goroutines: list indexes order by them.
func TestInstantsNeverRepeat(t *testing.T) {
	i := &Instants{clock: clock.NewFake(t0)} // a clock that never moves
	seen := make(chan time.Time, 400)
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			last := time.Time{}
			for n := 0; n < 100; n++ {
				at := i.Next()
				if !at.After(last) {
					t.Errorf("instant %v not after %v", at, last)
				}
				last = at
				seen <- at
			}
		}()
	}
	wg.Wait()
	close(seen)
	unique := map[time.Time]bool{}
	for at := range seen {
		if unique[at] {
			t.Fatalf("instant %v handed out twice", at)
		}
		unique[at] = true
	}
}

// A key's use is journaled at most once per APIKeyTouchInterval, with one
// touch on its way at a time, released by Touched.
func TestKeyRecordTouchesOncePerInterval(t *testing.T) {
	rec := NewKeyRecord("key_1", "prj_1", 0, time.Time{})
	if !rec.NoteUse(t0) {
		t.Fatal("the first use of a never-used key is not journaled")
	}
	if rec.NoteUse(t0.Add(2 * APIKeyTouchInterval)) {
		t.Fatal("a second touch while one is on its way")
	}
	rec.Touched(t0)
	if rec.NoteUse(t0.Add(APIKeyTouchInterval / 2)) {
		t.Fatal("a touch within the interval of the journaled use")
	}
	if got := rec.LastUsed(); !got.Equal(t0.Add(2 * APIKeyTouchInterval)) {
		t.Fatalf("last use %v, want the latest noted (never moved back)", got)
	}
	if !rec.NoteUse(t0.Add(3 * APIKeyTouchInterval)) {
		t.Fatal("no touch an interval after the journaled use")
	}
}

// A dashboard session's use follows the same protocol.
func TestLiveSessionTouchesOncePerInterval(t *testing.T) {
	var s Sessions
	h := [32]byte{7}
	s.Publish(h, NewLiveSession("07", "usr_1", t0.Add(time.Hour), t0))
	ls, ok := s.Lookup(h)
	if !ok || ls.UserID() != "usr_1" {
		t.Fatal("a published session is not found")
	}
	if ls.NoteUse(t0.Add(time.Second), time.Minute) {
		t.Fatal("a touch within the interval")
	}
	if !ls.NoteUse(t0.Add(time.Minute), time.Minute) || ls.NoteUse(t0.Add(2*time.Minute), time.Minute) {
		t.Fatal("want one touch on its way at a time")
	}
	ls.Touched(t0.Add(time.Minute))
	s.Withdraw(h)
	if _, ok := s.Lookup(h); ok {
		t.Fatal("a withdrawn session is still found")
	}
	s.SetRoles(map[string]map[string]string{"usr_1": {"acct_1": "owner"}})
	if r, ok := s.RoleOf("usr_1", "acct_1"); !ok || r != "owner" {
		t.Fatalf("role %q %v", r, ok)
	}
	if _, ok := s.RoleOf("usr_1", "acct_2"); ok {
		t.Fatal("a role in a workspace the user is not a member of")
	}
}

// What Secrets seals opens only with the same additional data, and a
// webhook secret is bound to its endpoint.
func TestSecretsBindSealedValues(t *testing.T) {
	keys, err := auth.DeriveKeys(make([]byte, 32))
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewSecrets(keys)
	if err != nil {
		t.Fatal(err)
	}
	sealed := s.Seal([]byte("plain"), []byte("id/a"))
	if got, ok := s.Open(sealed, []byte("id/a")); !ok || string(got) != "plain" {
		t.Fatalf("open: %q %v", got, ok)
	}
	if _, ok := s.Open(sealed, []byte("id/b")); ok {
		t.Fatal("opened with another key's additional data")
	}
	ep := &WebhookEndpoint{ID: "we_1", SecretSealed: s.SealWebhookSecret("we_1", "whsec_x")}
	if got, ok := s.OpenWebhookSecret(ep); !ok || got != "whsec_x" {
		t.Fatalf("webhook secret: %q %v", got, ok)
	}
	ep.ID = "we_2"
	if _, ok := s.OpenWebhookSecret(ep); ok {
		t.Fatal("a secret opened for another endpoint")
	}
}

// An envelope carries exactly one answer; a nil one (a command an actor
// runs for itself) drops it.
func TestEnvelopeAnswersOnce(t *testing.T) {
	env, answer := NewEnvelope(Sweep{})
	env.Respond(Reply{Status: 200})
	if r := <-answer; r.Status != 200 {
		t.Fatalf("answer %+v", r)
	}
	var none *Envelope
	none.Respond(Reply{Status: 200}) // must not block or panic
}
