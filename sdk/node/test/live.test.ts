// Every route of the SDK against the real rtcd (started by the harness),
// and webhook deliveries from a real rtcd verified with verifyWebhook.

import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { promisify } from "node:util";
import {
  APIError, Client, EVENT_TYPES, IdempotencyNotSupportedError, WebhookVerificationError, readAll, verifyWebhook,
  type CreatedWebhookEndpoint, type WebhookDelivery,
} from "../src/index.js";
import { called, recordingFetch, repoRoot, rtcdBinary, startRTCD, type RTCD } from "./harness.js";

const run = promisify(execFile);

/** How long a test waits for the server to do something on its own (a webhook delivery). */
const eventuallyMs = 15_000;

let rtcd: RTCD;
let client: Client;

function clientFor(s: RTCD, apiKey: string = s.apiKey, extra: Partial<ConstructorParameters<typeof Client>[0]> = {}): Client {
  return new Client({ apiKey, baseURL: s.base, fetch: recordingFetch, ...extra });
}

async function eventually<T>(what: string, probe: () => Promise<T | undefined>): Promise<T> {
  const deadline = Date.now() + eventuallyMs;
  for (;;) {
    const got = await probe();
    if (got !== undefined) return got;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50)); // polling the server, not a clock
  }
}

async function rejectsWith(p: Promise<unknown>, status: number, code: string): Promise<APIError> {
  try {
    await p;
  } catch (err) {
    assert.ok(err instanceof APIError, `want APIError ${status} ${code}, got ${String(err)}`);
    assert.equal(err.status, status, err.message);
    assert.equal(err.code, code, err.message);
    assert.match(err.requestId, /^req_/);
    return err;
  }
  assert.fail(`want APIError ${status} ${code}, got success`);
}

before(async () => {
  // The first automatic webhook retry is a day away, so the tests decide
  // every attempt; private destinations let the receiver run on loopback.
  rtcd = await startRTCD(["--webhook-allow-private", "--webhook-retry-schedule=86400"]);
  client = clientFor(rtcd);
});

after(async () => {
  await rtcd?.stop();
});

test("system info, and the base address rule of spec 9.5", async () => {
  const info = await client.getSystemInfo();
  assert.equal(info.object, "system_info");
  assert.equal(info.service, "rtcd");
  assert.equal(info.api_version, "v0.1");
  for (const base of [rtcd.base, `${rtcd.base}/`, `${rtcd.base}/v1`, `${rtcd.base}/v1/`]) {
    const c = new Client({ apiKey: rtcd.apiKey, baseURL: base, fetch: recordingFetch });
    assert.equal(c.baseURL, `${rtcd.base}/v1`);
    assert.equal((await c.getSystemInfo()).region, info.region);
  }
  // /v2 is kept as given: this server has no v2, so the route is unknown.
  await rejectsWith(new Client({ apiKey: rtcd.apiKey, baseURL: `${rtcd.base}/v2`, retries: 0 }).getSystemInfo(), 404, "invalid_request");
});

test("rooms: create, get, list, delete; idempotency; not found", async () => {
  const room = await client.createRoom({ name: "standup", expires_in: 3600, metadata: { team: "core", n: 7 } });
  assert.match(room.id, /^room_/);
  assert.equal(room.object, "room");
  assert.equal(room.status, "waiting");
  assert.deepEqual(room.metadata, { team: "core", n: 7 });
  assert.equal((await client.getRoom(room.id)).name, "standup");

  const page = await client.listRooms({ limit: 100 });
  assert.ok(page.data.some((r) => r.id === room.id));
  assert.equal(typeof page.hasMore, "boolean");
  assert.equal(page.nextCursor, null);
  assert.deepEqual([...page].map((r) => r.id), page.data.map((r) => r.id));
  await client.createRoom({ name: "a second room" });
  const one = await client.listRooms({ limit: 1 });
  assert.equal(one.data.length, 1);
  assert.equal(one.hasMore, true);
  await rejectsWith(client.listRooms({ limit: 101 }), 400, "invalid_request");
  const all = await readAll((p) => client.listRooms(p));
  assert.ok(all.complete, "fewer than 100 rooms: all of them");
  assert.ok(all.items.some((r) => r.id === room.id));

  const a = await client.createRoom({ name: "once" }, { idempotencyKey: "order-4242" });
  const b = await client.createRoom({ name: "once" }, { idempotencyKey: "order-4242" });
  assert.equal(b.id, a.id, "a repeated create with the same Idempotency-Key returns the stored room");
  const conflict = await rejectsWith(client.createRoom({ name: "other" }, { idempotencyKey: "order-4242" }), 409, "conflict");
  assert.equal(conflict.details["reason"], "idempotency_key_reused");
  await assert.rejects(client.getRoom(room.id, { idempotencyKey: "k" }), IdempotencyNotSupportedError);

  const ended = await client.deleteRoom(room.id);
  assert.ok(ended.status === "ending" || ended.status === "ended", ended.status);
  assert.ok(["ending", "ended"].includes((await client.deleteRoom(room.id)).status), "DELETE is idempotent");
  const missing = await rejectsWith(client.getRoom("room_aaaaaaaaaaaaaaaaaaaaaaaa"), 404, "room_not_found");
  assert.equal(missing.retryAfter, null);
  assert.throws(() => client.getRoom(""), TypeError);
  await rejectsWith(client.createRoom({ region: "mars" }), 400, "invalid_request");
});

