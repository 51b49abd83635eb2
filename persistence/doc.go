// Package persistence owns the durable state of rtcd: per-actor journals,
// per-actor snapshots, read records and the secondary indexes that back
// the list endpoints. Storage is what the actors write and read through;
// Store, one Pebble database, is its default implementation and the one
// described below (persistence/jsstore is the replicated one, and
// persistence/storetest the suite both pass).
//
// Writes are group-committed. An actor builds one batch per state change and
// hands it to Store.Commit, which applies it without waiting for the WAL
// fsync (Pebble's ApplyNoSyncWait) and queues it for a single syncer
// goroutine. The syncer waits for each batch's fsync in commit order
// (Batch.SyncWait) and only then runs the batch's done callback, which is
// where the actor's caller gets its reply. So an actor never sits idle on
// fsync, and nothing is acknowledged before it is durable.
//
// A failed fsync is not an operating error that can be retried: the state
// the actor already applied in memory would diverge from disk. The syncer
// therefore reports it to the store's fatal handler, which stops the process
// (the same stance as PostgreSQL after fsyncgate). The key layout is in
// keys.go and docs/storage.md.
package persistence
