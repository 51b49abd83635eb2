import { errorFromMedia, RtcError } from "./errors.js";
import type { EventMap, RemoteTrack, TrackInfo, TrackSource } from "./events.js";
import type { ServerMessage } from "./socket.js";

/**
 * The audio and video side of a session (media node protocol version 2,
 * docs/media-protocol.md "Media (version 2)"): the local tracks this
 * participant publishes, which outlive media connections (a reconnect
 * publishes them again), and, per joined media connection, two WebRTC peer
 * connections: publish (this client offers) and subscribe (the node
 * offers), with ICE candidates trickled over the WebSocket.
 */

/** Bounds of the media side. */
const MAX_QUEUED_CANDIDATES = 64; // the node's candidates held until their description is set
const MAX_SENT_CANDIDATES = 60; // the node takes 64 per socket, then bad_message
const PUBLISH_ANSWER_TIMEOUT_MS = 15_000; // a publish.answer that does not come ends the wait

/** The key of the participant state in which the SDK says which published sources are muted. */
export const MUTED_STATE_KEY = "rtcd.muted";

const SOURCE_KIND: Readonly<Record<TrackSource, "audio" | "video">> = { microphone: "audio", camera: "video", screen_share: "video" };

/** Options of publish: which device, and the capture's shape. */
export interface PublishOptions {
  /** A deviceId from listDevices(); the browser's default when omitted. */
  deviceId?: string;
  /** Camera and screen: ideal width, height and frame rate. */
  width?: number;
  height?: number;
  frameRate?: number;
  /** An existing MediaStreamTrack to publish instead of capturing one (the SDK then does not stop it). */
  track?: MediaStreamTrack;
}

/** What the media side needs of its session. */
export interface MediaHost {
  emit<E extends "track.subscribed" | "track.unsubscribed" | "error">(name: E, event: EventMap[E]): void;
  /** The node's view of a remote track (from the participants), if known yet. */
  trackInfo(participantId: string, trackId: string): TrackInfo | undefined;
  /** The muted sources changed: the session sends its state again. */
  mutedChanged(): void;
  /** May this participant publish source (connect's features)? */
  mayPublish(source: TrackSource): boolean;
}

/** A media connection's link: send a protocol message. */
export interface MediaLinkSocket {
  send(m: Record<string, unknown>): boolean;
}

/**
 * LocalTrack is a track this participant publishes. It stays published
 * across reconnects until unpublish().
 */
export class LocalTrack {
  readonly source: TrackSource;
  readonly kind: "audio" | "video";
  #track: MediaStreamTrack;
  #owned: boolean; // captured by the SDK: stopped when unpublished
  #muted = false;
  #media: MediaManager;
  #elements = new Set<HTMLMediaElement>();
  #options: PublishOptions;

  constructor(media: MediaManager, source: TrackSource, track: MediaStreamTrack, owned: boolean, options: PublishOptions) {
    this.#media = media;
    this.source = source;
    this.kind = SOURCE_KIND[source];
    this.#track = track;
    this.#owned = owned;
    this.#options = options;
  }

  /** The captured track (it changes when the device does). */
  get mediaStreamTrack(): MediaStreamTrack {
    return this.#track;
  }
  /** The capturing device's id ("" for a screen or a track given to publish). */
  get deviceId(): string {
    return this.#track.getSettings().deviceId ?? "";
  }
  get muted(): boolean {
    return this.#muted;
  }

