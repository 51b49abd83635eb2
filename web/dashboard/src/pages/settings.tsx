// The workspace's settings: its name.

import { useState } from "preact/hooks";
import { api } from "../api";
import { can, roleLabel } from "../roles";
import { useMe, type WorkspaceScope } from "../state";
import type { Account } from "../types";
import { ErrorNote, Field, PageHeader, Time, useAction } from "../ui";

export function SettingsPage({ scope }: { scope: WorkspaceScope }) {
  const { reloadMe } = useMe();
  const [name, setName] = useState(scope.account.name);
  const [saved, setSaved] = useState(false);
  const save = useAction(async () => {
    setSaved(false);
    await api<Account>("PATCH", `/v1/accounts/${encodeURIComponent(scope.account.id)}`, { body: { name } });
    await reloadMe();
    setSaved(true);
  });
  return (
    <>
      <PageHeader title="Workspace settings" subtitle={<code>{scope.account.id}</code>} />
      <dl class="facts">
        <div>
          <dt>Your role</dt>
          <dd>{roleLabel[scope.role]}</dd>
        </div>
        <div>
          <dt>Created</dt>
          <dd>
            <Time iso={scope.account.created_at} />
          </dd>
        </div>
      </dl>
      {can.renameWorkspace(scope.role) ? (
        <form
          class="panel row"
          aria-label="Rename the workspace"
          onSubmit={(e) => {
            e.preventDefault();
            void save.run();
          }}
        >
          <Field label="Workspace name">
            {(id) => <input id={id} required maxLength={128} value={name} onInput={(e) => setName(e.currentTarget.value)} />}
          </Field>
          <button type="submit" class="btn btn-primary" data-action="rename-workspace" disabled={save.busy}>
            Save
          </button>
          {saved && (
            <p class="ok-note" role="status">
              Saved.
            </p>
          )}
          <ErrorNote error={save.error} />
        </form>
      ) : (
        <p class="hint">Only owners and admins can rename the workspace.</p>
      )}
    </>
  );
}
