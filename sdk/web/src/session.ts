import { connectURL } from "./address.js";
import { backoffDelay, withDefaults, type ReconnectPolicy } from "./backoff.js";
import { systemClock, sleep, type Clock } from "./clock.js";
import { classifyMedia, errorFromAPI, errorFromTransport, RtcError, TIMEOUT_REASON } from "./errors.js";
import {
  Emitter,
  type DisconnectReason,
  type EventMap,
  type EventName,
  type Handler,
  type Participant,
  type Quality,
  type RemoteTrack,
  type TrackInfo,
  type TrackSource,
  type Unsubscribe,
} from "./events.js";
import { MediaManager, MUTED_STATE_KEY, type LocalTrack, type PublishOptions } from "./media.js";
import { dialJoin, JoinRefused, MediaSocket, CLOSE_HANDSHAKE_MS, type ServerMessage, type SocketEnd, type WireParticipant } from "./socket.js";
import { isTerminal, StateMachine, type ConnectionState } from "./state.js";
import { SDK_NAME, VERSION } from "./version.js";

/**
 * CONNECT_TIMEOUT_MS bounds the whole connect: the token exchange plus the
 * media connection and its join (spec 8). Each reconnect attempt has the
 * same bound.
 */
export const CONNECT_TIMEOUT_MS = 15_000;

/** MAX_STATE_BYTES bounds updateState's object (the media node's bound). */
export const MAX_STATE_BYTES = 4096;

/** Bounds of the SDK. */
const MAX_RESPONSE_BYTES = 1 << 20; // the connect response read into memory
const MAX_PLATFORM_BYTES = 64; // sdk.platform (the API's bound)
/**
 * An unused media token is tried again (a dial that failed before its
 * join) only this long after its exchange: its expires_at is on the
 * server's clock, which the page's need not match (and a cross-origin page
 * cannot read the server's Date header), and the node's token_expired
 * leads to a new exchange anyway. The node's default lifetime is 60 s.
 */
const MEDIA_TOKEN_REUSE_MS = 10_000;
/** The media node protocol versions this SDK speaks: 1 is presence only, 2 adds WebRTC media. */
const PROTOCOL_PRESENCE = 1;
const PROTOCOL_MEDIA = 2;

/** What the participant may publish (from its role). */
export interface Features {
  readonly audio: boolean;
  readonly video: boolean;
  readonly screenShare: boolean;
}

/** Options of connect and createSession. */
export interface ConnectOptions {
  /** Cancels the connect (not the session): the connect then fails, code unknown, cause the signal's reason. */
  signal?: AbortSignal;
  /** How the session reconnects after a drop; missing fields take DEFAULT_RECONNECT_POLICY's. */
  reconnect?: Partial<ReconnectPolicy>;
  /** sdk.platform of the connect request (at most 64 bytes); default "web/<browser>-<major version>". */
  platform?: string;
  /** The fetch of the token exchange; default globalThis.fetch. */
  fetch?: typeof fetch;
  /** The WebSocket class of the media connection; default globalThis.WebSocket. */
  WebSocket?: typeof WebSocket;
  /** The clock of the deadline, backoff and heartbeats (tests inject a fake one). */
  clock?: Clock;
  /** Random numbers in [0, 1) for the backoff's jitter; default Math.random. */
  random?: () => number;
  /**
   * Media (default true): publish and receive audio and video (media node
   * protocol 2), which needs WebRTC (unsupported_platform without it).
   * false: presence only (participants, states, events), no WebRTC.
   */
  media?: boolean;
  /** ICE servers (an external TURN service) besides those the media node hands out. */
  iceServers?: RTCIceServer[];
}

/** The response of POST /v1/connect (spec 2, "Connect session"). */
interface ConnectSession {
  session_id: string;
  endpoint: string;
  media_token: string;
  expires_at: string;
  room?: { id?: string };
  participant?: { id?: string };
  features?: { audio?: boolean; video?: boolean; screen_share?: boolean };
}

/**
 * connect exchanges participantToken for a media session at
 * POST <apiOrigin>/v1/connect, opens the media node's WebSocket with the
 * media token, joins, and resolves with the connected session.
 *
 * apiOrigin is the API's origin; trailing slashes and a trailing /v1 are
 * stripped (spec 9.5). The whole connect has a deadline of
 * CONNECT_TIMEOUT_MS (15 s; code timeout) and stops early when
 * options.signal aborts. Every rejection is an RtcError. To see every event
 * from the first (idle → connecting), use createSession, subscribe, then
 * call its connect.
 */
