// Package cluster owns this node's membership in a cluster of rtcd nodes
// and the placement of each project's work on exactly one of them.
//
// Membership lives in etcd: a node registers one key under a lease of
// LeaseTTLSeconds, renewed while it runs, and watches the other members'
// keys. A node killed or cut off stops renewing and its key disappears
// when the lease runs out, so every other node drops it within the TTL.
//
// Placement is rendezvous hashing of the project id over the members: every
// node computes the same owner from the same member list without asking
// anyone, and a change of members moves only the projects of the node that
// came or went. A project becomes active on its owner at its first request
// there (OnPlaced) and stops being active when the members change so that
// another node owns it, or when this node leaves or loses its lease
// (OnMoved).
//
// Forward carries one raw HTTP request to its project's owner in one hop:
// the owner's node-to-node listener runs it through Serve as if it had
// arrived there and sends the raw response back. An owner that no longer
// believes it owns the project (the members changed while the request was
// on its way) refuses it with ErrNotOwner instead of passing it on, so a
// request never makes two hops.
//
// Fencing: a node serves as an owner only while its lease is valid by its
// own clock (the last renewal plus the TTL less a margin), so a node that
// was paused past its lease refuses to serve before it has heard from
// etcd; it then registers again under a new lease and rejoins. Writes of
// an actor that moved are also refused by the store (the new owner's claim
// fences the old writer, docs/cluster.md).
//
// protoactor-go's cluster (grains over its etcd provider) was the first
// choice; at the newest version the module proxy serves it has data races
// in its member list (gossip reads it unlocked while the etcd provider
// writes it), which `go test -race` reports in the first test. This
// package keeps its model, an etcd lease per member and rendezvous
// placement, in a few hundred lines that are race-clean.
package cluster

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"net"
	"net/url"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/valyala/fasthttp"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Bounds of the cluster layer.
const (
	// LeaseTTLSeconds is a member's lease in etcd: a node that stops
	// renewing (killed, paused, cut off) is dropped by the others within
	// it.
	LeaseTTLSeconds = 3
	// leaseMargin is taken off the TTL when a node judges its own lease by
	// its own clock, so it stops serving before etcd could have let
	// another node take over.
	leaseMargin = time.Second
	// ForwardTimeout bounds one forwarded request, hop and work together:
	// the engine's own wait for an actor (10 s) plus the hop.
	ForwardTimeout = 12 * time.Second
	// MaxForwardedBytes bounds one forwarded request or response (raw HTTP,
	// headers and body): above the API's largest body (1 MiB) with room for
	// headers.
	MaxForwardedBytes = 2 << 20
	// MaxMembers bounds the member list a node keeps.
	MaxMembers = 64
	// MaxProjectIDBytes bounds the project id of a forwarded request.
	MaxProjectIDBytes = 128
	// etcdTimeout bounds each call to etcd at Join and re-registration.
	etcdTimeout = 5 * time.Second
	// rejoinInterval is the wait between attempts to register again after
	// the lease was lost.
	rejoinInterval = 500 * time.Millisecond
	// etcdKeyRoot is where members register (then the cluster's name).
	etcdKeyRoot = "/rtcd/"
	// forwardPath is the node-to-node listener's one route.
	forwardPath = "/cluster/v1/forward"
	// maxConnsPerMember bounds the connections this node keeps to one
	// other member (fasthttp's pool): one per forwarded request in flight.
	maxConnsPerMember = 1024
	// leaveTimeout bounds the listener's drain when the node leaves.
	leaveTimeout = 5 * time.Second
	// secretHeader carries the cluster's shared secret between nodes.
	secretHeader = "X-Rtcd-Cluster-Secret"
)

// Errors of Forward.
var (
	// ErrForwardTooLarge: a request or response above MaxForwardedBytes.
	ErrForwardTooLarge = errors.New("cluster: forwarded message above MaxForwardedBytes")
	// ErrNotOwner: the node the request reached does not own the project
	// (the members are changing); the client may retry.
	ErrNotOwner = errors.New("cluster: the node reached does not own the project (members are changing)")
	// ErrNotMember: this node is not a member now (its lease was lost and
	// it has not registered again), or it sees no members.
	ErrNotMember = errors.New("cluster: this node is not a member of the cluster now")
)

