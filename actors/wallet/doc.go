// Package wallet is the wallet actor: one per workspace. It owns the
// workspace's prepaid balance, its ledger, its credit state (and the
// credit gate rooms read on the connect path), its top-ups and the list of
// its projects.
//
// The balance only changes by ledger entries, each written with its
// balance_after, its credit-state move and that move's credit.* webhook
// event in one batch; usage reaches it as pending charges rooms wrote
// through the store (core.PendingCharge), applied and deleted in one
// batch, so a charge is applied exactly once.
//
// Read it as a small program: wallet.go holds the rules, the events, the
// state with its one pure Apply, Genesis and the journal's name, the
// commands and their handlers; views.go the records it writes.
//
// It imports no other owner.
package wallet
