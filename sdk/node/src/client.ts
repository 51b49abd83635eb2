// The Client: one secret API key, the base address rule of spec 9.5,
// retries of safe requests, Idempotency-Key support, and one method per
// public /v1 route except /v1/connect and the dashboard's (spec 9.6).

import { randomBytes } from "node:crypto";
import { APIError, IdempotencyNotSupportedError, apiErrorFrom } from "./errors.js";
import type {
  APIKey, AuditLogEntry, Balance, CreateAPIKeyParams, CreateParticipantParams, CreateRoomParams,
  CreateTopupParams, CreateWebhookEndpointParams, CreatedAPIKey, CreatedWebhookEndpoint, LedgerEntry,
  ListParams, Page, Participant, ParticipantSession, Pricing, ProjectLimits, Room, SystemInfo, Topup,
  UsageDaily, UsageParams, UsageSummary, WebhookDelivery, WebhookEndpoint,
} from "./types.js";
import { VERSION } from "./version.js";

/** rtcd serve's default --listen address; /v1 is appended. */
export const DEFAULT_BASE_URL = "http://127.0.0.1:8080";
/** How many times a retryable request is retried by default (so at most 3 attempts). */
export const DEFAULT_RETRIES = 2;
/** Bounds each attempt, in milliseconds. */
export const DEFAULT_TIMEOUT_MS = 60_000;
/** The longest Retry-After (seconds) defaultBackoff waits; a longer one is returned as the APIError at once. */
export const MAX_RETRY_AFTER_SECONDS = 60;
/** The largest page the list calls can ask for. */
export const MAX_PAGE_LIMIT = 100;
/** Bounds the response body the client reads (16 MiB); a longer one is an error. */
export const MAX_RESPONSE_BYTES = 16 << 20;
const maxResponseBytes = MAX_RESPONSE_BYTES;

/**
 * Returns how long to wait, in milliseconds, before retry number `retry`
 * (1 for the first). `retryAfterSeconds` is the Retry-After the server sent
 * with the failed attempt (null when none, e.g. after a connection error).
 * A negative result means "do not retry": the call throws the last error.
 */
export type Backoff = (retry: number, retryAfterSeconds: number | null) => number;

/**
 * Waits the server's Retry-After when it sent one (up to
 * MAX_RETRY_AFTER_SECONDS; a longer one is not waited for: the call throws
 * the APIError with its retryAfter), else exponentially longer with jitter:
 * about 0.5 s, 1 s, 2 s, … capped at 8 s.
 */
export const defaultBackoff: Backoff = (retry, retryAfterSeconds) => {
  if (retryAfterSeconds !== null && retryAfterSeconds > MAX_RETRY_AFTER_SECONDS) return -1;
  if (retryAfterSeconds !== null && retryAfterSeconds > 0) return retryAfterSeconds * 1000;
  const ms = 500 * 2 ** Math.min(Math.max(retry - 1, 0), 4);
  return ms / 2 + Math.random() * (ms / 2); // full jitter on the upper half
};

/** Options of new Client. */
export interface ClientOptions {
  /** A secret API key (sk_live_…), sent as Authorization: Bearer. */
  apiKey: string;
  /** The API address (spec 9.5: /v1 is appended when it has no version segment). Default DEFAULT_BASE_URL. */
  baseURL?: string | undefined;
  /** Retries of a retryable request (0: none). Default DEFAULT_RETRIES. */
  retries?: number | undefined;
  /** The wait before each retry. Default defaultBackoff. */
  backoff?: Backoff | undefined;
  /** Bounds each attempt, in milliseconds. Default DEFAULT_TIMEOUT_MS. */
  timeoutMs?: number | undefined;
  /** Your product token (for example "acme-backend/2.3"), put in front of the SDK's in User-Agent. */
  userAgent?: string | undefined;
  /** The fetch the requests go through (a proxy, a test double). Default Node's global fetch. */
  fetch?: typeof fetch | undefined;
}