// Config is one node's part in a cluster.
type Config struct {
	// Name is the cluster's name: nodes of one name in one etcd see each
	// other.
	Name string
	// EtcdEndpoints are etcd's client endpoints (host:port).
	EtcdEndpoints []string
	// Listen is HOST:PORT of this node's node-to-node listener (port 0:
	// any free port); Advertise, when set, is the HOST:PORT other nodes
	// dial instead (behind NAT or in a container). Keep it private.
	Listen    string
	Advertise string
	// Secret is shared by every node; a node-to-node request without it is
	// refused.
	Secret string
	// Serve runs a forwarded raw HTTP request for projectID on this node,
	// its owner, and returns the raw HTTP response. request is valid only
	// until Serve returns.
	Serve func(projectID string, request []byte) []byte
	// OnPlaced and OnMoved, if set, are called when a project becomes
	// active here (before its first request is served) and when it stops
	// being active here.
	OnPlaced func(projectID string)
	OnMoved  func(projectID string)
}

// Member is one node of the cluster as the member list shows it.
type Member struct {
	ID      string `json:"id"`      // random, new at every start
	Address string `json:"address"` // HOST:PORT of its node-to-node listener
}

// Node is this process's membership in the cluster.
type Node struct {
	cfg    Config
	self   Member
	prefix string // etcd key prefix of the cluster's members
	etcd   *clientv3.Client
	ln     net.Listener
	srv    *fasthttp.Server
	client *fasthttp.Client

	ctx    context.Context // ends at Leave
	cancel context.CancelFunc
	done   sync.WaitGroup

	mu sync.Mutex
	// members is the member list, sorted by id; self is in it while the
	// node is a member.
	members []Member
	// leaseValidUntil is when this node's lease may have run out, by its
	// own monotonic clock (zero: no lease).
	leaseValidUntil time.Time
	// active are the projects placed here.
	active map[string]bool
	// generation counts this node's registrations: 1 after Join, one more
	// each time it registers again after losing its lease.
	generation int
	// placing serialises OnPlaced calls, so a project's first requests
	// all wait for it to be active.
	placing sync.Mutex

	leaveOnce sync.Once
}

// Join starts this node's listener, registers it in etcd under a lease,
// reads the member list and returns; later changes arrive through etcd's
// watch.
func Join(cfg Config) (*Node, error) {
	if cfg.Name == "" || len(cfg.EtcdEndpoints) == 0 || cfg.Serve == nil || cfg.Secret == "" {
		return nil, errors.New("cluster: Join needs a name, etcd endpoints, a secret and Serve")
	}
	if strings.ContainsAny(cfg.Name, "/ ") {
		return nil, fmt.Errorf("cluster: name %q: no '/' or spaces", cfg.Name)
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("cluster: listen: %w", err)
	}
	advertise := cfg.Advertise
	if advertise == "" {
		advertise = ln.Addr().String()
	} else if _, _, err := net.SplitHostPort(advertise); err != nil {
		ln.Close()
		return nil, fmt.Errorf("cluster: advertise address: %w", err)
	}
	idBytes := make([]byte, 8)
	_, _ = rand.Read(idBytes)
	etcd, err := clientv3.New(clientv3.Config{Endpoints: cfg.EtcdEndpoints, DialTimeout: etcdTimeout})
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("cluster: etcd: %w", err)
	}
	n := &Node{
		cfg: cfg, self: Member{ID: hex.EncodeToString(idBytes), Address: advertise},
		prefix: etcdKeyRoot + cfg.Name + "/members/", etcd: etcd, ln: ln,
		client: &fasthttp.Client{
			MaxConnsPerHost: maxConnsPerMember, MaxResponseBodySize: MaxForwardedBytes,
			ReadTimeout: ForwardTimeout, WriteTimeout: ForwardTimeout, NoDefaultUserAgentHeader: true,
		},
		active: map[string]bool{},
	}
	n.ctx, n.cancel = context.WithCancel(context.Background())
	keepAlive, err := n.register()
	if err != nil {
		n.cancel()
		etcd.Close()
		ln.Close()
		return nil, err
	}
	rev, err := n.readMembers()
	if err != nil {
		n.cancel()
		etcd.Close()
		ln.Close()
		return nil, err
	}
	n.srv = &fasthttp.Server{Handler: n.handleForward, Name: "rtcd-cluster",
		MaxRequestBodySize: MaxForwardedBytes, ReadTimeout: ForwardTimeout, WriteTimeout: ForwardTimeout}
	n.done.Add(3)
	go func() { defer n.done.Done(); _ = n.srv.Serve(ln) }()
	go func() { defer n.done.Done(); n.watchMembers(rev) }()
	go func() { defer n.done.Done(); n.keepMembership(keepAlive) }()
	return n, nil
}

