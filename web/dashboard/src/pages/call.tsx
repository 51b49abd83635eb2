// The call page: a person of the project joins one of its rooms from the
// browser, through the web SDK (@rtcd/web), with camera and microphone,
// and sees and hears everyone else in it. Joining adds a participant
// (publisher) named after the person, trades its token at POST /v1/connect
// and holds the media connection; leaving (or leaving the page) ends it.
// The server serves this page with a Permissions-Policy that allows the
// camera and microphone and a Content-Security-Policy that reaches the
// media node (http/dashboard_pages.go), so it is always opened with a full
// page load.

import { createSession, type LocalTrack, type Participant, type RemoteTrack, type Session, type TrackSource } from "@rtcd/web";
import { useEffect, useRef, useState } from "preact/hooks";
import { api } from "../api";
import { can } from "../roles";
import { Link } from "../router";
import { projectPath, useMe, type ProjectScope } from "../state";
import type { Participant as ParticipantRecord, Room } from "../types";
import { ErrorNote, Loaded, PageHeader, useAsync } from "../ui";

/** How long the participant token of a call is good for: a join, and the reconnects of a long call. */
const callTokenSeconds = 6 * 3600;

const stateWords: Record<string, string> = {
  connecting: "Joining…",
  connected: "In the call",
  reconnecting: "Connection lost: reconnecting…",
  disconnecting: "Leaving…",
  disconnected: "You left the call.",
  failed: "The call ended.",
};

/** The call page's address of a room: opened with a full page load (see above). */
export const callPath = (projectId: string, roomId: string) => projectPath(projectId, `rooms/${encodeURIComponent(roomId)}/call`);

/** Plays one track in its element for as long as it is shown. */
function TrackView({ track, label }: { track: RemoteTrack | LocalTrack; label: string }) {
  const ref = useRef<HTMLVideoElement & HTMLAudioElement>(null);
  useEffect(() => {
    const el = ref.current;
    if (!el) return;
    track.attach(el);
    return () => track.detach(el);
  }, [track]);
  return track.kind === "video" ? <video ref={ref} aria-label={label} playsInline muted /> : <audio ref={ref} />;
}

function nameOf(p: Participant): string {
  const n = p.state["name"];
  return typeof n === "string" && n ? n : p.id;
}

function mutedWords(p: Participant): string {
  const off = p.tracks.filter((t) => t.muted).map((t) => (t.source === "microphone" ? "microphone muted" : t.source === "camera" ? "camera off" : "screen paused"));
  return off.length ? ` (${off.join(", ")})` : "";
}

interface CallView {
  state: string;
  others: Participant[];
  remote: RemoteTrack[];
  local: LocalTrack[];
}

const idle: CallView = { state: "", others: [], remote: [], local: [] };

