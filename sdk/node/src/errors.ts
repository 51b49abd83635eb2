// Errors: the API's error envelope as APIError, with the Retry-After value.

/** The API's error codes (spec section 7): stable, part of the contract. Branch on them. */
export type ErrorCode =
  | "invalid_request"
  | "authentication_failed"
  | "permission_denied"
  | "rate_limited"
  | "insufficient_credit"
  | "quota_exceeded"
  | "room_not_found"
  | "room_expired"
  | "room_ended"
  | "participant_not_found"
  | "participant_token_invalid"
  | "participant_token_expired"
  | "api_key_not_found"
  | "api_key_limit_reached"
  | "webhook_endpoint_not_found"
  | "webhook_endpoint_limit_reached"
  | "conflict"
  | "idempotency_in_progress"
  | "internal_error"
  | "service_unavailable"
  // Used by the dashboard routes only; listed for completeness.
  | "last_project"
  | "project_has_active_rooms";

/** Bounds how much of a body that is not the envelope goes into a message. */
const maxForeignBodyChars = 200;

/**
 * An error the API answered, in its error envelope. `code` is one of
 * ErrorCode, or "" when the answer was not the envelope (a proxy's 502
 * page); `message` is for humans and may change between releases.
 */
export class APIError extends Error {
  override readonly name = "APIError";
  /** The HTTP status. */
  readonly status: number;
  /** The envelope's code; "" when the body was not the envelope. */
  readonly code: ErrorCode | "";
  /** The request's id (req_…); quote it in support requests. */
  readonly requestId: string;
  /**
   * The envelope's details (never null): field for invalid_request,
   * required_scope for permission_denied, limit_name for rate_limited and
   * quota_exceeded, reason for conflict, ….
   */
  readonly details: Readonly<Record<string, unknown>>;
  /** The Retry-After header in seconds (429, some 503), else null. */
  readonly retryAfter: number | null;
  /** The API's own message, without the status, code and request id that `message` adds. */
  readonly apiMessage: string;

  constructor(init: {
    status: number;
    code: ErrorCode | "";
    message: string;
    requestId: string;
    details: Record<string, unknown>;
    retryAfter: number | null;
  }) {
    let text = `rtcd: ${init.status}`;
    if (init.code !== "") text += ` ${init.code}`;
    if (init.message !== "") text += `: ${init.message}`;
    if (init.requestId !== "") text += ` (request ${init.requestId})`;
    super(text);
    this.status = init.status;
    this.code = init.code;
    this.requestId = init.requestId;
    this.details = init.details;
    this.retryAfter = init.retryAfter;
    this.apiMessage = init.message;
  }

}

/** Thrown, without sending anything, when idempotencyKey is given to a call whose route takes none. */
export class IdempotencyNotSupportedError extends Error {
  override readonly name = "IdempotencyNotSupportedError";
  constructor(call: string) {
    super(`rtcd: ${call} takes no Idempotency-Key (only the creates of rooms, participants, API keys and webhook endpoints do)`);
  }
}

/** Parses Retry-After: delay seconds or an HTTP date; null when absent or past. */
export function parseRetryAfter(value: string | null, now: number = Date.now()): number | null {
  if (value === null) return null;
  const v = value.trim();
  if (v === "") return null;
  if (/^[0-9]+$/.test(v)) return Number(v);
  const at = Date.parse(v);
  if (Number.isNaN(at) || at <= now) return null;
  return Math.ceil((at - now) / 1000);
}

/** Builds the APIError of a non-2xx answer. */
export function apiErrorFrom(status: number, headers: Headers, body: string): APIError {
  let code: ErrorCode | "" = "";
  let message = "";
  let requestId = headers.get("X-Request-Id") ?? "";
  let details: Record<string, unknown> = {};
  let envelope: unknown;
  try {
    envelope = JSON.parse(body);
  } catch {
    envelope = undefined;
  }
  const e = isObject(envelope) ? envelope["error"] : undefined;
  if (isObject(e) && typeof e["code"] === "string" && e["code"] !== "") {
    code = e["code"] as ErrorCode;
    message = typeof e["message"] === "string" ? e["message"] : "";
    if (typeof e["request_id"] === "string" && e["request_id"] !== "") requestId = e["request_id"];
    if (isObject(e["details"])) details = e["details"];
  } else {
    message = body.trim();
    if (message.length > maxForeignBodyChars) message = message.slice(0, maxForeignBodyChars) + "…";
    if (message === "") message = `HTTP ${status}`;
  }
  return new APIError({ status, code, message, requestId, details, retryAfter: parseRetryAfter(headers.get("Retry-After")) });
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}
