package jsstore

import (
	"encoding/binary"
	"errors"
	"slices"
	"sort"
	"strings"
)

// batchWriter records a batch's writes until Commit publishes them. A key
// written twice keeps its last write (the stream keeps one message per
// subject, and an atomic batch may not check a subject it already wrote).
type batchWriter struct {
	ops         []writeOp
	index       map[string]int // key -> its position in ops
	truncations []truncation
	closed      bool
}

type writeOp struct {
	key     []byte
	value   []byte
	deleted bool
}

type truncation struct {
	actor      string
	throughSeq uint64
}

// journalHead is the head message a batch writes for one journal: the
// journal's last sequence after the batch, and whether the batch creates
// the journal (its first snapshot, at sequence 0, and no event), which is
// the one write allowed without a claim: it expects no head at all.
type journalHead struct {
	actor   string
	seq     uint64
	genesis bool
}

var errClosed = errors.New("jsstore: batch used after it was committed or discarded")

func newBatchWriter() *batchWriter { return &batchWriter{index: map[string]int{}} }

func (w *batchWriter) put(op writeOp) error {
	if w.closed {
		return errClosed
	}
	if i, ok := w.index[string(op.key)]; ok {
		w.ops[i] = op
		return nil
	}
	w.index[string(op.key)] = len(w.ops)
	w.ops = append(w.ops, op)
	return nil
}

func (w *batchWriter) Set(key, value []byte) error {
	return w.put(writeOp{key: slices.Clone(key), value: slices.Clone(value)})
}

func (w *batchWriter) Delete(key []byte) error {
	return w.put(writeOp{key: slices.Clone(key), deleted: true})
}

func (w *batchWriter) TruncateJournal(actorID string, throughSeq uint64) error {
	if w.closed {
		return errClosed
	}
	w.truncations = append(w.truncations, truncation{actor: actorID, throughSeq: throughSeq})
	return nil
}

func (w *batchWriter) Empty() bool { return len(w.ops) == 0 && len(w.truncations) == 0 }

func (w *batchWriter) Close() error {
	if w.closed {
		return errClosed
	}
	w.closed = true
	return nil
}

// Journal keys (persistence/keys.go): j/<actor>/<seq:8> and s/<actor>,
// whose value starts with the snapshot's seq:8.
const (
	journalKeyPrefix  = "j/"
	snapshotKeyPrefix = "s/"
	seqBytes          = 8
)

// journalHeads lists the journals the batch appends to or snapshots, in
// name order, each with its last sequence after the batch.
func (w *batchWriter) journalHeads() []journalHead {
	heads := map[string]*journalHead{}
	note := func(actor string, seq uint64, event bool) {
		h, ok := heads[actor]
		if !ok {
			h = &journalHead{actor: actor, genesis: true}
			heads[actor] = h
		}
		h.seq = max(h.seq, seq)
		if event || seq > 0 {
			h.genesis = false
		}
	}
	for _, o := range w.ops {
		k := string(o.key)
		switch {
		case o.deleted:
		case strings.HasPrefix(k, journalKeyPrefix) && len(k) > len(journalKeyPrefix)+1+seqBytes && k[len(k)-seqBytes-1] == '/':
			actor := k[len(journalKeyPrefix) : len(k)-seqBytes-1]
			note(actor, binary.BigEndian.Uint64(o.key[len(k)-seqBytes:]), true)
		case strings.HasPrefix(k, snapshotKeyPrefix) && len(o.value) >= seqBytes:
			note(k[len(snapshotKeyPrefix):], binary.BigEndian.Uint64(o.value), false)
		}
	}
	out := make([]journalHead, 0, len(heads))
	for _, h := range heads {
		out = append(out, *h)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].actor < out[j].actor })
	return out
}
