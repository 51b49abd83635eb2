// Package e2e holds the end-to-end tests: each starts the real rtcd server
// (package server, the same code `rtcd serve` runs) on loopback with a fresh
// Pebble data directory and an injected clock, and talks HTTP to it. The
// crash tests build the rtcd binary and kill the real process with SIGKILL.
package e2e