test("participants: create, get, list, delete", async () => {
  const room = await client.createRoom({ name: "participants" });
  const p = await client.createParticipant(room.id, { external_id: "user-42", name: "Ann", role: "subscriber" }, { idempotencyKey: "join-42" });
  assert.match(p.id, /^part_/);
  assert.match(p.token, /^rtc_pt_/);
  assert.equal(p.role, "subscriber");
  const again = await client.createParticipant(room.id, { external_id: "user-42", name: "Ann", role: "subscriber" }, { idempotencyKey: "join-42" });
  assert.equal(again.id, p.id);
  assert.equal(again.token, p.token, "the replay carries the token");
  const got = await client.getParticipant(room.id, p.id);
  assert.equal(got.external_id, "user-42");
  assert.equal(got.status, "created");
  assert.ok((await client.listParticipants(room.id, { limit: 10 })).data.some((x) => x.id === p.id));
  const removed = await client.deleteParticipant(room.id, p.id);
  assert.equal(removed.status, "removed");
  await rejectsWith(client.getParticipant(room.id, "part_aaaaaaaaaaaaaaaaaaaaaaaa"), 404, "participant_not_found");
});

test("API keys: create, use, list, revoke; scopes are enforced", async () => {
  const created = await client.createAPIKey({ name: "reader", scopes: ["rooms:read"] });
  assert.match(created.secret, /^sk_/);
  assert.equal(created.last_used_at, null);
  const reader = clientFor(rtcd, created.secret, { retries: 0 });
  await reader.listRooms();
  const denied = await rejectsWith(reader.createRoom(), 403, "permission_denied");
  assert.equal(denied.details["required_scope"], "rooms:write");
  assert.ok((await client.listAPIKeys()).data.some((k) => k.id === created.id));
  const revoked = await client.revokeAPIKey(created.id);
  assert.equal(revoked.status, "revoked");
  await rejectsWith(reader.listRooms(), 401, "authentication_failed");
  const self = await rejectsWith(client.revokeAPIKey(rtcd.apiKeyId), 409, "conflict");
  assert.equal(self.details["reason"], "cannot_revoke_current_key");
  await rejectsWith(client.createAPIKey({ scopes: [] }), 400, "invalid_request");
});

test("project limits, audit logs", async () => {
  const limits = await client.getProjectLimits();
  assert.equal(limits.project_id, rtcd.projectId);
  assert.ok(limits.max_active_rooms > 0);
  const logs = await client.listAuditLogs({ limit: 100 });
  assert.ok(logs.data.some((e) => e.action === "api_key.created"), JSON.stringify(logs.data.map((e) => e.action)));
});

test("usage: summary and daily", async () => {
  const today = new Date().toISOString().slice(0, 10);
  const summary = await client.getUsageSummary({ from: today, to: today });
  assert.equal(summary.project_id, rtcd.projectId);
  assert.equal(summary.finalized_only, true);
  const daily = await client.getUsageDaily({ from: today, to: today });
  assert.ok(Array.isArray(daily.data));
  await rejectsWith(client.getUsageSummary({ from: today, to: "2000-01-01" }), 400, "invalid_request");
});

test("billing: balance, pricing, ledger, top-ups", async () => {
  const balance = await client.getBalance();
  assert.equal(balance.currency, "USD");
  assert.match(balance.available, /^-?[0-9]+\.[0-9]{2,6}$/);
  const pricing = await client.getPricing();
  assert.equal(pricing.billing_enabled, true);
  const ledger = await client.listLedgerEntries({ limit: 10 });
  assert.ok(ledger.data.some((e) => e.type === "adjustment"), "the bootstrap credit");
  const topup = await client.createTopup({ amount: "25.00", method: "card" });
  assert.equal(topup.status, "pending");
  assert.equal(topup.provider, "sandbox");
  assert.match(topup.authorize_url, /^http/);
  assert.equal((await client.getTopup(topup.payment_id)).amount, "25.00");
  assert.ok((await client.listTopups()).data.some((t) => t.payment_id === topup.payment_id));
  const bad = await rejectsWith(client.createTopup({ amount: "4.99" }), 400, "invalid_request");
  assert.equal(bad.details["field"], "amount");
  await assert.rejects(client.createTopup({ amount: "5.00" }, { idempotencyKey: "k" }), IdempotencyNotSupportedError);
  await rejectsWith(client.getTopup("pay_aaaaaaaaaaaaaaaaaaaaaaaa"), 404, "invalid_request");
});

