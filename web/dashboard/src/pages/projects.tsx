// The workspace's projects: create, rename, archive (owners; refused while
// rooms are live or for the last active project, with the reason in words).

import { useState } from "preact/hooks";
import { api } from "../api";
import { can } from "../roles";
import { Link } from "../router";
import { projectPath, useMe, type WorkspaceScope } from "../state";
import type { Project } from "../types";
import { Badge, ConfirmButton, ErrorNote, Field, PageHeader, Table, Time, useAction } from "../ui";

/** The API's cap (docs/dashboard.md, MaxProjectsPerAccount). */
const maxProjectsPerAccount = 100;

function Rename({ scope, project, onDone }: { scope: WorkspaceScope; project: Project; onDone: () => void }) {
  const { reloadMe } = useMe();
  const [name, setName] = useState(project.name);
  const save = useAction(async () => {
    await api<Project>("PATCH", `/v1/accounts/${encodeURIComponent(scope.account.id)}/projects/${encodeURIComponent(project.id)}`, { body: { name } });
    await reloadMe();
    onDone();
  });
  return (
    <form
      class="inline-form"
      onSubmit={(e) => {
        e.preventDefault();
        void save.run();
      }}
    >
      <Field label={`New name for ${project.name}`}>
        {(id) => <input id={id} required maxLength={128} value={name} onInput={(e) => setName(e.currentTarget.value)} />}
      </Field>
      <button type="submit" class="btn btn-small btn-primary" data-action="rename-project" disabled={save.busy}>
        Save
      </button>
      <button type="button" class="btn btn-small" onClick={onDone}>
        Cancel
      </button>
      <ErrorNote error={save.error} />
    </form>
  );
}

export function ProjectsPage({ scope }: { scope: WorkspaceScope }) {
  const { reloadMe } = useMe();
  const aid = scope.account.id;
  const [name, setName] = useState("");
  const [renaming, setRenaming] = useState<string | null>(null);
  const create = useAction(async () => {
    await api<Project>("POST", `/v1/accounts/${encodeURIComponent(aid)}/projects`, { body: { name: name.trim() } });
    setName("");
    await reloadMe();
  });
  const archive = useAction(async (p: Project) => {
    await api<Project>("DELETE", `/v1/accounts/${encodeURIComponent(aid)}/projects/${encodeURIComponent(p.id)}`);
    await reloadMe();
  });
  const projects = scope.account.projects;
  return (
    <>
      <PageHeader title="Projects" subtitle={`${projects.length} of at most ${maxProjectsPerAccount} projects (archived ones count).`} />
      {can.createProject(scope.role) && (
        <form
          class="panel row"
          aria-label="Create a project"
          onSubmit={(e) => {
            e.preventDefault();
            void create.run();
          }}
        >
          <Field label="New project name">
            {(id) => <input id={id} required maxLength={128} value={name} onInput={(e) => setName(e.currentTarget.value)} />}
          </Field>
          <button type="submit" class="btn btn-primary" data-action="create-project" disabled={create.busy}>
            {create.busy ? "Creating…" : "Create project"}
          </button>
          <ErrorNote error={create.error} />
        </form>
      )}
      <ErrorNote error={archive.error} />
      <Table caption="Projects" head={["Project", "Status", "Created", ""]}>
        {projects.map((p) => (
          <tr key={p.id}>
            <td>
              {renaming === p.id ? (
                <Rename scope={scope} project={p} onDone={() => setRenaming(null)} />
              ) : p.status === "active" ? (
                <Link href={projectPath(p.id)}>{p.name}</Link>
              ) : (
                p.name
              )}
              <div class="sub">{p.id}</div>
            </td>
            <td>
              <Badge status={p.status} />
              {p.archived_at && (
                <div class="sub">
                  <Time iso={p.archived_at} />
                </div>
              )}
            </td>
            <td>
              <Time iso={p.created_at} />
            </td>
            <td class="actions">
              {p.status === "active" && renaming !== p.id && (
                <>
                  {can.renameProject(scope.role) && (
                    <button type="button" class="btn btn-small" data-action="rename-project" onClick={() => setRenaming(p.id)}>
                      Rename
                    </button>
                  )}
                  {can.archiveProject(scope.role) && (
                    <ConfirmButton
                      small
                      danger
                      action="archive-project"
                      label="Archive"
                      confirm={`Archive ${p.name}? Its keys are revoked and its webhooks disabled; this cannot be undone.`}
                      busy={archive.busy}
                      onConfirm={() => archive.run(p)}
                    />
                  )}
                </>
              )}
            </td>
          </tr>
        ))}
      </Table>
    </>
  );
}
