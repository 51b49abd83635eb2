// Focused tests without a server: the base address rule, the error
// envelope, retries and idempotency keys (with a fetch double), webhook
// verification, and that the key never prints.

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { inspect } from "node:util";
import { test } from "node:test";
import {
  APIError, Client, IdempotencyNotSupportedError, MAX_RESPONSE_BYTES, VERSION, WebhookVerificationError, defaultBackoff,
  normalizeBaseURL, readAll, signWebhook, verifyWebhook,
} from "../src/index.js";

test("VERSION is the package's version", () => {
  const pkg = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as { version: string };
  assert.equal(VERSION, pkg.version);
});

test("base address (spec 9.5)", () => {
  const cases: [string, string][] = [
    ["http://h", "http://h/v1"],
    ["http://h/", "http://h/v1"],
    ["http://h/v1", "http://h/v1"],
    ["http://h/v1/", "http://h/v1"],
    ["https://h:8443//", "https://h:8443/v1"],
    ["http://h/v2", "http://h/v2"],
    ["http://h/v10/", "http://h/v10"],
    ["http://h/prefix", "http://h/prefix/v1"],
    ["http://h/prefix/v1", "http://h/prefix/v1"],
    ["http://h/v1beta", "http://h/v1beta/v1"],
  ];
  for (const [given, want] of cases) assert.equal(normalizeBaseURL(given), want, given);
  for (const bad of ["ftp://h", "h:8080", "http://u:p@h", "http://h/?q=1", "http://h/#f", "http://h?", ""]) {
    assert.throws(() => normalizeBaseURL(bad), TypeError, bad);
  }
  assert.equal(new Client({ apiKey: "sk" }).baseURL, "http://127.0.0.1:8080/v1");
  assert.throws(() => new Client({ apiKey: "" }), TypeError);
  assert.throws(() => new Client({ apiKey: "sk", retries: -1 }), RangeError);
});

/** A fetch double answering from a list, recording each request. */
function fakeFetch(answers: (Response | Error)[]): { fetch: typeof fetch; requests: { url: string; init: RequestInit }[] } {
  const requests: { url: string; init: RequestInit }[] = [];
  const f: typeof fetch = async (input, init) => {
    requests.push({ url: String(input), init: init ?? {} });
    const next = answers.shift();
    if (next === undefined) throw new Error("no more answers");
    if (next instanceof Error) throw next;
    return next;
  };
  return { fetch: f, requests };
}

function envelope(status: number, code: string, headers: Record<string, string> = {}, details: object = {}): Response {
  return new Response(JSON.stringify({ error: { code, message: `a ${code}`, request_id: "req_abc", details } }),
    { status, headers: { "Content-Type": "application/json", "X-Request-Id": "req_abc", ...headers } });
}

const room = { object: "room", id: "room_x" };
const ok = (): Response => new Response(JSON.stringify(room), { status: 200 });

test("an error answer is an APIError with the envelope and retryAfter", async () => {
  const { fetch } = fakeFetch([envelope(429, "rate_limited", { "Retry-After": "7" }, { limit_name: "room_creates_per_minute" })]);
  const c = new Client({ apiKey: "sk", fetch, retries: 0 });
  const err = await c.createRoom().then(() => undefined, (e: unknown) => e);
  assert.ok(err instanceof APIError);
  assert.equal(err.status, 429);
  assert.equal(err.code, "rate_limited");
  assert.equal(err.apiMessage, "a rate_limited");
  assert.equal(err.requestId, "req_abc");
  assert.equal(err.retryAfter, 7);
  assert.equal(err.details["limit_name"], "room_creates_per_minute");
  assert.equal(err.message, "rtcd: 429 rate_limited: a rate_limited (request req_abc)");

  const proxy = fakeFetch([new Response("<html>bad gateway</html>", { status: 502, headers: { "X-Request-Id": "req_p" } })]);
  const e2 = await new Client({ apiKey: "sk", fetch: proxy.fetch, retries: 0 }).getRoom("room_x").then(() => undefined, (e: unknown) => e);
  assert.ok(e2 instanceof APIError);
  assert.equal(e2.code, "");
  assert.equal(e2.apiMessage, "<html>bad gateway</html>");
  assert.deepEqual(e2.details, {});
  assert.equal(e2.retryAfter, null);
});

