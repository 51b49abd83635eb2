package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Media nodes run on their own (`rtcd media`) register in the cluster's
// etcd as members do, under /rtcd/<name>/media/<id>, each under a lease of
// LeaseTTLSeconds kept alive while the node runs: a node killed or cut off
// is dropped within the TTL, one that stops revokes its lease and is
// dropped at once. The control plane's nodes watch the list (WatchMedia)
// and choose a media node for each room among them.

// MaxMediaMembers bounds the media nodes a control-plane node keeps.
const MaxMediaMembers = 256

// MediaMember is a media node as it registered: where clients reach it
// (MediaURL, the connect endpoint) and where the control plane sends its
// commands (ControlURL).
type MediaMember struct {
	ID         string `json:"id"`
	MediaURL   string `json:"media_url"`
	ControlURL string `json:"control_url"`
}

func mediaPrefix(name string) string { return etcdKeyRoot + name + "/media/" }

// MediaRegistration is a media node's registration; Close ends it.
type MediaRegistration struct {
	etcd   *clientv3.Client
	cancel context.CancelFunc
	done   chan struct{}
	closed sync.Once
}

// RegisterMedia registers m in the etcd of the cluster name and keeps it
// registered (registering again after a lost lease) until Close.
func RegisterMedia(name string, endpoints []string, m MediaMember) (*MediaRegistration, error) {
	if name == "" || strings.ContainsAny(name, "/ ") || len(endpoints) == 0 {
		return nil, fmt.Errorf("cluster: RegisterMedia needs a name without '/' or spaces and etcd endpoints")
	}
	if m.ID == "" || strings.Contains(m.ID, "/") || m.MediaURL == "" || m.ControlURL == "" {
		return nil, errors.New("cluster: a media member needs an id without '/', a media URL and a control URL")
	}
	etcd, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: etcdTimeout})
	if err != nil {
		return nil, fmt.Errorf("cluster: etcd: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &MediaRegistration{etcd: etcd, cancel: cancel, done: make(chan struct{})}
	key, value := mediaPrefix(name)+m.ID, mustJSON(m)
	lease, err := registerUnderLease(ctx, etcd, key, value)
	if err != nil {
		cancel()
		etcd.Close()
		return nil, err
	}
	go r.keep(ctx, key, value, lease)
	return r, nil
}

// registerUnderLease grants a lease and puts key under it.
func registerUnderLease(ctx context.Context, etcd *clientv3.Client, key, value string) (clientv3.LeaseID, error) {
	ctx, cancel := context.WithTimeout(ctx, etcdTimeout)
	defer cancel()
	lease, err := etcd.Grant(ctx, LeaseTTLSeconds)
	if err != nil {
		return 0, fmt.Errorf("cluster: etcd lease: %w", err)
	}
	if _, err := etcd.Put(ctx, key, value, clientv3.WithLease(lease.ID)); err != nil {
		return 0, fmt.Errorf("cluster: etcd register: %w", err)
	}
	return lease.ID, nil
}

// keep renews the lease; when it is lost it registers again, every
// rejoinInterval until it succeeds. At Close it revokes the lease.
func (r *MediaRegistration) keep(ctx context.Context, key, value string, lease clientv3.LeaseID) {
	defer close(r.done)
	for {
		alive, err := r.etcd.KeepAlive(ctx, lease)
		if err == nil {
			for range alive { // drained until the lease or ctx ends
			}
		}
		if ctx.Err() != nil {
			revoke, cancel := context.WithTimeout(context.Background(), etcdTimeout)
			_, _ = r.etcd.Revoke(revoke, lease)
			cancel()
			return
		}
		slog.Warn("cluster: a media node's registration was lost; registering again", "key", key)
		for ctx.Err() == nil {
			if lease, err = registerUnderLease(ctx, r.etcd, key, value); err == nil {
				break
			}
			select {
			case <-ctx.Done():
			case <-time.After(rejoinInterval):
			}
		}
	}
}

// Close revokes the registration (the control plane drops the node at
// once) and closes its etcd client. Idempotent.
func (r *MediaRegistration) Close() {
	r.closed.Do(func() {
		r.cancel()
		<-r.done
		_ = r.etcd.Close()
	})
}

// MediaWatch follows the media nodes registered in a cluster.
type MediaWatch struct {
	etcd   *clientv3.Client
	prefix string
	cancel context.CancelFunc
	done   sync.WaitGroup
}

// WatchMedia calls onChange with the media nodes registered in the
// cluster name (sorted by id, at most MaxMediaMembers), once before it
// returns and again after every change, from one goroutine, until Close.
func WatchMedia(name string, endpoints []string, onChange func([]MediaMember)) (*MediaWatch, error) {
	etcd, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: etcdTimeout})
	if err != nil {
		return nil, fmt.Errorf("cluster: etcd: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	w := &MediaWatch{etcd: etcd, prefix: mediaPrefix(name), cancel: cancel}
	rev, err := w.read(ctx, onChange)
	if err != nil {
		cancel()
		etcd.Close()
		return nil, err
	}
	w.done.Add(1)
	go w.follow(ctx, rev, onChange)
	return w, nil
}

// read reads the whole list, hands it to onChange and returns its
// revision.
func (w *MediaWatch) read(ctx context.Context, onChange func([]MediaMember)) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, etcdTimeout)
	defer cancel()
	res, err := w.etcd.Get(ctx, w.prefix, clientv3.WithPrefix(), clientv3.WithLimit(MaxMediaMembers))
	if err != nil {
		return 0, fmt.Errorf("cluster: etcd media nodes: %w", err)
	}
	members := make([]MediaMember, 0, len(res.Kvs))
	for _, kv := range res.Kvs {
		var m MediaMember
		if json.Unmarshal(kv.Value, &m) == nil && m.ID == strings.TrimPrefix(string(kv.Key), w.prefix) {
			members = append(members, m)
		}
	}
	sort.Slice(members, func(i, j int) bool { return members[i].ID < members[j].ID })
	onChange(members)
	return res.Header.Revision, nil
}

// follow reads the list again after every change etcd reports (media
// nodes come and go rarely), and when the watch ends (compaction, etcd
// lost), every rejoinInterval until a read succeeds.
func (w *MediaWatch) follow(ctx context.Context, rev int64, onChange func([]MediaMember)) {
	defer w.done.Done()
	for ctx.Err() == nil {
		watchCtx, cancelWatch := context.WithCancel(ctx)
		for res := range w.etcd.Watch(watchCtx, w.prefix, clientv3.WithPrefix(), clientv3.WithRev(rev+1)) {
			if res.Err() != nil {
				break
			}
			if next, err := w.read(ctx, onChange); err == nil {
				rev = max(rev, next)
			}
		}
		cancelWatch()
		for ctx.Err() == nil {
			next, err := w.read(ctx, onChange)
			if err == nil {
				rev = next
				break
			}
			select {
			case <-ctx.Done():
			case <-time.After(rejoinInterval):
			}
		}
	}
}

// Close stops the watch.
func (w *MediaWatch) Close() {
	w.cancel()
	w.done.Wait()
	_ = w.etcd.Close()
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("cluster: assertion failed: %T does not encode: %v", v, err))
	}
	return string(b)
}