// register grants a lease, puts this node's key under it and starts
// renewing it.
func (n *Node) register() (<-chan *clientv3.LeaseKeepAliveResponse, error) {
	ctx, cancel := context.WithTimeout(n.ctx, etcdTimeout)
	defer cancel()
	lease, err := n.etcd.Grant(ctx, LeaseTTLSeconds)
	if err != nil {
		return nil, fmt.Errorf("cluster: etcd lease: %w", err)
	}
	value, _ := json.Marshal(n.self)
	if _, err := n.etcd.Put(ctx, n.prefix+n.self.ID, string(value), clientv3.WithLease(lease.ID)); err != nil {
		return nil, fmt.Errorf("cluster: etcd register: %w", err)
	}
	n.mu.Lock()
	n.generation++
	n.mu.Unlock()
	n.renewed()
	keepAlive, err := n.etcd.KeepAlive(n.ctx, lease.ID)
	if err != nil {
		return nil, fmt.Errorf("cluster: etcd keep-alive: %w", err)
	}
	return keepAlive, nil
}

// renewed records a renewal of the lease (or its grant).
func (n *Node) renewed() {
	n.mu.Lock()
	n.leaseValidUntil = time.Now().Add(LeaseTTLSeconds*time.Second - leaseMargin)
	n.mu.Unlock()
}

// keepMembership follows the lease's renewals; when they end (the lease
// ran out, etcd is unreachable) the node stops serving as an owner and
// registers again until it can, unless it is leaving.
func (n *Node) keepMembership(keepAlive <-chan *clientv3.LeaseKeepAliveResponse) {
	for {
		for range keepAlive {
			n.renewed()
		}
		if n.ctx.Err() != nil {
			return
		}
		slog.Warn("cluster: lost the membership lease; this node owns nothing until it registers again")
		n.dropOwnership()
		for {
			var err error
			if keepAlive, err = n.register(); err == nil {
				break
			}
			select {
			case <-n.ctx.Done():
				return
			case <-time.After(rejoinInterval):
			}
		}
		slog.Info("cluster: registered again as a member", "id", n.self.ID)
		if _, err := n.readMembers(); err != nil {
			slog.Warn("cluster: reading the members after registering again", "err", err)
		}
	}
}

// dropOwnership ends every project placed here.
func (n *Node) dropOwnership() {
	n.mu.Lock()
	n.leaseValidUntil = time.Time{}
	moved := make([]string, 0, len(n.active))
	for id := range n.active {
		moved = append(moved, id)
	}
	n.active = map[string]bool{}
	n.mu.Unlock()
	n.notifyMoved(moved)
}

func (n *Node) notifyMoved(ids []string) {
	if n.cfg.OnMoved == nil {
		return
	}
	sort.Strings(ids)
	for _, id := range ids {
		n.cfg.OnMoved(id)
	}
}