test("retries: safe requests after 429, 503, idempotency_in_progress and connection errors", async () => {
  const waits: [number, number | null][] = [];
  const backoff = (retry: number, ra: number | null): number => (waits.push([retry, ra]), 0);
  const get = fakeFetch([envelope(503, "service_unavailable", { "Retry-After": "1" }), new TypeError("fetch failed"), ok()]);
  assert.equal((await new Client({ apiKey: "sk", fetch: get.fetch, backoff }).getRoom("room_x")).id, "room_x");
  assert.equal(get.requests.length, 3);
  assert.deepEqual(waits, [[1, 1], [2, null]]);

  // A create gets one random Idempotency-Key, the same on every attempt.
  const create = fakeFetch([envelope(409, "idempotency_in_progress"), ok()]);
  await new Client({ apiKey: "sk", fetch: create.fetch, backoff: () => 0 }).createRoom({ name: "r" });
  const keys = create.requests.map((r) => (r.init.headers as Record<string, string>)["Idempotency-Key"]);
  assert.equal(keys.length, 2);
  assert.match(keys[0] ?? "", /^sdk_[0-9a-f]{32}$/);
  assert.equal(keys[1], keys[0]);
  assert.equal(create.requests[0]?.init.body, JSON.stringify({ name: "r" }));

  // Not retried: a top-up (no Idempotency-Key), a 500, a 400, nor past the retries.
  for (const [call, answers] of [
    [(c: Client) => c.createTopup({ amount: "5.00" }), [envelope(503, "service_unavailable"), ok()]],
    [(c: Client) => c.getRoom("room_x"), [envelope(500, "internal_error"), ok()]],
    [(c: Client) => c.getRoom("room_x"), [envelope(400, "invalid_request"), ok()]],
    [(c: Client) => c.getRoom("room_x"), [envelope(503, "service_unavailable"), envelope(503, "service_unavailable"), envelope(503, "service_unavailable"), ok()]],
  ] as [(c: Client) => Promise<unknown>, Response[]][]) {
    const f = fakeFetch(answers);
    const n = answers.length;
    await assert.rejects(call(new Client({ apiKey: "sk", fetch: f.fetch, backoff: () => 0 })), APIError);
    assert.ok(f.requests.length === 1 || (n === 4 && f.requests.length === 3), `sent ${f.requests.length}`);
  }
  // Without retries, a create sends no key of its own.
  const noRetry = fakeFetch([ok()]);
  await new Client({ apiKey: "sk", fetch: noRetry.fetch, retries: 0 }).createRoom();
  assert.equal((noRetry.requests[0]?.init.headers as Record<string, string>)["Idempotency-Key"], undefined);
});

test("default backoff: Retry-After up to 60 s, else exponential with jitter", () => {
  assert.equal(defaultBackoff(1, 7), 7000);
  assert.equal(defaultBackoff(1, 61), -1);
  for (let retry = 1; retry <= 8; retry++) {
    const ms = defaultBackoff(retry, null);
    const cap = 500 * 2 ** Math.min(retry - 1, 4);
    assert.ok(ms >= cap / 2 && ms <= cap, `retry ${retry}: ${ms}`);
  }
});

test("idempotency keys only where the route takes one; headers; cancel", async () => {
  const f = fakeFetch([ok(), ok()]);
  const c = new Client({ apiKey: "sk_secret", fetch: f.fetch, userAgent: "acme/2.3" });
  await c.createRoom({}, { idempotencyKey: "mine", requestId: "trace-1" });
  const h = f.requests[0]?.init.headers as Record<string, string>;
  assert.equal(h["Idempotency-Key"], "mine");
  assert.equal(h["X-Request-Id"], "trace-1");
  assert.equal(h["Authorization"], "Bearer sk_secret");
  assert.equal(h["User-Agent"], `acme/2.3 rtcd-node-server/${VERSION}`);
  assert.equal(f.requests[0]?.url, "http://127.0.0.1:8080/v1/rooms");
  await c.getRoom("room/../x");
  assert.equal(f.requests[1]?.url, "http://127.0.0.1:8080/v1/rooms/room%2F..%2Fx");
  for (const call of [() => c.getRoom("r", { idempotencyKey: "k" }), () => c.createTopup({ amount: "5.00" }, { idempotencyKey: "k" }),
    () => c.retryWebhookDelivery("we_x", "wdl_x", { idempotencyKey: "k" })]) {
    await assert.rejects(call(), IdempotencyNotSupportedError);
  }
  assert.equal(f.requests.length, 2, "nothing sent for a refused idempotency key");

  const slow = new Client({ apiKey: "sk", fetch: fakeFetch([envelope(503, "service_unavailable")]).fetch, backoff: () => 60_000 });
  const ctl = new AbortController();
  const pending = slow.getRoom("room_x", { signal: ctl.signal });
  setTimeout(() => ctl.abort(), 10);
  await assert.rejects(pending, (e: unknown) => e instanceof APIError && e.status === 503, "canceled during the wait: the last error");
});

test("an answer longer than MAX_RESPONSE_BYTES is refused, not buffered", async () => {
  const chunk = new Uint8Array(1 << 20);
  let sent = 0;
  const endless = new ReadableStream<Uint8Array>({
    pull(ctl) {
      sent += chunk.byteLength;
      ctl.enqueue(chunk);
    },
  });
  const c = new Client({ apiKey: "sk", retries: 0, fetch: async () => new Response(endless, { status: 200 }) });
  await assert.rejects(c.getRoom("room_x"), /longer than 16777216 bytes/);
  assert.ok(sent <= MAX_RESPONSE_BYTES + 2 * chunk.byteLength, `read ${sent} bytes`);
});

