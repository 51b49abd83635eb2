// Audit logs: the project's (keys, rooms deleted, webhooks, billing
// adjustments) and the workspace's (team, invitations, projects).

import { api, pageLimitMax, type Page } from "../api";
import type { ProjectScope, WorkspaceScope } from "../state";
import type { AuditEntry } from "../types";
import { Empty, Loaded, MoreNote, PageHeader, Table, Time, useAsync, type Async } from "../ui";

function AuditTable({ state }: { state: Async<Page<AuditEntry>> }) {
  return (
    <Loaded state={state}>
      {(page) =>
        page.data.length === 0 ? (
          <Empty>Nothing recorded yet.</Empty>
        ) : (
          <>
            <Table caption="Audit log entries" head={["When", "Action", "By", "Target", "Request", "Details"]}>
              {page.data.map((e) => (
                <tr key={e.id}>
                  <td>
                    <Time iso={e.created_at} />
                  </td>
                  <td>
                    <code>{e.action}</code>
                  </td>
                  <td>
                    {e.actor.type}
                    <div class="sub">{e.actor.id}</div>
                  </td>
                  <td>
                    {e.target.type}
                    <div class="sub">{e.target.id}</div>
                  </td>
                  <td>
                    {e.request_id ? <code class="sub">{e.request_id}</code> : <span class="muted">—</span>}
                    {e.source_ip && <div class="sub">{e.source_ip}</div>}
                  </td>
                  <td>{Object.keys(e.details).length > 0 ? <code class="details">{JSON.stringify(e.details)}</code> : <span class="muted">—</span>}</td>
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

export function ProjectAuditPage({ scope }: { scope: ProjectScope }) {
  const pid = scope.project.id;
  const log = useAsync(() => api<Page<AuditEntry>>("GET", "/v1/audit-logs", { project: pid, query: { limit: pageLimitMax } }), [pid]);
  return (
    <>
      <PageHeader title="Audit log" subtitle="Who changed what in this project, newest first." />
      <AuditTable state={log} />
    </>
  );
}

export function WorkspaceAuditPage({ scope }: { scope: WorkspaceScope }) {
  const aid = scope.account.id;
  const log = useAsync(() => api<Page<AuditEntry>>("GET", `/v1/accounts/${encodeURIComponent(aid)}/audit-logs`, { query: { limit: pageLimitMax } }), [aid]);
  return (
    <>
      <PageHeader title="Workspace audit log" subtitle="Team, invitations and projects of this workspace, newest first." />
      <AuditTable state={log} />
    </>
  );
}
