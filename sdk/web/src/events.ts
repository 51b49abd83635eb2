import type { RtcError } from "./errors.js";
import type { ConnectionState } from "./state.js";

/** The eleven event names (spec 6, "Client SDK events"), in the spec's order. */
export const EVENT_NAMES = Object.freeze([
  "connection.state_changed",
  "connection.quality_changed",
  "connection.reconnecting",
  "connection.reconnected",
  "connection.disconnected",
  "participant.joined",
  "participant.updated",
  "participant.left",
  "track.subscribed",
  "track.unsubscribed",
  "error",
] as const);

export type EventName = (typeof EVENT_NAMES)[number];

/**
 * Connection quality, kept generic whatever the media engine (spec 6).
 * With media (protocol 2) it is the media node's measure of the WebRTC
 * path (loss, round trip, jitter: docs/media-protocol.md "Connection
 * quality"). Presence only (media: false), the SDK grades the round trip
 * of its heartbeat pings: excellent below 150 ms, good below 400 ms, poor
 * above that or when a pong is late. Either way it is lost when no pong
 * came for half the media node's heartbeat timeout, while reconnecting and
 * at the end; unknown before the first measurement.
 */
export type Quality = "unknown" | "excellent" | "good" | "poor" | "lost";

/** Where a track comes from. */
export type TrackSource = "microphone" | "camera" | "screen_share";

/** A track as the media node announces it. */
export interface TrackInfo {
  /** The node's id of the track (tr_…). */
  readonly id: string;
  readonly source: TrackSource;
  readonly kind: "audio" | "video";
  /** The publisher muted it: no frames come until it unmutes. */
  readonly muted: boolean;
}

/** Another participant in the room, as the media node shows it. */
export interface Participant {
  readonly id: string;
  /** publisher or subscriber. */
  readonly role: string;
  /** The participant's application state (a JSON object; {} until it sends one). */
  readonly state: Readonly<Record<string, unknown>>;
  /** What it publishes (empty when the node carries no media). */
  readonly tracks: readonly TrackInfo[];
  /** It is the room's active speaker (media node protocol 2). */
  readonly speaking: boolean;
}

/** Why a session ended (connection.disconnected). */
export type DisconnectReason = "left" | "room_ended" | "removed" | "replaced" | "failed";

/**
 * A remote track this session receives. attach() plays it in an <audio> or
 * <video> element; the MediaStreamTrack is there for anything else.
 */
export interface RemoteTrack {
  readonly id: string;
  readonly participantId: string;
  readonly source: TrackSource;
  readonly kind: "audio" | "video";
  readonly mediaStreamTrack: MediaStreamTrack;
  /** Plays the track in element (creating one of its kind when omitted) and returns it. */
  attach(element?: HTMLMediaElement): HTMLMediaElement;
  /** Stops playing it in element (or in every element it was attached to). */
  detach(element?: HTMLMediaElement): void;
  /** The browser's statistics of this track's receiver (inbound-rtp: packets, framesDecoded, audio level, …). */
  getStats(): Promise<RTCStatsReport>;
}

/** The payload of each event. */
export interface EventMap {
  "connection.state_changed": { state: ConnectionState; previousState: ConnectionState; error?: RtcError };
  "connection.quality_changed": { quality: Quality; previousQuality: Quality; rttMs?: number };
  /** attempt from 1; delayMs the wait before it; error: why (the drop, then each failed attempt). */
  "connection.reconnecting": { attempt: number; delayMs: number; error: RtcError };
  "connection.reconnected": { attempt: number };
  /** error is absent after leave(). */
  "connection.disconnected": { reason: DisconnectReason; error?: RtcError };
  /** Also for everyone already in the room when this session joins, and newcomers found after a reconnect. */
  "participant.joined": { participant: Participant };
  "participant.updated": { participant: Participant };
  /** reason: the media node's leave reason (left, disconnected, heartbeat_timeout, removed, room_closed, …), or unknown for someone found gone after a reconnect. */
  "participant.left": { participant: Participant; reason: string };
  "track.subscribed": { track: RemoteTrack };
  "track.unsubscribed": { track: RemoteTrack; reason: string };
  "error": { error: RtcError };
}

export type Handler<E extends EventName> = (event: EventMap[E]) => void;

/** Unsubscribes a handler; calling it again does nothing. */
export type Unsubscribe = () => void;

/** isEventName reports whether name is one of the eleven. */
export function isEventName(name: string): name is EventName {
  return (EVENT_NAMES as readonly string[]).includes(name);
}

/**
 * Emitter delivers events to handlers in the order they were emitted, one
 * at a time, never inside the SDK's own call stack (a handler that calls
 * back into the session sees it consistent). A handler that throws is
 * reported like an uncaught error (reportError) and the others still run.
 */
export class Emitter {
  readonly #handlers = new Map<EventName, Set<(e: never) => void>>();
  readonly #queue: Array<[EventName, unknown]> = [];
  #draining = false;
  #closed = false;

  on<E extends EventName>(name: E, handler: Handler<E>): Unsubscribe {
    if (!isEventName(name)) {
      throw new TypeError(`rtcd web: unknown event name "${String(name)}" (see EVENT_NAMES)`);
    }
    if (typeof handler !== "function") throw new TypeError("rtcd web: the handler must be a function");
    let set = this.#handlers.get(name);
    if (!set) {
      set = new Set();
      this.#handlers.set(name, set);
    }
    // A fresh wrapper per subscription, so the same function subscribed
    // twice is two subscriptions, each removed by its own unsubscribe.
    const entry = (e: never): void => handler(e as EventMap[E]);
    set.add(entry);
    return () => {
      set.delete(entry);
    };
  }

  emit<E extends EventName>(name: E, event: EventMap[E]): void {
    if (this.#closed) return;
    this.#queue.push([name, event]);
    if (!this.#draining) {
      this.#draining = true;
      queueMicrotask(() => this.#drain());
    }
  }

  /** close delivers what is queued and drops anything emitted later. */
  close(): void {
    this.#closed = true;
  }

  #drain(): void {
    for (let next = this.#queue.shift(); next; next = this.#queue.shift()) {
      const [name, event] = next;
      for (const h of [...(this.#handlers.get(name) ?? [])]) {
        if (!this.#handlers.get(name)?.has(h)) continue; // unsubscribed by an earlier handler
        try {
          h(event as never);
        } catch (err) {
          report(err);
        }
      }
    }
    this.#draining = false;
  }
}

function report(err: unknown): void {
  const g = globalThis as { reportError?: (e: unknown) => void };
  if (typeof g.reportError === "function") g.reportError(err);
  else
    setTimeout(() => {
      throw err;
    });
}
