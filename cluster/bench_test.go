package cluster

import (
	"fmt"
	"testing"
	"time"

	"rtcd/internal/testtools"
)

// The cost of the hop: the same request served by the node it reached
// (the owner) and by another member's owner through the node-to-node
// listener. Serve answers a fixed 600-byte response, about a room's JSON,
// so the difference is the hop alone. Run with
// `go test -run '^$' -bench Forward ./cluster`; docs/performance.md has
// the figures.
func BenchmarkForward(b *testing.B) {
	etcd := testtools.StartEtcd(b)
	response := make([]byte, 600)
	request := []byte("GET /v1/rooms/room_0123456789abcdef HTTP/1.1\r\nHost: rtcd\r\nAuthorization: Bearer sk_test\r\n\r\n")
	cfg := func() Config {
		return Config{Name: "bench", EtcdEndpoints: []string{etcd.Endpoint}, Listen: "127.0.0.1:0", Secret: "s",
			Serve: func(string, []byte) []byte { return response }}
	}
	x, err := Join(cfg())
	if err != nil {
		b.Fatal(err)
	}
	defer x.Leave()
	// A second member in this process (one process is enough here: no
	// test kills it).
	y, err := Join(cfg())
	if err != nil {
		b.Fatal(err)
	}
	defer y.Leave()
	for len(x.Members()) != 2 || len(y.Members()) != 2 {
		time.Sleep(10 * time.Millisecond) // polling etcd's watch
	}
	// A project x owns and one y owns.
	var ownedByX, ownedByY string
	for i := 0; ownedByX == "" || ownedByY == ""; i++ {
		id := fmt.Sprintf("proj_%d", i)
		if o, _ := x.Owner(id); o.ID == x.ID() {
			ownedByX = id
		} else {
			ownedByY = id
		}
	}
	for _, bc := range []struct{ name, project string }{{"owner", ownedByX}, {"one_hop", ownedByY}} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(request) + len(response)))
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := x.Forward(bc.project, request); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}
