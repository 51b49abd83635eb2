// The project's API keys: create one with the scopes it needs (only scopes
// the person holds can be picked), its secret shown once, the list with
// last4 and last use, and revoke.

import { useState } from "preact/hooks";
import { api, pageLimitMax, type Page } from "../api";
import { InputError } from "../errors";
import { allScopes, can, roleScopes, type Scope } from "../roles";
import type { ProjectScope } from "../state";
import type { ApiKey } from "../types";
import { Badge, ConfirmButton, Empty, ErrorNote, Field, Loaded, MoreNote, PageHeader, SecretOnce, Table, Time, useAction, useAsync } from "../ui";

function CreateKey({ scope, onCreated, onCancel }: { scope: ProjectScope; onCreated: () => void; onCancel: () => void }) {
  const held = roleScopes(scope.role);
  const [name, setName] = useState("");
  const [picked, setPicked] = useState<Set<Scope>>(new Set());
  const [created, setCreated] = useState<ApiKey | null>(null);
  const create = useAction(async () => {
    if (picked.size === 0) throw new InputError("Pick at least one scope.");
    const body: Record<string, unknown> = { scopes: allScopes.filter((s) => picked.has(s)) };
    if (name.trim()) body["name"] = name.trim();
    setCreated(await api<ApiKey>("POST", "/v1/api-keys", { project: scope.project.id, body }));
    onCreated();
  });
  const toggle = (s: Scope, on: boolean) => {
    const next = new Set(picked);
    if (on) next.add(s);
    else next.delete(s);
    setPicked(next);
  };
  if (created?.secret) {
    return (
      <SecretOnce title={`API key ${created.name ?? created.id} created`} label="Secret key" value={created.secret} onDone={onCancel}>
        <p class="hint">Use it from your backend as <code>Authorization: Bearer sk_live_…</code>. Never put it in a client app.</p>
      </SecretOnce>
    );
  }
  return (
    <form
      class="panel stack"
      aria-label="Create an API key"
      onSubmit={(e) => {
        e.preventDefault();
        void create.run();
      }}
    >
      <h2>Create an API key</h2>
      <Field label="Name (optional)" hint="To tell keys apart, such as “production backend”.">
        {(id, hint) => <input id={id} maxLength={128} value={name} aria-describedby={hint} onInput={(e) => setName(e.currentTarget.value)} />}
      </Field>
      <fieldset class="scopes">
        <legend>Scopes</legend>
        <div class="row">
          <button type="button" class="btn btn-small" onClick={() => setPicked(new Set(allScopes.filter((s) => held.has(s))))}>
            All I hold
          </button>
          <button type="button" class="btn btn-small" onClick={() => setPicked(new Set())}>
            None
          </button>
        </div>
        <div class="checks">
          {allScopes
            .filter((s) => held.has(s))
            .map((s) => (
              <label key={s} class="check">
                <input type="checkbox" checked={picked.has(s)} onChange={(e) => toggle(s, e.currentTarget.checked)} />
                <code>{s}</code>
              </label>
            ))}
        </div>
      </fieldset>
      <div class="row">
        <button type="submit" class="btn btn-primary" data-action="create-api-key" disabled={create.busy}>
          {create.busy ? "Creating…" : "Create key"}
        </button>
        <button type="button" class="btn" onClick={onCancel}>
          Cancel
        </button>
      </div>
      <ErrorNote error={create.error} />
    </form>
  );
}

export function ApiKeysPage({ scope }: { scope: ProjectScope }) {
  const pid = scope.project.id;
  const keys = useAsync(() => api<Page<ApiKey>>("GET", "/v1/api-keys", { project: pid, query: { limit: pageLimitMax } }), [pid]);
  const [creating, setCreating] = useState(false);
  const revoke = useAction(async (k: ApiKey) => {
    await api<ApiKey>("DELETE", `/v1/api-keys/${encodeURIComponent(k.id)}`, { project: pid });
    keys.reload();
  });
  const manage = can.manageKeys(scope.role);
  return (
    <>
      <PageHeader
        title="API keys"
        subtitle="Secret keys for your backend. Each holds only the scopes it was given."
        actions={
          manage &&
          !creating && (
            <button type="button" class="btn btn-primary" data-action="create-api-key" onClick={() => setCreating(true)}>
              Create API key
            </button>
          )
        }
      />
      {creating && <CreateKey scope={scope} onCreated={keys.reload} onCancel={() => setCreating(false)} />}
      <ErrorNote error={revoke.error} />
      <Loaded state={keys}>
        {(page) =>
          page.data.length === 0 ? (
            <Empty>No API keys. {manage ? "Create one for your backend." : "An owner or admin can create one."}</Empty>
          ) : (
            <>
              <Table caption="API keys" head={["Key", "Scopes", "Status", "Created", "Last used", ""]}>
                {page.data.map((k) => (
                  <tr key={k.id}>
                    <td>
                      {k.name ?? "Unnamed key"}
                      <div class="sub">
                        <code>sk_live_…{k.last4}</code> · {k.id}
                      </div>
                    </td>
                    <td class="scope-list">
                      {k.scopes.length === allScopes.length ? "all scopes" : k.scopes.map((s) => <code key={s}>{s}</code>)}
                    </td>
                    <td>
                      <Badge status={k.status} />
                      {k.revoked_at && (
                        <div class="sub">
                          <Time iso={k.revoked_at} />
                        </div>
                      )}
                    </td>
                    <td>
                      <Time iso={k.created_at} />
                    </td>
                    <td>
                      <Time iso={k.last_used_at} empty="never" />
                    </td>
                    <td class="actions">
                      {manage && k.status === "active" && (
                        <ConfirmButton
                          small
                          danger
                          action="revoke-api-key"
                          label="Revoke"
                          confirm={`Revoke ${k.name ?? k.id}? Requests with it fail at once.`}
                          busy={revoke.busy}
                          onConfirm={() => revoke.run(k)}
                        />
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
    </>
  );
}
