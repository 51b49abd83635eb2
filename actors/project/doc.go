// Package project is the project actor: one per project. It owns the
// project's record (status, own limits or none), the set of its rooms that
// have not ended (the max_active_rooms cap), its API keys (hashes, scopes,
// last recorded use: the 50-key cap), its webhook endpoints (sealed
// signing secrets: the 16-endpoint cap) and the Idempotency-Keys in
// flight. It creates rooms (writing each one's first state, room.Genesis,
// in its own batch) and publishes, for readers that must not wait on it,
// its core.ProjectGate, its keys in the core.KeyRegistry and its enabled
// endpoints.
//
// Read it as a small program: project.go (the actor, rooms, keys),
// endpoints.go, admin.go (rename and archive from the dashboard),
// idempotency.go, events.go (the events, the state with its one pure
// Apply, Genesis and the journal's name), model.go (keys and views).
//
// It imports the room package (a new room's first state) and no other
// owner.
package project
