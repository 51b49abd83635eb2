import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";

import { canTransition, CONNECTION_STATES, StateMachine, TRANSITIONS, type ConnectionState } from "../src/state.js";
import { repoFile } from "./repo.js";

// The Go client's state machine, read from its source: the TS table must
// be exactly it (issue 17: "the same transition table as the Go client,
// checked by a test against the code").
function goTransitions(): Record<string, string[]> {
  const src = readFileSync(repoFile("sdk/client/state.go"), "utf8");
  const values = new Map<string, string>();
  for (const m of src.matchAll(/(State\w+)\s+State\s*=\s*"(\w+)"/g)) values.set(m[1] as string, m[2] as string);
  const body = /var transitions = map\[State\]\[\]State\{([\s\S]*?)\n\}/.exec(src);
  assert.ok(body, "sdk/client/state.go has no transitions table");
  const out: Record<string, string[]> = {};
  for (const line of (body[1] as string).split("\n")) {
    const m = /^\s*(State\w+):\s*(nil|\{([^}]*)\}),?\s*$/.exec(line);
    if (!m) continue;
    const from = values.get(m[1] as string);
    assert.ok(from, `unknown Go state ${m[1]}`);
    out[from] = m[2] === "nil" ? [] : (m[3] as string).split(",").map((s) => {
      const v = values.get(s.trim());
      assert.ok(v, `unknown Go state ${s}`);
      return v;
    });
  }
  return out;
}

test("the states are spec 3's seven", () => {
  assert.deepEqual([...CONNECTION_STATES], ["idle", "connecting", "connected", "reconnecting", "disconnecting", "disconnected", "failed"]);
});

test("the transition table is the Go client's", () => {
  const go = goTransitions();
  assert.deepEqual(Object.keys(go).sort(), [...CONNECTION_STATES].sort());
  for (const s of CONNECTION_STATES) {
    assert.deepEqual([...TRANSITIONS[s]].sort(), [...(go[s] ?? [])].sort(), `from ${s}`);
  }
});

test("the table in README.md is the code's", () => {
  const readme = readFileSync(repoFile("sdk/web/README.md"), "utf8");
  const rows = new Set<string>();
  for (const m of readme.matchAll(/^\| `(\w+)` \| `(\w+)` \|/gm)) rows.add(`${m[1]} -> ${m[2]}`);
  const code = new Set<string>();
  for (const s of CONNECTION_STATES) for (const t of TRANSITIONS[s]) code.add(`${s} -> ${t}`);
  assert.deepEqual([...rows].sort(), [...code].sort());
});

test("the state machine moves only along the table", () => {
  for (const from of CONNECTION_STATES) {
    for (const to of CONNECTION_STATES) {
      const m = new StateMachine();
      // Walk to `from` along allowed moves.
      const path: Record<ConnectionState, ConnectionState[]> = {
        idle: [],
        connecting: ["connecting"],
        connected: ["connecting", "connected"],
        reconnecting: ["connecting", "connected", "reconnecting"],
        disconnecting: ["connecting", "connected", "disconnecting"],
        disconnected: ["connecting", "connected", "disconnected"],
        failed: ["connecting", "failed"],
      };
      for (const s of path[from]) m.move(s);
      assert.equal(m.state, from);
      if (canTransition(from, to)) {
        assert.equal(m.move(to), from);
        assert.equal(m.state, to);
      } else {
        assert.throws(() => m.move(to), /invalid state transition/);
        assert.equal(m.state, from, "a refused move changes nothing");
      }
    }
  }
});