/** Options of one call. */
export interface RequestOptions {
  /**
   * Sends Idempotency-Key (1 to 255 printable ASCII characters). Only the
   * creates of rooms, participants, API keys and webhook endpoints take it;
   * any other call throws IdempotencyNotSupportedError without sending. A
   * repeated create with the same key, path and body within 24 hours returns
   * the stored answer instead of creating again. With retries on and no key
   * given, those creates get a random key, so the SDK's own retries are safe.
   */
  idempotencyKey?: string | undefined;
  /** Sends X-Request-Id (1 to 64 of A–Z a–z 0–9 _ - .), which the server uses as the request's id. */
  requestId?: string | undefined;
  /** Cancels the call (and any wait before a retry). */
  signal?: AbortSignal | undefined;
}

/** One API call. */
interface Call {
  name: string; // the method, for errors
  method: "GET" | "POST" | "DELETE";
  path: string; // below the base URL, starting with "/"
  query?: Record<string, string> | undefined;
  body?: unknown;
  idempotent?: boolean; // the route takes Idempotency-Key
}

const versionSegment = /^v[0-9]+$/;

/**
 * Applies the base address rule of spec 9.5: /v1 is appended when the
 * address's path does not end in a version segment (/v1, /v2, …), which is
 * kept as given; trailing slashes are ignored. http and https only; no
 * query, fragment or user information.
 */
export function normalizeBaseURL(address: string): string {
  let u: URL;
  try {
    u = new URL(address.trim());
  } catch {
    throw new TypeError(`rtcd: invalid base URL ${JSON.stringify(address)}`);
  }
  if ((u.protocol !== "http:" && u.protocol !== "https:") || u.host === "") {
    throw new TypeError(`rtcd: invalid base URL ${JSON.stringify(address)}: want http:// or https:// and a host`);
  }
  if (u.username !== "" || u.password !== "" || u.search !== "" || u.hash !== "" || address.includes("?") || address.includes("#")) {
    throw new TypeError(`rtcd: invalid base URL ${JSON.stringify(address)}: no user information, query or fragment allowed`);
  }
  let path = u.pathname.replace(/\/+$/, "");
  const last = path.slice(path.lastIndexOf("/") + 1);
  if (!versionSegment.test(last)) path += "/v1";
  return `${u.protocol}//${u.host}${path}`;
}

function newIdempotencyKey(): string {
  return "sdk_" + randomBytes(16).toString("hex");
}

function pathID(name: string, id: string): string {
  if (typeof id !== "string" || id === "") throw new TypeError(`rtcd: ${name} is empty`);
  return encodeURIComponent(id);
}

function limitQuery(params: ListParams | undefined): Record<string, string> | undefined {
  return params?.limit === undefined ? undefined : { limit: String(params.limit) };
}

function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/** A wire list: the envelope every list call answers with. */
interface WireList<T> {
  data: T[] | null;
  page: { has_more: boolean; next_cursor?: string | null };
}

function toPage<T>(w: WireList<T>): Page<T> {
  const data = w.data ?? [];
  return {
    data,
    hasMore: w.page.has_more,
    nextCursor: w.page.next_cursor ?? null,
    [Symbol.iterator]: () => data[Symbol.iterator](),
  };
}

/**
 * Calls the rtcd API (v0.1) with one secret API key. Safe for concurrent
 * use; make one and share it. Never use a secret key in a browser.
 */
export class Client {
  /** The address resource paths are appended to, ending in its version segment (…/v1). */
  readonly baseURL: string;
  readonly #apiKey: string;
  readonly #retries: number;
  readonly #backoff: Backoff;
  readonly #timeoutMs: number;
  readonly #userAgent: string;
  readonly #fetch: typeof fetch;

