/**
 * rtcd's web client SDK. An application trades a participant token
 * (rtc_pt_…, created by its backend) for a media session and holds the
 * connection to the media node, with connection states, events, automatic
 * reconnects and normalized errors (docs/sdks.md, README.md).
 *
 * ```ts
 * import { connect, RtcError } from "@rtcd/web";
 * const session = await connect("https://api.example.com", participantToken);
 * const off = session.on("participant.joined", ({ participant }) => show(participant));
 * ```
 */
export { connectURL } from "./address.js";
export { backoffDelay, DEFAULT_RECONNECT_POLICY, withDefaults, type ReconnectPolicy } from "./backoff.js";
export type { Clock } from "./clock.js";
export { ERROR_CODES, RtcError, type ErrorCode } from "./errors.js";
export {
  EVENT_NAMES,
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
export { listDevices, LocalTrack, MUTED_STATE_KEY, type PublishOptions } from "./media.js";
export { connect, createSession, CONNECT_TIMEOUT_MS, MAX_STATE_BYTES, Session, type ConnectOptions, type Features } from "./session.js";
export { CONNECTION_STATES, TRANSITIONS, canTransition, type ConnectionState } from "./state.js";
export { SDK_NAME, VERSION } from "./version.js";
