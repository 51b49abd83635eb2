// One room: its state, its participants and their states, delete (the room
// goes ending, then ended), remove a participant, and add one, showing its
// token once. Refreshed while the room has not ended.

import { useState } from "preact/hooks";
import { api, pageLimitMax, type Page } from "../api";
import { can } from "../roles";
import { Link } from "../router";
import { projectPath, type ProjectScope } from "../state";
import type { Participant, Room } from "../types";
import {
  Badge,
  ConfirmButton,
  Empty,
  ErrorNote,
  Field,
  Loaded,
  MoreNote,
  PageHeader,
  SecretOnce,
  Section,
  Table,
  Time,
  useAction,
  useAsync,
  useInterval,
} from "../ui";
import { callPath } from "./call";
import { parseMetadata } from "./rooms";

const refreshMs = 3000;

const participantExpiry: [number, string][] = [
  [600, "10 minutes"],
  [3600, "1 hour"],
  [6 * 3600, "6 hours"],
  [86400, "24 hours"],
];

function AddParticipant({ scope, room, onAdded }: { scope: ProjectScope; room: Room; onAdded: () => void }) {
  const [name, setName] = useState("");
  const [externalId, setExternalId] = useState("");
  const [role, setRole] = useState<"publisher" | "subscriber">("publisher");
  const [expiresIn, setExpiresIn] = useState(3600);
  const [metadata, setMetadata] = useState("");
  const [created, setCreated] = useState<Participant | null>(null);
  const add = useAction(async () => {
    const body: Record<string, unknown> = { role, expires_in: expiresIn };
    if (name.trim()) body["name"] = name.trim();
    if (externalId.trim()) body["external_id"] = externalId.trim();
    const md = parseMetadata(metadata);
    if (md) body["metadata"] = md;
    const p = await api<Participant>("POST", `/v1/rooms/${encodeURIComponent(room.id)}/participants`, { project: scope.project.id, body });
    setCreated(p);
    setName("");
    setExternalId("");
    setMetadata("");
    onAdded();
  });
  if (created?.token) {
    return (
      <SecretOnce level={3} title={`Participant ${created.name ?? created.id} added`} label="Participant token" value={created.token} onDone={() => setCreated(null)}>
        <p class="hint">
          Give this token to the participant's client app; it trades it at <code>POST /v1/connect</code> for a media endpoint. It
          works until <Time iso={created.expires_at} />.
        </p>
      </SecretOnce>
    );
  }
  return (
    <form
      class="panel stack"
      aria-label="Add a participant"
      onSubmit={(e) => {
        e.preventDefault();
        void add.run();
      }}
    >
      <h3>Add a participant</h3>
      <div class="grid-2">
        <Field label="Name (optional)">
          {(id) => <input id={id} maxLength={128} value={name} onInput={(e) => setName(e.currentTarget.value)} />}
        </Field>
        <Field label="External id (optional)" hint="Your own id for the person.">
          {(id, hint) => (
            <input id={id} maxLength={128} value={externalId} aria-describedby={hint} onInput={(e) => setExternalId(e.currentTarget.value)} />
          )}
        </Field>
        <Field label="Role">
          {(id) => (
            <select id={id} value={role} onChange={(e) => setRole(e.currentTarget.value as "publisher" | "subscriber")}>
              <option value="publisher">publisher (sends and receives)</option>
              <option value="subscriber">subscriber (receives only)</option>
            </select>
          )}
        </Field>
        <Field label="Token valid for">
          {(id) => (
            <select id={id} value={expiresIn} onChange={(e) => setExpiresIn(Number(e.currentTarget.value))}>
              {participantExpiry.map(([s, label]) => (
                <option value={s} key={s}>
                  {label}
                </option>
              ))}
            </select>
          )}
        </Field>
        <Field label="Metadata (optional JSON object)">
          {(id) => (
            <textarea id={id} rows={2} spellcheck={false} value={metadata} onInput={(e) => setMetadata(e.currentTarget.value)} />
          )}
        </Field>
      </div>
      <div class="row">
        <button type="submit" class="btn btn-primary" data-action="add-participant" disabled={add.busy}>
          {add.busy ? "Adding…" : "Add participant"}
        </button>
      </div>
      <ErrorNote error={add.error} />
    </form>
  );
}