  constructor(options: ClientOptions) {
    if (typeof options?.apiKey !== "string" || options.apiKey === "") throw new TypeError("rtcd: empty API key");
    const retries = options.retries ?? DEFAULT_RETRIES;
    if (!Number.isInteger(retries) || retries < 0) throw new RangeError(`rtcd: retries must be a non-negative integer, got ${retries}`);
    const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    if (!(timeoutMs > 0)) throw new RangeError(`rtcd: timeoutMs must be positive, got ${timeoutMs}`);
    this.baseURL = normalizeBaseURL(options.baseURL ?? DEFAULT_BASE_URL);
    this.#apiKey = options.apiKey;
    this.#retries = retries;
    this.#backoff = options.backoff ?? defaultBackoff;
    this.#timeoutMs = timeoutMs;
    const own = `rtcd-node-server/${VERSION}`;
    this.#userAgent = options.userAgent?.trim() ? `${options.userAgent.trim()} ${own}` : own;
    this.#fetch = options.fetch ?? globalThis.fetch;
  }

  /** Describes the client without its API key. */
  toString(): string {
    return `rtcd.Client{base=${this.baseURL} key=[redacted]}`;
  }

  /** Keeps the key out of JSON.stringify and util.inspect. */
  toJSON(): { baseURL: string; apiKey: string } {
    return { baseURL: this.baseURL, apiKey: "[redacted]" };
  }

  [Symbol.for("nodejs.util.inspect.custom")](): string {
    return this.toString();
  }

  // --- rooms ----------------------------------------------------------------

  /** Creates a room (POST /v1/rooms, rooms:write). Takes idempotencyKey. */
  createRoom(params: CreateRoomParams = {}, opts?: RequestOptions): Promise<Room> {
    return this.#do({ name: "createRoom", method: "POST", path: "/rooms", body: params, idempotent: true }, opts);
  }

  /** Lists the project's rooms, newest first, all statuses (GET /v1/rooms, rooms:read). */
  listRooms(params?: ListParams, opts?: RequestOptions): Promise<Page<Room>> {
    return this.#list({ name: "listRooms", method: "GET", path: "/rooms", query: limitQuery(params) }, opts);
  }

  /** Returns one room (GET /v1/rooms/{room_id}, rooms:read). */
  getRoom(roomId: string, opts?: RequestOptions): Promise<Room> {
    return this.#do({ name: "getRoom", method: "GET", path: `/rooms/${pathID("roomId", roomId)}` }, opts);
  }

  /** Ends a room and returns it in its new state, ending or ended (DELETE /v1/rooms/{room_id}, rooms:write). Idempotent. */
  deleteRoom(roomId: string, opts?: RequestOptions): Promise<Room> {
    return this.#do({ name: "deleteRoom", method: "DELETE", path: `/rooms/${pathID("roomId", roomId)}` }, opts);
  }

  // --- participants -----------------------------------------------------------

  /**
   * Creates a participant session in a room and returns it with its token
   * (POST /v1/rooms/{room_id}/participants, participants:write). Takes
   * idempotencyKey. While the workspace is out of credit: 402 insufficient_credit.
   */
  createParticipant(roomId: string, params: CreateParticipantParams = {}, opts?: RequestOptions): Promise<ParticipantSession> {
    return this.#do({ name: "createParticipant", method: "POST", path: `/rooms/${pathID("roomId", roomId)}/participants`, body: params, idempotent: true }, opts);
  }

  /** Lists a room's participants, newest first (GET /v1/rooms/{room_id}/participants, participants:read). */
  listParticipants(roomId: string, params?: ListParams, opts?: RequestOptions): Promise<Page<Participant>> {
    return this.#list({ name: "listParticipants", method: "GET", path: `/rooms/${pathID("roomId", roomId)}/participants`, query: limitQuery(params) }, opts);
  }

  /** Returns one participant (GET /v1/rooms/{room_id}/participants/{participant_id}, participants:read). */
  getParticipant(roomId: string, participantId: string, opts?: RequestOptions): Promise<Participant> {
    return this.#do({ name: "getParticipant", method: "GET", path: `/rooms/${pathID("roomId", roomId)}/participants/${pathID("participantId", participantId)}` }, opts);
  }

  /**
   * Removes a participant: its token is refused from then on (DELETE
   * /v1/rooms/{room_id}/participants/{participant_id}, participants:write).
   * Returns it in its new state. Idempotent.
   */
  deleteParticipant(roomId: string, participantId: string, opts?: RequestOptions): Promise<Participant> {
    return this.#do({ name: "deleteParticipant", method: "DELETE", path: `/rooms/${pathID("roomId", roomId)}/participants/${pathID("participantId", participantId)}` }, opts);
  }

