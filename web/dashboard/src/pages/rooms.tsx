// The project's rooms: newest first, filtered by status in the page (the
// API lists by creation only, spec section 6), refreshed while any room is
// live, and a form to create one.

import { useState } from "preact/hooks";
import { api, pageLimitMax, type Page } from "../api";
import { InputError } from "../errors";
import { can } from "../roles";
import { Link, navigate } from "../router";
import { projectPath, type ProjectScope } from "../state";
import type { Room, RoomStatus } from "../types";
import { Badge, Empty, ErrorNote, Field, Loaded, MoreNote, PageHeader, Table, Time, useAction, useAsync, useInterval } from "../ui";

const statuses: RoomStatus[] = ["waiting", "active", "ending", "ended"];
const refreshMs = 5000;

export const expiryChoices: [number, string][] = [
  [3600, "1 hour"],
  [6 * 3600, "6 hours"],
  [86400, "24 hours"],
  [7 * 86400, "7 days"],
];

/** Parses an optional JSON object typed by a person; null when empty. */
export function parseMetadata(text: string): Record<string, unknown> | null {
  if (text.trim() === "") return null;
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    throw new InputError("Metadata must be a JSON object, such as {\"topic\": \"standup\"}.");
  }
  if (typeof v !== "object" || v === null || Array.isArray(v)) throw new InputError("Metadata must be a JSON object, such as {\"topic\": \"standup\"}.");
  return v as Record<string, unknown>;
}

function CreateRoom({ scope, onCancel }: { scope: ProjectScope; onCancel: () => void }) {
  const [name, setName] = useState("");
  const [maxParticipants, setMaxParticipants] = useState("");
  const [expiresIn, setExpiresIn] = useState(86400);
  const [metadata, setMetadata] = useState("");
  const create = useAction(async () => {
    const body: Record<string, unknown> = { expires_in: expiresIn };
    if (name.trim()) body["name"] = name.trim();
    if (maxParticipants.trim()) body["max_participants"] = Number(maxParticipants);
    const md = parseMetadata(metadata);
    if (md) body["metadata"] = md;
    const room = await api<Room>("POST", "/v1/rooms", { project: scope.project.id, body });
    navigate(projectPath(scope.project.id, "rooms/" + room.id));
  });
  return (
    <form
      class="panel stack"
      aria-label="Create a room"
      onSubmit={(e) => {
        e.preventDefault();
        void create.run();
      }}
    >
      <h2>Create a room</h2>
      <div class="grid-2">
        <Field label="Name (optional)">
          {(id) => <input id={id} maxLength={128} value={name} onInput={(e) => setName(e.currentTarget.value)} />}
        </Field>
        <Field label="Most participants (optional)" hint="Default: the project's per-room limit.">
          {(id, hint) => (
            <input
              id={id}
              type="number"
              min={1}
              inputMode="numeric"
              value={maxParticipants}
              aria-describedby={hint}
              onInput={(e) => setMaxParticipants(e.currentTarget.value)}
            />
          )}
        </Field>
        <Field label="Expires after">
          {(id) => (
            <select id={id} value={expiresIn} onChange={(e) => setExpiresIn(Number(e.currentTarget.value))}>
              {expiryChoices.map(([s, label]) => (
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
        <button type="submit" class="btn btn-primary" data-action="create-room" disabled={create.busy}>
          {create.busy ? "Creating…" : "Create room"}
        </button>
        <button type="button" class="btn" onClick={onCancel}>
          Cancel
        </button>
      </div>
      <ErrorNote error={create.error} />
    </form>
  );
}

export function RoomsPage({ scope }: { scope: ProjectScope }) {
  const pid = scope.project.id;
  const rooms = useAsync(() => api<Page<Room>>("GET", "/v1/rooms", { project: pid, query: { limit: pageLimitMax } }), [pid]);
  const [filter, setFilter] = useState<RoomStatus | "">("");
  const [creating, setCreating] = useState(false);
  const live = rooms.data?.data.some((r) => r.status !== "ended") ?? false;
  useInterval(rooms.reload, refreshMs, live);
  return (
    <>
      <PageHeader
        title="Rooms"
        subtitle="Newest first. The list refreshes while rooms are live."
        actions={
          can.manageRooms(scope.role) &&
          !creating && (
            <button type="button" class="btn btn-primary" data-action="create-room" onClick={() => setCreating(true)}>
              Create room
            </button>
          )
        }
      />
      {creating && <CreateRoom scope={scope} onCancel={() => setCreating(false)} />}
      <div class="toolbar">
        <Field label="Status">
          {(id) => (
            <select id={id} value={filter} onChange={(e) => setFilter(e.currentTarget.value as RoomStatus | "")}>
              <option value="">All</option>
              {statuses.map((s) => (
                <option value={s} key={s}>
                  {s}
                </option>
              ))}
            </select>
          )}
        </Field>
      </div>
      <Loaded state={rooms}>
        {(page) => {
          const shown = page.data.filter((r) => !filter || r.status === filter);
          if (page.data.length === 0) return <Empty>No rooms yet. Create one here, or with your backend through the API.</Empty>;
          if (shown.length === 0) return <Empty>No {filter} rooms among the newest {page.data.length}.</Empty>;
          return (
            <>
              <Table caption="Rooms" head={["Room", "Status", "Most participants", "Created", "Expires"]}>
                {shown.map((r) => (
                  <tr key={r.id}>
                    <td>
                      <Link href={projectPath(pid, "rooms/" + r.id)}>{r.name ?? r.id}</Link>
                      {r.name && <div class="sub">{r.id}</div>}
                    </td>
                    <td>
                      <Badge status={r.status} />
                    </td>
                    <td>{r.max_participants}</td>
                    <td>
                      <Time iso={r.created_at} />
                    </td>
                    <td>
                      <Time iso={r.expires_at} />
                    </td>
                  </tr>
                ))}
              </Table>
              <MoreNote hasMore={page.page.has_more} shown={page.data.length} />
            </>
          );
        }}
      </Loaded>
    </>
  );
}
