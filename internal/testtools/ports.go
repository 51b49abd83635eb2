package testtools

import (
	"net"
	"strconv"
	"testing"
)

// freePairTries bounds FreeMediaAddr's search.
const freePairTries = 100

// FreeMediaAddr is a loopback address whose port, and the port after it,
// were free a moment ago. A media listener (rtcd media --listen,
// --media-listen) also binds the next port for ICE over TCP, and a port
// picked alone can have that neighbour held by another connection.
func FreeMediaAddr(t testing.TB) string {
	t.Helper()
	for range freePairTries {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		next, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(ln.Addr().(*net.TCPAddr).Port+1)))
		_ = ln.Close()
		if err == nil {
			_ = next.Close()
			return ln.Addr().String()
		}
	}
	t.Fatalf("no free pair of loopback ports in %d tries", freePairTries)
	return ""
}