  // --- API keys ---------------------------------------------------------------

  /** Creates a secret API key; the secret is in the answer only (POST /v1/api-keys, api_keys:write). Takes idempotencyKey. */
  createAPIKey(params: CreateAPIKeyParams, opts?: RequestOptions): Promise<CreatedAPIKey> {
    return this.#do({ name: "createAPIKey", method: "POST", path: "/api-keys", body: params, idempotent: true }, opts);
  }

  /** Lists the project's keys, active and revoked, newest first (GET /v1/api-keys, api_keys:read). */
  listAPIKeys(params?: ListParams, opts?: RequestOptions): Promise<Page<APIKey>> {
    return this.#list({ name: "listAPIKeys", method: "GET", path: "/api-keys", query: limitQuery(params) }, opts);
  }

  /**
   * Revokes a key (DELETE /v1/api-keys/{key_id}, api_keys:write). Idempotent.
   * The key the client uses cannot revoke itself (409 conflict, details.reason cannot_revoke_current_key).
   */
  revokeAPIKey(keyId: string, opts?: RequestOptions): Promise<APIKey> {
    return this.#do({ name: "revokeAPIKey", method: "DELETE", path: `/api-keys/${pathID("keyId", keyId)}` }, opts);
  }

  // --- project and system -------------------------------------------------------

  /** Returns the project's effective limits (GET /v1/project/limits, project:read). */
  getProjectLimits(opts?: RequestOptions): Promise<ProjectLimits> {
    return this.#do({ name: "getProjectLimits", method: "GET", path: "/project/limits" }, opts);
  }

  /** Lists the project's audit log, newest first (GET /v1/audit-logs, audit_logs:read). */
  listAuditLogs(params?: ListParams, opts?: RequestOptions): Promise<Page<AuditLogEntry>> {
    return this.#list({ name: "listAuditLogs", method: "GET", path: "/audit-logs", query: limitQuery(params) }, opts);
  }

  /** Identifies the deployment (GET /v1/system/info; any valid key). */
  getSystemInfo(opts?: RequestOptions): Promise<SystemInfo> {
    return this.#do({ name: "getSystemInfo", method: "GET", path: "/system/info" }, opts);
  }

  // --- usage --------------------------------------------------------------------

  /** The project's finalized usage from day `from` to day `to`, both included (GET /v1/usage/summary, usage:read). */
  getUsageSummary(params: UsageParams, opts?: RequestOptions): Promise<UsageSummary> {
    return this.#do({ name: "getUsageSummary", method: "GET", path: "/usage/summary", query: { from: params.from, to: params.to } }, opts);
  }

  /** The project's finalized usage per day, oldest first (GET /v1/usage/daily, usage:read). */
  async getUsageDaily(params: UsageParams, opts?: RequestOptions): Promise<UsageDaily> {
    const out = await this.#do<UsageDaily>({ name: "getUsageDaily", method: "GET", path: "/usage/daily", query: { from: params.from, to: params.to } }, opts);
    out.data ??= [];
    return out;
  }

  // --- billing --------------------------------------------------------------------

  /** The workspace's balance (GET /v1/billing/balance, billing:read). */
  getBalance(opts?: RequestOptions): Promise<Balance> {
    return this.#do({ name: "getBalance", method: "GET", path: "/billing/balance" }, opts);
  }

  /** The price, the credit policy and the workspace's credit state (GET /v1/billing/pricing, billing:read). */
  getPricing(opts?: RequestOptions): Promise<Pricing> {
    return this.#do({ name: "getPricing", method: "GET", path: "/billing/pricing" }, opts);
  }

  /** Lists the workspace's ledger, newest first (GET /v1/billing/ledger, billing:read). */
  listLedgerEntries(params?: ListParams, opts?: RequestOptions): Promise<Page<LedgerEntry>> {
    return this.#list({ name: "listLedgerEntries", method: "GET", path: "/billing/ledger", query: limitQuery(params) }, opts);
  }

