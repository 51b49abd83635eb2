// Package cluster owns this node's membership in a cluster of rtcd nodes
// and the placement of each project's work on exactly one of them.
//
// Membership lives in etcd: a node registers one key under a lease of
// LeaseTTLSeconds, renewed every second while it runs, and watches the
// other members' keys. A node killed or cut off stops renewing and its key disappears
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
// own clock (the moment it asked for the last renewal that etcd granted,
// plus the TTL less a margin: etcd cannot have let the lease run out
// before), so a node that
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
	"rtcd/internal/rendezvous"
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
	// renewInterval is how often the lease is renewed, and how long one
	// renewal may take: a third of the TTL, so two renewals can fail
	// before the lease runs out.
	renewInterval = LeaseTTLSeconds * time.Second / 3
	// rejoinInterval is the wait between attempts to register again after
	// the lease was lost.
	rejoinInterval = 500 * time.Millisecond
	// etcdKeyRoot is where members register (then the cluster's name).
	etcdKeyRoot = "/rtcd/"
	// forwardPath is the node-to-node listener's route of requests placed
	// by their key; sendPath its route of requests to one member
	// (SendTo), which nothing places.
	forwardPath = "/cluster/v1/forward"
	sendPath    = "/cluster/v1/send"
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
	// ErrNotPlaced: the owner could not make the project active
	// (Config.OnPlaced failed); the client may retry.
	ErrNotPlaced = errors.New("cluster: the owner could not place the project")
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
	// being active here. A project whose OnPlaced fails is not active: the
	// request that placed it gets the error (wrapped in ErrNotPlaced), and
	// the next one tries again; OnMoved follows every OnPlaced, failed or
	// not.
	OnPlaced func(projectID string) error
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

	ctx     context.Context // ends at Leave
	cancel  context.CancelFunc
	done    sync.WaitGroup // keepMembership and watchMembers
	serving sync.WaitGroup // the listener
	// refreshMembers asks watchMembers to read the whole list again.
	refreshMembers chan struct{}

	mu sync.Mutex
	// members is the member list, sorted by id, as of etcd revision
	// membersRevision; self is in it while the node is a member.
	members         []Member
	membersRevision int64
	// leaseID is the current lease; leaving is set by Leave.
	leaseID clientv3.LeaseID
	leaving bool
	// leaseValidUntil is when this node's lease may have run out, by its
	// own monotonic clock (zero: no lease).
	leaseValidUntil time.Time
	// active are the projects placed here; placing those whose OnPlaced
	// runs now, each with a channel closed when it returns.
	active  map[string]bool
	placing map[string]chan struct{}
	// moving are the projects whose OnMoved runs now (or waits for their
	// requests); inflight counts each project's requests being served,
	// and drained (on mu) wakes a move when a count drops to zero.
	moving   map[string]chan struct{}
	inflight map[string]int
	drained  *sync.Cond
	movers   sync.WaitGroup // moves setMembers started
	// generation counts this node's registrations: 1 after Join, one more
	// each time it registers again after losing its lease.
	generation int

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
		active: map[string]bool{}, placing: map[string]chan struct{}{}, moving: map[string]chan struct{}{},
		inflight: map[string]int{}, refreshMembers: make(chan struct{}, 1),
	}
	n.drained = sync.NewCond(&n.mu)
	n.ctx, n.cancel = context.WithCancel(context.Background())
	if err := n.register(); err != nil {
		n.cancel()
		etcd.Close()
		ln.Close()
		return nil, err
	}
	rev, err := n.readMembers()
	if err != nil {
		n.revoke()
		n.cancel()
		etcd.Close()
		ln.Close()
		return nil, err
	}
	n.srv = &fasthttp.Server{Handler: n.handleForward, Name: "rtcd-cluster",
		MaxRequestBodySize: MaxForwardedBytes, ReadTimeout: ForwardTimeout, WriteTimeout: ForwardTimeout}
	n.serving.Add(1)
	go func() { defer n.serving.Done(); _ = n.srv.Serve(ln) }()
	n.done.Add(2)
	go func() { defer n.done.Done(); n.watchMembers(rev) }()
	go func() { defer n.done.Done(); n.keepMembership() }()
	return n, nil
}

