/**
 * The normalized error codes (spec 7, "Client SDK errors"): the contract.
 * What the API, the media node or the browser said is only in
 * RtcError.debug.
 */
export type ErrorCode =
  | "authentication_failed"
  | "token_expired"
  | "room_not_found"
  | "room_ended"
  | "participant_limit_reached"
  | "permission_denied"
  | "device_not_found"
  | "device_in_use"
  | "media_permission_denied"
  | "connection_failed"
  | "connection_lost"
  | "network_unavailable"
  | "service_unavailable"
  | "unsupported_platform"
  | "invalid_request"
  | "insufficient_credit"
  | "rate_limited"
  | "timeout"
  | "unknown";

/** Every code, in the spec's order. */
export const ERROR_CODES: readonly ErrorCode[] = Object.freeze([
  "authentication_failed",
  "token_expired",
  "room_not_found",
  "room_ended",
  "participant_limit_reached",
  "permission_denied",
  "device_not_found",
  "device_in_use",
  "media_permission_denied",
  "connection_failed",
  "connection_lost",
  "network_unavailable",
  "service_unavailable",
  "unsupported_platform",
  "invalid_request",
  "insufficient_credit",
  "rate_limited",
  "timeout",
  "unknown",
]);

/**
 * RtcError is every error the SDK throws or rejects with, and the one the
 * `error` event carries.
 *
 * ```ts
 * try { await connect(api, token) } catch (e) {
 *   if (e instanceof RtcError && e.code === "rate_limited") wait(e.retryAfter)
 * }
 * ```
 */
export class RtcError extends Error {
  /** One of ERROR_CODES. */
  readonly code: ErrorCode;
  /**
   * Seconds to wait, from the API's Retry-After, for rate_limited (and a
   * service_unavailable that sent one); undefined otherwise.
   */
  readonly retryAfter: number | undefined;
  /**
   * What the SDK knows about the cause, for logs and support only (not a
   * contract): http_status, api_code, request_id, details (from the API's
   * error envelope); media_code, media_message, close_code (from the media
   * node); dom_error (a browser API's error name); cause (a transport
   * error's text).
   */
  readonly debug: Readonly<Record<string, unknown>>;

  constructor(code: ErrorCode, message: string, debug: Record<string, unknown> = {}, retryAfter?: number, cause?: unknown) {
    super(message, cause === undefined ? undefined : { cause });
    this.name = "RtcError";
    this.code = code;
    this.retryAfter = retryAfter;
    if (cause !== undefined && debug["cause"] === undefined) {
      debug = { ...debug, cause: cause instanceof Error ? `${cause.name}: ${cause.message}` : String(cause) };
    }
    this.debug = Object.freeze({ ...debug });
  }
}

/** The API's error body. */
interface APIEnvelope {
  error?: { code?: unknown; message?: unknown; request_id?: unknown; details?: unknown };
}

/**
 * errorFromAPI maps a non-2xx answer of POST /v1/connect to a normalized
 * error, as the Go client does: the API's code decides where it is known,
 * the status otherwise.
 */
