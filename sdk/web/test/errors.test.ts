import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { test } from "node:test";

import { classifyMedia, ERROR_CODES, errorFromAPI, errorFromMedia, errorFromTransport, parseRetryAfter, RtcError } from "../src/errors.js";
import { repoFile } from "./repo.js";

const NOW = Date.parse("2026-11-22T12:00:00Z");

function headers(h: Record<string, string> = {}): { get(name: string): string | null } {
  const lower = Object.fromEntries(Object.entries(h).map(([k, v]) => [k.toLowerCase(), v]));
  return { get: (n: string) => lower[n.toLowerCase()] ?? null };
}

function envelope(code: string, details: Record<string, unknown> = {}): string {
  return JSON.stringify({ error: { code, message: `the API says ${code}`, request_id: "req_abc", details } });
}

test("the codes are spec 7's client SDK codes, and the Go client's", () => {
  // The spec lives beside the repository on the team's machines.
  const specPath = repoFile("../shared/spec/interface-v0.1.md");
  const spec = existsSync(specPath) ? readFileSync(specPath, "utf8") : "";
  const line = /Normalized codes: ([^.]*?)\. The Flutter/.exec(spec.replace(/\n/g, " "));
  assert.ok(line || !spec, "the spec's list of client SDK codes was not found");
  if (line) {
    const names = (line[1] as string)
      .replace(/\([^)]*\)/g, "")
      .split(",")
      .map((s) => s.trim());
    assert.deepEqual([...ERROR_CODES].sort(), [...names].sort());
  }
  const goSrc = readFileSync(repoFile("sdk/client/errors.go"), "utf8");
  const goCodes = [...goSrc.matchAll(/Code\w+\s+=\s+"(\w+)"/g)].map((m) => m[1] as string);
  assert.deepEqual([...ERROR_CODES].sort(), [...goCodes].sort());
});

test("API answers map to spec 7 codes", () => {
  const cases: Array<[number, string, string]> = [
    [401, "participant_token_invalid", "authentication_failed"],
    [401, "authentication_failed", "authentication_failed"],
    [401, "participant_token_expired", "token_expired"],
    [403, "permission_denied", "permission_denied"],
    [404, "participant_not_found", "permission_denied"],
    [404, "room_not_found", "room_not_found"],
    [410, "room_ended", "room_ended"],
    [410, "room_expired", "room_ended"],
    [409, "quota_exceeded", "participant_limit_reached"],
    [402, "insufficient_credit", "insufficient_credit"],
    [429, "rate_limited", "rate_limited"],
    [400, "invalid_request", "invalid_request"],
    [415, "invalid_request", "invalid_request"],
    [503, "service_unavailable", "service_unavailable"],
    [500, "internal_error", "unknown"],
  ];
  for (const [status, api, want] of cases) {
    const e = errorFromAPI(status, headers(), envelope(api), NOW);
    assert.ok(e instanceof RtcError);
    assert.equal(e.code, want, `${status} ${api}`);
    assert.equal(e.debug["api_code"], api);
    assert.equal(e.debug["http_status"], status);
    assert.equal(e.debug["request_id"], "req_abc");
    assert.equal(e.message, `the API says ${api}`);
  }
});

test("without an envelope the status decides", () => {
  const cases: Array<[number, string]> = [
    [402, "insufficient_credit"],
    [429, "rate_limited"],
    [401, "authentication_failed"],
    [403, "permission_denied"],
    [410, "room_ended"],
    [502, "service_unavailable"],
    [503, "service_unavailable"],
    [504, "service_unavailable"],
    [400, "invalid_request"],
    [404, "unknown"],
    [500, "unknown"],
  ];
  for (const [status, want] of cases) {
    const e = errorFromAPI(status, headers({ "X-Request-Id": "req_h" }), "<html>proxy error</html>", NOW);
    assert.equal(e.code, want, String(status));
    assert.equal(e.debug["request_id"], "req_h");
    assert.equal(e.debug["api_code"], undefined);
  }
});

test("402 is insufficient_credit and 429 carries retryAfter in seconds", () => {
  assert.equal(errorFromAPI(402, headers(), envelope("insufficient_credit"), NOW).code, "insufficient_credit");
  const limited = errorFromAPI(429, headers({ "Retry-After": "17" }), envelope("rate_limited", { limit_name: "connect_requests_per_minute" }), NOW);
  assert.equal(limited.code, "rate_limited");
  assert.equal(limited.retryAfter, 17);
  assert.deepEqual(limited.debug["details"], { limit_name: "connect_requests_per_minute" });
  const date = errorFromAPI(429, headers({ "Retry-After": new Date(NOW + 30_000).toUTCString() }), envelope("rate_limited"), NOW);
  assert.equal(date.retryAfter, 30);
  const fromDetails = errorFromAPI(429, headers(), envelope("rate_limited", { retry_after_seconds: 5 }), NOW);
  assert.equal(fromDetails.retryAfter, 5);
  const unavailable = errorFromAPI(503, headers({ "Retry-After": "2" }), envelope("service_unavailable"), NOW);
  assert.equal(unavailable.retryAfter, 2);
  assert.equal(errorFromAPI(402, headers({ "Retry-After": "9" }), envelope("insufficient_credit"), NOW).retryAfter, undefined);
  assert.equal(errorFromAPI(429, headers(), envelope("rate_limited"), NOW).retryAfter, undefined);
});

