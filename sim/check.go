package sim

import (
	"bytes"
	"encoding/binary"
	stdjson "encoding/json"
	"fmt"
	"sort"
	"strings"

	"rtcd/actors/core"
	"rtcd/actors/directory"
	"rtcd/actors/dispatch"
	"rtcd/actors/project"
	"rtcd/actors/room"
	"rtcd/actors/wallet"
	"rtcd/money"
	"rtcd/persistence"
)

// The owners' states as their snapshots encode them. Decoded strictly
// (unknown fields refused): a field an owner adds must be added here too,
// so no invariant ever reads a zero value in its place.
type roomSnap struct {
	Room         room.Room                    `json:"room"`
	Participants map[string]*room.Participant `json:"participants"`
	EventSeq     uint64                       `json:"event_seq"`
}

// joined counts the participants recorded as joined: the slots the room
// holds for good (a connect's reservation is the room's memory only).
func (r *roomSnap) joined() int {
	n := 0
	for _, p := range r.Participants {
		if p.Status == room.ParticipantJoined {
			n++
		}
	}
	return n
}

type projectSnap struct {
	Project         core.Project                     `json:"project"`
	ActiveRooms     map[string]struct{}              `json:"active_rooms"`
	Keys            map[string]*project.APIKey       `json:"keys"`
	ActiveKeys      int                              `json:"active_keys"`
	Endpoints       map[string]*core.WebhookEndpoint `json:"endpoints"`
	ActiveEndpoints int                              `json:"active_endpoints"`
}

type walletSnap struct {
	Account     wallet.Account           `json:"account"`
	Balance     int64                    `json:"balance"`
	CreditState string                   `json:"credit_state"`
	Topups      map[string]*wallet.Topup `json:"topups"`
}

func decodeStrict(b []byte, v any) error {
	d := stdjson.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	return d.Decode(v)
}

// view is the world as the store holds it at a durable point: every
// owner's state there (each checked against what its journal replays,
// then or after the crash), the ledger, the pending charges, the outbox
// and the webhook deliveries.
type view struct {
	store      *persistence.Store
	rooms      map[string]*roomSnap
	projects   map[string]*projectSnap
	wallets    map[string]*walletSnap
	dir        *directory.State
	ledger     map[string][]wallet.LedgerEntryView // account -> entries
	charges    map[string][]core.PendingCharge     // account -> charges not yet applied
	outbox     []core.OutboxEvent
	deliveries map[string][]dispatch.Delivery // endpoint -> deliveries
	due        map[string][]string            // endpoint -> the delivery ids of its wq/ entries, with their due time
}

func (w *world) view() *view {
	v := &view{store: w.store, rooms: map[string]*roomSnap{}, projects: map[string]*projectSnap{}, wallets: map[string]*walletSnap{},
		ledger: map[string][]wallet.LedgerEntryView{}, charges: map[string][]core.PendingCharge{},
		deliveries: map[string][]dispatch.Delivery{}, due: map[string][]string{}}
	for name, state := range w.durable {
		kind, id, _ := strings.Cut(name, "/")
		var target any
		switch kind {
		case "room":
			v.rooms[id] = &roomSnap{}
			target = v.rooms[id]
		case "project":
			v.projects[id] = &projectSnap{}
			target = v.projects[id]
		case "wallet":
			v.wallets[id] = &walletSnap{}
			target = v.wallets[id]
		case "directory":
			v.dir = &directory.State{}
			target = v.dir
		default:
			w.fail("a snapshot of no owner: %s", name)
		}
		if err := decodeStrict(state, target); err != nil {
			w.fail("the state of %s does not decode as the simulation reads it (update sim/check.go): %v", name, err)
		}
	}
	w.scan(persistence.PrefixLedger, func(key, value []byte) {
		acct, _, _ := strings.Cut(string(key[len(persistence.PrefixLedger):]), "/")
		var e wallet.LedgerEntryView
		w.decode(key, value, &e)
		v.ledger[acct] = append(v.ledger[acct], e)
	})
	w.scan(persistence.PrefixCharge, func(key, value []byte) {
		acct, _, _ := strings.Cut(string(key[len(persistence.PrefixCharge):]), "/")
		var c core.PendingCharge
		w.decode(key, value, &c)
		v.charges[acct] = append(v.charges[acct], c)
	})
	w.scan(persistence.PrefixOutbox, func(key, value []byte) {
		var ev core.OutboxEvent
		w.decode(key, value, &ev)
		v.outbox = append(v.outbox, ev)
	})
	w.scan(persistence.PrefixDelivery, func(key, value []byte) {
		var d dispatch.Delivery
		w.decode(key, value, &d)
		v.deliveries[d.EndpointID] = append(v.deliveries[d.EndpointID], d)
	})
	w.scan(persistence.PrefixDelDue, func(key, value []byte) {
		rest := key[len(persistence.PrefixDelDue):]
		i := bytes.IndexByte(rest, '/')
		if i < 0 || len(rest) < i+1+8 {
			w.fail("a malformed due entry %q", key)
		}
		ep, due := string(rest[:i]), int64(binary.BigEndian.Uint64(rest[i+1:]))
		v.due[ep] = append(v.due[ep], fmt.Sprintf("%s@%d", value, due))
	})
	return v
}