export function CallPage({ scope, roomId }: { scope: ProjectScope; roomId: string }) {
  const { me } = useMe();
  const pid = scope.project.id;
  const room = useAsync(() => api<Room>("GET", `/v1/rooms/${encodeURIComponent(roomId)}`, { project: pid }), [pid, roomId]);
  const [sendCamera, setSendCamera] = useState(true);
  const [sendMicrophone, setSendMicrophone] = useState(true);
  const [view, setView] = useState<CallView>(idle);
  const [error, setError] = useState<unknown>(undefined);
  const [joining, setJoining] = useState(false);
  const session = useRef<Session | null>(null);
  const name = me.user.name || me.user.email;

  // Leaving the page leaves the call.
  useEffect(
    () => () => {
      void session.current?.leave();
    },
    [],
  );

  const refresh = (s: Session) => {
    if (session.current !== s) return;
    setView({ state: s.state, others: s.participants, remote: s.remoteTracks, local: s.localTracks });
  };

  const join = async () => {
    setJoining(true);
    setError(undefined);
    let s: Session | null = null;
    try {
      const p = await api<ParticipantRecord>("POST", `/v1/rooms/${encodeURIComponent(roomId)}/participants`, {
        project: pid,
        body: { name: name.slice(0, 128), role: "publisher", expires_in: callTokenSeconds },
      });
      s = createSession(window.location.origin, p.token ?? "");
      session.current = s;
      const mine = s;
      for (const ev of ["connection.state_changed", "participant.joined", "participant.updated", "participant.left", "track.subscribed", "track.unsubscribed"] as const) {
        s.on(ev, () => refresh(mine));
      }
      s.on("error", ({ error: e }) => setError(e));
      await s.connect();
      s.updateState({ name });
      refresh(s);
      const sources: TrackSource[] = [...(sendCamera ? ["camera" as const] : []), ...(sendMicrophone ? ["microphone" as const] : [])];
      for (const source of sources) {
        try {
          await s.publish(source);
        } catch (e) {
          setError(e); // the call goes on without it
        }
        refresh(s);
      }
    } catch (e) {
      setError(e);
      if (s && session.current === s) session.current = null;
      setView(idle);
    } finally {
      setJoining(false);
    }
  };

  const leave = async () => {
    const s = session.current;
    if (!s) return;
    await s.leave();
    session.current = null;
    setView({ ...idle, state: "disconnected" });
  };

  const toggle = async (t: LocalTrack) => {
    if (t.muted) await t.unmute();
    else await t.mute();
    if (session.current) refresh(session.current);
  };

  const inCall = view.state !== "" && view.state !== "disconnected" && view.state !== "failed";
  const camera = view.local.find((t) => t.source === "camera");
  const microphone = view.local.find((t) => t.source === "microphone");
  const r = room.data;
  return (
    <>
      <p class="crumbs">
        <Link href={projectPath(pid, "rooms")}>Rooms</Link> / <Link href={projectPath(pid, `rooms/${encodeURIComponent(roomId)}`)}>{r ? (r.name ?? r.id) : roomId}</Link> /
      </p>
      <PageHeader title={r ? `Call in ${r.name ?? r.id}` : "Call"} subtitle={<code>{roomId}</code>} />
      <Loaded state={room}>
        {(r) =>
          !can.manageParticipants(scope.role) ? (
            <p class="hint">Your role in this workspace cannot add participants, so it cannot join calls.</p>
          ) : r.status === "ended" ? (
            <p class="hint">This room has ended.</p>
          ) : !inCall ? (
            <form
              class="panel stack"
              aria-label="Join the call"
              onSubmit={(e) => {
                e.preventDefault();
                void join();
              }}
            >
              {view.state === "disconnected" && <p role="status">You left the call.</p>}
              <p class="hint">
                You join as a new participant of this room, named <strong>{name}</strong>. Everyone in the room sees your camera and hears your
                microphone; you see and hear them.
              </p>
              <div class="row">
                <label class="check">
                  <input type="checkbox" checked={sendCamera} onChange={(e) => setSendCamera(e.currentTarget.checked)} /> Send my camera
                </label>
                <label class="check">
                  <input type="checkbox" checked={sendMicrophone} onChange={(e) => setSendMicrophone(e.currentTarget.checked)} /> Send my microphone
                </label>
              </div>
              <div class="row">
                <button type="submit" class="btn btn-primary" data-action="add-participant" disabled={joining}>
                  {joining ? "Joining…" : "Join the call"}
                </button>
              </div>
            </form>
          ) : (
            <section class="call" aria-label="The call">
              <p class="call-state" role="status">
                {stateWords[view.state] ?? view.state}
              </p>
              <div class="row">
                {microphone && (
                  <button type="button" class="btn" onClick={() => void toggle(microphone)}>
                    {microphone.muted ? "Unmute microphone" : "Mute microphone"}
                  </button>
                )}
                {camera && (
                  <button type="button" class="btn" onClick={() => void toggle(camera)}>
                    {camera.muted ? "Turn camera on" : "Turn camera off"}
                  </button>
                )}
                <button type="button" class="btn btn-danger" onClick={() => void leave()}>
                  Leave the call
                </button>
              </div>
              <ul class="call-tiles" aria-label="People in the call">
                <li class="call-tile">
                  {camera && !camera.muted ? <TrackView track={camera} label="Your camera" /> : <div class="call-novideo">{camera ? "Camera off" : "No camera"}</div>}
                  <p>
                    {name} (you){microphone?.muted ? " (microphone muted)" : ""}
                  </p>
                </li>
                {view.others.map((p) => {
                  const tracks = view.remote.filter((t) => t.participantId === p.id);
                  const video = tracks.find((t) => t.kind === "video");
                  const videoMuted = p.tracks.find((t) => t.id === video?.id)?.muted ?? false;
                  return (
                    <li class="call-tile" key={p.id} data-participant={p.id}>
                      {video && !videoMuted ? (
                        <TrackView track={video} label={`Video of ${nameOf(p)}`} />
                      ) : (
                        <div class="call-novideo">{video ? "Camera off" : "No camera"}</div>
                      )}
                      {tracks
                        .filter((t) => t.kind === "audio")
                        .map((t) => (
                          <TrackView key={t.id} track={t} label={`Sound of ${nameOf(p)}`} />
                        ))}
                      <p>
                        {nameOf(p)}
                        {mutedWords(p)}
                      </p>
                    </li>
                  );
                })}
              </ul>
              {view.others.length === 0 && <p class="hint">Nobody else is here yet.</p>}
            </section>
          )
        }
      </Loaded>
      <ErrorNote error={error} />
    </>
  );
}