test("Retry-After parses delay-seconds and HTTP dates", () => {
  assert.equal(parseRetryAfter("0", NOW), undefined);
  assert.equal(parseRetryAfter(" 12 ", NOW), 12);
  assert.equal(parseRetryAfter("-3", NOW), undefined);
  assert.equal(parseRetryAfter("soon", NOW), undefined);
  assert.equal(parseRetryAfter(null, NOW), undefined);
  assert.equal(parseRetryAfter(new Date(NOW - 1000).toUTCString(), NOW), undefined);
  assert.equal(parseRetryAfter(new Date(NOW + 1500).toUTCString(), NOW), 1); // HTTP dates have whole seconds
});

test("media node codes map to spec 7 codes and an action", () => {
  const cases: Array<[string, string, string]> = [
    ["token_invalid", "reexchange", "authentication_failed"],
    ["token_expired", "reexchange", "token_expired"],
    ["room_full", "fail", "participant_limit_reached"],
    ["participant_limit_reached", "fail", "participant_limit_reached"],
    ["insufficient_credit", "fail", "insufficient_credit"],
    ["session_superseded", "end", "connection_lost"],
    ["bad_message", "fail", "unknown"],
    ["replaced", "end", "connection_lost"],
    ["removed", "end", "permission_denied"],
    ["room_closed", "end", "room_ended"],
    ["node_shutdown", "reconnect", "service_unavailable"],
    ["heartbeat_timeout", "reconnect", "connection_lost"],
    ["slow_consumer", "reconnect", "connection_lost"],
    ["join_timeout", "reconnect", "connection_lost"],
    ["something_new", "reconnect", "connection_lost"],
  ];
  for (const [media, action, code] of cases) {
    const r = classifyMedia(media, "raw text", 4009);
    assert.equal(r.action, action, media);
    assert.equal(r.error.code, code, media);
    // The raw media-engine error is debug metadata only.
    assert.equal(r.error.debug["media_code"], media);
    assert.equal(r.error.debug["media_message"], "raw text");
    assert.notEqual(r.error.message, "raw text");
  }
});

test("getUserMedia and getDisplayMedia errors map to the device codes", () => {
  const dom = (name: string): Error => Object.assign(new Error(`${name} from the browser`), { name });
  const cases: Array<[string, string]> = [
    ["NotAllowedError", "media_permission_denied"],
    ["PermissionDeniedError", "media_permission_denied"],
    ["SecurityError", "media_permission_denied"],
    ["NotFoundError", "device_not_found"],
    ["DevicesNotFoundError", "device_not_found"],
    ["OverconstrainedError", "device_not_found"],
    ["NotReadableError", "device_in_use"],
    ["TrackStartError", "device_in_use"],
    ["AbortError", "device_in_use"],
    ["NotSupportedError", "unsupported_platform"],
    ["TypeError", "invalid_request"],
    ["WeirdError", "unknown"],
  ];
  for (const [name, code] of cases) {
    const e = errorFromMedia(dom(name), "camera");
    assert.equal(e.code, code, name);
    assert.equal(e.debug["dom_error"], name);
  }
  const already = new RtcError("unsupported_platform", "x");
  assert.equal(errorFromMedia(already, "camera"), already);
});

test("transport failures: network_unavailable on the API, connection_failed on the media node, timeout on the deadline", () => {
  const fetchFailed = new TypeError("Failed to fetch");
  assert.equal(errorFromTransport(fetchFailed, false, false).code, "network_unavailable");
  assert.equal(errorFromTransport(fetchFailed, true, false).code, "connection_failed");
  assert.equal(errorFromTransport(new Error("deadline"), false, true).code, "timeout");
  assert.equal(errorFromTransport(new Error("deadline"), true, true).code, "timeout");
  const abort = Object.assign(new Error("The operation was aborted"), { name: "AbortError" });
  assert.equal(errorFromTransport(abort, false, false).code, "unknown");
  const e = errorFromTransport(fetchFailed, false, false);
  assert.match(String(e.debug["cause"]), /Failed to fetch/);
  assert.equal(e.cause, fetchFailed);
});
