// Package actors is the engine: the face that http/ and server/ call, and
// the registry of the actors that own rtcd's state.
//
// Every project, room and wallet (one per workspace), and the one
// directory of dashboard users and workspaces, is a protoactor actor that
// owns its state, each in a package of its own:
//
//	actors/room       a room, its participants, connects, usage and settlement
//	actors/project    a project: its rooms, API keys, webhook endpoints, idempotency
//	actors/wallet     a workspace's balance, ledger, credit gate and top-ups
//	actors/directory  users, sessions, sign-in links, workspaces, members, invitations
//	actors/dispatch   the webhook fan-out and the endpoint workers
//	actors/core       the kernel they share and which imports none of them
//
// Each owner is written the same way: a command arrives as a plain value
// (in a core.Envelope when it expects an answer), is validated against the
// state, produces past-tense events, and the owner's one pure Apply
// changes the state, the same function at run time and on replay
// (core.Log). One Pebble batch per state change carries the journal
// entries, any snapshot, the read records and indexes the list endpoints
// use, the outbox entries and the idempotency record; the caller is
// answered only once that batch is durable (group commit, see package
// persistence).
//
// This package holds what is not any owner's:
//
//   - the Engine's methods, one per operation: the request's parameters
//     and the checks that need no state (params.go), then one message to
//     the owner (two around an Idempotency-Key), then the answer;
//   - the registry (engine.go): spawning each actor with its core.Env,
//     finding it by core.Address, start-up recovery in order (wallets,
//     then projects with their rooms, then the directory), the sweeps, and
//     the stop;
//   - bootstrap, built from each owner's Genesis;
//   - the dashboard mail queue (the directory's answers name the mail);
//   - authentication, which reads what owners publish (the key registry,
//     the directory's sessions and roles) without a message.
//
// The connect hot path is one message: the HTTP goroutine verifies the
// token and the per-address and per-project rates, and the room actor runs
// every other check in the spec's order against the core.ProjectGate its
// project publishes, taking the project's participant slot last, with a
// compare-and-swap.
package actors
