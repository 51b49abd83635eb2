/**
 * A session's connection state (spec 3, "Client SDK connection states").
 *
 * - `idle`: created, connect() not called yet.
 * - `connecting`: the first connect is running (token exchange at
 *   POST /v1/connect, then the media node's WebSocket and its join).
 * - `connected`: joined in the media node.
 * - `reconnecting`: the media connection dropped; the SDK is getting it
 *   back with backoff.
 * - `disconnecting`: leave() is closing the connection.
 * - `disconnected`: the session is over, by leave(), or because the server
 *   ended it (room ended, participant removed, connection replaced). Final.
 * - `failed`: the connect or the reconnects failed. Final.
 */
export type ConnectionState = "idle" | "connecting" | "connected" | "reconnecting" | "disconnecting" | "disconnected" | "failed";

/** The seven states, in the spec's order. */
export const CONNECTION_STATES: readonly ConnectionState[] = Object.freeze([
  "idle",
  "connecting",
  "connected",
  "reconnecting",
  "disconnecting",
  "disconnected",
  "failed",
]);

/**
 * The whole state machine: from → allowed next states. It is the Go
 * client's table (sdk/client/state.go), which a unit test checks, and the
 * table of README.md; nothing else can move a session's state.
 */
export const TRANSITIONS: Readonly<Record<ConnectionState, readonly ConnectionState[]>> = Object.freeze({
  idle: Object.freeze(["connecting"] as const),
  connecting: Object.freeze(["connected", "failed"] as const),
  connected: Object.freeze(["reconnecting", "disconnecting", "disconnected", "failed"] as const),
  reconnecting: Object.freeze(["connected", "disconnecting", "disconnected", "failed"] as const),
  disconnecting: Object.freeze(["disconnected"] as const),
  disconnected: Object.freeze([] as const),
  failed: Object.freeze([] as const),
});

/** canTransition reports whether from → to is in the table. */
export function canTransition(from: ConnectionState, to: ConnectionState): boolean {
  return TRANSITIONS[from].includes(to);
}

/** isTerminal reports whether s is final (disconnected or failed). */
export function isTerminal(s: ConnectionState): boolean {
  return s === "disconnected" || s === "failed";
}

/** StateMachine holds a state and refuses any move not in TRANSITIONS. */
export class StateMachine {
  #state: ConnectionState = "idle";

  get state(): ConnectionState {
    return this.#state;
  }

  /** move changes the state to `to` and returns the previous one, or throws (changing nothing) when the table does not allow it. */
  move(to: ConnectionState): ConnectionState {
    const from = this.#state;
    if (!canTransition(from, to)) {
      throw new Error(`rtcd web: invalid state transition ${from} -> ${to}`);
    }
    this.#state = to;
    return from;
  }
}
