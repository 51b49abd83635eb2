// Package actors owns the state of rtcd and every rule about it. Each
// project and each room is a protoactor actor that owns its state; commands
// arrive as messages, are validated against that state, produce past-tense
// events, and a pure apply function changes the state, the same function at
// run time and on replay. One Pebble batch per state change carries the
// journal entries, any snapshot, the read records and indexes used by the
// list endpoints, and the idempotency record; the caller is answered only
// once that batch is durable (group commit, see package persistence).
//
// Decisions on the connect hot path are made by one room actor in one round
// trip: the project publishes its status and limits as an immutable view
// behind an atomic pointer, and the project-wide count of active
// participants is a lock-free counter that room actors acquire with
// compare-and-swap, so the cap holds exactly without asking the project.
//
// Engine is the API the HTTP layer uses: one method per operation, each
// sending one message (two around an Idempotency-Key) and waiting for the
// reply.
package actors
