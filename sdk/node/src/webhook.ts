// Verifying webhook deliveries: X-RTC-Signature is "v1=" and the hex
// HMAC-SHA256, keyed with the endpoint's signing secret (whsec_… whole),
// of "<X-RTC-Timestamp>.<raw body>" (spec section 6).

import { createHmac, timingSafeEqual } from "node:crypto";
import type { WebhookEvent } from "./types.js";

export const HEADER_WEBHOOK_ID = "X-RTC-Webhook-Id";
export const HEADER_WEBHOOK_TIMESTAMP = "X-RTC-Timestamp";
export const HEADER_WEBHOOK_SIGNATURE = "X-RTC-Signature";

/** The largest accepted difference, either way, between a delivery's signed timestamp and now. */
export const DEFAULT_WEBHOOK_TOLERANCE_SECONDS = 300;

// Bounds on untrusted header input, as the server's verifier.
const maxTimestampDigits = 19;
const maxSignatureHeaderBytes = 1024;
const maxSignatures = 8;
const signatureHexLength = 64;

/** Why verifyWebhook refused a delivery. */
export type WebhookVerificationReason =
  /** A header is missing or not in the documented format, or the verified body is not an event. */
  | "malformed"
  /** No v1 signature matches the body and timestamp under the secret (forged, altered, or another secret). */
  | "signature_mismatch"
  /** Authentic, but signed too long ago or too far ahead (a replay, or a skewed clock). */
  | "timestamp_outside_tolerance"
  /** No signing secret was given. */
  | "empty_secret";

/** Thrown by verifyWebhook; answer such a delivery with a 4xx (400 or 401) and do not process it. */
export class WebhookVerificationError extends Error {
  override readonly name = "WebhookVerificationError";
  readonly reason: WebhookVerificationReason;
  constructor(reason: WebhookVerificationReason, detail?: string) {
    super(`rtcd: webhook ${reason.replaceAll("_", " ")}${detail === undefined ? "" : `: ${detail}`}`);
    this.reason = reason;
  }
}

/**
 * The request headers of a delivery: a fetch Headers object, or Node's
 * IncomingHttpHeaders (lower-case names; several values as an array).
 */
export type WebhookHeaders = Headers | Readonly<Record<string, string | readonly string[] | undefined>>;

/** Options of verifyWebhook. */
export interface VerifyWebhookOptions {
  /** Seconds; 0 or less means DEFAULT_WEBHOOK_TOLERANCE_SECONDS (replay protection cannot be switched off). */
  toleranceSeconds?: number | undefined;
  /** The verifier's clock, for tests: a Date or milliseconds since the epoch. Default now. */
  now?: Date | number | undefined;
}

function header(headers: WebhookHeaders, name: string): string {
  if (typeof (headers as Headers).get === "function") {
    return (headers as Headers).get(name) ?? "";
  }
  const lower = name.toLowerCase();
  for (const [k, v] of Object.entries(headers as Record<string, string | readonly string[] | undefined>)) {
    if (k.toLowerCase() !== lower || v === undefined) continue;
    // Several lines (some proxies split a comma-separated value) are joined back with commas.
    return typeof v === "string" ? v : v.join(",");
  }
  return "";
}

function mac(secret: string, timestamp: string, body: Uint8Array): Buffer {
  return createHmac("sha256", secret).update(timestamp).update(".").update(body).digest();
}

function bytesOf(body: Uint8Array | string): Uint8Array {
  return typeof body === "string" ? Buffer.from(body, "utf8") : body;
}

/**
 * The X-RTC-Signature value rtcd sends for body signed at timestamp (Unix
 * seconds). Useful to test a receiver.
 */
export function signWebhook(secret: string, timestamp: number, body: Uint8Array | string): string {
  return "v1=" + mac(secret, String(Math.trunc(timestamp)), bytesOf(body)).toString("hex");
}

