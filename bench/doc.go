// Package bench holds the benchmarks of rtcd's hot paths (issue 7): token
// verification, the connect decision through a real engine on a real Pebble
// store, journal appends with and without the fsync, snapshots, recovery,
// the JSON of the connect exchange, and memory per idle room and per
// connected participant. It has no code of its own; see README.md for how to
// run the benchmarks, what each measures, the targets and measured figures.
package bench