func (w *world) scan(prefix string, fn func(key, value []byte)) {
	if err := w.store.Scan([]byte(prefix), 0, func(k, val []byte) bool { fn(k, val); return true }); err != nil {
		w.fail("scan %s: %v", prefix, err)
	}
}

func (w *world) decode(key, value []byte, v any) {
	if err := stdjson.Unmarshal(value, v); err != nil {
		w.fail("%q does not decode: %v", key, err)
	}
}

// checkAll checks every fact and invariant on the store and the live
// owners (after a recovery, and at the end of a run).
func (w *world) checkAll(when string) {
	v := w.view()
	for _, f := range w.facts {
		if err := f.holds(v); err != nil {
			w.fail("after %s, acknowledged: %s: %v", when, f.what, err)
		}
	}
	w.checkCaps(v)
	w.checkMoney(v)
	w.checkWebhooks(v)
	w.checkOwnersAgree(v)
	w.checkGates(v)
}

// checkRoom checks a live room at a durable point, on its state as
// encoded: its caps (roomCaps); its gate, which holds a slot for each
// participant joined and each reservation, and never more than
// max_participants; and the media node, which serves exactly the sessions
// the room records as joined.
func (w *world) checkRoom(name string, state []byte) {
	var r roomSnap
	if err := decodeStrict(state, &r); err != nil {
		w.fail("the state of %s does not decode as the simulation reads it (update sim/check.go): %v", name, err)
	}
	w.roomCaps(&r)
	id := r.Room.ID
	if n := w.rt.rooms[id]; n != nil && !n.stopped {
		joined, reserved := n.gate.Held()
		if joined != int64(r.joined()) {
			w.fail("room %s has %d participants joined, and its gate holds %d joined seats", id, r.joined(), joined)
		}
		if slots := n.gate.Slots(); joined+reserved != slots {
			w.fail("room %s counts %d slots held, and %d seats hold one (%d joined, %d reserved)", id, slots, joined+reserved, joined, reserved)
		}
		if slots := n.gate.Slots(); slots > int64(r.Room.MaxParticipants) {
			w.fail("room %s holds %d slots (%d joined, %d reserved), its max_participants is %d", id, slots, joined, reserved, r.Room.MaxParticipants)
		}
	}
	for pid, p := range r.Participants {
		served := w.rt.media.served(id, pid)
		switch {
		case p.Status == room.ParticipantJoined && served != p.SessionID:
			w.fail("participant %s is joined with session %s, and the media node serves %q", pid, p.SessionID, served)
		case p.Status != room.ParticipantJoined && served != "":
			w.fail("participant %s is %s, and the media node serves its session %s", pid, p.Status, served)
		}
	}
}

// roomCaps: the room records no more participants joined than
// max_participants, and none connected (a connect is a reservation of the
// room's memory, never recorded).
func (w *world) roomCaps(r *roomSnap) {
	for id, p := range r.Participants {
		if p.Status == room.ParticipantConnected {
			w.fail("room %s records participant %s as connected", r.Room.ID, id)
		}
	}
	if n := r.joined(); n > r.Room.MaxParticipants {
		w.fail("room %s holds %d participants joined, its max_participants is %d", r.Room.ID, n, r.Room.MaxParticipants)
	}
	if len(r.Participants) > room.MaxParticipantSessionsPerRoom {
		w.fail("room %s has %d participant sessions", r.Room.ID, len(r.Participants))
	}
}

