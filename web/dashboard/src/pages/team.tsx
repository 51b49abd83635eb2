// The workspace's people: members and their roles (change, remove, leave;
// a workspace always keeps an owner) and invitations (send, list, revoke).

import { useState } from "preact/hooks";
import { api, pageLimitMax, type Page } from "../api";
import { can, roleLabel } from "../roles";
import { navigate } from "../router";
import { useMe, type WorkspaceScope } from "../state";
import type { Invitation, Member, Role } from "../types";
import { Badge, ConfirmButton, Empty, ErrorNote, Field, Loaded, MoreNote, PageHeader, Section, Table, Time, useAction, useAsync } from "../ui";

const roles: Role[] = ["owner", "admin", "member"];

function Members({ scope }: { scope: WorkspaceScope }) {
  const { me, reloadMe } = useMe();
  const aid = scope.account.id;
  const base = `/v1/accounts/${encodeURIComponent(aid)}/members`;
  const members = useAsync(() => api<Page<Member>>("GET", base, { query: { limit: pageLimitMax } }), [aid]);
  const change = useAction(async (m: Member, role: Role) => {
    await api<Member>("PATCH", `${base}/${encodeURIComponent(m.user_id)}`, { body: { role } });
    members.reload();
    if (m.user_id === me.user.id) await reloadMe();
  });
  const remove = useAction(async (m: Member) => {
    await api<Member>("DELETE", `${base}/${encodeURIComponent(m.user_id)}`);
    if (m.user_id === me.user.id) {
      await reloadMe();
      navigate("/", true);
      return;
    }
    members.reload();
  });
  const mine = scope.role;
  return (
    <Section title="Members">
      <p class="hint">A workspace always keeps at least one owner. Owners and admins manage the team; only owners grant or take the owner role.</p>
      <ErrorNote error={change.error ?? remove.error} />
      <Loaded state={members}>
        {(page) => {
          // The only owner can neither leave nor give up the role (the
          // server refuses with last_owner): offer neither. Known only when
          // the page holds every member.
          const owners = page.data.filter((m) => m.role === "owner").length;
          const onlyOwner = (m: Member) => m.role === "owner" && owners === 1 && !page.page.has_more;
          return (
            <>
              <Table caption="Members" head={["Person", "Role", "Joined", ""]}>
                {page.data.map((m) => {
                  const self = m.user_id === me.user.id;
                  // data-action names the target: "self" or its role.
                  const target = self ? "self" : m.role;
                  const choices = onlyOwner(m) ? [m.role] : roles.filter((r) => r === m.role || can.changeRole(mine, m.role, r));
                  return (
                    <tr key={m.user_id}>
                      <td>
                        {m.name || m.email}
                        {self && <span class="sub"> (you)</span>}
                        {m.name && <div class="sub">{m.email}</div>}
                      </td>
                      <td>
                        {choices.length > 1 ? (
                          <label class="inline-select">
                            <span class="visually-hidden">Role of {m.name || m.email}</span>
                            <select value={m.role} disabled={change.busy} onChange={(e) => void change.run(m, e.currentTarget.value as Role)}>
                              {choices.map((r) => (
                                <option value={r} key={r} data-action={r === m.role ? undefined : `change-role ${target} to ${r}`}>
                                  {roleLabel[r]}
                                </option>
                              ))}
                            </select>
                          </label>
                        ) : (
                          roleLabel[m.role]
                        )}
                      </td>
                      <td>
                        <Time iso={m.joined_at} />
                      </td>
                      <td class="actions">
                        {!onlyOwner(m) && can.removeMember(mine, m.role, self) && (
                          <ConfirmButton
                            small
                            danger
                            action={self ? "leave" : `remove ${m.role}`}
                            label={self ? "Leave" : "Remove"}
                            confirm={self ? "Leave this workspace?" : `Remove ${m.name || m.email} from the workspace?`}
                            busy={remove.busy}
                            onConfirm={() => remove.run(m)}
                          />
                        )}
                        {onlyOwner(m) && <span class="sub">The only owner</span>}
                      </td>
                    </tr>
                  );
                })}
              </Table>
              <MoreNote hasMore={page.page.has_more} shown={page.data.length} />
            </>
          );
        }}
      </Loaded>
    </Section>
  );
}

function Invitations({ scope }: { scope: WorkspaceScope }) {
  const aid = scope.account.id;
  const base = `/v1/accounts/${encodeURIComponent(aid)}/invitations`;
  const list = useAsync(() => api<Page<Invitation>>("GET", base, { query: { limit: pageLimitMax } }), [aid]);
  const [email, setEmail] = useState("");
  const [role, setRole] = useState<"member" | "admin">("member");
  const [sent, setSent] = useState<string | null>(null);
  const send = useAction(async () => {
    const inv = await api<Invitation>("POST", base, { body: { email: email.trim(), role } });
    setSent(inv.email);
    setEmail("");
    list.reload();
  });
  const revoke = useAction(async (inv: Invitation) => {
    await api<Invitation>("DELETE", `${base}/${encodeURIComponent(inv.id)}`);
    list.reload();
  });
  return (
    <Section title="Invitations">
      <form
        class="panel stack"
        aria-label="Invite someone"
        onSubmit={(e) => {
          e.preventDefault();
          setSent(null);
          void send.run();
        }}
      >
        <div class="row">
          <Field label="E-mail address">
            {(id) => <input id={id} type="email" required maxLength={254} value={email} onInput={(e) => setEmail(e.currentTarget.value)} />}
          </Field>
          <Field label="Role">
            {(id) => (
              <select id={id} value={role} onChange={(e) => setRole(e.currentTarget.value as "member" | "admin")}>
                <option value="member">Member</option>
                <option value="admin">Admin</option>
              </select>
            )}
          </Field>
          <button type="submit" class="btn btn-primary" data-action="invite" disabled={send.busy}>
            {send.busy ? "Sending…" : "Send invitation"}
          </button>
        </div>
        <p class="hint">The invitation is mailed and works for 7 days, for that address only. Make someone an owner once they joined.</p>
        {sent && (
          <p class="ok-note" role="status">
            Invitation sent to {sent}.
          </p>
        )}
        <ErrorNote error={send.error} />
      </form>
      <ErrorNote error={revoke.error} />
      <Loaded state={list}>
        {(page) =>
          page.data.length === 0 ? (
            <Empty>No invitations.</Empty>
          ) : (
            <>
              <Table caption="Invitations" head={["Invited", "Role", "Status", "Sent", "Expires", ""]}>
                {page.data.map((inv) => (
                  <tr key={inv.id}>
                    <td>{inv.email}</td>
                    <td>{roleLabel[inv.role]}</td>
                    <td>
                      <Badge status={inv.status} />
                    </td>
                    <td>
                      <Time iso={inv.created_at} />
                    </td>
                    <td>
                      <Time iso={inv.expires_at} />
                    </td>
                    <td class="actions">
                      {inv.status === "pending" && (
                        <ConfirmButton small danger action="revoke-invitation" label="Revoke" confirm={`Revoke the invitation to ${inv.email}?`} busy={revoke.busy} onConfirm={() => revoke.run(inv)} />
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
    </Section>
  );
}

export function TeamPage({ scope }: { scope: WorkspaceScope }) {
  return (
    <>
      <PageHeader title="Team" subtitle={`The people of ${scope.account.name}. You are ${roleLabel[scope.role].toLowerCase()}.`} />
      <Members scope={scope} />
      {can.manageInvitations(scope.role) && <Invitations scope={scope} />}
    </>
  );
}
