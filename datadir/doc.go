// Package datadir owns one process's claim on an rtcd data directory: an
// exclusive advisory lock (flock) on <data-dir>/rtcd.pid, a file that also
// holds the pid of the process holding the lock.
//
// Pebble locks its own directory too, but a second process only learns
// "resource temporarily unavailable" from it. This lock is taken first, by
// `rtcd serve` and `rtcd init`, so a second rtcd on the same directory is
// told that another rtcd holds it, and which one. The kernel drops the lock
// when its process exits, kill -9 included, so a crash never leaves a stale
// lock behind; a pid left in the file by a crashed process is never shown,
// because the pid is only read while someone holds the lock.
package datadir