// checkCaps: no cap is exceeded, and every count an owner keeps agrees
// with what it counts.
func (w *world) checkCaps(v *view) {
	type projectUse struct{ joined, open int }
	use := map[string]*projectUse{}
	for id, r := range v.rooms {
		w.roomCaps(r)
		u := use[r.Room.ProjectID]
		if u == nil {
			u = &projectUse{}
			use[r.Room.ProjectID] = u
		}
		u.joined += r.joined()
		if r.Room.Status == room.RoomWaiting || r.Room.Status == room.RoomActive {
			u.open++
			if p := v.projects[r.Room.ProjectID]; p == nil {
				w.fail("room %s belongs to project %s, which does not exist", id, r.Room.ProjectID)
			} else if _, listed := p.ActiveRooms[id]; !listed {
				w.fail("room %s is %s, and its project does not count it against max_active_rooms", id, r.Room.Status)
			}
		}
	}
	for id, p := range v.projects {
		limits := simLimits
		if p.Project.Limits != nil {
			limits = *p.Project.Limits
		}
		if u := use[id]; u != nil {
			if u.joined > limits.MaxActiveParticipants {
				w.fail("project %s has %d participants joined, its max_active_participants is %d", id, u.joined, limits.MaxActiveParticipants)
			}
			if u.open > limits.MaxActiveRooms {
				w.fail("project %s has %d open rooms, its max_active_rooms is %d", id, u.open, limits.MaxActiveRooms)
			}
		}
		for roomID := range p.ActiveRooms {
			if v.rooms[roomID] == nil {
				w.fail("project %s counts room %s, which does not exist", id, roomID)
			}
		}
		active := 0
		for _, k := range p.Keys {
			if k.RevokedAt.IsZero() {
				active++
			}
		}
		if active != p.ActiveKeys || active > project.MaxActiveAPIKeysPerProject {
			w.fail("project %s counts %d active keys and holds %d (at most %d)", id, p.ActiveKeys, active, project.MaxActiveAPIKeysPerProject)
		}
		enabled := 0
		for _, ep := range p.Endpoints {
			if ep.Status == core.EndpointEnabled {
				enabled++
			}
		}
		if enabled != p.ActiveEndpoints || enabled > project.MaxActiveEndpointsPerProject {
			w.fail("project %s counts %d enabled endpoints and holds %d (at most %d)", id, p.ActiveEndpoints, enabled, project.MaxActiveEndpointsPerProject)
		}
	}
	owned := map[string]int{}
	for id, ws := range v.dir.Workspaces {
		if len(ws.ProjectIDs) > directory.MaxProjectsPerAccount {
			w.fail("workspace %s has %d projects", id, len(ws.ProjectIDs))
		}
		for uid, m := range ws.Members {
			if m.Role == directory.RoleOwner {
				owned[uid]++
			}
		}
	}
	for uid, n := range owned {
		if n > directory.MaxOwnedAccountsPerUser {
			w.fail("user %s owns %d workspaces", uid, n)
		}
	}
}

// checkMoney: each ledger sums to its wallet's balance, and every
// micro-unit of usage a room charged is on its wallet's ledger or pending
// for it (pc/), exactly once.
func (w *world) checkMoney(v *view) {
	for acct, wal := range v.wallets {
		var sum, usage int64
		for _, e := range v.ledger[acct] {
			amount, err := money.Parse(e.Amount, core.LedgerAmountDecimals)
			if err != nil {
				w.fail("ledger entry %s of %s: amount %q: %v", e.ID, acct, e.Amount, err)
			}
			sum += int64(amount)
			if e.Type == wallet.LedgerUsage {
				usage -= int64(amount)
			}
		}
		if sum != wal.Balance {
			w.fail("the ledger of %s sums to %d, its balance is %d", acct, sum, wal.Balance)
		}
		if want := wallet.CreditStateOf(&simBilling, wal.Balance); wal.CreditState != want {
			w.fail("wallet %s is %s with a balance of %d, which is %s", acct, wal.CreditState, wal.Balance, want)
		}
		var pending int64
		for _, c := range v.charges[acct] {
			pending += c.Amount
		}
		var charged int64
		for _, r := range v.rooms {
			p := v.projects[r.Room.ProjectID]
			if p == nil || p.Project.AccountID != acct {
				continue
			}
			for _, q := range r.Participants {
				charged += q.ParticipantSeconds * microsPerSecond // closed sessions: floor(s x price / 60), exact at this price
				if q.Usage != nil {
					charged += q.Usage.ChargedMicros
					if q.Usage.ChargedMicros != q.Usage.SettledSeconds*microsPerSecond {
						w.fail("participant %s has %d micro-units charged for %d settled seconds", q.ID, q.Usage.ChargedMicros, q.Usage.SettledSeconds)
					}
				}
			}
		}
		if usage+pending != charged {
			w.fail("rooms of %s charged %d micro-units; its ledger has %d of usage and %d are pending: %d lost or counted twice",
				acct, charged, usage, pending, charged-usage-pending)
		}
	}
}

