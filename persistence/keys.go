package persistence

import (
	"encoding/binary"
	"math"
)

// Key layout. Every key starts with a short family prefix followed by '/'.
// Integers are big-endian so that byte order equals numeric order. List
// indexes store an inverted timestamp so that a forward scan yields the
// newest entry first, which is the order every list endpoint returns.
const (
	prefixJournal       = "j/"  // j/<actorID>/<seq:8>                          -> encoded event
	prefixSnapshot      = "s/"  // s/<actorID>                                  -> seq:8 + encoded state
	PrefixMeta          = "m/"  // m/<name>                                     -> operator metadata
	PrefixProject       = "p/"  // p/<projectID>                                -> accountID (directory of project actors; names the workspace that places it)
	PrefixRoom          = "r/"  // r/<projectID>/<roomID>                       -> room read record
	PrefixRoomIdx       = "ri/" // ri/<projectID>/<inv:8><roomID>               -> roomID
	PrefixPart          = "pt/" // pt/<projectID>/<roomID>/<participantID>      -> participant read record
	PrefixPartIdx       = "pi/" // pi/<projectID>/<roomID>/<inv:8><participantID> -> participantID
	PrefixKeyIdx        = "ki/" // ki/<projectID>/<inv:8><keyID>                -> API key read record
	PrefixKeyHash       = "kh/" // kh/<hex of the key's keyed hash>             -> projectID (routes a key to its project's node; written once)
	PrefixWorkspaceProj = "wp/" // wp/<accountID>/<projectID>                   -> (the projects of a workspace, placed with it in a cluster)
	PrefixAudit         = "au/" // au/<projectID>/<inv:8><auditID>              -> audit log entry
	PrefixIdem          = "id/" // id/<projectID>/<scope:32>                    -> sealed idempotency record
	PrefixIdemExp       = "ie/" // ie/<projectID>/<nanos:8><scope:32>           -> (expiry index of id/, oldest first)
	PrefixAccount       = "a/"  // a/<accountID>                                -> (directory of wallet actors)
	PrefixLedger        = "lg/" // lg/<accountID>/<inv:8><entryID>              -> ledger entry
	PrefixTopup         = "tp/" // tp/<accountID>/<paymentID>                   -> top-up read record
	PrefixTopupIdx      = "ti/" // ti/<accountID>/<inv:8><paymentID>            -> paymentID
	PrefixCharge        = "pc/" // pc/<accountID>/<chargeID>                    -> usage charge not yet applied to the wallet
	PrefixUsage         = "us/" // us/<projectID>/<YYYY-MM-DD>/<sessionID>      -> finalized usage of one session on one UTC day
	PrefixPayment       = "pd/" // pd/<paymentID>                               -> accountID (routes provider callbacks)
	PrefixEndpoint      = "we/" // we/<projectID>/<inv:8><endpointID>           -> webhook endpoint read record
	PrefixDelivery      = "wd/" // wd/<endpointID>/<deliveryID>                 -> webhook delivery record (with the event bytes)
	PrefixDelIdx        = "wi/" // wi/<endpointID>/<inv:8><deliveryID>          -> deliveryID (list, newest first)
	PrefixDelDue        = "wq/" // wq/<endpointID>/<dueNanos:8><deliveryID>     -> deliveryID (attempts due, oldest first)
	PrefixUndelivered   = "wu/" // wu/<endpointID>/<createdNanos:8><deliveryID> -> status, pending or retrying (not delivered yet, oldest first)
	PrefixOutbox        = "ob/" // ob/<nanos:8><eventID>                        -> webhook event not yet delivered (oldest first)
	PrefixAccountAudit  = "wa/" // wa/<accountID>/<inv:8><auditID>         -> workspace audit log entry (team, invitations, projects)
	PrefixProjectRec    = "pr/" // pr/<projectID>                               -> project as the dashboard shows it (read by the directory on any node)
)

// JournalKey is the key of event seq in actorID's journal.
func JournalKey(actorID string, seq uint64) []byte {
	k := make([]byte, 0, len(prefixJournal)+len(actorID)+1+8)
	k = append(k, prefixJournal...)
	k = append(k, actorID...)
	k = append(k, '/')
	return binary.BigEndian.AppendUint64(k, seq)
}

// journalPrefix is the common prefix of all of actorID's journal keys.
func journalPrefix(actorID string) []byte {
	k := make([]byte, 0, len(prefixJournal)+len(actorID)+1)
	k = append(k, prefixJournal...)
	k = append(k, actorID...)
	return append(k, '/')
}

// SnapshotKey is the key of actorID's latest snapshot.
func SnapshotKey(actorID string) []byte {
	return []byte(prefixSnapshot + actorID)
}

// Key joins a family prefix and a name into a key.
func Key(prefix, name string) []byte {
	return []byte(prefix + name)
}

// IndexKey is an index entry under prefix+owner+"/" ordered newest first by
// atUnixNanos, with id as the tie breaker.
func IndexKey(prefix, owner string, atUnixNanos int64, id string) []byte {
	k := make([]byte, 0, len(prefix)+len(owner)+1+8+len(id))
	k = append(k, prefix...)
	k = append(k, owner...)
	k = append(k, '/')
	k = binary.BigEndian.AppendUint64(k, math.MaxUint64-uint64(atUnixNanos))
	return append(k, id...)
}

// OutboxKey orders events oldest first by atUnixNanos, then by id.
func OutboxKey(atUnixNanos int64, eventID string) []byte {
	k := make([]byte, 0, len(PrefixOutbox)+8+len(eventID))
	k = append(k, PrefixOutbox...)
	k = binary.BigEndian.AppendUint64(k, uint64(atUnixNanos))
	return append(k, eventID...)
}

// IndexPrefix is the prefix shared by all of owner's entries in an index.
func IndexPrefix(prefix, owner string) []byte {
	return []byte(prefix + owner + "/")
}

// prefixEnd returns the smallest key greater than every key with prefix p.
func prefixEnd(p []byte) []byte {
	end := append([]byte(nil), p...)
	for i := len(end) - 1; i >= 0; i-- {
		end[i]++
		if end[i] != 0 {
			return end[:i+1]
		}
	}
	return nil // p is all 0xff: no upper bound
}
