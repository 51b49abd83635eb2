import { MEDIA_CODE_OF_CLOSE } from "./errors.js";

/**
 * The media node protocol's messages this SDK reads (docs/media-protocol.md;
 * media/protocol.go is the source of truth). Unknown fields are ignored.
 */
export interface ServerMessage {
  type: string;
  protocol?: number;
  session_id?: string;
  room_id?: string;
  participant_id?: string;
  role?: string;
  heartbeat_interval_ms?: number;
  heartbeat_timeout_ms?: number;
  participants?: WireParticipant[];
  participant?: WireParticipant;
  state?: unknown;
  tracks?: WireTrack[];
  speaking?: boolean;
  quality?: string;
  reason?: string;
  code?: string;
  message?: string;
  ts?: number;
  sdp?: string;
  target?: string;
  candidate?: RTCIceCandidateInit;
  track_id?: string;
  source?: string;
  ice_servers?: RTCIceServer[];
}

export interface WireParticipant {
  participant_id: string;
  role?: string;
  state?: unknown;
  tracks?: WireTrack[];
  speaking?: boolean;
}

export interface WireTrack {
  track_id: string;
  source: string;
  kind: string;
}

/** How a media socket ended: the node's error (message or close code), or a transport failure. */
export interface SocketEnd {
  mediaCode?: string;
  mediaMessage?: string;
  closeCode?: number;
  /** Set when the SDK closed the socket itself (leave, liveness). */
  byClient?: string;
}

/** The media node refused the join (an error message or an error close code). */
export class JoinRefused extends Error {
  constructor(
    readonly mediaCode: string,
    readonly mediaMessage: string,
    readonly closeCode: number | undefined,
  ) {
    super(`media node: ${mediaCode} (close ${closeCode ?? "-"}): ${mediaMessage}`);
    this.name = "JoinRefused";
  }
}

/** Bounds of the socket. */
export const CLOSE_HANDSHAKE_MS = 1000; // wait for the node's close frame after leave
export const DEFAULT_HEARTBEAT_INTERVAL_MS = 5000;
export const DEFAULT_HEARTBEAT_TIMEOUT_MS = 15000;

/**
 * MediaSocket is one joined WebSocket to the media node. Messages after
 * the join go to onMessage; ended resolves once, when the socket is gone.
 */
export class MediaSocket {
  readonly joined: ServerMessage;
  readonly ended: Promise<SocketEnd>;
  #onMessage: ((m: ServerMessage) => void) | undefined;
  #pending: ServerMessage[] = []; // what came before listen
  #ws: WebSocket;
  #end: SocketEnd = {};
  #resolve!: (e: SocketEnd) => void;
  #lastFrameAt: number;

