// What each workspace role may do, as the server decides it (spec 5.3,
// docs/dashboard.md "Members and roles"). The dashboard only uses this to
// leave out buttons the server would refuse; the server enforces every rule
// itself, and a refusal is still shown in words if it happens.

import type { Role } from "./types";

export const allScopes = [
  "rooms:read",
  "rooms:write",
  "participants:read",
  "participants:write",
  "usage:read",
  "billing:read",
  "billing:write",
  "api_keys:read",
  "api_keys:write",
  "webhooks:read",
  "webhooks:write",
  "project:read",
  "audit_logs:read",
] as const;

export type Scope = (typeof allScopes)[number];

const memberScopes: ReadonlySet<Scope> = new Set<Scope>([
  "rooms:read",
  "rooms:write",
  "participants:read",
  "participants:write",
  "usage:read",
  "billing:read",
  "api_keys:read",
  "webhooks:read",
  "project:read",
  "audit_logs:read",
]);

/** The scopes a role's session holds on the workspace's project routes. */
export function roleScopes(role: Role): ReadonlySet<Scope> {
  return role === "member" ? memberScopes : new Set<Scope>(allScopes);
}

export function hasScope(role: Role, scope: Scope): boolean {
  return roleScopes(role).has(scope);
}

/** Dashboard actions, by role (docs/dashboard.md, "Who may do what"). */
export const can = {
  renameWorkspace: (r: Role) => r !== "member",
  createProject: (r: Role) => r !== "member",
  renameProject: (r: Role) => r !== "member",
  archiveProject: (r: Role) => r === "owner",
  manageInvitations: (r: Role) => r !== "member",
  readWorkspaceAudit: (r: Role) => r !== "member",
  /** Change `target`'s role to `to`. */
  changeRole: (r: Role, target: Role, to: Role) => r === "owner" || (r === "admin" && target !== "owner" && to !== "owner"),
  /** Remove a member with role `target` (oneself is always allowed, but for the last owner). */
  removeMember: (r: Role, target: Role, self: boolean) => self || r === "owner" || (r === "admin" && target !== "owner"),
  topUp: (r: Role) => hasScope(r, "billing:write"),
  manageKeys: (r: Role) => hasScope(r, "api_keys:write"),
  manageWebhooks: (r: Role) => hasScope(r, "webhooks:write"),
  manageRooms: (r: Role) => hasScope(r, "rooms:write"),
  manageParticipants: (r: Role) => hasScope(r, "participants:write"),
};

export const roleLabel: Record<Role, string> = { owner: "Owner", admin: "Admin", member: "Member" };