/** A receiver on loopback that keeps each request's raw bytes. */
interface Received {
  path: string;
  headers: IncomingHttpHeaders;
  body: Buffer;
}

async function startReceiver(status: (path: string) => number): Promise<{ url: string; got: Received[]; server: Server }> {
  const got: Received[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      got.push({ path: req.url ?? "", headers: req.headers, body: Buffer.concat(chunks) });
      res.statusCode = status(req.url ?? "");
      res.end("ok");
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const a = server.address();
  assert.ok(a !== null && typeof a === "object");
  return { url: `http://127.0.0.1:${a.port}`, got, server };
}

test("webhooks: endpoints, a real delivery verified, deliveries and retries", async () => {
  let failing = true;
  const receiver = await startReceiver((path) => (path === "/flaky" && failing ? 500 : 204));
  try {
    const ok: CreatedWebhookEndpoint = await client.createWebhookEndpoint({ url: `${receiver.url}/hook`, events: ["room.ended"] }, { idempotencyKey: "endpoint-1" });
    assert.match(ok.signing_secret, /^whsec_/);
    const flaky = await client.createWebhookEndpoint({ url: `${receiver.url}/flaky`, events: ["room.ended"] });
    const listed = await client.listWebhookEndpoints();
    assert.ok(listed.data.some((e) => e.id === ok.id) && listed.data.some((e) => e.id === flaky.id));

    const room = await client.createRoom({ name: "webhooks" });
    await client.deleteRoom(room.id);

    // The real delivery, verified on its raw bytes with the endpoint's secret.
    const delivery = await eventually("the delivery to /hook", async () => receiver.got.find((r) => r.path === "/hook"));
    const event = verifyWebhook(ok.signing_secret, delivery.body, delivery.headers);
    assert.equal(event.type, "room.ended");
    assert.equal(event.data["room_id"], room.id);
    assert.equal(event.project_id, rtcd.projectId);
    assert.equal(delivery.headers["x-rtc-webhook-id"], event.id);
    // A fetch Headers object works too.
    const h = new Headers();
    for (const [k, v] of Object.entries(delivery.headers)) if (typeof v === "string") h.set(k, v);
    assert.equal(verifyWebhook(ok.signing_secret, delivery.body, h).id, event.id);
    // Altered, signed with another secret, replayed late: refused.
    const altered = Buffer.from(delivery.body.toString("utf8").replace(room.id, "room_bbbbbbbbbbbbbbbbbbbbbbbb"));
    const reasons = [
      () => verifyWebhook(ok.signing_secret, altered, delivery.headers),
      () => verifyWebhook(flaky.signing_secret, delivery.body, delivery.headers),
      () => verifyWebhook(ok.signing_secret, delivery.body, delivery.headers, { now: Date.now() + 301_000 }),
      () => verifyWebhook(ok.signing_secret, delivery.body, { ...delivery.headers, "x-rtc-signature": undefined }),
    ].map((f) => {
      try {
        f();
      } catch (err) {
        assert.ok(err instanceof WebhookVerificationError);
        return err.reason;
      }
      return "accepted";
    });
    assert.deepEqual(reasons, ["signature_mismatch", "signature_mismatch", "timestamp_outside_tolerance", "malformed"]);

    const succeeded = await eventually("a succeeded delivery", async () =>
      (await client.listWebhookDeliveries(ok.id)).data.find((d) => d.status === "succeeded"));
    assert.equal(succeeded.event_id, event.id);
    await rejectsWith(client.retryWebhookDelivery(ok.id, succeeded.id), 409, "conflict");

    // The flaky endpoint answered 500: its delivery waits a day; a manual retry brings it forward.
    const retrying: WebhookDelivery = await eventually("a retrying delivery", async () =>
      (await client.listWebhookDeliveries(flaky.id)).data.find((d) => d.status === "retrying"));
    assert.equal(retrying.attempts[0]?.response_status, 500);
    failing = false;
    const retried = await client.retryWebhookDelivery(flaky.id, retrying.id);
    assert.equal(retried.id, retrying.id);
    await eventually("the retried delivery to succeed", async () =>
      (await client.listWebhookDeliveries(flaky.id)).data.find((d) => d.id === retrying.id && d.status === "succeeded"));
    const second = receiver.got.filter((r) => r.path === "/flaky").at(-1);
    assert.ok(second !== undefined);
    assert.equal(verifyWebhook(flaky.signing_secret, second.body, second.headers).id, event.id);

    const disabled = await client.disableWebhookEndpoint(flaky.id);
    assert.equal(disabled.status, "disabled");
    await rejectsWith(client.disableWebhookEndpoint("we_aaaaaaaaaaaaaaaaaaaaaaaa"), 404, "webhook_endpoint_not_found");
    const refused = await rejectsWith(client.createWebhookEndpoint({ url: "ftp://example.com/" }), 400, "invalid_request");
    assert.equal(refused.details["field"], "url");
  } finally {
    receiver.server.close();
  }
});

test("rtcd webhooks test: every event type verifies", async () => {
  const receiver = await startReceiver(() => 204);
  const secret = "whsec_sdknodesdknodesdknodesdknodesdknodesdknod";
  try {
    const bin = await rtcdBinary();
    for (const type of EVENT_TYPES) {
      await run(bin, ["webhooks", "test", "--url", `${receiver.url}/${type}`, "--type", type], { env: { ...process.env, RTCD_WEBHOOK_SECRET: secret } });
      const got = receiver.got.find((r) => r.path === `/${type}`);
      assert.ok(got !== undefined, type);
      const event = verifyWebhook(secret, got.body, got.headers);
      assert.equal(event.type, type);
    }
  } finally {
    receiver.server.close();
  }
});

test("a rate limit is an APIError with retryAfter", async () => {
  const limited = await startRTCD(["--default-room-creates-per-minute=1"]);
  try {
    const c = clientFor(limited, limited.apiKey, { retries: 0 });
    await c.createRoom();
    const err = await rejectsWith(c.createRoom(), 429, "rate_limited");
    assert.ok(err.retryAfter !== null && err.retryAfter >= 1 && err.retryAfter <= 60, String(err.retryAfter));
    assert.equal(err.details["limit_name"], "room_creates_per_minute");
    // With retries, a Retry-After the backoff declines to wait returns the error at once.
    const declining = clientFor(limited, limited.apiKey, { retries: 2, backoff: () => -1 });
    await rejectsWith(declining.createRoom(), 429, "rate_limited");
  } finally {
    await limited.stop();
  }
});

// The SDK covers every public /v1 route except /v1/connect, the dashboard
// routes, the payment provider's callback and the payer's pages (spec 9.6).
const sdkRoutes = [
  "POST /v1/rooms", "GET /v1/rooms", "GET /v1/rooms/{}", "DELETE /v1/rooms/{}",
  "POST /v1/rooms/{}/participants", "GET /v1/rooms/{}/participants",
  "GET /v1/rooms/{}/participants/{}", "DELETE /v1/rooms/{}/participants/{}",
  "POST /v1/api-keys", "GET /v1/api-keys", "DELETE /v1/api-keys/{}",
  "GET /v1/project/limits", "GET /v1/audit-logs", "GET /v1/system/info",
  "GET /v1/usage/summary", "GET /v1/usage/daily",
  "GET /v1/billing/balance", "GET /v1/billing/pricing", "GET /v1/billing/ledger",
  "POST /v1/billing/topups", "GET /v1/billing/topups", "GET /v1/billing/topups/{}",
  "POST /v1/webhook-endpoints", "GET /v1/webhook-endpoints", "DELETE /v1/webhook-endpoints/{}",
  "GET /v1/webhook-endpoints/{}/deliveries", "POST /v1/webhook-endpoints/{}/deliveries/{}/retry",
];
const notForServerSDKs = ["/v1/connect", "/v1/billing/providers/{}/webhook", "/v1/billing/return"];

test("every route of the SDK was called, and the server has no other public route", () => {
  const missing = sdkRoutes.filter((r) => !called.has(r));
  assert.deepEqual(missing, [], "routes the tests never called");
  const known = new Set([...sdkRoutes.map((r) => r.slice(r.indexOf(" ") + 1)), ...notForServerSDKs]);
  const uncovered: string[] = [];
  for (const file of ["routes.go", "billing.go"]) {
    const src = readFileSync(join(repoRoot(), "http", file), "utf8");
    for (const m of src.matchAll(/"(\/v1\/[^"]*)"/g)) {
      const path = (m[1] ?? "").replace(/\{[a-z_]+\}/g, "{}");
      if (!known.has(path)) uncovered.push(`${path} (http/${file})`);
    }
  }
  assert.deepEqual(uncovered, [], "server routes the SDK neither covers nor leaves out on purpose");
});