  /** attach shows the local track in element (a preview; created when omitted) and returns it. Audio is never played back locally. */
  attach(element?: HTMLMediaElement): HTMLMediaElement {
    const el = element ?? document.createElement(this.kind === "video" ? "video" : "audio");
    el.muted = true;
    if (el instanceof HTMLVideoElement) el.playsInline = true;
    el.autoplay = true;
    el.srcObject = new MediaStream([this.#track]);
    this.#elements.add(el);
    void el.play().catch(() => {});
    return el;
  }

  detach(element?: HTMLMediaElement): void {
    for (const el of element ? [element] : [...this.#elements]) {
      el.srcObject = null;
      this.#elements.delete(el);
    }
  }

  /**
   * mute stops sending the track (no packets reach the node, so the
   * others receive no frames) and tells the others through the
   * participant's state (Participant.tracks[].muted). The device stays
   * open, so unmute is instant.
   */
  async mute(): Promise<void> {
    if (this.#muted) return;
    this.#muted = true;
    this.#track.enabled = false;
    await this.#media.senderTrack(this, null);
    this.#media.host.mutedChanged();
  }

  async unmute(): Promise<void> {
    if (!this.#muted) return;
    this.#muted = false;
    this.#track.enabled = true;
    await this.#media.senderTrack(this, this.#track);
    this.#media.host.mutedChanged();
  }

  /**
   * switchDevice captures from another camera or microphone and sends it
   * in place of the current one, on the same published track: the others
   * keep receiving without a new track.subscribed.
   */
  async switchDevice(deviceId: string): Promise<void> {
    if (this.source === "screen_share") throw new RtcError("invalid_request", "a screen share has no device to switch", {});
    const next = await capture(this.source, { ...this.#options, deviceId });
    const old = this.#track;
    next.enabled = !this.#muted;
    if (!this.#muted) await this.#media.senderTrack(this, next);
    this.#track = next;
    const owned = this.#owned;
    this.#owned = true;
    this.#options = { ...this.#options, deviceId };
    for (const el of this.#elements) el.srcObject = new MediaStream([next]);
    if (owned) old.stop();
  }

  /** The browser's statistics of this track's sender (outbound-rtp), or undefined while no media connection carries it. */
  async getStats(): Promise<RTCStatsReport | undefined> {
    return this.#media.senderStats(this);
  }

  /** unpublish stops publishing (and capturing) the track; the others get track.unsubscribed. */
  async unpublish(): Promise<void> {
    await this.#media.unpublish(this);
  }

  /** stop ends the capture when the SDK captured it (internal). */
  stopCapture(): void {
    this.detach();
    if (this.#owned) this.#track.stop();
  }
}

class RemoteTrackImpl implements RemoteTrack {
  readonly id: string;
  readonly participantId: string;
  readonly source: TrackSource;
  readonly kind: "audio" | "video";
  readonly mediaStreamTrack: MediaStreamTrack;
  #elements = new Set<HTMLMediaElement>();
  #receiver: RTCRtpReceiver;

  constructor(id: string, participantId: string, source: TrackSource, receiver: RTCRtpReceiver) {
    this.id = id;
    this.participantId = participantId;
    this.source = source;
    this.mediaStreamTrack = receiver.track;
    this.kind = receiver.track.kind === "audio" ? "audio" : "video";
    this.#receiver = receiver;
  }

  getStats(): Promise<RTCStatsReport> {
    return this.#receiver.getStats();
  }

  attach(element?: HTMLMediaElement): HTMLMediaElement {
    const el = element ?? document.createElement(this.kind === "video" ? "video" : "audio");
    if (el instanceof HTMLVideoElement) {
      el.playsInline = true;
      el.muted = true; // the audio comes on its own track
    }
    el.autoplay = true;
    el.srcObject = new MediaStream([this.mediaStreamTrack]);
    this.#elements.add(el);
    // Autoplay may need a gesture for audio; a rejected play leaves the
    // element ready for the page to play() from one.
    void el.play().catch(() => {});
    return el;
  }

  detach(element?: HTMLMediaElement): void {
    for (const el of element ? [element] : [...this.#elements]) {
      el.srcObject = null;
      this.#elements.delete(el);
    }
  }
}

/** capture opens a device (or the screen) for source. */
async function capture(source: TrackSource, o: PublishOptions): Promise<MediaStreamTrack> {
  const md = typeof navigator !== "undefined" ? navigator.mediaDevices : undefined;
  if (!md || typeof md.getUserMedia !== "function") {
    throw new RtcError("unsupported_platform", "this page cannot capture media: a browser gives camera, microphone and screen only to secure (https) pages", {});
  }
  const what = source === "microphone" ? "microphone" : source === "camera" ? "camera" : "screen";
  try {
    if (source === "screen_share") {
      if (typeof md.getDisplayMedia !== "function") throw new RtcError("unsupported_platform", "this browser cannot share the screen", {});
      const video: MediaTrackConstraints = {};
      if (o.frameRate) video.frameRate = { ideal: o.frameRate };
      const stream = await md.getDisplayMedia({ video: Object.keys(video).length ? video : true, audio: false });
      return firstTrack(stream, "video");
    }
    const c: MediaTrackConstraints = {};
    if (o.deviceId) c.deviceId = { exact: o.deviceId };
    if (source === "camera") {
      if (o.width) c.width = { ideal: o.width };
      if (o.height) c.height = { ideal: o.height };
      if (o.frameRate) c.frameRate = { ideal: o.frameRate };
    }
    const constraints: MediaStreamConstraints = source === "microphone" ? { audio: Object.keys(c).length ? c : true } : { video: Object.keys(c).length ? c : true };
    const stream = await md.getUserMedia(constraints);
    return firstTrack(stream, SOURCE_KIND[source]);
  } catch (err) {
    throw errorFromMedia(err, what);
  }
}

function firstTrack(stream: MediaStream, kind: "audio" | "video"): MediaStreamTrack {
  const t = kind === "audio" ? stream.getAudioTracks()[0] : stream.getVideoTracks()[0];
  if (!t) throw new RtcError("device_not_found", `the browser gave no ${kind} track`, {});
  return t;
}

/** listDevices lists the cameras (videoinput), microphones (audioinput) or speakers (audiooutput); labels appear once the page has been allowed a device. */
export async function listDevices(kind?: MediaDeviceKind): Promise<MediaDeviceInfo[]> {
  const md = typeof navigator !== "undefined" ? navigator.mediaDevices : undefined;
  if (!md || typeof md.enumerateDevices !== "function") {
    throw new RtcError("unsupported_platform", "this page cannot list media devices (a secure page is needed)", {});
  }
  const all = await md.enumerateDevices();
  return kind ? all.filter((d) => d.kind === kind) : all;
}

/** msids maps each m-section's mid to its msid's two parts. */
export function msidsByMid(sdp: string): Map<string, { stream: string; track: string }> {
  const out = new Map<string, { stream: string; track: string }>();
  for (const section of sdp.split(/\r?\nm=/).slice(1)) {
    const mid = /\r?\na=mid:(\S+)/.exec("\n" + section)?.[1];
    const msid = /\r?\na=msid:(\S+) (\S+)/.exec("\n" + section);
    if (mid && msid) out.set(mid, { stream: msid[1] as string, track: msid[2] as string });
  }
  return out;
}

/** One media connection's two peer connections. */
class Link {
  readonly socket: MediaLinkSocket;
  readonly iceServers: RTCIceServer[];
  pub: RTCPeerConnection | undefined;
  sub: RTCPeerConnection | undefined;
  senders = new Map<LocalTrack, RTCRtpTransceiver>();
  pending: Record<"publish" | "subscribe", RTCIceCandidateInit[]> = { publish: [], subscribe: [] };
  sent = 0;
  answerWait: { resolve: (sdp: string) => void; reject: (e: unknown) => void } | undefined;
  negotiating = false;
  renegotiate = false;
  subChain: Promise<void> = Promise.resolve();
  closed = false;

  constructor(socket: MediaLinkSocket, iceServers: RTCIceServer[]) {
    this.socket = socket;
    this.iceServers = iceServers;
  }
}

/**
 * MediaManager is a session's media: its local tracks, and the peer
 * connections of the current media connection.
 */
export class MediaManager {
  readonly host: MediaHost;
  #local = new Map<TrackSource, LocalTrack>();
  #remote = new Map<string, RemoteTrackImpl>(); // by the node's track id
  #waiting = new Map<string, { participantId: string; receiver: RTCRtpReceiver }>(); // received, its source not known yet
  #link: Link | undefined;

  constructor(host: MediaHost) {
    this.host = host;
  }

  /** supported reports whether this browser has WebRTC. */
  static supported(): boolean {
    return typeof RTCPeerConnection === "function";
  }

  get localTracks(): LocalTrack[] {
    return [...this.#local.values()];
  }
  get remoteTracks(): RemoteTrack[] {
    return [...this.#remote.values()];
  }
  /** The sources published but muted, for the participant's state. */
  get mutedSources(): TrackSource[] {
    return [...this.#local.values()].filter((t) => t.muted).map((t) => t.source);
  }

  // --- local tracks -----------------------------------------------------------

  async publish(source: TrackSource, options: PublishOptions = {}): Promise<LocalTrack> {
    if (!(source in SOURCE_KIND)) throw new RtcError("invalid_request", `unknown source ${String(source)}: microphone, camera or screen_share`, {});
    if (!MediaManager.supported()) throw new RtcError("unsupported_platform", "this browser has no WebRTC", {});
    if (!this.host.mayPublish(source)) {
      throw new RtcError("permission_denied", `this participant's role may not publish the ${source}`, { source });
    }
    if (this.#local.has(source)) throw new RtcError("invalid_request", `the ${source} is already published; unpublish it or switch its device`, { source });
    const given = options.track;
    if (given && given.kind !== SOURCE_KIND[source]) throw new RtcError("invalid_request", `a ${source} needs a ${SOURCE_KIND[source]} track`, {});
    const track = given ?? (await capture(source, options));
    if (this.#local.has(source)) {
      // Published meanwhile by a concurrent call.
      if (!given) track.stop();
      throw new RtcError("invalid_request", `the ${source} is already published`, { source });
    }
    const local = new LocalTrack(this, source, track, !given, options);
    this.#local.set(source, local);
    if (source === "screen_share") {
      // The browser's own "stop sharing" button ends the track.
      track.addEventListener("ended", () => void this.unpublish(local).catch(() => {}), { once: true });
    }
    const link = this.#link;
    if (link) {
      this.#addSender(link, local);
      await this.#negotiate(link);
    }
    return local;
  }

  async unpublish(local: LocalTrack): Promise<void> {
    if (this.#local.get(local.source) !== local) return;
    this.#local.delete(local.source);
    local.stopCapture();
    const link = this.#link;
    const tr = link?.senders.get(local);
    if (link && tr) {
      link.senders.delete(local);
      try {
        tr.stop();
      } catch {
        // the connection is closing
      }
      await this.#negotiate(link);
    }
    if (local.muted) this.host.mutedChanged();
  }

  async senderStats(local: LocalTrack): Promise<RTCStatsReport | undefined> {
    const tr = this.#link?.senders.get(local);
    return tr ? tr.sender.getStats() : undefined;
  }

  /** senderTrack sets what the published track sends (null: nothing, while muted). */
  async senderTrack(local: LocalTrack, track: MediaStreamTrack | null): Promise<void> {
    const tr = this.#link?.senders.get(local);
    if (tr && tr.currentDirection !== "stopped") await tr.sender.replaceTrack(track);
  }

  // --- a media connection -------------------------------------------------------

  /** attach starts media on a joined connection: the local tracks are published again on it. */
  attach(socket: MediaLinkSocket, iceServers: RTCIceServer[]): void {
    const link = new Link(socket, iceServers);
    this.#link = link;
    if (this.#local.size > 0) {
      for (const local of this.#local.values()) this.#addSender(link, local);
      void this.#negotiate(link);
    }
  }

  /** detach ends media on a connection that is gone: its peer connections close and every remote track ends. */
  detach(reason: string): void {
    const link = this.#link;
    this.#link = undefined;
    if (link) {
      link.closed = true;
      link.answerWait?.reject(new RtcError("connection_lost", "the media connection ended", {}));
      link.pub?.close();
      link.sub?.close();
    }
    this.#waiting.clear();
    for (const t of [...this.#remote.values()]) {
      this.#remote.delete(t.id);
      t.detach();
      this.host.emit("track.unsubscribed", { track: t, reason });
    }
  }

  /** close ends everything at the session's end: the captures stop. */
  close(reason: string): void {
    this.detach(reason);
    for (const local of this.#local.values()) local.stopCapture();
    this.#local.clear();
  }

  /** handle takes a protocol 2 message of the current connection; false when it is not one. */
  handle(m: ServerMessage): boolean {
    const link = this.#link;
    if (!link) return false;
    switch (m.type) {
      case "publish.answer":
        link.answerWait?.resolve(m.sdp ?? "");
        return true;
      case "subscribe.offer":
        link.subChain = link.subChain.then(() => this.#answerSubscribe(link, m.sdp ?? "")).catch((err) => this.#mediaError(link, "the node's subscribe offer failed", err));
        return true;
      case "candidate":
        if (m.candidate && (m.target === "publish" || m.target === "subscribe")) void this.#addCandidate(link, m.target, m.candidate);
        return true;
      case "track.unsubscribed": {
        const id = m.track_id ?? "";
        this.#waiting.delete(id);
        const t = this.#remote.get(id);
        if (t) {
          this.#remote.delete(id);
          t.detach();
          this.host.emit("track.unsubscribed", { track: t, reason: m.reason ?? "unpublished" });
        }
        return true;
      }
      case "track.refused": {
        const source = m.source as TrackSource;
        const local = this.#local.get(source);
        if (local) void this.unpublish(local).catch(() => {});
        this.host.emit("error", {
          error: new RtcError("permission_denied", `the media node refused to publish the ${source}`, { media_code: m.code, media_message: m.message, source }),
        });
        return true;
      }
      default:
        return false;
    }
  }

  /** participantsChanged resolves received tracks whose source is now known. */
  participantsChanged(): void {
    for (const [id, w] of [...this.#waiting]) {
      const info = this.host.trackInfo(w.participantId, id);
      if (info) {
        this.#waiting.delete(id);
        this.#subscribed(id, w.participantId, info.source, w.receiver);
      }
    }
  }

  // --- publish connection -----------------------------------------------------

  #ensurePub(link: Link): RTCPeerConnection {
    if (link.pub) return link.pub;
    const pc = new RTCPeerConnection({ iceServers: link.iceServers, bundlePolicy: "max-bundle", rtcpMuxPolicy: "require" });
    pc.onicecandidate = (ev) => this.#sendCandidate(link, "publish", ev.candidate);
    link.pub = pc;
    return pc;
  }

  #addSender(link: Link, local: LocalTrack): void {
    const pc = this.#ensurePub(link);
    const stream = new MediaStream([local.mediaStreamTrack]);
    const tr = pc.addTransceiver(local.mediaStreamTrack, { direction: "sendonly", streams: [stream] });
    if (local.muted) void tr.sender.replaceTrack(null);
    link.senders.set(local, tr);
  }

  /** negotiate offers the published tracks to the node, one offer at a time; changes meanwhile go into the next. */
  async #negotiate(link: Link): Promise<void> {
    if (link.negotiating) {
      link.renegotiate = true;
      return;
    }
    link.negotiating = true;
    try {
      do {
        link.renegotiate = false;
        const pc = this.#ensurePub(link);
        const offer = await pc.createOffer();
        await pc.setLocalDescription(offer);
        if (link.closed) return;
        const sdp = pc.localDescription?.sdp ?? offer.sdp ?? "";
        const msids = msidsByMid(sdp);
        const tracks: Array<{ track_id: string; source: TrackSource }> = [];
        for (const [local, tr] of link.senders) {
          const msid = tr.mid ? msids.get(tr.mid) : undefined;
          if (msid) tracks.push({ track_id: msid.track, source: local.source });
        }
        const answer = new Promise<string>((resolve, reject) => {
          link.answerWait = { resolve, reject };
        });
        if (!link.socket.send({ type: "publish.offer", sdp, tracks })) return;
        let timer: ReturnType<typeof setTimeout> | undefined;
        const answered = await Promise.race([
          answer,
          new Promise<string>((_, reject) => {
            timer = setTimeout(() => reject(new RtcError("connection_failed", "the media node did not answer the publish offer", {})), PUBLISH_ANSWER_TIMEOUT_MS);
          }),
        ]).finally(() => clearTimeout(timer));
        link.answerWait = undefined;
        if (link.closed) return;
        await pc.setRemoteDescription({ type: "answer", sdp: answered });
        await this.#flushCandidates(link, "publish");
      } while (link.renegotiate && !link.closed);
    } catch (err) {
      if (!link.closed) this.#mediaError(link, "publishing failed", err);
    } finally {
      link.negotiating = false;
    }
  }

  // --- subscribe connection ---------------------------------------------------

  async #answerSubscribe(link: Link, sdp: string): Promise<void> {
    if (link.closed) return;
    if (!link.sub) {
      const pc = new RTCPeerConnection({ iceServers: link.iceServers, bundlePolicy: "max-bundle", rtcpMuxPolicy: "require" });
      pc.onicecandidate = (ev) => this.#sendCandidate(link, "subscribe", ev.candidate);
      pc.ontrack = (ev) => this.#onTrack(link, ev);
      link.sub = pc;
    }
    const pc = link.sub;
    await pc.setRemoteDescription({ type: "offer", sdp });
    await this.#flushCandidates(link, "subscribe");
    const answer = await pc.createAnswer();
    await pc.setLocalDescription(answer);
    if (link.closed) return;
    link.socket.send({ type: "subscribe.answer", sdp: pc.localDescription?.sdp ?? answer.sdp ?? "" });
  }

  #onTrack(link: Link, ev: RTCTrackEvent): void {
    if (link.closed) return;
    const mid = ev.transceiver.mid;
    const msid = mid ? msidsByMid(link.sub?.remoteDescription?.sdp ?? "").get(mid) : undefined;
    // msid is "<publisher participant_id> <the node's track id>".
    const participantId = msid?.stream ?? ev.streams[0]?.id ?? "";
    const id = msid?.track ?? ev.track.id;
    if (this.#remote.has(id)) return;
    const info = this.host.trackInfo(participantId, id);
    if (info) this.#subscribed(id, participantId, info.source, ev.receiver);
    else this.#waiting.set(id, { participantId, receiver: ev.receiver });
  }

  #subscribed(id: string, participantId: string, source: TrackSource, receiver: RTCRtpReceiver): void {
    const t = new RemoteTrackImpl(id, participantId, source, receiver);
    this.#remote.set(id, t);
    this.host.emit("track.subscribed", { track: t });
  }

  /** subscribe and unsubscribe start and stop receiving one remote track (by its id). */
  subscribe(trackId: string): void {
    this.#link?.socket.send({ type: "track.subscribe", track_id: trackId });
  }
  unsubscribe(trackId: string): void {
    this.#link?.socket.send({ type: "track.unsubscribe", track_id: trackId });
  }

  // --- ICE --------------------------------------------------------------------

  #sendCandidate(link: Link, target: "publish" | "subscribe", c: RTCIceCandidate | null): void {
    if (!c || !c.candidate || link.closed || link.sent >= MAX_SENT_CANDIDATES) return;
    link.sent++;
    link.socket.send({ type: "candidate", target, candidate: c.toJSON() });
  }

  async #addCandidate(link: Link, target: "publish" | "subscribe", c: RTCIceCandidateInit): Promise<void> {
    const pc = target === "publish" ? link.pub : link.sub;
    if (!pc || !pc.remoteDescription) {
      if (link.pending[target].length < MAX_QUEUED_CANDIDATES) link.pending[target].push(c);
      return;
    }
    try {
      await pc.addIceCandidate(c);
    } catch {
      // a candidate the browser cannot use: ICE goes on with the others
    }
  }

  async #flushCandidates(link: Link, target: "publish" | "subscribe"): Promise<void> {
    const queued = link.pending[target];
    link.pending[target] = [];
    for (const c of queued) await this.#addCandidate(link, target, c);
  }

  #mediaError(link: Link, what: string, err: unknown): void {
    if (link.closed) return;
    const e = err instanceof RtcError ? err : new RtcError("unknown", `${what}: ${err instanceof Error ? err.message : String(err)}`, {}, undefined, err);
    this.host.emit("error", { error: e });
  }
}