// register grants a lease and puts this node's key under it. The lease is
// counted from before the grant was asked for, by this node's clock.
func (n *Node) register() error {
	ctx, cancel := context.WithTimeout(n.ctx, etcdTimeout)
	defer cancel()
	asked := time.Now()
	lease, err := n.etcd.Grant(ctx, LeaseTTLSeconds)
	if err != nil {
		return fmt.Errorf("cluster: etcd lease: %w", err)
	}
	value, _ := json.Marshal(n.self)
	if _, err := n.etcd.Put(ctx, n.prefix+n.self.ID, string(value), clientv3.WithLease(lease.ID)); err != nil {
		return fmt.Errorf("cluster: etcd register: %w", err)
	}
	n.mu.Lock()
	n.leaseID = lease.ID
	n.generation++
	n.mu.Unlock()
	n.renewed(asked, lease.TTL)
	return nil
}

// renewed records that etcd granted or renewed the lease for ttlSeconds
// from no earlier than asked: the lease is valid, by this node's clock,
// until asked plus the TTL less leaseMargin (it cannot have run out in
// etcd before that).
func (n *Node) renewed(asked time.Time, ttlSeconds int64) {
	n.mu.Lock()
	if !n.leaving {
		n.leaseValidUntil = asked.Add(time.Duration(ttlSeconds)*time.Second - leaseMargin)
	}
	n.mu.Unlock()
}

// keepMembership renews the lease every renewInterval (each renewal timed
// from before it was asked for, see renewed); when a renewal fails or
// finds the lease gone, the node stops serving as an owner and registers
// again until it can, unless it is leaving.
func (n *Node) keepMembership() {
	for {
		for n.renewOnce() {
			select {
			case <-n.ctx.Done():
				return
			case <-time.After(renewInterval):
			}
		}
		if n.ctx.Err() != nil {
			return
		}
		// Renewals may still succeed before the lease runs out, but the
		// node cannot tell: it goes on by its own clock until then.
		n.mu.Lock()
		validUntil := n.leaseValidUntil
		n.mu.Unlock()
		if wait := time.Until(validUntil); wait > 0 {
			select {
			case <-n.ctx.Done():
				return
			case <-time.After(wait):
			}
			if n.renewOnce() {
				continue // etcd answered again in time
			}
		}
		slog.Warn("cluster: lost the membership lease; this node owns nothing until it registers again")
		n.dropOwnership()
		for n.register() != nil {
			select {
			case <-n.ctx.Done():
				return
			case <-time.After(rejoinInterval):
			}
		}
		slog.Info("cluster: registered again as a member", "id", n.self.ID)
		select { // one pending refresh is enough
		case n.refreshMembers <- struct{}{}:
		default:
		}
	}
}

// renewOnce renews the lease once; false when etcd did not answer in time
// or the lease is gone.
func (n *Node) renewOnce() bool {
	n.mu.Lock()
	id := n.leaseID
	n.mu.Unlock()
	ctx, cancel := context.WithTimeout(n.ctx, renewInterval)
	defer cancel()
	asked := time.Now()
	res, err := n.etcd.KeepAliveOnce(ctx, id)
	if err != nil || res.TTL <= 0 {
		return false
	}
	n.renewed(asked, res.TTL)
	return true
}

// revoke ends this node's lease in etcd, which deletes its key at once.
func (n *Node) revoke() {
	n.mu.Lock()
	id := n.leaseID
	n.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), etcdTimeout)
	defer cancel()
	_, _ = n.etcd.Revoke(ctx, id)
}

