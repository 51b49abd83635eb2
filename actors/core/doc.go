// Package core is the kernel the owners of rtcd's state are built on: the
// room, project, wallet and directory actors (packages room, project,
// wallet, directory) and the webhook dispatcher (package dispatch) use it,
// and it imports none of them.
//
// It holds:
//   - Env, everything an actor may use besides its own state (store,
//     clock, keys, secrets, settings, rate limiter, outbox, audit, and the
//     Registry through which it reaches other actors);
//   - the event log (Log): recovery from a snapshot plus the journal's
//     tail through the owner's one pure Apply, and Record (append, apply,
//     snapshot when due), the same for every owner;
//   - the state owners publish for others to read without a message
//     (ProjectGate, CreditGate, KeyRegistry, the directory's Sessions);
//   - the messages one actor sends another (messages.go), plain values,
//     and the Envelope that carries a command's answer;
//   - the records and rules shared by several owners: settings, limits,
//     the project record, callers, audit entries, webhook events and
//     endpoints, idempotency records.
package core