  /**
   * Starts a top-up; send the payer to its authorize_url (POST
   * /v1/billing/topups, billing:write). The route takes no Idempotency-Key,
   * so this call is never retried: a repeated call creates a second top-up
   * (an unpaid one simply expires).
   */
  createTopup(params: CreateTopupParams, opts?: RequestOptions): Promise<Topup> {
    return this.#do({ name: "createTopup", method: "POST", path: "/billing/topups", body: params }, opts);
  }

  /** Lists the workspace's top-ups, newest first (GET /v1/billing/topups, billing:read). */
  listTopups(params?: ListParams, opts?: RequestOptions): Promise<Page<Topup>> {
    return this.#list({ name: "listTopups", method: "GET", path: "/billing/topups", query: limitQuery(params) }, opts);
  }

  /** Returns one top-up (GET /v1/billing/topups/{payment_id}, billing:read). An unknown id is 404 invalid_request. */
  getTopup(paymentId: string, opts?: RequestOptions): Promise<Topup> {
    return this.#do({ name: "getTopup", method: "GET", path: `/billing/topups/${pathID("paymentId", paymentId)}` }, opts);
  }

  // --- webhook endpoints ------------------------------------------------------------

  /**
   * Registers a webhook endpoint and returns it with its signing secret,
   * shown only here (POST /v1/webhook-endpoints, webhooks:write). Takes idempotencyKey.
   */
  createWebhookEndpoint(params: CreateWebhookEndpointParams, opts?: RequestOptions): Promise<CreatedWebhookEndpoint> {
    return this.#do({ name: "createWebhookEndpoint", method: "POST", path: "/webhook-endpoints", body: params, idempotent: true }, opts);
  }

  /** Lists the project's endpoints, enabled and disabled, newest first (GET /v1/webhook-endpoints, webhooks:read). */
  listWebhookEndpoints(params?: ListParams, opts?: RequestOptions): Promise<Page<WebhookEndpoint>> {
    return this.#list({ name: "listWebhookEndpoints", method: "GET", path: "/webhook-endpoints", query: limitQuery(params) }, opts);
  }

  /** Disables an endpoint for good (DELETE /v1/webhook-endpoints/{endpoint_id}, webhooks:write). Idempotent. */
  disableWebhookEndpoint(endpointId: string, opts?: RequestOptions): Promise<WebhookEndpoint> {
    return this.#do({ name: "disableWebhookEndpoint", method: "DELETE", path: `/webhook-endpoints/${pathID("endpointId", endpointId)}` }, opts);
  }

  /** Lists an endpoint's deliveries, newest first (GET /v1/webhook-endpoints/{endpoint_id}/deliveries, webhooks:read). */
  listWebhookDeliveries(endpointId: string, params?: ListParams, opts?: RequestOptions): Promise<Page<WebhookDelivery>> {
    return this.#list({ name: "listWebhookDeliveries", method: "GET", path: `/webhook-endpoints/${pathID("endpointId", endpointId)}/deliveries`, query: limitQuery(params) }, opts);
  }

  /**
   * Redelivers a dead delivery, or brings a retrying one's next attempt
   * forward, and returns it (POST
   * /v1/webhook-endpoints/{endpoint_id}/deliveries/{delivery_id}/retry,
   * webhooks:write). A succeeded delivery, or one of a disabled endpoint, is
   * 409 conflict. Never retried automatically.
   */
  retryWebhookDelivery(endpointId: string, deliveryId: string, opts?: RequestOptions): Promise<WebhookDelivery> {
    return this.#do({ name: "retryWebhookDelivery", method: "POST", path: `/webhook-endpoints/${pathID("endpointId", endpointId)}/deliveries/${pathID("deliveryId", deliveryId)}/retry` }, opts);
  }

  // --- transport ---------------------------------------------------------------------

  async #list<T>(call: Call, opts: RequestOptions | undefined): Promise<Page<T>> {
    return toPage(await this.#do<WireList<T>>(call, opts));
  }