  constructor(ws: WebSocket, joined: ServerMessage, now: number) {
    this.#ws = ws;
    this.joined = joined;
    this.#lastFrameAt = now;
    this.ended = new Promise((r) => (this.#resolve = r));
    ws.onmessage = (ev) => {
      this.#lastFrameAt = Date.now();
      const m = parse(ev.data);
      if (!m) return; // not JSON: ignored, as the Go client does
      if (m.type === "error") {
        this.#end.mediaCode = m.code ?? "";
        this.#end.mediaMessage = m.message ?? "";
        return;
      }
      if (this.#onMessage) this.#onMessage(m);
      else this.#pending.push(m);
    };
    ws.onclose = (ev) => {
      const byClose = MEDIA_CODE_OF_CLOSE[ev.code];
      if (this.#end.mediaCode === undefined && byClose !== undefined) {
        this.#end.mediaCode = byClose;
        this.#end.mediaMessage = ev.reason;
      }
      this.#end.closeCode = ev.code;
      this.#resolve(this.#end);
    };
    ws.onerror = () => {}; // the close event follows with what is known
  }

  /** listen delivers the messages after the join (those already received first) to fn. */
  listen(fn: (m: ServerMessage) => void): void {
    this.#onMessage = fn;
    for (let m = this.#pending.shift(); m; m = this.#pending.shift()) fn(m);
  }

  get heartbeatIntervalMs(): number {
    return this.joined.heartbeat_interval_ms && this.joined.heartbeat_interval_ms > 0 ? this.joined.heartbeat_interval_ms : DEFAULT_HEARTBEAT_INTERVAL_MS;
  }

  get heartbeatTimeoutMs(): number {
    return this.joined.heartbeat_timeout_ms && this.joined.heartbeat_timeout_ms > 0 ? this.joined.heartbeat_timeout_ms : DEFAULT_HEARTBEAT_TIMEOUT_MS;
  }

  /** Real milliseconds since the node last sent a frame (the network knows no other clock). */
  get silentForMs(): number {
    return Date.now() - this.#lastFrameAt;
  }

  get open(): boolean {
    return this.#ws.readyState === WebSocket.OPEN;
  }

  /** send writes one message; false when the socket is no longer open. */
  send(m: Record<string, unknown>): boolean {
    if (this.#ws.readyState !== WebSocket.OPEN) return false;
    this.#ws.send(JSON.stringify(m));
    return true;
  }

  /** close ends the socket from this side; why is kept in the end record. */
  close(why: string): void {
    if (this.#end.byClient === undefined) this.#end.byClient = why;
    try {
      this.#ws.close(1000);
    } catch {
      // already closing
    }
  }
}

function parse(data: unknown): ServerMessage | undefined {
  if (typeof data !== "string") return undefined;
  try {
    const m: unknown = JSON.parse(data);
    return m && typeof m === "object" && typeof (m as { type?: unknown }).type === "string" ? (m as ServerMessage) : undefined;
  } catch {
    return undefined;
  }
}

/**
 * dialJoin opens the media node's WebSocket and joins with the media token.
 * It resolves with a joined socket, or rejects with JoinRefused when the
 * node refused the join, signal's reason when signal aborted, or an Error
 * for a socket that failed.
 */
export function dialJoin(WS: typeof WebSocket, endpoint: string, mediaToken: string, protocol: number, signal: AbortSignal, now: () => number): Promise<MediaSocket> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) {
      reject(signal.reason);
      return;
    }
    let ws: WebSocket;
    try {
      ws = new WS(endpoint);
    } catch (err) {
      reject(err);
      return;
    }
    let settled = false;
    let refused: JoinRefused | undefined;
    const finish = (f: () => void): void => {
      if (settled) return;
      settled = true;
      signal.removeEventListener("abort", onAbort);
      f();
    };
    const onAbort = (): void => {
      finish(() => {
        ws.onopen = ws.onmessage = ws.onclose = ws.onerror = null;
        try {
          ws.close();
        } catch {
          // not open yet
        }
        reject(signal.reason);
      });
    };
    signal.addEventListener("abort", onAbort, { once: true });
    ws.onopen = () => {
      ws.send(JSON.stringify({ type: "join", media_token: mediaToken, protocol }));
    };
    ws.onmessage = (ev) => {
      const m = parse(ev.data);
      if (!m) return;
      if (m.type === "joined") {
        finish(() => {
          ws.onopen = null;
          resolve(new MediaSocket(ws, m, now()));
        });
      } else if (m.type === "error") {
        // The close frame follows; its code confirms the error.
        refused = new JoinRefused(m.code ?? "", m.message ?? "", undefined);
      }
      // Nothing else comes before joined; ignore what a newer node may add.
    };
    ws.onerror = () => {};
    ws.onclose = (ev) => {
      finish(() => {
        const code = refused?.mediaCode || MEDIA_CODE_OF_CLOSE[ev.code];
        if (code) {
          reject(new JoinRefused(code, refused?.mediaMessage || ev.reason, ev.code));
        } else {
          reject(new Error(`the media WebSocket closed (code ${ev.code}) before the join`));
        }
      });
    };
  });
}
