package media

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/pion/logging"
	"github.com/pion/transport/v5"
	"github.com/pion/turn/v5"
)

// turnCredentialSeconds is how long the TURN credentials handed out at a
// join stay valid. TURN checks them on every allocation refresh, so this
// bounds a relayed call: a client past it reconnects (and gets new ones).
const turnCredentialSeconds = 8 * 3600

// turnRealm is the realm of the embedded TURN server.
const turnRealm = "rtcd"

// TURNConfig turns on the node's embedded TURN server (pion/turn), for
// clients whose networks let through neither UDP to the media port nor
// ICE over TCP. It relays only to the node's own media address: it is no
// open relay.
type TURNConfig struct {
	// UDP and TCP carry TURN (either may be nil, not both).
	UDP net.PacketConn
	TCP net.Listener
	// Host is the address clients are told to reach TURN at (in the
	// turn: URLs), and RelayIP the address relayed allocations get.
	Host    string
	Port    int
	RelayIP net.IP
	// PeerIPs are the only addresses a relay may send to: the node's media
	// addresses.
	PeerIPs []net.IP
	// Net is the network relays are opened on; nil: the host's.
	Net transport.Net
}

// turnServer is a running embedded TURN server with its credential secret.
type turnServer struct {
	cfg    TURNConfig
	secret string
	server *turn.Server
}

func startTURN(cfg TURNConfig) (*turnServer, error) {
	if cfg.UDP == nil && cfg.TCP == nil {
		return nil, errors.New("media: TURNConfig needs a UDP or TCP socket")
	}
	if cfg.RelayIP == nil || len(cfg.PeerIPs) == 0 {
		return nil, errors.New("media: TURNConfig needs a relay IP and the node's media IPs")
	}
	var key [32]byte
	_, _ = rand.Read(key[:])
	secret := base64.StdEncoding.EncodeToString(key[:])
	lf := logging.NewDefaultLoggerFactory()
	lf.DefaultLogLevel = logging.LogLevelError
	relay := func() turn.RelayAddressGenerator {
		return &turn.RelayAddressGeneratorStatic{RelayAddress: cfg.RelayIP, Address: cfg.RelayIP.String(), Net: cfg.Net}
	}
	allowed := func(_ net.Addr, peer net.IP) bool {
		for _, ip := range cfg.PeerIPs {
			if ip.Equal(peer) {
				return true
			}
		}
		return false
	}
	sc := turn.ServerConfig{
		Realm:         turnRealm,
		AuthHandler:   turn.LongTermTURNRESTAuthHandler(secret, lf.NewLogger("turn")),
		LoggerFactory: lf,
	}
	if cfg.UDP != nil {
		sc.PacketConnConfigs = []turn.PacketConnConfig{{PacketConn: cfg.UDP, RelayAddressGenerator: relay(), PermissionHandler: allowed}}
	}
	if cfg.TCP != nil {
		sc.ListenerConfigs = []turn.ListenerConfig{{Listener: cfg.TCP, RelayAddressGenerator: relay(), PermissionHandler: allowed}}
	}
	s, err := turn.NewServer(sc)
	if err != nil {
		return nil, fmt.Errorf("media: TURN server: %w", err)
	}
	return &turnServer{cfg: cfg, secret: secret, server: s}, nil
}

// iceServers returns the TURN entry of joined.ice_servers for one
// participant: time-limited credentials in the TURN REST API form
// (username "<expiry>:<participant>", password HMAC of it), which the
// server checks with its secret and nothing stored.
func (t *turnServer) iceServers(id participantIdentity) []ICEServer {
	user, pass, err := turn.GenerateLongTermTURNRESTCredentials(t.secret, id.ParticipantID, turnCredentialSeconds*time.Second)
	if err != nil {
		return nil
	}
	hostPort := net.JoinHostPort(t.cfg.Host, strconv.Itoa(t.cfg.Port))
	var urls []string
	if t.cfg.UDP != nil {
		urls = append(urls, "turn:"+hostPort+"?transport=udp")
	}
	if t.cfg.TCP != nil {
		urls = append(urls, "turn:"+hostPort+"?transport=tcp")
	}
	return []ICEServer{{URLs: urls, Username: user, Credential: pass}}
}

func (t *turnServer) close() {
	_ = t.server.Close()
}
