// The browser tests' harness (e2e/websdk_browser_test.go): it drives the
// SDK the way an application does and records every event in window.rtcdLog
// as plain JSON the Go test reads with Eval.
import * as rtcd from "./rtcd-web.js";

window.rtcd = rtcd;
window.rtcdLog = [];
window.rtcdSessions = {};

// summarize keeps what a test checks of an event.
function summarize(name, e) {
  const out = { name, at: Date.now() };
  if (e.state) out.state = e.state;
  if (e.previousState) out.previousState = e.previousState;
  if (e.quality) out.quality = e.quality;
  if (e.attempt !== undefined) out.attempt = e.attempt;
  if (e.reason) out.reason = e.reason;
  if (e.error) {
    out.code = e.error.code;
    if (e.error.retryAfter !== undefined) out.retryAfter = e.error.retryAfter;
  }
  if (e.participant) {
    out.participant = e.participant.id;
    out.participantState = e.participant.state;
    out.tracks = e.participant.tracks.map((t) => t.source);
  }
  if (e.track) {
    out.participant = e.track.participantId;
    out.kind = e.track.kind;
    out.source = e.track.source;
    out.trackId = e.track.id;
  }
  return out;
}

function errorView(e) {
  if (e instanceof rtcd.RtcError) return { ok: false, code: e.code, retryAfter: e.retryAfter ?? null, message: e.message, debug: e.debug };
  return { ok: false, code: "not-an-RtcError", message: String(e) };
}

// join connects a session named name; options.signalAfterMs aborts it.
window.rtcdJoin = async (name, api, token, options = {}) => {
  const s = rtcd.createSession(api, token, options);
  window.rtcdSessions[name] = s;
  for (const ev of rtcd.EVENT_NAMES) s.on(ev, (e) => window.rtcdLog.push({ session: name, ...summarize(ev, e) }));
  try {
    await s.connect();
    document.getElementById("status").textContent = `${name}: ${s.state}`;
    return { ok: true, state: s.state, participantId: s.participantId, roomId: s.roomId };
  } catch (e) {
    document.getElementById("status").textContent = `${name}: ${e.code}`;
    return errorView(e);
  }
};

// start begins a join without waiting for it (for connects that take
// longer than one Eval may): its result lands in window.rtcdResults[name].
window.rtcdResults = {};
window.rtcdStart = (name, api, token, options = {}) => {
  window.rtcdResults[name] = null;
  window.rtcdJoin(name, api, token, options).then((r) => (window.rtcdResults[name] = r));
  return true;
};

window.rtcdCall = async (name, method, ...args) => {
  try {
    const r = await window.rtcdSessions[name][method](...args);
    return { ok: true, value: r === undefined ? null : r };
  } catch (e) {
    return errorView(e);
  }
};
