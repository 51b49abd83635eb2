/**
 * ReconnectPolicy bounds the automatic reconnect after a dropped media
 * connection: the Go client's policy (sdk/client/backoff.go), in
 * milliseconds. Missing fields take the defaults of
 * DEFAULT_RECONNECT_POLICY.
 *
 * Attempt n (from 1) waits d = min(maxDelayMs, initialDelayMs ×
 * multiplier^(n-1)), reduced by a random part of up to jitter × d (so it
 * waits between (1-jitter)×d and d), and at least the Retry-After of a
 * rate-limited or unavailable answer. The SDK gives up (state failed,
 * error connection_lost) after maxAttempts attempts, or when the next
 * attempt would start more than maxElapsedMs after the drop, whichever
 * comes first. Errors no retry can fix (the room ended, the participant
 * was removed, the participant token was refused or expired, no credit)
 * end the reconnect at once.
 */
export interface ReconnectPolicy {
  /** Wait before attempt 1; default 250. */
  initialDelayMs: number;
  /** Cap of one wait; default 10000. */
  maxDelayMs: number;
  /** Growth per attempt; default 2. */
  multiplier: number;
  /** Up to 1; default 0.5; negative: no jitter. */
  jitter: number;
  /** Attempts before giving up; default 10. Negative: never reconnect (a drop goes straight to failed). */
  maxAttempts: number;
  /** No attempt starts later than this after the drop; default 120000. */
  maxElapsedMs: number;
}

/**
 * The default policy: attempts after about 0.25, 0.5, 1, 2, 4, 8, 10, 10,
 * 10 and 10 seconds (each minus up to half for jitter), at most 10 attempts
 * within 2 minutes.
 */
export const DEFAULT_RECONNECT_POLICY: Readonly<ReconnectPolicy> = Object.freeze({
  initialDelayMs: 250,
  maxDelayMs: 10_000,
  multiplier: 2,
  jitter: 0.5,
  maxAttempts: 10,
  maxElapsedMs: 120_000,
});

/** withDefaults fills what p leaves out or sets out of range, as the Go client does. */
export function withDefaults(p: Partial<ReconnectPolicy> = {}): ReconnectPolicy {
  const d = DEFAULT_RECONNECT_POLICY;
  const num = (v: number | undefined): number => (typeof v === "number" && Number.isFinite(v) ? v : 0);
  const out: ReconnectPolicy = {
    initialDelayMs: num(p.initialDelayMs),
    maxDelayMs: num(p.maxDelayMs),
    multiplier: num(p.multiplier),
    jitter: num(p.jitter),
    maxAttempts: Math.trunc(num(p.maxAttempts)),
    maxElapsedMs: num(p.maxElapsedMs),
  };
  if (out.initialDelayMs <= 0) out.initialDelayMs = d.initialDelayMs;
  if (out.maxDelayMs <= 0) out.maxDelayMs = d.maxDelayMs;
  if (out.maxDelayMs < out.initialDelayMs) out.maxDelayMs = out.initialDelayMs;
  if (out.multiplier < 1) out.multiplier = d.multiplier;
  if (out.jitter === 0 || out.jitter > 1) out.jitter = d.jitter;
  else if (out.jitter < 0) out.jitter = 0;
  if (out.maxAttempts === 0) out.maxAttempts = d.maxAttempts;
  if (out.maxElapsedMs <= 0) out.maxElapsedMs = d.maxElapsedMs;
  return out;
}

/** backoffDelay is the wait in milliseconds before attempt n (n ≥ 1); rnd is uniform in [0, 1). */
export function backoffDelay(p: ReconnectPolicy, n: number, rnd: number): number {
  let base = p.initialDelayMs * Math.pow(p.multiplier, n - 1);
  if (!Number.isFinite(base) || base > p.maxDelayMs) base = p.maxDelayMs;
  return Math.floor(base * (1 - p.jitter * rnd));
}
