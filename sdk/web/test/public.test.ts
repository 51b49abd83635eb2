import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { inspect } from "node:util";
import { test } from "node:test";

import { Emitter, EVENT_NAMES } from "../src/events.js";
import { createSession, defaultPlatform } from "../src/session.js";
import { VERSION } from "../src/version.js";
import { repoFile } from "./repo.js";

test("the event names are spec 6's and the Go client's", () => {
  assert.deepEqual(
    [...EVENT_NAMES],
    [
      "connection.state_changed",
      "connection.quality_changed",
      "connection.reconnecting",
      "connection.reconnected",
      "connection.disconnected",
      "participant.joined",
      "participant.updated",
      "participant.left",
      "track.subscribed",
      "track.unsubscribed",
      "error",
    ],
  );
  const go = readFileSync(repoFile("sdk/client/events.go"), "utf8");
  const goNames = [...go.matchAll(/Event\w+\s+=\s+"([\w.]+)"/g)].map((m) => m[1]);
  assert.deepEqual([...EVENT_NAMES], goNames);
});

test("on() returns an unsubscribe; handlers run in order, after the emitting code, and a throwing one does not stop the others", async () => {
  const em = new Emitter();
  const seen: string[] = [];
  const off = em.on("participant.joined", (e) => seen.push(`a:${e.participant.id}`));
  em.on("participant.joined", () => {
    throw new Error("a handler's bug");
  });
  em.on("participant.joined", (e) => seen.push(`b:${e.participant.id}`));
  const reported: unknown[] = [];
  const g = globalThis as { reportError?: ((e: unknown) => void) | undefined };
  const saved = g.reportError;
  g.reportError = (e) => reported.push(e);
  try {
    const p = (id: string) => ({ participant: { id, role: "publisher", state: {}, tracks: [], speaking: false } });
    em.emit("participant.joined", p("1"));
    assert.deepEqual(seen, [], "handlers never run inside emit");
    await Promise.resolve();
    off();
    off(); // twice is harmless
    em.emit("participant.joined", p("2"));
    await Promise.resolve();
    assert.deepEqual(seen, ["a:1", "b:1", "b:2"]);
    assert.equal(reported.length, 2);
  } finally {
    g.reportError = saved;
  }
  assert.throws(() => em.on("participant.joind" as "participant.joined", () => {}), /unknown event name/);
});

test("the participant and media tokens are not reachable through the public object", () => {
  const token = "rtc_pt_SECRET_participant_token_value";
  const s = createSession("https://api.example.com", token);
  const views = [
    JSON.stringify(s),
    String(s),
    inspect(s, { showHidden: true, depth: 5 }),
    Object.getOwnPropertyNames(s).join(","),
    Object.getOwnPropertyNames(Object.getPrototypeOf(s)).join(","),
    Object.getOwnPropertySymbols(s).map(String).join(","),
    Object.values(s).map(String).join(","),
  ];
  for (const v of views) {
    assert.ok(!v.includes("SECRET"), `token visible in ${v}`);
    assert.ok(!/mediaToken|media_token|participantToken/i.test(v), `token field visible in ${v}`);
  }
  for (const key in s) assert.ok(!/token/i.test(key), key);
});

test("sdk.version is the package's version", () => {
  const pkg = JSON.parse(readFileSync(repoFile("sdk/web/package.json"), "utf8")) as { version: string };
  assert.equal(VERSION, pkg.version);
  const changelog = readFileSync(repoFile("sdk/web/CHANGELOG.md"), "utf8");
  assert.ok(changelog.includes(`## [${VERSION}]`), "CHANGELOG.md has no section for the version");
});

test("sdk.platform names the browser", () => {
  assert.equal(defaultPlatform("Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) HeadlessChrome/120.0.6099.224 Safari/537.36"), "web/chrome-120");
  assert.equal(defaultPlatform("Mozilla/5.0 (Macintosh; Intel Mac OS X 10.15; rv:125.0) Gecko/20100101 Firefox/125.0"), "web/firefox-125");
  assert.equal(defaultPlatform("Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4 Safari/605.1.15"), "web/safari-17");
  assert.equal(defaultPlatform("Mozilla/5.0 (Windows NT 10.0) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36 Edg/124.0.2478.80"), "web/edge-124");
  assert.equal(defaultPlatform(""), "web");
});