// readMembers reads the whole member list and returns its revision.
func (n *Node) readMembers() (int64, error) {
	ctx, cancel := context.WithTimeout(n.ctx, etcdTimeout)
	defer cancel()
	res, err := n.etcd.Get(ctx, n.prefix, clientv3.WithPrefix(), clientv3.WithLimit(MaxMembers))
	if err != nil {
		return 0, fmt.Errorf("cluster: etcd members: %w", err)
	}
	var members []Member
	for _, kv := range res.Kvs {
		var m Member
		if json.Unmarshal(kv.Value, &m) == nil && m.ID != "" {
			members = append(members, m)
		}
	}
	n.setMembers(members)
	return res.Header.Revision, nil
}

// watchMembers applies etcd's changes to the member list from rev on.
func (n *Node) watchMembers(rev int64) {
	for n.ctx.Err() == nil {
		for res := range n.etcd.Watch(n.ctx, n.prefix, clientv3.WithPrefix(), clientv3.WithRev(rev+1)) {
			if res.Err() != nil {
				break // compacted or cancelled: read the list again below
			}
			rev = res.Header.Revision
			n.mu.Lock()
			members := append([]Member(nil), n.members...)
			n.mu.Unlock()
			for _, ev := range res.Events {
				id := strings.TrimPrefix(string(ev.Kv.Key), n.prefix)
				members = removeMember(members, id)
				if ev.Type == clientv3.EventTypePut {
					var m Member
					if json.Unmarshal(ev.Kv.Value, &m) == nil && m.ID == id {
						members = append(members, m)
					}
				}
			}
			n.setMembers(members)
		}
		if n.ctx.Err() != nil {
			return
		}
		if r, err := n.readMembers(); err == nil {
			rev = r
		} else {
			time.Sleep(rejoinInterval) // etcd unreachable: try again shortly
		}
	}
}

func removeMember(members []Member, id string) []Member {
	out := members[:0]
	for _, m := range members {
		if m.ID != id {
			out = append(out, m)
		}
	}
	return out
}

// setMembers installs a member list and ends the placements it moves.
func (n *Node) setMembers(members []Member) {
	sort.Slice(members, func(i, j int) bool { return members[i].ID < members[j].ID })
	if len(members) > MaxMembers {
		members = members[:MaxMembers]
	}
	n.mu.Lock()
	n.members = members
	var moved []string
	for id := range n.active {
		if owner, ok := ownerOf(members, id); !ok || owner.ID != n.self.ID {
			moved = append(moved, id)
			delete(n.active, id)
		}
	}
	n.mu.Unlock()
	n.notifyMoved(moved)
}

// ownerOf is the rendezvous owner of id among members: the member whose
// hash of (id, member id) is highest.
func ownerOf(members []Member, id string) (Member, bool) {
	var best Member
	var bestScore uint64
	found := false
	for _, m := range members {
		h := fnv.New64a()
		_, _ = h.Write([]byte(id))
		_, _ = h.Write([]byte{0})
		_, _ = h.Write([]byte(m.ID))
		if score := h.Sum64(); !found || score > bestScore {
			best, bestScore, found = m, score, true
		}
	}
	return best, found
}

// ID is this node's member id.
func (n *Node) ID() string { return n.self.ID }

// Generation counts this node's registrations in etcd: 1 after Join, one
// more each time it registered again after losing its lease.
func (n *Node) Generation() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.generation
}

// Address is this node's node-to-node address as other nodes dial it.
func (n *Node) Address() string { return n.self.Address }

// Members lists the members this node sees, itself included while it is
// one.
func (n *Node) Members() []Member {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]Member(nil), n.members...)
}

// Owner is the member that owns projectID in this node's view.
func (n *Node) Owner(projectID string) (Member, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return ownerOf(n.members, projectID)
}

