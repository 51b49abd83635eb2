import assert from "node:assert/strict";
import { test } from "node:test";

import { connectURL } from "../src/address.js";
import { RtcError } from "../src/errors.js";

// Spec 9.5: client SDKs take the API origin and add /v1/connect, stripping
// a trailing /v1 and trailing slashes; any other path is kept (as the Go
// client does).
test("the base address rule of spec 9.5", () => {
  const want = "https://api.example.com/v1/connect";
  for (const origin of [
    "https://api.example.com",
    "https://api.example.com/",
    "https://api.example.com//",
    "https://api.example.com/v1",
    "https://api.example.com/v1/",
    "https://api.example.com/v1//",
    "  https://api.example.com/v1 ",
  ]) {
    assert.equal(connectURL(origin), want, origin);
  }
  assert.equal(connectURL("http://127.0.0.1:8080"), "http://127.0.0.1:8080/v1/connect");
  assert.equal(connectURL("https://h.example/rtc"), "https://h.example/rtc/v1/connect");
  assert.equal(connectURL("https://h.example/rtc/v1/"), "https://h.example/rtc/v1/connect");
  // Only one trailing /v1 goes, and /v2 is a path like any other.
  assert.equal(connectURL("https://h.example/v1/v1"), "https://h.example/v1/v1/connect");
  assert.equal(connectURL("https://h.example/v2"), "https://h.example/v2/v1/connect");
});

test("an unusable origin is invalid_request", () => {
  for (const origin of ["", "api.example.com", "ftp://api.example.com", "ws://api.example.com", "https://", "https://h.example/?x=1", "https://h.example/#f", "/v1"]) {
    assert.throws(
      () => connectURL(origin),
      (e: unknown) => e instanceof RtcError && e.code === "invalid_request" && e.debug["origin"] === origin,
      JSON.stringify(origin),
    );
  }
});