// checkWebhooks: an event is either still in the outbox or fanned out,
// once per endpoint; each delivery waiting for an attempt is due exactly
// once and no other is; a receiver accepted each event at most once per
// endpoint, and every delivery recorded as succeeded was accepted; and
// every room event reaches the project's witness endpoint exactly once,
// with no number missing (none lost, none invented).
func (w *world) checkWebhooks(v *view) {
	inOutbox := map[string]bool{}
	for _, ev := range v.outbox {
		inOutbox[ev.ID] = true
	}
	urls := map[string]string{}
	for _, p := range v.projects {
		for id, ep := range p.Endpoints {
			urls[id] = ep.URL
		}
	}
	for ep, ds := range v.deliveries {
		seen := map[string]bool{}
		var wantDue []string
		for _, d := range ds {
			if seen[d.EventID] {
				w.fail("event %s has two deliveries to endpoint %s", d.EventID, ep)
			}
			seen[d.EventID] = true
			if inOutbox[d.EventID] {
				w.fail("event %s is delivered to %s and still in the outbox", d.EventID, ep)
			}
			switch d.Status {
			case dispatch.DeliveryPending, dispatch.DeliveryRetrying:
				wantDue = append(wantDue, fmt.Sprintf("%s@%d", d.ID, d.NextAttemptAt.UnixNano()))
			case dispatch.DeliverySucceeded:
				if n := w.receiver.acceptedCount(urls[ep], d.EventID); n != 1 {
					w.fail("delivery %s of event %s succeeded, and the receiver accepted it %d times", d.ID, d.EventID, n)
				}
			}
		}
		due := v.due[ep]
		sort.Strings(wantDue)
		sort.Strings(due)
		if strings.Join(due, " ") != strings.Join(wantDue, " ") {
			w.fail("endpoint %s: due entries %v, want one per waiting delivery %v", ep, due, wantDue)
		}
	}
	w.receiver.mu.Lock()
	for k, n := range w.receiver.accepted {
		if n > 1 {
			w.receiver.mu.Unlock()
			w.fail("the receiver accepted %s %d times", k, n)
		}
	}
	if w.receiver.window == 1 && len(w.receiver.disorder) > 0 {
		first := w.receiver.disorder[0]
		w.receiver.mu.Unlock()
		w.fail("with one attempt in flight per endpoint, a room's first attempts arrived out of order: %s", first)
	}
	w.receiver.mu.Unlock()

	for _, sp := range w.m.projects {
		p := v.projects[sp.id]
		if sp.witness == nil || p == nil || p.Project.Status != core.ProjectActive {
			continue // an archive disables the witness
		}
		numbers := map[string][]int{} // room -> the sequence numbers of its events
		add := func(ev core.OutboxEvent) {
			if ev.ProjectID != sp.id {
				return
			}
			roomID, _ := ev.Data["room_id"].(string)
			seq, ok := ev.Data["sequence"].(float64)
			if roomID != "" && ok {
				numbers[roomID] = append(numbers[roomID], int(seq))
			}
		}
		for _, ev := range v.outbox {
			add(ev)
		}
		for _, d := range v.deliveries[sp.witness.id] {
			var ev core.OutboxEvent
			if err := stdjson.Unmarshal(d.Event, &ev); err != nil {
				w.fail("delivery %s: the event does not decode: %v", d.ID, err)
			}
			add(ev)
		}
		witness := p.Endpoints[sp.witness.id]
		if witness == nil {
			w.fail("project %s does not have its witness endpoint %s", sp.id, sp.witness.id)
		}
		for id, r := range v.rooms {
			if r.Room.ProjectID != sp.id || !w.m.witnessed[id] {
				continue
			}
			got := numbers[id]
			sort.Ints(got)
			complete := len(got) == int(r.EventSeq)
			for i := 0; complete && i < len(got); i++ {
				complete = got[i] == i+1
			}
			if !complete {
				var elsewhere []string
				for ep, ds := range v.deliveries {
					for _, d := range ds {
						if strings.Contains(string(d.Event), id) {
							elsewhere = append(elsewhere, ep+":"+d.EventType)
						}
					}
				}
				w.fail("room %s (created %s) numbered %d webhook events; the outbox and the witness endpoint %s (created %s) hold %v; other endpoints %v",
					id, r.Room.CreatedAt, r.EventSeq, sp.witness.id, witness.CreatedAt, got, elsewhere)
			}
		}
	}
}