// Forward runs the raw HTTP request on projectID's owner (this node, or
// another in one hop) and returns its raw HTTP response.
func (n *Node) Forward(projectID string, request []byte) ([]byte, error) {
	if len(request) > MaxForwardedBytes {
		return nil, ErrForwardTooLarge
	}
	owner, ok := n.Owner(projectID)
	if !ok {
		return nil, ErrNotMember
	}
	if owner.ID == n.self.ID {
		return n.serveOwned(projectID, request)
	}
	req, res := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(res)
	req.Header.SetMethod(fasthttp.MethodPost)
	req.SetRequestURI("http://" + owner.Address + forwardPath + "?project=" + url.QueryEscape(projectID))
	req.Header.Set(secretHeader, n.cfg.Secret)
	req.SetBodyRaw(request)
	if err := n.client.DoTimeout(req, res, ForwardTimeout); err != nil {
		if errors.Is(err, fasthttp.ErrBodyTooLarge) {
			return nil, ErrForwardTooLarge
		}
		return nil, fmt.Errorf("cluster: forward to %s: %w", owner.Address, err)
	}
	switch res.StatusCode() {
	case fasthttp.StatusOK:
		return append([]byte(nil), res.Body()...), nil
	case fasthttp.StatusMisdirectedRequest:
		return nil, ErrNotOwner
	case fasthttp.StatusRequestEntityTooLarge:
		return nil, ErrForwardTooLarge
	default:
		return nil, fmt.Errorf("cluster: forward to %s: %d: %s", owner.Address, res.StatusCode(), res.Body())
	}
}

// serveOwned serves a request for a project this node should own: only
// while its lease is valid by its own clock and its view makes it the
// owner.
func (n *Node) serveOwned(projectID string, request []byte) ([]byte, error) {
	n.mu.Lock()
	owner, ok := ownerOf(n.members, projectID)
	valid := time.Now().Before(n.leaseValidUntil)
	placed := n.active[projectID]
	n.mu.Unlock()
	if !valid {
		return nil, ErrNotMember
	}
	if !ok || owner.ID != n.self.ID {
		return nil, ErrNotOwner
	}
	if !placed {
		n.placing.Lock()
		n.mu.Lock()
		placed = n.active[projectID]
		n.mu.Unlock()
		if !placed {
			if n.cfg.OnPlaced != nil {
				n.cfg.OnPlaced(projectID)
			}
			n.mu.Lock()
			n.active[projectID] = true
			n.mu.Unlock()
		}
		n.placing.Unlock()
	}
	response := n.cfg.Serve(projectID, request)
	if len(response) > MaxForwardedBytes {
		return nil, ErrForwardTooLarge
	}
	return response, nil
}

// handleForward is the owner's side of Forward: the listener's one route.
func (n *Node) handleForward(ctx *fasthttp.RequestCtx) {
	if !ctx.IsPost() || string(ctx.Path()) != forwardPath {
		ctx.Error("not found", fasthttp.StatusNotFound)
		return
	}
	if subtle.ConstantTimeCompare(ctx.Request.Header.Peek(secretHeader), []byte(n.cfg.Secret)) != 1 {
		ctx.Error("not a member of this cluster", fasthttp.StatusForbidden)
		return
	}
	projectID := string(ctx.QueryArgs().Peek("project"))
	if projectID == "" || len(projectID) > MaxProjectIDBytes {
		ctx.Error("project id missing or too long", fasthttp.StatusBadRequest)
		return
	}
	// The server refused bodies above MaxForwardedBytes before this.
	response, err := n.serveOwned(projectID, ctx.PostBody())
	switch {
	case errors.Is(err, ErrNotOwner), errors.Is(err, ErrNotMember):
		ctx.Error(err.Error(), fasthttp.StatusMisdirectedRequest)
	case errors.Is(err, ErrForwardTooLarge):
		ctx.Error(err.Error(), fasthttp.StatusRequestEntityTooLarge)
	default:
		ctx.SetBody(response)
	}
}

// Leave deregisters this node (the others drop it at once), ends its
// placements and stops its listener. Idempotent.
func (n *Node) Leave() {
	n.leaveOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), etcdTimeout)
		_, _ = n.etcd.Delete(ctx, n.prefix+n.self.ID)
		cancel()
		n.cancel()
		shutdown, cancelShutdown := context.WithTimeout(context.Background(), leaveTimeout)
		_ = n.srv.ShutdownWithContext(shutdown)
		cancelShutdown()
		n.done.Wait()
		n.dropOwnership()
		_ = n.etcd.Close()
	})
}