export async function connect(apiOrigin: string, participantToken: string, options: ConnectOptions = {}): Promise<Session> {
  const s = createSession(apiOrigin, participantToken, options);
  await s.connect(options.signal);
  return s;
}

/** createSession returns an idle session: subscribe with on(), then call connect(). */
export function createSession(apiOrigin: string, participantToken: string, options: ConnectOptions = {}): Session {
  return new Session(apiOrigin, participantToken, options);
}

/**
 * Session is one participant's connection to a room: the connect session
 * obtained at POST /v1/connect and the media node's WebSocket. The
 * participant token and the media token are private fields: no property,
 * enumeration, JSON or console view of the object shows them.
 */
export class Session {
  readonly #origin: string;
  readonly #participantToken: string;
  readonly #events = new Emitter();
  readonly #sm = new StateMachine();
  readonly #policy: ReconnectPolicy;
  readonly #clock: Clock;
  readonly #random: () => number;
  readonly #fetch: typeof fetch | undefined;
  readonly #WS: typeof WebSocket | undefined;
  readonly #platform: string;
  readonly #wantMedia: boolean;
  readonly #iceServers: RTCIceServer[];
  readonly #media: MediaManager;
  #protocol = PROTOCOL_PRESENCE; // of the current connection
  /** Aborted by leave() and the final states: stops reconnects and attempts. */
  readonly #life = new AbortController();
  readonly #terminated: Promise<void>;
  #resolveTerminated!: () => void;

  #connectURL = "";
  #closing = false;
  #socket: MediaSocket | undefined;
  #sessionId = "";
  #roomId = "";
  #participantId = "";
  #role = "";
  #features: Features = { audio: false, video: false, screenShare: false };
  #endpoint = "";
  #mediaToken: string | undefined;
  #mediaReuseUntil = 0; // on the session's clock: see MEDIA_TOKEN_REUSE_MS
  #tokenUsed = false; // a join succeeded with #mediaToken: its session is spent once the socket drops
  #participants = new Map<string, Participant>();
  #localState: string | undefined;
  #stateSent = false; // a state was sent once: later changes (unmute) must be sent too
  #quality: Quality = "unknown";
  #lastPingAt = 0;
  #pongPending = false;
  #heartbeat: unknown;
  #error: RtcError | undefined;
  #onPageHide: (() => void) | undefined;