function parseSignatures(value: string): Buffer[] {
  if (value === "" || value.length > maxSignatureHeaderBytes) throw new WebhookVerificationError("malformed", `${HEADER_WEBHOOK_SIGNATURE} is missing or too long`);
  const entries = value.split(",");
  if (entries.length > maxSignatures) throw new WebhookVerificationError("malformed", `more than ${maxSignatures} signatures`);
  const out: Buffer[] = [];
  for (const entry of entries) {
    const trimmed = entry.trim();
    const eq = trimmed.indexOf("=");
    const scheme = eq < 0 ? "" : trimmed.slice(0, eq);
    const hex = eq < 0 ? "" : trimmed.slice(eq + 1);
    if (scheme === "" || hex === "") throw new WebhookVerificationError("malformed", `signature entry ${JSON.stringify(trimmed)}`);
    if (scheme !== "v1") continue; // a later scheme, sent alongside v1
    if (hex.length !== signatureHexLength || !/^[0-9a-fA-F]+$/.test(hex)) throw new WebhookVerificationError("malformed", "a v1 signature is not 64 hex digits");
    out.push(Buffer.from(hex, "hex"));
  }
  if (out.length === 0) throw new WebhookVerificationError("malformed", "no v1 signature");
  return out;
}

/**
 * Verifies a delivery and returns its event. `body` must be the raw bytes
 * received (a Buffer or Uint8Array; a string only if it is the exact text
 * received), never re-encoded JSON. Any v1 entry of X-RTC-Signature passing
 * is enough (several are sent while a secret is replaced; other schemes are
 * ignored); signatures are compared in constant time, and the signature is
 * checked before the timestamp, which must be within the tolerance (5
 * minutes by default) either way. Throws WebhookVerificationError.
 */
export function verifyWebhook(secret: string, body: Uint8Array | string, headers: WebhookHeaders, options: VerifyWebhookOptions = {}): WebhookEvent {
  if (typeof secret !== "string" || secret === "") throw new WebhookVerificationError("empty_secret");
  const timestamp = header(headers, HEADER_WEBHOOK_TIMESTAMP);
  if (timestamp === "" || timestamp.length > maxTimestampDigits || !/^[0-9]+$/.test(timestamp)) {
    throw new WebhookVerificationError("malformed", `${HEADER_WEBHOOK_TIMESTAMP} must be decimal Unix seconds`);
  }
  const candidates = parseSignatures(header(headers, HEADER_WEBHOOK_SIGNATURE));
  const raw = bytesOf(body);
  // The signed content uses the header value exactly as received.
  const expected = mac(secret, timestamp, raw);
  let matched = false;
  for (const candidate of candidates) {
    // Every candidate is compared, so the time taken does not depend on which one matched.
    if (timingSafeEqual(expected, candidate)) matched = true;
  }
  if (!matched) throw new WebhookVerificationError("signature_mismatch");

  let tolerance = options.toleranceSeconds ?? DEFAULT_WEBHOOK_TOLERANCE_SECONDS;
  if (!(tolerance > 0)) tolerance = DEFAULT_WEBHOOK_TOLERANCE_SECONDS;
  const nowMs = options.now === undefined ? Date.now() : typeof options.now === "number" ? options.now : options.now.getTime();
  const skewSeconds = nowMs / 1000 - Number(timestamp);
  if (skewSeconds > tolerance || skewSeconds < -tolerance) throw new WebhookVerificationError("timestamp_outside_tolerance");

  let event: unknown;
  try {
    event = JSON.parse(Buffer.from(raw).toString("utf8"));
  } catch (err) {
    throw new WebhookVerificationError("malformed", `the body is not JSON: ${String(err)}`);
  }
  const e = event as { id?: unknown; type?: unknown; data?: unknown } | null;
  if (typeof e !== "object" || e === null || typeof e.id !== "string" || e.id === "" || typeof e.type !== "string" || e.type === "" ||
    typeof e.data !== "object" || e.data === null) {
    throw new WebhookVerificationError("malformed", "the body is not an event");
  }
  return e as WebhookEvent;
}
