// The person's own page: display name, their workspaces (and a new one,
// within the cap of workspaces a person may own), and their sessions
// (sign out here, or everywhere).

import { useState } from "preact/hooks";
import { api } from "../api";
import { roleLabel } from "../roles";
import { Link, navigate } from "../router";
import { signOut } from "../shell";
import { accountPath, firstActiveProject, projectPath, useMe } from "../state";
import type { Account, Me } from "../types";
import { ErrorNote, Field, PageHeader, Section, Table, useAction } from "../ui";

/** The API's cap (docs/dashboard.md, MaxOwnedAccountsPerUser). */
const maxOwnedWorkspaces = 10;

export function AccountPage() {
  const { me, reloadMe } = useMe();
  const [name, setName] = useState(me.user.name);
  const [saved, setSaved] = useState(false);
  const [workspaceName, setWorkspaceName] = useState("");
  const rename = useAction(async () => {
    setSaved(false);
    await api<Me>("PATCH", "/v1/me", { body: { name } });
    await reloadMe();
    setSaved(true);
  });
  const createWorkspace = useAction(async () => {
    const body = workspaceName.trim() ? { name: workspaceName.trim() } : {};
    const a = await api<Account>("POST", "/v1/accounts", { body });
    await reloadMe();
    const p = firstActiveProject(a);
    navigate(p ? projectPath(p.id) : accountPath(a.id, "projects"));
  });
  const everywhere = useAction(() => signOut(true));
  const owned = me.accounts.filter((a) => a.role === "owner").length;
  return (
    <>
      <PageHeader title="Your profile" subtitle={me.user.email} />
      <form
        class="panel row"
        aria-label="Display name"
        onSubmit={(e) => {
          e.preventDefault();
          void rename.run();
        }}
      >
        <Field label="Display name" hint="Shown to your team.">
          {(id, hint) => <input id={id} required maxLength={128} value={name} aria-describedby={hint} onInput={(e) => setName(e.currentTarget.value)} />}
        </Field>
        <button type="submit" class="btn btn-primary" data-action="save-display-name" disabled={rename.busy}>
          Save
        </button>
        {saved && (
          <p class="ok-note" role="status">
            Saved.
          </p>
        )}
        <ErrorNote error={rename.error} />
      </form>
      <Section title="Your workspaces">
        <Table caption="Your workspaces" head={["Workspace", "Your role", "Projects"]}>
          {[...me.accounts].sort((a, b) => a.name.localeCompare(b.name)).map((a) => {
            const p = firstActiveProject(a);
            return (
              <tr key={a.id}>
                <td>
                  <Link href={p ? projectPath(p.id) : accountPath(a.id, "projects")}>{a.name}</Link>
                  <div class="sub">{a.id}</div>
                </td>
                <td>{roleLabel[a.role]}</td>
                <td>{a.projects.filter((x) => x.status === "active").length}</td>
              </tr>
            );
          })}
        </Table>
        <form
          class="panel row"
          aria-label="Create a workspace"
          onSubmit={(e) => {
            e.preventDefault();
            void createWorkspace.run();
          }}
        >
          <Field
            label="New workspace name (optional)"
            hint={
              owned >= maxOwnedWorkspaces
                ? `You own ${owned} of at most ${maxOwnedWorkspaces} workspaces, the most a person may own.`
                : `You own ${owned} of at most ${maxOwnedWorkspaces} workspaces. A new one starts with a project and an empty wallet.`
            }
          >
            {(id, hint) => <input id={id} maxLength={128} value={workspaceName} aria-describedby={hint} onInput={(e) => setWorkspaceName(e.currentTarget.value)} />}
          </Field>
          <button type="submit" class="btn" data-action="create-workspace" disabled={createWorkspace.busy || owned >= maxOwnedWorkspaces}>
            Create workspace
          </button>
          <ErrorNote error={createWorkspace.error} />
        </form>
      </Section>
      <Section title="Sessions">
        <p>Signing out everywhere ends every session of yours, on every device, this one included.</p>
        <div class="row">
          <button type="button" class="btn" data-action="sign-out" onClick={() => void signOut(false)}>
            Sign out
          </button>
          <button type="button" class="btn btn-danger" data-action="sign-out-everywhere" disabled={everywhere.busy} onClick={() => void everywhere.run()}>
            Sign out everywhere
          </button>
        </div>
        <ErrorNote error={everywhere.error} />
      </Section>
    </>
  );
}
