// Package sim is rtcd's crash simulation: a seeded generator drives random
// command sequences through the owners' real code (the room, project,
// wallet and directory actors and the webhook dispatcher, on a core.Env
// with a fake clock) on one goroutine, with Pebble on an in-memory file
// system whose write-ahead log syncs it holds back and releases. At random
// points it crashes: it keeps only what was synced (Pebble's crash clone),
// reopens the store and recovers every owner through its real recovery
// path, in the engine's order. After every durable point and every
// recovery it checks the invariants (docs/testing.md):
//
//   - every acknowledged write is there after a crash, and what recovery
//     finds is exactly the state at the last durable point;
//   - replaying an owner's journal gives the state the live owner holds;
//   - each wallet's ledger sums to its balance, and every usage charge a
//     room wrote is on its wallet's ledger or pending for it, exactly once;
//   - no cap is exceeded (room max_participants, project
//     max_active_participants and max_active_rooms, keys, endpoints,
//     workspaces and projects);
//   - every webhook event is in the outbox or delivered to an endpoint
//     exactly once, and a receiver is told of it successfully at most once.
//
// It owns the single-goroutine runtime that stands in for the actor
// system (system.go: the Registry, the mailboxes, recovery), the world
// and its generator (world.go, ops.go), the invariants (check.go) and the
// trace: every operation and its outcome, hashed, so a seed replays
// exactly and a failing one prints the command that replays it. The
// bugs it plants to prove it finds them are in package internal/simbug.
package sim
