package cluster

import (
	"reflect"
	"sync"
	"testing"
	"time"

	"rtcd/internal/testtools"
)

// A watch sees media nodes register, and drops one at once when it closes
// its registration; a registration outlives its watchers and theirs.
func TestMediaNodesRegisterAndLeave(t *testing.T) {
	etcd := testtools.StartEtcd(t)
	endpoints := []string{etcd.Endpoint}
	var mu sync.Mutex
	var seen []MediaMember
	w, err := WatchMedia("media", endpoints, func(m []MediaMember) {
		mu.Lock()
		seen = m
		mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	waitFor := func(what string, want []MediaMember) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			mu.Lock()
			got := seen
			mu.Unlock()
			if reflect.DeepEqual(got, want) || (len(got) == 0 && len(want) == 0) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: the watch sees %+v, want %+v", what, got, want)
			}
			time.Sleep(10 * time.Millisecond) // etcd's watch, in its own goroutine
		}
	}
	waitFor("none yet", nil)
	b := MediaMember{ID: "media-b", MediaURL: "ws://127.0.0.1:2/rtc", ControlURL: "http://127.0.0.1:2"}
	a := MediaMember{ID: "media-a", MediaURL: "ws://127.0.0.1:1/rtc", ControlURL: "http://127.0.0.1:1"}
	rb, err := RegisterMedia("media", endpoints, b)
	if err != nil {
		t.Fatal(err)
	}
	ra, err := RegisterMedia("media", endpoints, a)
	if err != nil {
		t.Fatal(err)
	}
	waitFor("two registered", []MediaMember{a, b}) // sorted by id

	// Past several lease TTLs, still registered: the lease is kept alive.
	time.Sleep((LeaseTTLSeconds + 1) * time.Second) // the lease's real TTL in etcd
	waitFor("kept alive", []MediaMember{a, b})

	// Another cluster's name sees none of them.
	var other []MediaMember
	wo, err := WatchMedia("elsewhere", endpoints, func(m []MediaMember) { other = m })
	if err != nil {
		t.Fatal(err)
	}
	wo.Close()
	if len(other) != 0 {
		t.Fatalf("another cluster sees %+v", other)
	}

	rb.Close()
	waitFor("one left at once", []MediaMember{a})
	ra.Close()
	waitFor("none left", nil)

	if _, err := RegisterMedia("media", endpoints, MediaMember{ID: "x/y", MediaURL: "ws://a/rtc", ControlURL: "http://a"}); err == nil {
		t.Fatal("an id with '/' was registered")
	}
	if _, err := RegisterMedia("media", endpoints, MediaMember{ID: "x"}); err == nil {
		t.Fatal("a member without URLs was registered")
	}
}
