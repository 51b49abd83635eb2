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
    out.muted = e.participant.tracks.filter((t) => t.muted).map((t) => t.source);
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

// Tracks are shown as an application does: each remote track in a
// <figure> of #media (video) or as an <audio> element, removed when the
// track goes; the caption says whose it is and whether its publisher muted
// it. Published video gets a preview (#local).
function figure(box, caption, el, data) {
  const fig = document.createElement("figure");
  Object.assign(fig.dataset, data);
  const cap = document.createElement("figcaption");
  cap.textContent = caption;
  if (el.tagName === "VIDEO") {
    el.width = 160;
    el.height = 120;
    el.setAttribute("aria-label", caption);
  }
  fig.append(el, cap);
  box.append(fig);
  return fig;
}

function caption(track, muted) {
  return `${track.source} of ${track.participantId}${muted ? " (muted)" : ""}`;
}

function attachTracks(name, s) {
  const box = document.getElementById("media");
  const mutedOf = (track) => !!s.participants.find((p) => p.id === track.participantId)?.tracks.find((t) => t.id === track.id)?.muted;
  s.on("track.subscribed", ({ track }) => {
    const el = track.attach();
    const data = { session: name, participant: track.participantId, source: track.source, track: track.id };
    if (el.tagName === "VIDEO") figure(box, caption(track, mutedOf(track)), el, data);
    else {
      Object.assign(el.dataset, data);
      box.append(el);
    }
  });
  s.on("track.unsubscribed", ({ track }) => {
    track.detach();
    box.querySelector(`[data-session="${name}"][data-track="${track.id}"]`)?.remove();
  });
  s.on("participant.updated", ({ participant }) => {
    for (const t of participant.tracks) {
      const cap = box.querySelector(`figure[data-session="${name}"][data-track="${t.id}"] figcaption`);
      if (cap) cap.textContent = caption({ source: t.source, participantId: participant.id }, t.muted);
    }
  });
}

// join connects a session named name.
window.rtcdJoin = async (name, api, token, options = {}) => {
  const s = rtcd.createSession(api, token, options);
  window.rtcdSessions[name] = s;
  for (const ev of rtcd.EVENT_NAMES) s.on(ev, (e) => window.rtcdLog.push({ session: name, ...summarize(ev, e) }));
  attachTracks(name, s);
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

// publish publishes source on session name and describes the local track.
window.rtcdPublish = async (name, source, options = {}) => {
  try {
    const t = await window.rtcdSessions[name].publish(source, options);
    if (t.kind === "video") {
      figure(document.getElementById("local"), `my ${source}`, t.attach(), { session: name, source });
    }
    return { ok: true, value: { source: t.source, kind: t.kind, deviceId: t.deviceId, muted: t.muted } };
  } catch (e) {
    document.getElementById("status").textContent = `${name}: publish ${source}: ${e.code}`;
    return errorView(e);
  }
};

// local calls a LocalTrack method (mute, unmute, switchDevice, unpublish).
window.rtcdLocal = async (name, source, method, ...args) => {
  try {
    const t = window.rtcdSessions[name].localTracks.find((l) => l.source === source);
    if (!t) return { ok: false, code: "no-such-track", message: source };
    await t[method](...args);
    if (method === "unpublish") document.querySelector(`#local [data-session="${name}"][data-source="${source}"]`)?.remove();
    return { ok: true, value: { deviceId: t.deviceId, muted: t.muted } };
  } catch (e) {
    return errorView(e);
  }
};

// received describes what session name receives of participant's source:
// the decoder's counters (getStats inbound-rtp), and for video the element's
// size.
window.rtcdReceived = async (name, participant, source) => {
  const s = window.rtcdSessions[name];
  const t = s.remoteTracks.find((r) => r.participantId === participant && r.source === source);
  if (!t) return null;
  const out = { kind: t.kind, packets: 0, bytes: 0, framesDecoded: 0, audioEnergy: 0, width: 0, height: 0 };
  (await t.getStats()).forEach((r) => {
    if (r.type !== "inbound-rtp") return;
    out.packets += r.packetsReceived ?? 0;
    out.bytes += r.bytesReceived ?? 0;
    out.framesDecoded += r.framesDecoded ?? 0;
    out.audioEnergy += r.totalAudioEnergy ?? 0;
  });
  const el = document.querySelector(`[data-session="${name}"][data-track="${t.id}"] video`);
  if (el && el.tagName === "VIDEO") {
    out.width = el.videoWidth;
    out.height = el.videoHeight;
  }
  return out;
};

window.rtcdDevices = async (kind) => (await rtcd.listDevices(kind)).map((d) => ({ deviceId: d.deviceId, label: d.label }));
