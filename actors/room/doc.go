// Package room is the room actor: one per room that has not ended. It owns
// the room (status, max_participants, expiry), its participant sessions
// with their open usage sessions, and the count of participants holding a
// slot, and it decides a connect in one step.
//
// Read it as a small program:
//   - model.go: the room and its participants, their statuses;
//   - events.go: the past-tense events, the state and its one pure Apply,
//     the journal's name and Genesis (a new room's first state);
//   - room.go: the commands (CreateParticipant, Connect, RemoveParticipant,
//     Delete) and their handlers, in the spec's check order;
//   - usage.go: media joins and leaves, usage sessions, settlement (the
//     pending charges it hands to its wallet through the store) and the
//     reconciler;
//   - views.go: the records and API objects it writes.
//
// It imports no other owner: the project's record, participant count and
// credit gate are read from the core.ProjectGate its project publishes.
package room
