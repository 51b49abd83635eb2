/**
 * rtcd's server SDK for Node.js (20 or later): the rtcd API v0.1 with a
 * secret API key, every public /v1 route except /v1/connect (client SDKs
 * only) and the dashboard routes, and the verification of signed webhook
 * deliveries. No runtime dependencies: Node's fetch and crypto.
 */
export {
  Client, DEFAULT_BASE_URL, DEFAULT_RETRIES, DEFAULT_TIMEOUT_MS, MAX_PAGE_LIMIT, MAX_RESPONSE_BYTES, MAX_RETRY_AFTER_SECONDS,
  defaultBackoff, normalizeBaseURL,
} from "./client.js";
export type { Backoff, ClientOptions, RequestOptions } from "./client.js";
export { APIError, IdempotencyNotSupportedError } from "./errors.js";
export { readAll } from "./pagination.js";
export type { Collected } from "./pagination.js";
export type { ErrorCode } from "./errors.js";
export {
  DEFAULT_WEBHOOK_TOLERANCE_SECONDS, HEADER_WEBHOOK_ID, HEADER_WEBHOOK_SIGNATURE, HEADER_WEBHOOK_TIMESTAMP,
  WebhookVerificationError, signWebhook, verifyWebhook,
} from "./webhook.js";
export type { VerifyWebhookOptions, WebhookHeaders, WebhookVerificationReason } from "./webhook.js";
export { EVENT_TYPES, SCOPES } from "./types.js";
export type * from "./types.js";
export { VERSION } from "./version.js";