// dropOwnership ends every project placed here and the lease's validity.
func (n *Node) dropOwnership() {
	n.mu.Lock()
	n.leaseValidUntil = time.Time{}
	ids := make([]string, 0, len(n.active))
	for id := range n.active {
		ids = append(ids, id)
	}
	moves := n.beginMovesLocked(ids)
	n.mu.Unlock()
	n.finishMoves(moves)
}

// move is one project's OnMoved in progress: place waits for done before
// placing it again, so a project's OnPlaced and OnMoved never overlap.
type move struct {
	projectID string
	done      chan struct{}
}

// beginMovesLocked takes ids out of active and marks them moving. n.mu is
// held.
func (n *Node) beginMovesLocked(ids []string) []move {
	sort.Strings(ids)
	moves := make([]move, 0, len(ids))
	for _, id := range ids {
		delete(n.active, id)
		m := move{projectID: id, done: make(chan struct{})}
		n.moving[id] = m.done
		moves = append(moves, m)
	}
	return moves
}

// finishMoves calls OnMoved for each move once the requests being served
// for its project have returned, then lets the project be placed again.
func (n *Node) finishMoves(moves []move) {
	for _, m := range moves {
		n.mu.Lock()
		for n.inflight[m.projectID] > 0 {
			n.drained.Wait()
		}
		n.mu.Unlock()
		if n.cfg.OnMoved != nil {
			n.cfg.OnMoved(m.projectID)
		}
		n.mu.Lock()
		delete(n.moving, m.projectID)
		close(m.done)
		n.mu.Unlock()
	}
}

// readMembers reads the whole member list and returns its revision.
func (n *Node) readMembers() (int64, error) {
	ctx, cancel := context.WithTimeout(n.ctx, etcdTimeout)
	defer cancel()
	res, err := n.etcd.Get(ctx, n.prefix, clientv3.WithPrefix())
	if err != nil {
		return 0, fmt.Errorf("cluster: etcd members: %w", err)
	}
	var members []Member
	for _, kv := range res.Kvs {
		if m, ok := n.parseMember(kv.Key, kv.Value); ok {
			members = append(members, m)
		}
	}
	n.setMembers(members, res.Header.Revision)
	return res.Header.Revision, nil
}

// parseMember reads one member's key and value; a value whose id is not
// its key's is ignored.
func (n *Node) parseMember(key, value []byte) (Member, bool) {
	var m Member
	id := strings.TrimPrefix(string(key), n.prefix)
	if json.Unmarshal(value, &m) != nil || m.ID == "" || m.ID != id {
		return Member{}, false
	}
	return m, true
}