function Participants({ scope, room, list }: { scope: ProjectScope; room: Room; list: ReturnType<typeof useAsync<Page<Participant>>> }) {
  const remove = useAction(async (p: Participant) => {
    await api("DELETE", `/v1/rooms/${encodeURIComponent(room.id)}/participants/${encodeURIComponent(p.id)}`, { project: scope.project.id });
    list.reload();
  });
  const mayRemove = can.manageParticipants(scope.role);
  return (
    <Loaded state={list}>
      {(page) =>
        page.data.length === 0 ? (
          <Empty>No participants yet.</Empty>
        ) : (
          <>
            <ErrorNote error={remove.error} />
            <Table caption="Participants" head={["Participant", "Role", "Status", "Created", "Connected", "Ended", ""]}>
              {page.data.map((p) => (
                <tr key={p.id}>
                  <td>
                    {p.name ?? p.external_id ?? p.id}
                    <div class="sub">
                      {p.id}
                      {p.external_id && p.name ? ` · ${p.external_id}` : ""}
                    </div>
                  </td>
                  <td>{p.role}</td>
                  <td>
                    <Badge status={p.status} />
                  </td>
                  <td>
                    <Time iso={p.created_at} />
                  </td>
                  <td>
                    <Time iso={p.connected_at} />
                  </td>
                  <td>
                    <Time iso={p.ended_at} />
                  </td>
                  <td class="actions">
                    {mayRemove && !["left", "removed", "ended"].includes(p.status) && (
                      <ConfirmButton small danger action="remove-participant" label="Remove" confirm={`Remove ${p.name ?? p.id}?`} busy={remove.busy} onConfirm={() => remove.run(p)} />
                    )}
                  </td>
                </tr>
              ))}
            </Table>
            <MoreNote hasMore={page.page.has_more} shown={page.data.length} />
          </>
        )
      }
    </Loaded>
  );
}

export function RoomPage({ scope, roomId }: { scope: ProjectScope; roomId: string }) {
  const pid = scope.project.id;
  const path = `/v1/rooms/${encodeURIComponent(roomId)}`;
  const room = useAsync(() => api<Room>("GET", path, { project: pid }), [pid, roomId]);
  const participants = useAsync(() => api<Page<Participant>>("GET", path + "/participants", { project: pid, query: { limit: pageLimitMax } }), [pid, roomId]);
  const live = room.data !== undefined && room.data.status !== "ended";
  useInterval(() => {
    room.reload();
    participants.reload();
  }, refreshMs, live);
  const del = useAction(async () => {
    await api<Room>("DELETE", path, { project: pid });
    room.reload();
    participants.reload();
  });
  const r = room.data;
  return (
    <>
      <p class="crumbs">
        <Link href={projectPath(pid, "rooms")}>Rooms</Link> /
      </p>
      <PageHeader
        title={r ? (r.name ?? r.id) : "Room"}
        subtitle={r ? <code>{r.id}</code> : undefined}
        actions={
          r &&
          (r.status === "waiting" || r.status === "active") && (
            <>
              {can.manageParticipants(scope.role) && (
                // A plain link, not the in-page router: the call page's
                // document needs its own policies (camera, microphone).
                <a class="btn" href={callPath(pid, r.id)}>
                  Join in browser
                </a>
              )}
              {can.manageRooms(scope.role) && (
                <ConfirmButton danger action="delete-room" label="Delete room" confirm="Delete this room? Everyone in it is disconnected." busy={del.busy} onConfirm={() => del.run()} />
              )}
            </>
          )
        }
      />
      <ErrorNote error={del.error} />
      <Loaded state={room}>
        {(r) => (
          <>
            <dl class="facts">
              <div>
                <dt>Status</dt>
                <dd>
                  <Badge status={r.status} />
                  {r.end_reason && <span class="sub"> ({r.end_reason})</span>}
                </dd>
              </div>
              <div>
                <dt>Most participants</dt>
                <dd>{r.max_participants}</dd>
              </div>
              <div>
                <dt>Region</dt>
                <dd>{r.region}</dd>
              </div>
              <div>
                <dt>Created</dt>
                <dd>
                  <Time iso={r.created_at} />
                </dd>
              </div>
              <div>
                <dt>Expires</dt>
                <dd>
                  <Time iso={r.expires_at} />
                </dd>
              </div>
              <div>
                <dt>Ended</dt>
                <dd>
                  <Time iso={r.ended_at} />
                </dd>
              </div>
            </dl>
            {Object.keys(r.metadata).length > 0 && (
              <details>
                <summary>Metadata</summary>
                <pre class="json">{JSON.stringify(r.metadata, null, 2)}</pre>
              </details>
            )}
            <Section title="Participants">
              <Participants scope={scope} room={r} list={participants} />
              {can.manageParticipants(scope.role) && (r.status === "waiting" || r.status === "active") && (
                <AddParticipant scope={scope} room={r} onAdded={participants.reload} />
              )}
            </Section>
          </>
        )}
      </Loaded>
    </>
  );
}