// checkOwnersAgree: the directory, the wallets and the projects tell the
// same story of who belongs where.
func (w *world) checkOwnersAgree(v *view) {
	for acct, ws := range v.dir.Workspaces {
		if v.wallets[acct] == nil {
			w.fail("workspace %s has no wallet", acct)
		}
		for _, id := range ws.ProjectIDs {
			if p := v.projects[id]; p == nil || p.Project.AccountID != acct {
				w.fail("workspace %s lists project %s, which is not one of its projects", acct, id)
			}
		}
	}
	for id, p := range v.projects {
		ws := v.dir.Workspaces[p.Project.AccountID]
		if ws == nil || !contains(ws.ProjectIDs, id) {
			w.fail("project %s of %s is not listed by its workspace", id, p.Project.AccountID)
		}
		if _, err := w.store.Get(persistence.Key(persistence.PrefixProject, id)); err != nil {
			w.fail("project %s has no p/ entry (recovery would not start it): %v", id, err)
		}
	}
	for acct := range v.wallets {
		if _, err := w.store.Get(persistence.Key(persistence.PrefixAccount, acct)); err != nil {
			w.fail("wallet %s has no a/ entry (recovery would not start it): %v", acct, err)
		}
	}
}

// checkGates: what the live owners publish agrees with their states: a
// project's slot counter is the sum of its live rooms' slots (joins and
// reservations), within its max_active_participants; each live room's gate
// and media agree with it (checkRoom); and a wallet's credit gate is closed
// exactly when its credit is exhausted.
func (w *world) checkGates(v *view) {
	slots := map[string]int64{}
	for _, roomID := range sortedKeys(w.rt.rooms) {
		if n := w.rt.rooms[roomID]; !n.stopped {
			slots[n.projectID] += n.gate.Slots()
			if _, ok := v.rooms[roomID]; ok {
				w.checkRoom("room/"+roomID, w.durable["room/"+roomID])
			}
		}
	}
	for id, p := range w.rt.projects {
		if got := p.gate.ActiveParticipants.Load(); got != slots[id] {
			w.fail("project %s publishes %d participant slots taken; its rooms hold %d", id, got, slots[id])
		}
		if limit := int64(w.rt.env.LimitsOf(p.gate.Record.Load()).MaxActiveParticipants); slots[id] > limit {
			w.fail("project %s holds %d participant slots (joins and reservations), its max_active_participants is %d", id, slots[id], limit)
		}
	}
	for id, wn := range w.rt.wallets {
		s := v.wallets[id]
		if closed := s != nil && s.CreditState == wallet.CreditExhausted; wn.gate.Closed() != closed {
			w.fail("wallet %s publishes its credit gate closed=%v in credit state %s", id, wn.gate.Closed(), s.CreditState)
		}
	}
}

// checkReservationsGone: after a recovery no room holds a reservation (a
// connect is not a durable write: a restart loses it), and every slot held
// is a recorded join's.
func (w *world) checkReservationsGone() {
	for _, id := range sortedKeys(w.rt.rooms) {
		n := w.rt.rooms[id]
		if _, reserved := n.gate.Held(); reserved != 0 {
			w.fail("room %s holds %d reservations after a recovery", id, reserved)
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