// watchMembers applies etcd's changes to the member list from rev on, and
// reads the whole list again when the watch ends (compaction, etcd lost)
// or keepMembership asks (after registering again).
func (n *Node) watchMembers(rev int64) {
	for n.ctx.Err() == nil {
		watchCtx, cancelWatch := context.WithCancel(n.ctx)
		events := n.etcd.Watch(watchCtx, n.prefix, clientv3.WithPrefix(), clientv3.WithRev(rev+1))
	watching:
		for {
			select {
			case res, ok := <-events:
				if !ok || res.Err() != nil {
					break watching
				}
				rev = res.Header.Revision
				n.mu.Lock()
				members := append([]Member(nil), n.members...)
				n.mu.Unlock()
				for _, ev := range res.Events {
					members = removeMember(members, strings.TrimPrefix(string(ev.Kv.Key), n.prefix))
					if ev.Type == clientv3.EventTypePut {
						if m, ok := n.parseMember(ev.Kv.Key, ev.Kv.Value); ok {
							members = append(members, m)
						}
					}
				}
				n.setMembers(members, rev)
			case <-n.refreshMembers:
				break watching
			case <-n.ctx.Done():
				cancelWatch()
				return
			}
		}
		cancelWatch()
		for n.ctx.Err() == nil {
			r, err := n.readMembers()
			if err == nil {
				rev = r
				break
			}
			select { // etcd unreachable: try again shortly
			case <-n.ctx.Done():
			case <-time.After(rejoinInterval):
			}
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

// setMembers installs the member list as of etcd revision rev (an older
// list than the one installed is dropped) and ends the placements it
// moves. Past MaxMembers the list is cut and an error logged: placement
// stays consistent only while every node sees every member.
func (n *Node) setMembers(members []Member, rev int64) {
	sort.Slice(members, func(i, j int) bool { return members[i].ID < members[j].ID })
	if len(members) > MaxMembers {
		slog.Error("cluster: more members than MaxMembers; the rest are ignored", "members", len(members), "max", MaxMembers)
		members = members[:MaxMembers]
	}
	n.mu.Lock()
	if rev < n.membersRevision {
		n.mu.Unlock()
		return
	}
	n.members, n.membersRevision = members, rev
	var movedIDs []string
	for id := range n.active {
		if owner, ok := ownerOf(members, id); !ok || owner.ID != n.self.ID {
			movedIDs = append(movedIDs, id)
		}
	}
	moves := n.beginMovesLocked(movedIDs)
	n.mu.Unlock()
	if len(moves) > 0 {
		// Off the watch's goroutine: a move waits for its project's
		// requests, and membership must not wait for them.
		n.movers.Add(1)
		go func() { defer n.movers.Done(); n.finishMoves(moves) }()
	}
}

// ownerOf is the rendezvous owner of id among members: the member with
// the highest rendezvous.Score of (id, member id).
func ownerOf(members []Member, id string) (Member, bool) {
	var best Member
	var bestScore uint64
	found := false
	for _, m := range members {
		if score := rendezvous.Score(id, m.ID); !found || score > bestScore {
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

// View is the member list this node sees and its fingerprint: two nodes
// with one fingerprint see the same members, so place every key alike.
func (n *Node) View() ([]Member, uint64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	h := fnv.New64a()
	for _, m := range n.members {
		_, _ = h.Write([]byte(m.ID))
		_, _ = h.Write([]byte{0})
	}
	return append([]Member(nil), n.members...), h.Sum64()
}

// OwnerIn is the member that owns key among members (a View's).
func OwnerIn(members []Member, key string) (Member, bool) { return ownerOf(members, key) }

// SendTo runs the raw HTTP request on member m (Config.Serve with no key,
// placing nothing) and returns its raw HTTP response. For a message to
// every member, such as what concerns each one's workspaces; a request
// for a key's owner goes through Route.
func (n *Node) SendTo(m Member, request []byte) ([]byte, error) {
	if len(request) > MaxForwardedBytes {
		return nil, ErrForwardTooLarge
	}
	if m.ID == n.self.ID {
		return n.cfg.Serve("", request), nil
	}
	req, res := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(res)
	req.Header.SetMethod(fasthttp.MethodPost)
	req.SetRequestURI("http://" + m.Address + sendPath)
	req.Header.Set(secretHeader, n.cfg.Secret)
	req.SetBodyRaw(request)
	if err := n.client.DoTimeout(req, res, ForwardTimeout); err != nil {
		return nil, fmt.Errorf("cluster: send to %s: %w", m.Address, err)
	}
	if res.StatusCode() != fasthttp.StatusOK {
		return nil, fmt.Errorf("cluster: send to %s: %d: %s", m.Address, res.StatusCode(), res.Body())
	}
	return append([]byte(nil), res.Body()...), nil
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
	return n.forward(projectID, request, true)
}

// forward is Forward; the owner waits for a move of the key under way
// only if waitMoves (see RouteNested).
func (n *Node) forward(projectID string, request []byte, waitMoves bool) ([]byte, error) {
	if len(request) > MaxForwardedBytes {
		return nil, ErrForwardTooLarge
	}
	owner, ok := n.Owner(projectID)
	if !ok {
		return nil, ErrNotMember
	}
	if owner.ID == n.self.ID {
		return n.serveOwned(projectID, request, waitMoves)
	}
	req, res := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(res)
	req.Header.SetMethod(fasthttp.MethodPost)
	uri := "http://" + owner.Address + forwardPath + "?project=" + url.QueryEscape(projectID)
	if !waitMoves {
		uri += "&nested=1"
	}
	req.SetRequestURI(uri)
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
	case fasthttp.StatusServiceUnavailable:
		return nil, fmt.Errorf("%w: on %s: %s", ErrNotPlaced, owner.Address, res.Body())
	default:
		return nil, fmt.Errorf("cluster: forward to %s: %d: %s", owner.Address, res.StatusCode(), res.Body())
	}
}

// Route runs a request for projectID where it is owned: on this node by
// calling local, once the project is placed here (as a forwarded request
// is served, without encoding it), or on its owner with the raw request
// that raw returns, whose raw response Route returns. A nil response and
// error mean local ran.
func (n *Node) Route(projectID string, local func(), raw func() []byte) ([]byte, error) {
	return n.route(projectID, local, raw, true)
}

// RouteNested is Route for a request made while another key's request is
// in flight here: if key is moving off this node it fails at once
// (ErrNotPlaced) instead of waiting, since the move may wait for the
// request in flight, and two such requests in opposite directions would
// wait on each other's moves.
func (n *Node) RouteNested(key string, local func(), raw func() []byte) ([]byte, error) {
	return n.route(key, local, raw, false)
}

func (n *Node) route(key string, local func(), raw func() []byte, waitMoves bool) ([]byte, error) {
	owner, ok := n.Owner(key)
	if !ok {
		return nil, ErrNotMember
	}
	if owner.ID != n.self.ID {
		return n.forward(key, raw(), waitMoves)
	}
	if err := n.place(key, waitMoves); err != nil {
		return nil, err
	}
	defer n.served(key)
	local()
	return nil, nil
}

// serveOwned serves a request for a project this node should own: only
// while its lease is valid by its own clock and its view makes it the
// owner, once the project is placed here.
func (n *Node) serveOwned(projectID string, request []byte, waitMoves bool) ([]byte, error) {
	if err := n.place(projectID, waitMoves); err != nil {
		return nil, err
	}
	defer n.served(projectID)
	response := n.cfg.Serve(projectID, request)
	if len(response) > MaxForwardedBytes {
		return nil, ErrForwardTooLarge
	}
	return response, nil
}

// served ends one request that place admitted.
func (n *Node) served(projectID string) {
	n.mu.Lock()
	if n.inflight[projectID]--; n.inflight[projectID] <= 0 {
		delete(n.inflight, projectID)
		n.drained.Broadcast()
	}
	n.mu.Unlock()
}

// place makes projectID active here if this node owns it, calling
// OnPlaced once: a project's first requests wait for it, other projects'
// do not; a request waits for a move of it under way only if waitMoves. A nil error admits one request, which must end with served. A change of members or the loss of the lease while OnPlaced
// runs is caught after it: the project is then not made active, and
// OnMoved follows at once, so every OnPlaced is followed by exactly one
// OnMoved.
func (n *Node) place(projectID string, waitMoves bool) error {
	for {
		n.mu.Lock()
		if err := n.ownsLocked(projectID); err != nil {
			n.mu.Unlock()
			return err
		}
		if n.active[projectID] {
			n.inflight[projectID]++
			n.mu.Unlock()
			return nil
		}
		if wait, ok := n.placing[projectID]; ok {
			n.mu.Unlock()
			<-wait
			continue
		}
		if wait, ok := n.moving[projectID]; ok {
			n.mu.Unlock()
			if !waitMoves {
				return fmt.Errorf("%w: it is moving off this node", ErrNotPlaced)
			}
			<-wait
			continue
		}
		done := make(chan struct{})
		n.placing[projectID] = done
		n.mu.Unlock()

		var placeErr error
		if n.cfg.OnPlaced != nil {
			placeErr = n.cfg.OnPlaced(projectID)
		}
		n.mu.Lock()
		err := n.ownsLocked(projectID)
		if err == nil && placeErr != nil {
			err = fmt.Errorf("%w: %w", ErrNotPlaced, placeErr)
		}
		var moves []move
		if err == nil {
			n.active[projectID] = true
			n.inflight[projectID]++
		} else {
			// Marked moving before the placement ends, so no request
			// places it again before OnMoved has run.
			moves = n.beginMovesLocked([]string{projectID})
		}
		delete(n.placing, projectID)
		close(done)
		n.mu.Unlock()
		n.finishMoves(moves)
		return err
	}
}

// ownsLocked says whether this node owns projectID now: its lease valid by
// its own clock, and its member list naming it the owner. n.mu is held.
func (n *Node) ownsLocked(projectID string) error {
	if n.leaving || !time.Now().Before(n.leaseValidUntil) {
		return ErrNotMember
	}
	if owner, ok := ownerOf(n.members, projectID); !ok || owner.ID != n.self.ID {
		return ErrNotOwner
	}
	return nil
}

// handleForward is the owner's side of Forward: the listener's one route.
func (n *Node) handleForward(ctx *fasthttp.RequestCtx) {
	path := string(ctx.Path())
	if !ctx.IsPost() || (path != forwardPath && path != sendPath) {
		ctx.Error("not found", fasthttp.StatusNotFound)
		return
	}
	if subtle.ConstantTimeCompare(ctx.Request.Header.Peek(secretHeader), []byte(n.cfg.Secret)) != 1 {
		ctx.Error("not a member of this cluster", fasthttp.StatusForbidden)
		return
	}
	if path == sendPath {
		if response := n.cfg.Serve("", ctx.PostBody()); len(response) <= MaxForwardedBytes {
			ctx.SetBody(response)
		} else {
			ctx.Error(ErrForwardTooLarge.Error(), fasthttp.StatusRequestEntityTooLarge)
		}
		return
	}
	projectID := string(ctx.QueryArgs().Peek("project"))
	if projectID == "" || len(projectID) > MaxProjectIDBytes {
		ctx.Error("project id missing or too long", fasthttp.StatusBadRequest)
		return
	}
	// The server refused bodies above MaxForwardedBytes before this.
	response, err := n.serveOwned(projectID, ctx.PostBody(), !ctx.QueryArgs().Has("nested"))
	switch {
	case errors.Is(err, ErrNotOwner), errors.Is(err, ErrNotMember):
		ctx.Error(err.Error(), fasthttp.StatusMisdirectedRequest)
	case errors.Is(err, ErrForwardTooLarge):
		ctx.Error(err.Error(), fasthttp.StatusRequestEntityTooLarge)
	case errors.Is(err, ErrNotPlaced):
		ctx.Error(err.Error(), fasthttp.StatusServiceUnavailable)
	default:
		ctx.SetBody(response)
	}
}

// Leave stops this node serving as an owner, ends its placements
// (OnMoved), ends its lease (the others drop it at once), and stops its
// listener. Idempotent.
func (n *Node) Leave() {
	n.leaveOnce.Do(func() {
		n.mu.Lock()
		n.leaving = true // ownsLocked refuses from here on
		n.mu.Unlock()
		n.dropOwnership()
		// The renewals and the watch end before the lease does, so that no
		// registration in flight puts the key back after it.
		n.cancel()
		n.done.Wait()
		n.movers.Wait()
		n.revoke()
		shutdown, cancelShutdown := context.WithTimeout(context.Background(), leaveTimeout)
		_ = n.srv.ShutdownWithContext(shutdown)
		cancelShutdown()
		n.serving.Wait()
		_ = n.etcd.Close()
	})
}
