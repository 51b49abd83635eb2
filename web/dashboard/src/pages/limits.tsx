// The project's limits: the caps and per-minute rates every request is
// held to (read-only here; an operator sets them).

import { api } from "../api";
import type { ProjectScope } from "../state";
import type { ProjectLimits } from "../types";
import { Loaded, PageHeader, Table, useAsync } from "../ui";

const rows: [keyof ProjectLimits, string, string][] = [
  ["max_active_rooms", "Active rooms", "Rooms not yet ended, at once"],
  ["max_active_participants", "Connected participants", "Across all rooms of the project, at once"],
  ["max_participants_per_room", "Participants per room", "The most a room may allow"],
  ["room_creates_per_minute", "Room creations", "Per minute"],
  ["participant_creates_per_minute", "Participant creations", "Per minute"],
  ["connect_requests_per_minute", "Connect requests", "Per minute"],
];

export function LimitsPage({ scope }: { scope: ProjectScope }) {
  const pid = scope.project.id;
  const limits = useAsync(() => api<ProjectLimits>("GET", "/v1/project/limits", { project: pid }), [pid]);
  return (
    <>
      <PageHeader title="Limits" subtitle="What this project may use at once and per minute. Past a limit, requests are refused with its name." />
      <Loaded state={limits}>
        {(l) => (
          <Table caption="Project limits" head={["Limit", "Value", "Meaning", "Name in errors"]}>
            {rows.map(([key, label, meaning]) => (
              <tr key={key}>
                <td>{label}</td>
                <td class="num">{String(l[key])}</td>
                <td>{meaning}</td>
                <td>
                  <code>{key}</code>
                </td>
              </tr>
            ))}
          </Table>
        )}
      </Loaded>
    </>
  );
}