test("readAll asks for the largest page and says whether it is everything", async () => {
  const list = (hasMore: boolean): Response => new Response(JSON.stringify({ object: "list", data: [room], page: { has_more: hasMore } }), { status: 200 });
  const f = fakeFetch([list(true), list(false)]);
  const c = new Client({ apiKey: "sk", fetch: f.fetch });
  assert.deepEqual(await readAll((p) => c.listParticipants("room_x", p)), { items: [room], complete: false });
  assert.deepEqual(await readAll((p) => c.listAuditLogs(p)), { items: [room], complete: true });
  assert.equal(f.requests[0]?.url, "http://127.0.0.1:8080/v1/rooms/room_x/participants?limit=100");
});

test("the API key never prints", () => {
  const c = new Client({ apiKey: "sk_live_verysecret" });
  for (const s of [String(c), JSON.stringify(c), inspect(c), `${c}`]) {
    assert.ok(!s.includes("verysecret"), s);
  }
});

test("verifyWebhook: raw bytes, 5 minutes either way, every v1 entry, bounded input", () => {
  const secret = "whsec_test";
  const body = Buffer.from('{"id":"evt_1","type":"room.ended","created_at":"2026-11-22T13:55:28.268Z","project_id":"prj_1","data":{"room_id":"room_1"}}');
  const ts = 1_795_355_728;
  const now = ts * 1000;
  const sig = signWebhook(secret, ts, body);
  const headers = { "x-rtc-timestamp": String(ts), "x-rtc-signature": sig };
  assert.equal(verifyWebhook(secret, body, headers, { now }).type, "room.ended");
  assert.equal(verifyWebhook(secret, body.toString("utf8"), headers, { now }).id, "evt_1");
  assert.equal(verifyWebhook(secret, new Uint8Array(body), new Headers(headers), { now: new Date(now) }).id, "evt_1");

  const reason = (f: () => unknown): string => {
    try {
      f();
      return "accepted";
    } catch (err) {
      assert.ok(err instanceof WebhookVerificationError, String(err));
      return err.reason;
    }
  };
  const other = signWebhook("whsec_other", ts, body);
  const cases: [string, () => unknown][] = [
    ["accepted", () => verifyWebhook(secret, body, { ...headers, "x-rtc-signature": `v1=${"0".repeat(64)}, ${sig}` }, { now })],
    ["accepted", () => verifyWebhook(secret, body, { ...headers, "x-rtc-signature": [other, sig] }, { now })],
    ["accepted", () => verifyWebhook(secret, body, { ...headers, "x-rtc-signature": `v2=zz,${sig}` }, { now })],
    ["accepted", () => verifyWebhook(secret, body, headers, { now: now + 300_000 })],
    ["accepted", () => verifyWebhook(secret, body, headers, { now: now - 300_000 })],
    ["timestamp_outside_tolerance", () => verifyWebhook(secret, body, headers, { now: now + 301_000 })],
    ["timestamp_outside_tolerance", () => verifyWebhook(secret, body, headers, { now: now - 301_000 })],
    ["accepted", () => verifyWebhook(secret, body, headers, { now: now + 301_000, toleranceSeconds: 600 })],
    ["timestamp_outside_tolerance", () => verifyWebhook(secret, body, headers, { now: now + 301_000, toleranceSeconds: 0 })],
    ["signature_mismatch", () => verifyWebhook(secret, Buffer.concat([body, Buffer.from(" ")]), headers, { now })],
    ["signature_mismatch", () => verifyWebhook(secret, body, { ...headers, "x-rtc-timestamp": String(ts + 1) }, { now })],
    ["signature_mismatch", () => verifyWebhook("whsec_other2", body, headers, { now })],
    ["empty_secret", () => verifyWebhook("", body, headers, { now })],
    ["malformed", () => verifyWebhook(secret, body, { "x-rtc-signature": sig }, { now })],
    ["malformed", () => verifyWebhook(secret, body, { ...headers, "x-rtc-timestamp": "-1" }, { now })],
    ["malformed", () => verifyWebhook(secret, body, { ...headers, "x-rtc-timestamp": "1".repeat(20) }, { now })],
    ["malformed", () => verifyWebhook(secret, body, { ...headers, "x-rtc-signature": "v1=abc" }, { now })],
    ["malformed", () => verifyWebhook(secret, body, { ...headers, "x-rtc-signature": "v2=" + "a".repeat(64) }, { now })],
    ["malformed", () => verifyWebhook(secret, body, { ...headers, "x-rtc-signature": Array(9).fill(sig).join(",") }, { now })],
    ["malformed", () => verifyWebhook(secret, body, { ...headers, "x-rtc-signature": "v1=" + "a".repeat(2000) }, { now })],
    ["malformed", () => verifyWebhook(secret, "[1]", { "x-rtc-timestamp": String(ts), "x-rtc-signature": signWebhook(secret, ts, "[1]") }, { now })],
  ];
  assert.deepEqual(cases.map(([, f]) => reason(f)), cases.map(([want]) => want));
});
