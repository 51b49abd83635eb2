import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";

import { backoffDelay, DEFAULT_RECONNECT_POLICY, withDefaults } from "../src/backoff.js";
import { repoFile } from "./repo.js";

test("the default policy is the Go client's", () => {
  const src = readFileSync(repoFile("sdk/client/backoff.go"), "utf8");
  const body = /func DefaultReconnectPolicy\(\) ReconnectPolicy \{([\s\S]*?)\n\}/.exec(src)?.[1] ?? "";
  const field = (name: string): string => (new RegExp(`${name}:\\s*([^,]+),`).exec(body)?.[1] ?? "").trim();
  const ms = (goDuration: string): number => {
    const m = /^(\d+)\s*\*\s*time\.(Millisecond|Second|Minute)$/.exec(goDuration);
    assert.ok(m, `duration ${goDuration}`);
    return Number(m[1]) * { Millisecond: 1, Second: 1000, Minute: 60_000 }[m[2] as "Millisecond" | "Second" | "Minute"];
  };
  assert.deepEqual(
    { ...DEFAULT_RECONNECT_POLICY },
    {
      initialDelayMs: ms(field("InitialDelay")),
      maxDelayMs: ms(field("MaxDelay")),
      multiplier: Number(field("Multiplier")),
      jitter: Number(field("Jitter")),
      maxAttempts: Number(field("MaxAttempts")),
      maxElapsedMs: ms(field("MaxElapsed")),
    },
  );
});

test("exponential growth, capped, without jitter at rnd = 0", () => {
  const p = withDefaults();
  assert.deepEqual(
    Array.from({ length: 10 }, (_, i) => backoffDelay(p, i + 1, 0)),
    [250, 500, 1000, 2000, 4000, 8000, 10_000, 10_000, 10_000, 10_000],
  );
});

test("jitter takes off up to its fraction, never more", () => {
  const p = withDefaults();
  assert.equal(backoffDelay(p, 4, 0.5), 1500); // 2000 × (1 − 0.5 × 0.5)
  for (let n = 1; n <= 12; n++) {
    const full = backoffDelay(p, n, 0);
    for (const rnd of [0, 0.1, 0.37, 0.5, 0.99, 0.999999]) {
      const d = backoffDelay(p, n, rnd);
      assert.ok(d <= full && d >= Math.floor(full * (1 - p.jitter)), `attempt ${n} rnd ${rnd}: ${d} of ${full}`);
    }
  }
  const none = withDefaults({ jitter: -1 });
  assert.equal(none.jitter, 0);
  assert.equal(backoffDelay(none, 3, 0.99), 1000);
});

test("out-of-range fields take the defaults, as in the Go client", () => {
  assert.deepEqual(withDefaults({ initialDelayMs: -5, maxDelayMs: 0, multiplier: 0.5, jitter: 7, maxAttempts: 0, maxElapsedMs: -1 }), {
    ...DEFAULT_RECONNECT_POLICY,
  });
  // MaxDelay below InitialDelay is raised to it.
  assert.equal(withDefaults({ initialDelayMs: 20_000 }).maxDelayMs, 20_000);
  assert.equal(withDefaults({ maxAttempts: -1 }).maxAttempts, -1); // never reconnect
  assert.equal(withDefaults({ multiplier: Number.NaN }).multiplier, 2);
  // A huge attempt number stays at the cap.
  assert.equal(backoffDelay(withDefaults(), 5000, 0), 10_000);
});