export function errorFromAPI(status: number, headers: { get(name: string): string | null }, body: string, nowMs: number): RtcError {
  let env: APIEnvelope = {};
  try {
    const parsed: unknown = JSON.parse(body);
    if (parsed && typeof parsed === "object") env = parsed as APIEnvelope;
  } catch {
    // not JSON: the status decides
  }
  const api = env.error && typeof env.error === "object" ? env.error : {};
  const apiCode = typeof api.code === "string" ? api.code : "";
  const details = api.details && typeof api.details === "object" ? (api.details as Record<string, unknown>) : {};
  const debug: Record<string, unknown> = { http_status: status };
  if (apiCode) debug["api_code"] = apiCode;
  const rid = typeof api.request_id === "string" && api.request_id ? api.request_id : headers.get("X-Request-Id");
  if (rid) debug["request_id"] = rid;
  if (Object.keys(details).length > 0) debug["details"] = details;
  const message = typeof api.message === "string" && api.message ? api.message : `the API answered ${status}`;

  let code: ErrorCode = "unknown";
  switch (apiCode) {
    case "participant_token_invalid":
    case "authentication_failed":
      code = "authentication_failed";
      break;
    case "participant_token_expired":
      code = "token_expired";
      break;
    case "permission_denied":
    case "participant_not_found": // removed, or ended with its room: the token admits no one
      code = "permission_denied";
      break;
    case "room_not_found":
      code = "room_not_found";
      break;
    case "room_ended":
    case "room_expired":
      code = "room_ended";
      break;
    case "quota_exceeded": // max_participants of the room or max_active_participants of the project
      code = "participant_limit_reached";
      break;
    case "insufficient_credit":
      code = "insufficient_credit";
      break;
    case "rate_limited":
      code = "rate_limited";
      break;
    case "invalid_request":
      code = "invalid_request";
      break;
    case "service_unavailable":
      code = "service_unavailable";
      break;
    default:
      if (status === 402) code = "insufficient_credit";
      else if (status === 429) code = "rate_limited";
      else if (status === 401) code = "authentication_failed";
      else if (status === 403) code = "permission_denied";
      else if (status === 410) code = "room_ended";
      else if (status === 502 || status === 503 || status === 504) code = "service_unavailable";
      else if (status >= 400 && status < 500 && status !== 404) code = "invalid_request";
  }
  let retryAfter: number | undefined;
  if (code === "rate_limited" || code === "service_unavailable") {
    retryAfter = parseRetryAfter(headers.get("Retry-After"), nowMs);
    if (retryAfter === undefined && code === "rate_limited") {
      const s = details["retry_after_seconds"];
      if (typeof s === "number" && s > 0) retryAfter = s;
    }
  }
  return new RtcError(code, message, debug, retryAfter);
}

/** parseRetryAfter reads delay-seconds or an HTTP date (RFC 9110 section 10.2.3) as seconds; undefined when absent or past. */
export function parseRetryAfter(v: string | null, nowMs: number): number | undefined {
  const s = (v ?? "").trim();
  if (s === "") return undefined;
  if (/^\d+$/.test(s)) {
    const n = Number(s);
    return n > 0 ? n : undefined;
  }
  const t = Date.parse(s);
  if (Number.isNaN(t) || t <= nowMs) return undefined;
  return Math.ceil((t - nowMs) / 1000);
}

/** What the SDK does about a media node's verdict. */
export type MediaAction = "reconnect" | "reexchange" | "end" | "fail";

/** The media node's error codes by WebSocket close code (docs/media-protocol.md). */
export const MEDIA_CODE_OF_CLOSE: Readonly<Record<number, string>> = Object.freeze({
  4000: "bad_message",
  4001: "token_invalid",
  4002: "token_expired",
  4003: "join_timeout",
  4004: "room_full",
  4005: "heartbeat_timeout",
  4006: "slow_consumer",
  4007: "replaced",
  4008: "removed",
  4009: "room_closed",
  4010: "node_shutdown",
  // The control plane's refusals of a join (the join is its point of record).
  4011: "session_superseded",
  4012: "participant_limit_reached",
  4013: "insufficient_credit",
});

