// A call with @rtcd/web, in plain JavaScript: join with a participant
// token, publish camera and microphone, show everyone else, mute, switch
// cameras, leave. It imports the SDK's one-file bundle (npm run bundle
// --workspace sdk/web); an application imports "@rtcd/web" through its own
// bundler instead.
import { createSession, listDevices, RtcError } from "../dist-bundle/rtcd-web.js";

const $ = (id) => document.getElementById(id);
const stateWords = {
  idle: "Not connected",
  connecting: "Connecting…",
  connected: "Connected",
  reconnecting: "Connection lost: reconnecting…",
  disconnecting: "Leaving…",
  disconnected: "You left the call",
  failed: "The call ended",
};

let session;

function showError(e) {
  const el = $("error");
  if (!e) {
    el.hidden = true;
    el.textContent = "";
    return;
  }
  const words = e instanceof RtcError ? `${e.message} (${e.code}${e.retryAfter ? `, retry in ${e.retryAfter} s` : ""})` : String(e);
  el.textContent = words;
  el.hidden = false;
}

// tile is the figure of one participant (created on first use).
function tile(participantId) {
  let fig = document.querySelector(`#others figure[data-participant="${participantId}"]`);
  if (!fig) {
    fig = document.createElement("figure");
    fig.dataset.participant = participantId;
    const cap = document.createElement("figcaption");
    fig.append(cap);
    $("others").append(fig);
  }
  $("alone").hidden = true;
  return fig;
}

function caption(participant) {
  const fig = document.querySelector(`#others figure[data-participant="${participant.id}"]`);
  if (!fig) return;
  const name = typeof participant.state.name === "string" ? participant.state.name : participant.id;
  const muted = participant.tracks.filter((t) => t.muted).map((t) => (t.source === "microphone" ? "microphone muted" : `${t.source.replace("_", " ")} off`));
  fig.querySelector("figcaption").textContent = muted.length ? `${name} (${muted.join(", ")})` : name;
  const video = fig.querySelector("video");
  if (video) video.setAttribute("aria-label", `Video of ${name}`);
}

function removeTile(participantId) {
  document.querySelector(`#others figure[data-participant="${participantId}"]`)?.remove();
  $("alone").hidden = $("others").children.length > 0;
}

function watch(s) {
  s.on("connection.state_changed", ({ state }) => {
    $("state").textContent = stateWords[state] ?? state;
    if (state === "disconnected" || state === "failed") leftCall();
  });
  s.on("participant.joined", ({ participant }) => {
    tile(participant.id);
    caption(participant);
  });
  s.on("participant.updated", ({ participant }) => caption(participant));
  s.on("participant.left", ({ participant }) => removeTile(participant.id));
  s.on("track.subscribed", ({ track }) => {
    const fig = tile(track.participantId);
    const el = track.attach();
    el.dataset.track = track.id;
    if (track.kind === "video") fig.insertBefore(el, fig.firstChild);
    else fig.append(el);
    const p = s.participants.find((x) => x.id === track.participantId);
    if (p) caption(p);
  });
  s.on("track.unsubscribed", ({ track }) => {
    track.detach();
    document.querySelector(`#others [data-track="${track.id}"]`)?.remove();
  });
  s.on("error", ({ error }) => showError(error));
}

async function publish(s, source) {
  try {
    const t = await s.publish(source);
    if (source === "camera") {
      const fig = document.createElement("figure");
      const video = t.attach();
      video.setAttribute("aria-label", "Your camera");
      const cap = document.createElement("figcaption");
      cap.textContent = "Your camera";
      fig.append(video, cap);
      $("me").append(fig);
      await fillCameras(t.deviceId);
    }
    $(`toggle-${source}`).disabled = false;
  } catch (e) {
    showError(e);
  }
}

async function fillCameras(current) {
  const select = $("camera-select");
  select.replaceChildren();
  for (const [i, d] of (await listDevices("videoinput")).entries()) {
    const o = document.createElement("option");
    o.value = d.deviceId;
    o.textContent = d.label || `Camera ${i + 1}`;
    o.selected = d.deviceId === current;
    select.append(o);
  }
  select.disabled = select.options.length < 2;
}

function leftCall() {
  $("me").replaceChildren();
  $("others").replaceChildren();
  $("alone").hidden = false;
  for (const id of ["toggle-microphone", "toggle-camera", "camera-select"]) $(id).disabled = true;
  $("toggle-microphone").textContent = "Mute microphone";
  $("toggle-camera").textContent = "Turn camera off";
  $("call").hidden = true;
  $("join").hidden = false;
}

$("join").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  showError(null);
  const button = ev.submitter ?? $("join").querySelector("button");
  button.disabled = true;
  session = createSession($("api").value, $("token").value);
  watch(session);
  try {
    await session.connect();
  } catch (e) {
    showError(e);
    button.disabled = false;
    return;
  }
  button.disabled = false;
  $("token").value = "";
  $("join").hidden = true;
  $("call").hidden = false;
  if ($("with-camera").checked) await publish(session, "camera");
  if ($("with-microphone").checked) await publish(session, "microphone");
});

for (const [source, off, on] of [
  ["microphone", "Mute microphone", "Unmute microphone"],
  ["camera", "Turn camera off", "Turn camera on"],
]) {
  $(`toggle-${source}`).addEventListener("click", async () => {
    const t = session?.localTracks.find((l) => l.source === source);
    if (!t) return;
    if (t.muted) await t.unmute();
    else await t.mute();
    $(`toggle-${source}`).textContent = t.muted ? on : off;
  });
}

$("camera-select").addEventListener("change", async (ev) => {
  const t = session?.localTracks.find((l) => l.source === "camera");
  if (!t) return;
  try {
    await t.switchDevice(ev.target.value);
  } catch (e) {
    showError(e);
  }
});

$("leave").addEventListener("click", () => void session?.leave());
