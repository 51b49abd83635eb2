// Package directory is the directory actor, the one actor that owns the
// people side of the service: dashboard users, their sessions and e-mail
// sign-in links (as keyed hashes only), and the workspaces as the
// dashboard knows them (name, members with their roles, invitations, and
// the ids of their projects). One actor, because a sign-in or an accepted
// invitation changes a user and a workspace together (and may create a
// workspace with its wallet and project), and the dashboard's traffic is
// small next to the API's. Authentication of dashboard requests never
// waits on it: it publishes its sessions and the user -> workspace -> role
// map in a core.Sessions.
//
// Project records themselves (name, status, keys, endpoints) stay with the
// project actors and balances with the wallets; the directory asks a
// project to archive (core.ArchiveProject) and never waits on it.
//
// Read it as a small program: directory.go (users, workspaces,
// invitations, sessions and links; the events, the state with its one pure
// Apply, Genesis and the journal's name; the actor, its recovery, its
// published sessions and its sweep), commands.go (the typed commands and
// their handlers), signin.go (e-mail and Google sign-in), team.go
// (members and invitations), ops.go (views and the steps the commands
// share, such as a new workspace with its wallet and project, written
// through wallet.Genesis and project.Genesis).
package directory
