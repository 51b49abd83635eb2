package media

import (
	"errors"
	"fmt"
	"net"
	"strconv"
)

// NetworkOptions say where a node's WebRTC traffic goes (the flags
// --media-node-ip, --media-udp-port and --media-tcp-port).
type NetworkOptions struct {
	// NodeIP is the address in the node's host candidates, the one clients
	// send media to. Empty: the media listener's host; when that is
	// 0.0.0.0 or ::, every interface's address (pion's default).
	NodeIP string
	// UDPPort is the one UDP port every peer's ICE uses. 0: the media
	// listener's port number (on UDP, so it never collides with it).
	UDPPort int
	// TCPPort is the ICE over TCP port, the fallback for networks that block
	// UDP. 0: the media listener's port plus one; -1: no ICE over TCP.
	TCPPort int
	// TURNPort, if not 0, runs the embedded TURN server on this port, UDP
	// and TCP, for clients that reach neither the UDP port nor ICE over
	// TCP. Off by default.
	TURNPort int
}

// Port bounds of NetworkOptions.
const (
	maxPort        = 65535
	DisabledICETCP = -1 // NetworkOptions.TCPPort: no ICE over TCP
)

// Validate checks the options alone (ports in range, an IP that parses).
func (o NetworkOptions) Validate() error {
	if o.NodeIP != "" && net.ParseIP(o.NodeIP) == nil {
		return fmt.Errorf("--media-node-ip=%q: want an IP address", o.NodeIP)
	}
	if o.UDPPort < 0 || o.UDPPort > maxPort {
		return fmt.Errorf("--media-udp-port=%d: want 0 (the media listener's port) to %d", o.UDPPort, maxPort)
	}
	if o.TCPPort < DisabledICETCP || o.TCPPort > maxPort {
		return fmt.Errorf("--media-tcp-port=%d: want -1 (off), 0 (the media listener's port + 1) or a port up to %d", o.TCPPort, maxPort)
	}
	if o.TURNPort < 0 || o.TURNPort > maxPort {
		return fmt.Errorf("--media-turn-port=%d: want 0 (off) or a port up to %d", o.TURNPort, maxPort)
	}
	return nil
}

// OpenWebRTC opens the sockets of a node whose WebSocket listener is
// listener, and returns the WebRTCConfig that uses them. The sockets are
// closed when the node closes (Node.Close). A listener on an ephemeral
// port (":0", as tests use) gets ephemeral media ports too, so two nodes
// on one machine never collide.
func OpenWebRTC(o NetworkOptions, listener net.Addr, ephemeral bool) (*WebRTCConfig, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	la, ok := listener.(*net.TCPAddr)
	if !ok {
		return nil, errors.New("media: the media listener is not a TCP listener")
	}
	bindIP := la.IP
	var announce []string
	if o.NodeIP != "" {
		ip := net.ParseIP(o.NodeIP)
		if la.IP.IsUnspecified() || la.IP.Equal(ip) {
			bindIP = la.IP
			if la.IP.IsUnspecified() {
				announce = []string{o.NodeIP}
			}
		} else {
			// Bound to one address, announcing another (a 1:1 NAT).
			announce = []string{o.NodeIP}
		}
	}
	udpPort, tcpPort := o.UDPPort, o.TCPPort
	if udpPort == 0 {
		udpPort = la.Port
	}
	if tcpPort == 0 {
		tcpPort = la.Port + 1
	}
	if ephemeral {
		udpPort = 0
		if tcpPort != DisabledICETCP {
			tcpPort = 0
		}
	}
	udp, err := net.ListenPacket("udp", net.JoinHostPort(bindIP.String(), strconv.Itoa(udpPort)))
	if err != nil {
		return nil, fmt.Errorf("media UDP port: %w", err)
	}
	cfg := &WebRTCConfig{UDP: udp, AnnounceIPs: announce, LoopbackCandidates: bindIP.IsLoopback()}
	if tcpPort != DisabledICETCP {
		tcp, err := net.Listen("tcp", net.JoinHostPort(bindIP.String(), strconv.Itoa(tcpPort)))
		if err != nil {
			_ = udp.Close()
			return nil, fmt.Errorf("media ICE-TCP port: %w", err)
		}
		cfg.TCP = tcp
	}
	if o.TURNPort != 0 {
		if err := openTURN(cfg, o, bindIP, ephemeral); err != nil {
			closeWebRTC(cfg)
			return nil, err
		}
	}
	return cfg, nil
}

// openTURN opens the embedded TURN server's sockets, UDP and TCP on one
// port, and relays on the node's address.
func openTURN(cfg *WebRTCConfig, o NetworkOptions, bindIP net.IP, ephemeral bool) error {
	nodeIP := bindIP
	if o.NodeIP != "" {
		nodeIP = net.ParseIP(o.NodeIP)
	}
	if nodeIP.IsUnspecified() {
		return errors.New("--media-turn-port needs --media-node-ip when the media listener is on every interface: TURN relays only to the node's own address")
	}
	port := o.TURNPort
	if ephemeral {
		port = 0
	}
	udp, err := net.ListenPacket("udp", net.JoinHostPort(bindIP.String(), strconv.Itoa(port)))
	if err != nil {
		return fmt.Errorf("media TURN UDP port: %w", err)
	}
	port = udp.LocalAddr().(*net.UDPAddr).Port
	tcp, err := net.Listen("tcp", net.JoinHostPort(bindIP.String(), strconv.Itoa(port)))
	if err != nil {
		_ = udp.Close()
		return fmt.Errorf("media TURN TCP port: %w", err)
	}
	relayIP := bindIP
	if relayIP.IsUnspecified() {
		relayIP = nodeIP
	}
	cfg.TURN = &TURNConfig{UDP: udp, TCP: tcp, Host: nodeIP.String(), Port: port, RelayIP: relayIP,
		PeerIPs: []net.IP{nodeIP, bindIP}}
	return nil
}

// closeWebRTC closes the sockets OpenWebRTC opened, for a caller that
// fails before a node owns them.
func closeWebRTC(cfg *WebRTCConfig) {
	_ = cfg.UDP.Close()
	if cfg.TCP != nil {
		_ = cfg.TCP.Close()
	}
	if cfg.TURN != nil {
		if cfg.TURN.UDP != nil {
			_ = cfg.TURN.UDP.Close()
		}
		if cfg.TURN.TCP != nil {
			_ = cfg.TURN.TCP.Close()
		}
	}
}

// CloseWebRTC closes the sockets of a config OpenWebRTC returned that was
// never given to a node (NewNode failed).
func CloseWebRTC(cfg *WebRTCConfig) { closeWebRTC(cfg) }