  /** Performs a call, retrying what is safe to repeat, and decodes a 2xx body. */
  async #do<T>(call: Call, opts: RequestOptions = {}): Promise<T> {
    let key = opts.idempotencyKey;
    if (key !== undefined && !call.idempotent) throw new IdempotencyNotSupportedError(call.name);
    if (call.idempotent && key === undefined && this.#retries > 0) key = newIdempotencyKey();
    let url = this.baseURL + call.path;
    if (call.query !== undefined) url += "?" + new URLSearchParams(call.query).toString();
    const payload = call.body === undefined ? undefined : JSON.stringify(call.body ?? {});
    const headers: Record<string, string> = {
      Authorization: `Bearer ${this.#apiKey}`,
      Accept: "application/json",
      "User-Agent": this.#userAgent,
    };
    if (payload !== undefined) headers["Content-Type"] = "application/json";
    if (key !== undefined) headers["Idempotency-Key"] = key;
    if (opts.requestId !== undefined) headers["X-Request-Id"] = opts.requestId;
    const retryable = call.method === "GET" || call.method === "DELETE" || key !== undefined;

    for (let attempt = 0; ; attempt++) {
      let failure: unknown;
      let retryAfter: number | null = null;
      let res: Answer | undefined;
      try {
        res = await this.#send(url, call.method, headers, payload, opts.signal);
      } catch (err) {
        if (!retryable || opts.signal?.aborted) throw err;
        failure = err; // a connection error or the attempt's timeout
      }
      if (res !== undefined) {
        if (res.status >= 200 && res.status < 300) return decode<T>(call, res.body);
        const apiErr = apiErrorFrom(res.status, res.headers, res.body);
        if (!retryable || !retryableStatus(apiErr)) throw apiErr;
        failure = apiErr;
        retryAfter = apiErr.retryAfter;
      }
      if (attempt >= this.#retries) throw failure;
      const wait = this.#backoff(attempt + 1, retryAfter);
      if (wait < 0) throw failure; // the backoff declined (e.g. Retry-After above MAX_RETRY_AFTER_SECONDS)
      if (wait > 0) {
        try {
          await sleep(wait, opts.signal);
        } catch {
          throw failure; // canceled during the wait: report what happened
        }
      }
    }
  }

  /** Sends one attempt, bounded by the timeout and the caller's signal. */
  async #send(url: string, method: string, headers: Record<string, string>, payload: string | undefined, signal: AbortSignal | undefined): Promise<Answer> {
    const timeout = AbortSignal.timeout(this.#timeoutMs);
    const res = await this.#fetch(url, {
      method,
      headers,
      body: payload ?? null,
      signal: signal === undefined ? timeout : AbortSignal.any([signal, timeout]),
      redirect: "error",
    });
    return { status: res.status, headers: res.headers, body: await readBounded(res, method) };
  }
}

/** One attempt's answer. */
interface Answer {
  status: number;
  headers: Headers;
  body: string;
}

/** Reads an answer's body as text, refusing one longer than maxResponseBytes. */
async function readBounded(res: Response, method: string): Promise<string> {
  if (res.body === null) return "";
  const reader = res.body.getReader();
  const chunks: Uint8Array[] = [];
  let total = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.byteLength;
    if (total > maxResponseBytes) {
      await reader.cancel();
      throw new Error(`rtcd: the ${method} answer is longer than ${maxResponseBytes} bytes`);
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks).toString("utf8");
}

/** Decodes a 2xx answer's JSON body. */
function decode<T>(call: Call, body: string): T {
  if (body === "") return undefined as T;
  try {
    return JSON.parse(body) as T;
  } catch (err) {
    throw new Error(`rtcd: decoding the ${call.method} ${call.path} answer: ${String(err)}`);
  }
}

/** Which API errors a safe request is retried after. */
function retryableStatus(e: APIError): boolean {
  if (e.status === 429 || e.status === 503) return true;
  // The first attempt (which the client gave up on) is still running on the
  // server; once it completes the same key replays its result.
  return e.status === 409 && e.code === "idempotency_in_progress";
}