  /** Use connect() or createSession(). */
  constructor(apiOrigin: string, participantToken: string, options: ConnectOptions = {}) {
    this.#origin = apiOrigin;
    this.#participantToken = participantToken;
    this.#policy = withDefaults(options.reconnect);
    this.#clock = options.clock ?? systemClock;
    this.#random = options.random ?? Math.random;
    this.#fetch = options.fetch ?? (typeof fetch === "function" ? fetch.bind(globalThis) : undefined);
    this.#WS = options.WebSocket ?? (typeof WebSocket === "function" ? WebSocket : undefined);
    this.#platform = truncateBytes(options.platform ?? defaultPlatform(), MAX_PLATFORM_BYTES);
    this.#wantMedia = options.media ?? true;
    this.#iceServers = [...(options.iceServers ?? [])];
    this.#media = new MediaManager({
      emit: (name, event) => {
        if (!isTerminal(this.#sm.state)) this.#events.emit(name, event);
      },
      trackInfo: (participantId, trackId) => this.#participants.get(participantId)?.tracks.find((t) => t.id === trackId),
      mutedChanged: () => this.#sendState(),
      mayPublish: (source) => (source === "microphone" ? this.#features.audio : source === "camera" ? this.#features.video : this.#features.screenShare),
    });
    this.#terminated = new Promise((r) => (this.#resolveTerminated = r));
  }

  /** on subscribes handler to event (one of EVENT_NAMES; any other name throws) and returns the function that unsubscribes it. */
  on<E extends EventName>(event: E, handler: Handler<E>): Unsubscribe {
    return this.#events.on(event, handler);
  }

  get state(): ConnectionState {
    return this.#sm.state;
  }
  get quality(): Quality {
    return this.#quality;
  }
  /** The current connect session's id (cs_…); a reconnect that exchanged the token again changes it. */
  get sessionId(): string {
    return this.#sessionId;
  }
  get roomId(): string {
    return this.#roomId;
  }
  get participantId(): string {
    return this.#participantId;
  }
  /** publisher or subscriber. */
  get role(): string {
    return this.#role;
  }
  /** What this participant may publish. */
  get features(): Features {
    return this.#features;
  }
  /** The other participants in the room, sorted by id. */
  get participants(): Participant[] {
    return [...this.#participants.values()].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  }
  /** The tracks this participant publishes. */
  get localTracks(): LocalTrack[] {
    return this.#media.localTracks;
  }
  /** The other participants' tracks this session receives. */
  get remoteTracks(): RemoteTrack[] {
    return this.#media.remoteTracks;
  }

  /** Why the session ended: undefined while it runs and after leave(). */
  get error(): RtcError | undefined {
    return this.#error;
  }
  /** Resolves once the session is disconnected or failed. */
  get ended(): Promise<void> {
    return this.#terminated;
  }

  /** A description without tokens (also what JSON.stringify shows). */
  toString(): string {
    return `rtcd.Session{room=${this.#roomId} participant=${this.#participantId} session=${this.#sessionId} state=${this.#sm.state}}`;
  }
  toJSON(): Record<string, unknown> {
    return { roomId: this.#roomId, participantId: this.#participantId, sessionId: this.#sessionId, state: this.#sm.state };
  }

  /**
   * connect runs the first connect (once): token exchange, media socket,
   * join, within CONNECT_TIMEOUT_MS. signal cancels it. Rejects with an
   * RtcError, the session then failed.
   */
  async connect(signal?: AbortSignal): Promise<void> {
    if (this.#sm.state !== "idle") {
      throw new RtcError("invalid_request", "connect may be called once, on an idle session", { state: this.#sm.state });
    }
    this.#move("connecting");
    try {
      if (!this.#fetch || !this.#WS) {
        throw new RtcError("unsupported_platform", "this browser lacks fetch or WebSocket", {});
      }
      if (this.#wantMedia && !MediaManager.supported()) {
        throw new RtcError("unsupported_platform", "this browser has no WebRTC (connect with media: false for presence only)", {});
      }
      this.#connectURL = connectURL(this.#origin);
      const socket = await this.#attempt(signal);
      this.#adopt(socket, false, 0);
    } catch (err) {
      const e = err instanceof RtcError ? err : errorFromTransport(err, false, false);
      this.#terminate("failed", "failed", e, false);
      throw e;
    }
    this.#watchPage();
    void this.#supervise(this.#socket as MediaSocket);
  }

  /**
   * updateState replaces this participant's application state, which the
   * others get as participant.updated. state must be a JSON object of at
   * most MAX_STATE_BYTES once serialized. It is kept and sent again after
   * every reconnect.
   */
  updateState(state: Record<string, unknown>): void {
    let raw: string | undefined;
    try {
      raw = JSON.stringify(state);
    } catch (err) {
      throw new RtcError("invalid_request", "the state does not serialize to JSON", {}, undefined, err);
    }
    if (raw === undefined || !raw.startsWith("{")) {
      throw new RtcError("invalid_request", "the state must be a JSON object", {});
    }
    if (MUTED_STATE_KEY in state) {
      throw new RtcError("invalid_request", `the state key ${MUTED_STATE_KEY} is the SDK's (which tracks are muted)`, {});
    }
    if (new TextEncoder().encode(this.#withMedia(raw)).length > MAX_STATE_BYTES) {
      throw new RtcError("invalid_request", `the state is larger than ${MAX_STATE_BYTES} bytes`, {});
    }
    if (isTerminal(this.#sm.state) || this.#closing || this.#sm.state === "idle") {
      throw new RtcError("invalid_request", "the session is not running", { state: this.#sm.state });
    }
    this.#localState = raw;
    this.#sendState();
  }

  /**
   * publish captures and publishes the microphone, the camera or the
   * screen (source microphone, camera or screen_share), or options.track.
   * It resolves once the track is offered to the media node; the others
   * then get track.subscribed. Published tracks survive reconnects (they
   * are published again on the new connection) until unpublish() or the
   * session's end, which stops the captures. Rejects with
   * media_permission_denied, device_not_found, device_in_use,
   * unsupported_platform, or permission_denied when the participant's role
   * may not publish the source (features).
   */
  async publish(source: TrackSource, options: PublishOptions = {}): Promise<LocalTrack> {
    const st = this.#sm.state;
    if (st !== "connected" && st !== "reconnecting") {
      throw new RtcError("invalid_request", "publish needs a connected session", { state: st });
    }
    if (!this.#wantMedia) throw new RtcError("invalid_request", "this session was connected with media: false", {});
    return this.#media.publish(source, options);
  }

  /** unpublish stops publishing source (and its capture), if it is published. */
  async unpublish(source: TrackSource): Promise<void> {
    const t = this.#media.localTracks.find((l) => l.source === source);
    if (t) await this.#media.unpublish(t);
  }

  /** subscribe and unsubscribe start and stop receiving one remote track (every track is received by default). */
  subscribe(trackId: string): void {
    this.#media.subscribe(trackId);
  }
  unsubscribe(trackId: string): void {
    this.#media.unsubscribe(trackId);
  }

  /** withMedia adds the SDK's key (the muted sources) to the application's state. */
  #withMedia(raw: string | undefined): string {
    const muted = this.#media.mutedSources;
    if (muted.length === 0) return raw ?? "{}";
    const o = raw ? (JSON.parse(raw) as Record<string, unknown>) : {};
    return JSON.stringify({ ...o, [MUTED_STATE_KEY]: muted });
  }

  /** sendState sends the participant's state (the application's and the SDK's); while reconnecting it is sent once connected again. */
  #sendState(): void {
    if (this.#localState === undefined && this.#media.mutedSources.length === 0 && !this.#stateSent) return;
    this.#stateSent = true;
    this.#socket?.send({ type: "update", state: JSON.parse(this.#withMedia(this.#localState)) as unknown });
  }

  /**
   * leave leaves the room: the state moves to disconnecting, the media node
   * is told (so the others see participant.left at once), and once the
   * socket is closed the state is disconnected. It stops a reconnect in
   * progress. On a session still connecting it cancels the connect (which
   * then fails). Calling it again, or on an idle or ended session, resolves
   * at once.
   */
  async leave(): Promise<void> {
    const st = this.#sm.state;
    if (isTerminal(st) || st === "idle") return;
    if (st === "connecting") {
      this.#life.abort(new RtcError("unknown", "connect was cancelled by leave()", {}));
      await this.#terminated;
      return;
    }
    if (!this.#closing) {
      this.#closing = true;
      this.#move("disconnecting");
      this.#life.abort(new RtcError("unknown", "left", {})); // stops a reconnect wait or attempt
      const sock = this.#socket;
      if (sock) {
        if (sock.send({ type: "leave" })) {
          // The node answers leave with a close frame; do not wait for a silent node for long.
          const t = this.#clock.setTimeout(() => sock.close("left"), CLOSE_HANDSHAKE_MS);
          void this.#terminated.then(() => this.#clock.clearTimeout(t));
        } else {
          sock.close("left");
        }
      }
    }
    await this.#terminated;
  }

  // --- connecting ---------------------------------------------------------

  /**
   * attempt gets a joined media socket within CONNECT_TIMEOUT_MS on the
   * session's clock, cancelled by signal (the caller's) and by the
   * session's end.
   */
  async #attempt(signal?: AbortSignal): Promise<MediaSocket> {
    const ctl = new AbortController();
    let timedOut = false;
    const timer = this.#clock.setTimeout(() => {
      timedOut = true;
      ctl.abort(new Error(TIMEOUT_REASON));
    }, CONNECT_TIMEOUT_MS);
    const onAbort = (reason: unknown): void => ctl.abort(reason);
    const unlink = [signal, this.#life.signal].map((sig) => {
      if (!sig) return () => {};
      if (sig.aborted) onAbort(sig.reason);
      const f = (): void => onAbort(sig.reason);
      sig.addEventListener("abort", f, { once: true });
      return () => sig.removeEventListener("abort", f);
    });
    try {
      return await this.#establish(ctl.signal, () => timedOut);
    } finally {
      this.#clock.clearTimeout(timer);
      for (const u of unlink) u();
    }
  }

  /**
   * establish exchanges the participant token when there is no reusable
   * media token, dials and joins, and when the media node refuses the media
   * token exchanges again (up to twice), as the Go client does.
   */
  async #establish(signal: AbortSignal, timedOut: () => boolean): Promise<MediaSocket> {
    let last: RtcError | undefined;
    for (let attempt = 0; attempt < 3; attempt++) {
      if (signal.aborted) throw this.#abortError(signal, timedOut(), false);
      const need = this.#mediaToken === undefined || this.#tokenUsed || this.#clock.now() >= this.#mediaReuseUntil;
      if (need) {
        await this.#exchange(signal, timedOut);
      }
      try {
        const protocol = this.#wantMedia ? PROTOCOL_MEDIA : PROTOCOL_PRESENCE;
        const sock = await dialJoin(this.#WS as typeof WebSocket, this.#endpoint, this.#mediaToken as string, protocol, signal, () => this.#clock.now());
        this.#tokenUsed = true;
        return sock;
      } catch (err) {
        if (signal.aborted) throw this.#abortError(signal, timedOut(), true);
        if (err instanceof JoinRefused) {
          const { action, error } = classifyMedia(err.mediaCode, err.mediaMessage, err.closeCode);
          if (action === "reexchange") {
            this.#mediaToken = undefined;
            last = error;
            continue;
          }
          throw error;
        }
        throw errorFromTransport(err, true, false);
      }
    }
    throw last as RtcError;
  }

  #abortError(signal: AbortSignal, timedOut: boolean, media: boolean): RtcError {
    if (signal.reason instanceof RtcError) return signal.reason;
    return errorFromTransport(signal.reason ?? new Error("aborted"), media, timedOut);
  }

  /** exchange trades the participant token for a connect session. */
  async #exchange(signal: AbortSignal, timedOut: () => boolean): Promise<void> {
    let res: Response;
    let text: string;
    try {
      res = await (this.#fetch as typeof fetch)(this.#connectURL, {
        method: "POST",
        headers: { "Content-Type": "application/json", Accept: "application/json" },
        body: JSON.stringify({ token: this.#participantToken, sdk: { name: SDK_NAME, version: VERSION, platform: this.#platform } }),
        signal,
        // The token in the body is the credential: no cookies, no cache.
        credentials: "omit",
        cache: "no-store",
        mode: "cors",
        redirect: "error",
      });
      text = await readBounded(res, MAX_RESPONSE_BYTES);
    } catch (err) {
      if (signal.aborted) throw this.#abortError(signal, timedOut(), false);
      throw errorFromTransport(err, false, false);
    }
    if (res.status < 200 || res.status > 299) {
      throw errorFromAPI(res.status, res.headers, text, this.#clock.now());
    }
    let cs: ConnectSession;
    try {
      cs = JSON.parse(text) as ConnectSession;
    } catch (err) {
      throw new RtcError("unknown", "the connect response is not a connect session", { http_status: res.status }, undefined, err);
    }
    if (!cs || typeof cs.media_token !== "string" || !cs.media_token || typeof cs.endpoint !== "string" || !/^wss?:\/\/[^/]/.test(cs.endpoint)) {
      throw new RtcError("unknown", "the connect response has no usable media endpoint", { http_status: res.status });
    }
    this.#sessionId = cs.session_id ?? "";
    this.#roomId = cs.room?.id ?? "";
    this.#participantId = cs.participant?.id ?? "";
    this.#features = { audio: !!cs.features?.audio, video: !!cs.features?.video, screenShare: !!cs.features?.screen_share };
    this.#endpoint = cs.endpoint;
    this.#mediaToken = cs.media_token;
    this.#mediaReuseUntil = this.#clock.now() + MEDIA_TOKEN_REUSE_MS;
    this.#tokenUsed = false;
  }

  /**
   * adopt makes sock the session's connection and moves to connected. It
   * reconciles the participant list with the joined message (emitting
   * participant events) and sends the application state again after a
   * reconnect.
   */
  #adopt(sock: MediaSocket, reconnected: boolean, attempt: number): void {
    this.#socket = sock;
    if (this.#stateSent || this.#localState !== undefined) this.#sendState();
    const j = sock.joined;
    this.#sessionId = j.session_id ?? this.#sessionId;
    this.#roomId = j.room_id ?? this.#roomId;
    this.#participantId = j.participant_id ?? this.#participantId;
    this.#role = j.role ?? "";
    this.#pongPending = false;
    this.#lastPingAt = 0;
    this.#protocol = j.protocol === PROTOCOL_MEDIA ? PROTOCOL_MEDIA : PROTOCOL_PRESENCE;
    this.#move("connected");
    if (reconnected) this.#events.emit("connection.reconnected", { attempt });
    const seen = new Set<string>();
    for (const w of j.participants ?? []) {
      const p = toParticipant(w);
      seen.add(p.id);
      const old = this.#participants.get(p.id);
      this.#participants.set(p.id, p);
      if (!old) this.#events.emit("participant.joined", { participant: p });
      else if (!sameParticipant(old, p)) this.#events.emit("participant.updated", { participant: p });
    }
    for (const [id, p] of this.#participants) {
      if (!seen.has(id)) {
        this.#participants.delete(id);
        this.#events.emit("participant.left", { participant: p, reason: "unknown" });
      }
    }
    if (this.#protocol === PROTOCOL_MEDIA) {
      this.#media.attach(sock, [...(j.ice_servers ?? []), ...this.#iceServers]);
      this.#media.participantsChanged();
    }
    sock.listen((m) => this.#onMessage(m));
    this.#startHeartbeat(sock);
  }

  #onMessage(m: ServerMessage): void {
    if (this.#protocol === PROTOCOL_MEDIA && this.#media.handle(m)) return;
    switch (m.type) {
      case "connection.quality":
        // With media, quality is the node's measure of the media path.
        if (m.quality === "excellent" || m.quality === "good" || m.quality === "poor" || m.quality === "lost" || m.quality === "unknown") {
          this.#setQuality(m.quality);
        }
        break;
      case "pong":
        this.#pong(m.ts);
        break;
      case "participant.joined":
        if (m.participant) {
          const p = toParticipant(m.participant);
          this.#participants.set(p.id, p);
          this.#events.emit("participant.joined", { participant: p });
          this.#media.participantsChanged();
        }
        break;
      case "participant.updated": {
        const id = m.participant_id ?? "";
        // The node also tells a publisher its own tracks (it accepted them):
        // this participant is not one of the others.
        if (id === this.#participantId) break;
        const old = this.#participants.get(id);
        // The node sends tracks and speaking with every update of a
        // version 2 socket; a version 1 socket keeps what it knew.
        const p = toParticipant({
          participant_id: id,
          role: old?.role ?? "",
          state: m.state,
          tracks: m.tracks ?? (this.#protocol === PROTOCOL_MEDIA ? [] : (old?.tracks.map((t) => ({ track_id: t.id, source: t.source, kind: t.kind })) ?? [])),
          speaking: m.speaking ?? false,
        });
        this.#participants.set(id, p);
        this.#events.emit("participant.updated", { participant: p });
        this.#media.participantsChanged();
        break;
      }
      case "participant.left": {
        const id = m.participant_id ?? "";
        const p = this.#participants.get(id) ?? toParticipant({ participant_id: id });
        this.#participants.delete(id);
        this.#events.emit("participant.left", { participant: p, reason: m.reason ?? "unknown" });
        break;
      }
      default:
      // Additive protocol changes may add message types a client may ignore.
    }
  }

  // --- heartbeat and quality ------------------------------------------------

  /** startHeartbeat pings every heartbeat interval, grades the quality from the pongs, and drops a node silent for its heartbeat timeout. */
  #startHeartbeat(sock: MediaSocket): void {
    const interval = sock.heartbeatIntervalMs;
    const timeout = sock.heartbeatTimeoutMs;
    const tick = (): void => {
      if (this.#socket !== sock || !sock.open) return;
      if (sock.silentForMs >= timeout) {
        sock.close("the media node sent nothing for its heartbeat timeout");
        return;
      }
      const now = this.#clock.now();
      if (this.#pongPending) {
        const since = now - this.#lastPingAt;
        if (since >= timeout / 2) this.#setQuality("lost");
        else if (since >= interval && this.#protocol !== PROTOCOL_MEDIA) this.#setQuality("poor");
      } else {
        this.#lastPingAt = now;
      }
      this.#pongPending = true;
      sock.send({ type: "ping", ts: this.#lastPingAt });
      this.#heartbeat = this.#clock.setTimeout(tick, interval);
    };
    tick();
  }

  #pong(ts: number | undefined): void {
    const pending = this.#pongPending;
    this.#pongPending = false;
    if (!pending || ts !== this.#lastPingAt) return; // not the answer to the outstanding ping
    if (this.#protocol === PROTOCOL_MEDIA) return; // with media, the node grades quality
    const rtt = Math.max(0, this.#clock.now() - this.#lastPingAt);
    this.#setQuality(rtt < 150 ? "excellent" : rtt < 400 ? "good" : "poor", rtt);
  }

  #setQuality(q: Quality, rttMs?: number): void {
    const prev = this.#quality;
    if (prev === q || (isTerminal(this.#sm.state) && q !== "lost")) return;
    this.#quality = q;
    this.#events.emit("connection.quality_changed", rttMs === undefined ? { quality: q, previousQuality: prev } : { quality: q, previousQuality: prev, rttMs });
  }

  // --- drops and reconnects -------------------------------------------------

  /** supervise watches the current socket and decides, when it ends, between reconnecting, disconnected and failed. */
  async #supervise(first: MediaSocket): Promise<void> {
    let sock = first;
    for (;;) {
      const end = await sock.ended;
      this.#clock.clearTimeout(this.#heartbeat);
      this.#socket = undefined;
      // The remote tracks end with the socket (a reconnect receives them anew).
      this.#media.detach(this.#closing ? "left" : "disconnected");
      if (this.#closing) {
        this.#terminate("disconnected", "left", undefined, true);
        return;
      }
      const { action, error } = judgeEnd(end);
      if (action === "end") {
        this.#terminate("disconnected", endReason(error), error, true);
        return;
      }
      if (action === "fail" || this.#policy.maxAttempts < 0) {
        this.#terminate("failed", "failed", error, true);
        return;
      }
      const next = await this.#reconnect(error);
      if (!next.socket) {
        if (!next.error) this.#terminate("disconnected", "left", undefined, true);
        else if (endReason(next.error) !== "failed") this.#terminate("disconnected", endReason(next.error), next.error, true);
        else this.#terminate("failed", "failed", next.error, true);
        return;
      }
      sock = next.socket;
    }
  }

  /**
   * reconnect moves to reconnecting and tries to get a connection back
   * within the policy; { socket } on success, { error } when the attempts
   * ended, {} when the session is closing.
   */
  async #reconnect(cause: RtcError): Promise<{ socket?: MediaSocket; error?: RtcError }> {
    if (this.#closing) return {};
    this.#move("reconnecting");
    this.#setQuality("lost");
    const p = this.#policy;
    const start = this.#clock.now();
    let last = cause;
    for (let attempt = 1; ; attempt++) {
      if (attempt > p.maxAttempts) return { error: gaveUp(attempt - 1, last) };
      let d = backoffDelay(p, attempt, this.#random());
      if (last.retryAfter !== undefined && last.retryAfter * 1000 > d) d = last.retryAfter * 1000;
      if (this.#clock.now() + d - start > p.maxElapsedMs) return { error: gaveUp(attempt - 1, last) };
      if (this.#closing) return {};
      this.#events.emit("connection.reconnecting", { attempt, delayMs: d, error: last });
      try {
        await sleep(this.#clock, d, this.#life.signal);
      } catch {
        return {};
      }
      try {
        const sock = await this.#attempt();
        if (this.#closing) {
          abandon(sock);
          return {};
        }
        this.#adopt(sock, true, attempt);
        return { socket: sock };
      } catch (err) {
        if (this.#closing) return {};
        const e = err instanceof RtcError ? err : errorFromTransport(err, true, false);
        if (!retryable(e)) return { error: e };
        last = e;
      }
    }
  }

  // --- states ---------------------------------------------------------------

  #move(to: ConnectionState, error?: RtcError): void {
    const from = this.#sm.move(to);
    this.#events.emit("connection.state_changed", error ? { state: to, previousState: from, error } : { state: to, previousState: from });
  }

  /** terminate moves to a final state (from disconnecting, failed becomes disconnected), emits the last events and stops the session. */
  #terminate(to: "disconnected" | "failed", reason: DisconnectReason, error: RtcError | undefined, wasStarted: boolean): void {
    if (isTerminal(this.#sm.state)) return;
    if (this.#sm.state === "disconnecting") to = "disconnected";
    this.#error = error;
    this.#socket = undefined;
    this.#move(to, to === "failed" ? error : undefined);
    this.#setQuality("lost");
    if (error) this.#events.emit("error", { error });
    if (wasStarted) {
      const r: DisconnectReason = to === "failed" ? "failed" : reason;
      this.#events.emit("connection.disconnected", error ? { reason: r, error } : { reason: r });
    }
    this.#media.close(reason === "left" ? "left" : "disconnected");
    this.#events.close();
    this.#clock.clearTimeout(this.#heartbeat);
    if (this.#onPageHide) globalThis.removeEventListener?.("pagehide", this.#onPageHide);
    if (!this.#life.signal.aborted) this.#life.abort(new RtcError("unknown", "the session ended", {}));
    this.#resolveTerminated();
  }

  /** watchPage tells the node this participant leaves when the page goes away, so the others see it at once. */
  #watchPage(): void {
    if (typeof globalThis.addEventListener !== "function") return;
    this.#onPageHide = () => {
      this.#closing = true;
      this.#socket?.send({ type: "leave" });
    };
    globalThis.addEventListener("pagehide", this.#onPageHide);
  }
}

// --- helpers ------------------------------------------------------------------

/** judgeEnd classifies how a joined socket ended. */
function judgeEnd(end: SocketEnd): { action: "reconnect" | "end" | "fail"; error: RtcError } {
  if (end.mediaCode) {
    const { action, error } = classifyMedia(end.mediaCode, end.mediaMessage ?? "", end.closeCode);
    // A refusal of the token after the join cannot happen; be safe.
    return { action: action === "reexchange" ? "reconnect" : action, error };
  }
  const debug: Record<string, unknown> = {};
  if (end.closeCode !== undefined) debug["close_code"] = end.closeCode;
  if (end.byClient) debug["cause"] = end.byClient;
  return { action: "reconnect", error: new RtcError("connection_lost", "the media connection was lost", debug) };
}

/** endReason says whether an error means the server ended the session, and why ("failed" when it did not). */
function endReason(e: RtcError | undefined): DisconnectReason {
  if (!e) return "left";
  if (e.code === "room_ended") return "room_ended";
  if (e.debug["media_code"] === "removed" || e.debug["api_code"] === "participant_not_found") return "removed";
  if (e.debug["media_code"] === "replaced") return "replaced";
  return "failed";
}

/** retryable reports whether another reconnect attempt may succeed. */
function retryable(e: RtcError): boolean {
  switch (e.code) {
    case "connection_failed":
    case "connection_lost":
    case "network_unavailable":
    case "service_unavailable":
    case "rate_limited":
    case "timeout":
      return true;
    default:
      return false;
  }
}

function gaveUp(attempts: number, last: RtcError): RtcError {
  return new RtcError("connection_lost", `the media connection was lost and ${attempts} reconnect attempts failed`, {
    attempts,
    last_code: last.code,
    last_debug: last.debug,
  });
}

/** abandon tells the node a joined connection the session will not use is leaving, then closes it. */
function abandon(sock: MediaSocket): void {
  sock.send({ type: "leave" });
  sock.close("abandoned");
}

/** toParticipant reads a participant view: the SDK's key of the state (muted sources) goes into its tracks, the rest is the application's state. */
function toParticipant(w: WireParticipant): Participant {
  const raw = w.state && typeof w.state === "object" && !Array.isArray(w.state) ? (w.state as Record<string, unknown>) : {};
  const { [MUTED_STATE_KEY]: mutedRaw, ...state } = raw;
  const muted = Array.isArray(mutedRaw) ? mutedRaw.filter((v): v is string => typeof v === "string") : [];
  const tracks: TrackInfo[] = [];
  for (const t of w.tracks ?? []) {
    if (t && typeof t.track_id === "string" && (t.kind === "audio" || t.kind === "video")) {
      tracks.push(Object.freeze({ id: t.track_id, source: t.source as TrackSource, kind: t.kind, muted: muted.includes(t.source) }));
    }
  }
  return Object.freeze({ id: w.participant_id, role: w.role ?? "", state: Object.freeze(state), tracks: Object.freeze(tracks), speaking: !!w.speaking });
}

function sameParticipant(a: Participant, b: Participant): boolean {
  return a.role === b.role && a.speaking === b.speaking && JSON.stringify(a.state) === JSON.stringify(b.state) && JSON.stringify(a.tracks) === JSON.stringify(b.tracks);
}

/** readBounded reads a response body as text, refusing more than max bytes. */
async function readBounded(res: Response, max: number): Promise<string> {
  const len = Number(res.headers.get("Content-Length") ?? "0");
  if (len > max) throw new Error(`the connect response is larger than ${max} bytes`);
  const text = await res.text();
  if (text.length > max) throw new Error(`the connect response is larger than ${max} bytes`);
  return text;
}

function truncateBytes(s: string, max: number): string {
  const enc = new TextEncoder();
  while (enc.encode(s).length > max) s = s.slice(0, -1);
  return s;
}

/** defaultPlatform is "web/<browser>-<major version>" from the user agent, or "web". */
export function defaultPlatform(userAgent: string = typeof navigator !== "undefined" ? navigator.userAgent : ""): string {
  const tests: Array<[RegExp, string]> = [
    [/Edg\/(\d+)/, "edge"],
    [/OPR\/(\d+)/, "opera"],
    [/Firefox\/(\d+)/, "firefox"],
    [/(?:Chrome|Chromium|HeadlessChrome)\/(\d+)/, "chrome"],
    [/Version\/(\d+)[\d.]* (?:Mobile\/\S+ )?Safari\//, "safari"],
  ];
  for (const [re, name] of tests) {
    const m = re.exec(userAgent);
    if (m) return `web/${name}-${m[1]}`;
  }
  return "web";
}

export type { EventMap };
