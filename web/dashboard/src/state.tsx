// Who is signed in and where they are: the GET /v1/me answer (the user,
// their workspaces with their role in each, and each workspace's
// projects), shared by every page, and the workspace and project a page
// belongs to.

import { createContext } from "preact";
import { useContext } from "preact/hooks";
import type { Account, Me, Project, Role } from "./types";

export interface MeState {
  me: Me;
  /** Fetches GET /v1/me again (after a rename, a new project, a role change…). */
  reloadMe: () => Promise<Me>;
}

export const MeContext = createContext<MeState | null>(null);

export function useMe(): MeState {
  const v = useContext(MeContext);
  if (!v) throw new Error("useMe outside a signed-in page");
  return v;
}

/** A page inside one workspace. */
export interface WorkspaceScope {
  account: Account;
  role: Role;
}

/** A page inside one project (of one workspace). */
export interface ProjectScope extends WorkspaceScope {
  project: Project;
}

export function findProject(me: Me, projectId: string): ProjectScope | null {
  for (const account of me.accounts) {
    const project = account.projects.find((p) => p.id === projectId);
    if (project) return { account, project, role: account.role };
  }
  return null;
}

export function findAccount(me: Me, accountId: string): WorkspaceScope | null {
  const account = me.accounts.find((a) => a.id === accountId);
  return account ? { account, role: account.role } : null;
}

/** The first active project of a workspace: where switching to it lands. */
export function firstActiveProject(account: Account): Project | undefined {
  return account.projects.find((p) => p.status === "active");
}

export const projectPath = (projectId: string, page = "rooms") => `/p/${encodeURIComponent(projectId)}/${page}`;
export const accountPath = (accountId: string, page: string) => `/a/${encodeURIComponent(accountId)}/${page}`;