/** classifyMedia decides what to do about a media node error and how to report it (the Go client's table). */
export function classifyMedia(mediaCode: string, mediaMessage: string, closeCode: number | undefined): { action: MediaAction; error: RtcError } {
  const debug: Record<string, unknown> = { media_code: mediaCode };
  if (mediaMessage) debug["media_message"] = mediaMessage;
  if (closeCode !== undefined) debug["close_code"] = closeCode;
  switch (mediaCode) {
    case "token_invalid":
      return { action: "reexchange", error: new RtcError("authentication_failed", "the media node refused the media token", debug) };
    case "token_expired":
      return { action: "reexchange", error: new RtcError("token_expired", "the media token expired before the join", debug) };
    case "room_full":
    case "participant_limit_reached":
      return { action: "fail", error: new RtcError("participant_limit_reached", "the room is full", debug) };
    case "insufficient_credit":
      return { action: "fail", error: new RtcError("insufficient_credit", "the workspace is out of credit", debug) };
    case "session_superseded":
      return { action: "end", error: new RtcError("connection_lost", "a newer session of this participant took over", debug) };
    case "bad_message":
      return { action: "fail", error: new RtcError("unknown", "the media node refused a message of this SDK", debug) };
    case "replaced":
      return { action: "end", error: new RtcError("connection_lost", "a newer connection of this participant took over", debug) };
    case "removed":
      return { action: "end", error: new RtcError("permission_denied", "the participant was removed from the room", debug) };
    case "room_closed":
      return { action: "end", error: new RtcError("room_ended", "the room ended", debug) };
    case "node_shutdown":
      return { action: "reconnect", error: new RtcError("service_unavailable", "the media node is shutting down", debug) };
    default: // join_timeout, heartbeat_timeout, slow_consumer, an unknown code
      return { action: "reconnect", error: new RtcError("connection_lost", "the media connection was lost", debug) };
  }
}

/**
 * errorFromMedia maps an error of getUserMedia or getDisplayMedia (a
 * DOMException, by name) to a normalized error. The browser's own name
 * and message are kept in debug only.
 */
export function errorFromMedia(err: unknown, what: string): RtcError {
  if (err instanceof RtcError) return err;
  const name = err && typeof err === "object" && "name" in err ? String((err as { name: unknown }).name) : "";
  const msg = err && typeof err === "object" && "message" in err ? String((err as { message: unknown }).message) : String(err);
  const debug = { dom_error: name, dom_message: msg };
  switch (name) {
    case "NotAllowedError":
    case "PermissionDeniedError": // older Chrome
    case "SecurityError": // blocked by a permissions policy or an insecure page
      return new RtcError("media_permission_denied", `permission to use the ${what} was denied`, debug);
    case "NotFoundError":
    case "DevicesNotFoundError":
    case "OverconstrainedError": // no device satisfies the constraints (e.g. a deviceId that is gone)
      return new RtcError("device_not_found", `no ${what} was found`, debug);
    case "NotReadableError":
    case "TrackStartError":
    case "AbortError": // Firefox: the device could not be started
      return new RtcError("device_in_use", `the ${what} is in use or could not be started`, debug);
    case "NotSupportedError":
      return new RtcError("unsupported_platform", `this browser cannot capture the ${what}`, debug);
    case "TypeError":
      return new RtcError("invalid_request", `invalid constraints for the ${what}`, debug);
    default:
      return new RtcError("unknown", `the ${what} could not be opened`, debug);
  }
}

/** Why a connect step was aborted. */
export const TIMEOUT_REASON = "rtcd-web: connect exceeded its deadline";

/**
 * errorFromTransport maps a failed fetch or WebSocket, or an abort, to a
 * normalized error. media says whether it happened on the media connection
 * (connection_failed) or on the API (network_unavailable: the browser
 * could not reach it, which includes a CORS refusal and being offline).
 * timedOut says the 15-second deadline aborted it.
 */
export function errorFromTransport(err: unknown, media: boolean, timedOut: boolean): RtcError {
  if (err instanceof RtcError) return err;
  if (timedOut) return new RtcError("timeout", "connect did not complete within its deadline", {}, undefined, err);
  const name = err && typeof err === "object" && "name" in err ? String((err as { name: unknown }).name) : "";
  if (name === "AbortError") return new RtcError("unknown", "connect was cancelled", {}, undefined, err);
  if (media) return new RtcError("connection_failed", "could not connect to the media node", {}, undefined, err);
  return new RtcError("network_unavailable", "could not reach the API", {}, undefined, err);
}
