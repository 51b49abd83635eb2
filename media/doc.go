// Package media owns rtcd's reference media node: a WebSocket signalling
// server that admits participants holding a media token, tracks who is in
// each room with heartbeats, tells the others in a room who joined, changed
// or left, and reports joins and leaves to the control plane; and, for
// protocol 2 clients, a WebRTC selective forwarding unit on pion that
// forwards every published RTP packet, undecoded, to the room's other
// participants (rtc.go, peer.go, forward.go).
//
// It also owns the seam between the control plane and any media engine:
//
//   - Engine: the commands the control plane sends (close a room, remove a
//     participant). *Node implements it in process; HTTPEngine implements it
//     over HTTP for a node run on its own (`rtcd media`).
//   - Reporter: what a media engine tells the control plane (joins, leaves,
//     and periodic presence snapshots for the reconciler). HTTPReporter
//     carries reports over HTTP; AsyncReporter decouples an in-process
//     receiver.
//
// Both HTTP directions are signed with HMAC-SHA256 over "timestamp.body"
// (SignRequest, VerifyReport), so the node and the control plane trust each
// other's requests without sharing anything but one 32-byte key.
//
// The wire protocol clients speak is written down in docs/media-protocol.md;
// protocol.go is its source of truth in code.
//
// JSON: this package uses encoding/json, not the project's usual
// github.com/goccy/go-json, because the node decodes frames from
// unauthenticated clients, and goccy has open reports of panics on
// malformed input (goccy/go-json#604, #575). The node's JSON volume is
// small, so the standard library's speed costs nothing here.
//
// Concurrency: one hub goroutine owns every room, member and pending
// connection (see hub.go). Connection goroutines and control commands send
// it closures over a bounded inbox; it never blocks on a socket, so a slow
// client can never stall a room. Media never passes through the hub: each
// peer has its own signalling goroutine, each published layer its own
// forwarding goroutine, and each subscriber's copy its own bounded queue
// and writer; rtc.mu guards only who receives what.
package media
