// The frame of every signed-in page: a top bar (workspace and project
// switchers, the person, sign out) and the navigation of the current
// project and workspace. At narrow widths the navigation folds into a
// menu button.

import type { ComponentChildren } from "preact";
import { useState } from "preact/hooks";
import { api } from "./api";
import { roleLabel, can } from "./roles";
import { Link, navigate, useLocation } from "./router";
import { clearSession } from "./session";
import { accountPath, firstActiveProject, projectPath, useMe } from "./state";
import type { Account, Project } from "./types";

interface NavItem {
  href: string;
  label: string;
  /** data-action of a link only some roles are offered. */
  action?: string;
}

function projectNav(p: Project): NavItem[] {
  return [
    { href: projectPath(p.id, "rooms"), label: "Rooms" },
    { href: projectPath(p.id, "usage"), label: "Usage" },
    { href: projectPath(p.id, "api-keys"), label: "API keys" },
    { href: projectPath(p.id, "webhooks"), label: "Webhooks" },
    { href: projectPath(p.id, "audit-logs"), label: "Audit log" },
    { href: projectPath(p.id, "limits"), label: "Limits" },
  ];
}

function workspaceNav(a: Account, billingProject: Project | undefined): NavItem[] {
  const items: NavItem[] = [];
  if (billingProject) items.push({ href: projectPath(billingProject.id, "billing"), label: "Billing" });
  items.push({ href: accountPath(a.id, "team"), label: "Team" });
  items.push({ href: accountPath(a.id, "projects"), label: "Projects" });
  if (can.readWorkspaceAudit(a.role)) items.push({ href: accountPath(a.id, "audit-logs"), label: "Workspace audit log", action: "read-workspace-audit-log" });
  items.push({ href: accountPath(a.id, "settings"), label: "Settings" });
  return items;
}

export async function signOut(everywhere: boolean): Promise<void> {
  try {
    await api<void>("POST", everywhere ? "/v1/auth/logout-all" : "/v1/auth/logout");
  } finally {
    clearSession();
    navigate("/sign-in", true);
  }
}

export function Shell(props: { account: Account; project?: Project; children: ComponentChildren }) {
  const { me } = useMe();
  const loc = useLocation();
  const [menuOpen, setMenuOpen] = useState(false);
  const account = props.account;
  const project = props.project ?? firstActiveProject(account);
  const activeProjects = account.projects.filter((p) => p.status === "active");
  const navLink = (item: NavItem) => {
    const current = loc.path === item.href || loc.path.startsWith(item.href + "/");
    return (
      <li key={item.href}>
        <Link href={item.href} aria-current={current ? "page" : undefined} data-action={item.action} onClick={() => setMenuOpen(false)}>
          {item.label}
        </Link>
      </li>
    );
  };
  return (
    <div class="shell">
      <a class="skip-link" href="#main">
        Skip to content
      </a>
      <header class="topbar">
        <Link href="/" class="brand" aria-label="rtcd dashboard home">
          rtcd
        </Link>
        <div class="switchers">
          <label class="switcher">
            <span>Workspace</span>
            <select
              value={account.id}
              onChange={(e) => {
                const next = me.accounts.find((a) => a.id === e.currentTarget.value);
                if (!next) return;
                const p = firstActiveProject(next);
                navigate(p ? projectPath(p.id) : accountPath(next.id, "projects"));
              }}
            >
              {me.accounts.map((a) => (
                <option value={a.id} key={a.id}>
                  {a.name} ({roleLabel[a.role]})
                </option>
              ))}
            </select>
          </label>
          {activeProjects.length > 0 && (
            <label class="switcher">
              <span>Project</span>
              <select
                value={props.project?.id ?? ""}
                onChange={(e) => {
                  const page = loc.path.match(/^\/p\/[^/]+\/([^/]+)/)?.[1] ?? "rooms";
                  navigate(projectPath(e.currentTarget.value, page));
                }}
              >
                {!props.project && <option value="">Choose a project</option>}
                {activeProjects.map((p) => (
                  <option value={p.id} key={p.id}>
                    {p.name}
                  </option>
                ))}
              </select>
            </label>
          )}
        </div>
        <div class="user">
          <Link href="/account" class="user-link">
            {me.user.name || me.user.email}
          </Link>
          <button type="button" class="btn btn-small" data-action="sign-out" onClick={() => void signOut(false)}>
            Sign out
          </button>
        </div>
        <button
          type="button"
          class="btn btn-small menu-button"
          aria-expanded={menuOpen}
          aria-controls="nav"
          onClick={() => setMenuOpen(!menuOpen)}
        >
          Menu
        </button>
      </header>
      <div class="body">
        <nav id="nav" class={menuOpen ? "nav open" : "nav"} aria-label="Dashboard">
          {props.project && (
            <>
              <p class="nav-title">Project · {props.project.name}</p>
              <ul>{projectNav(props.project).map(navLink)}</ul>
            </>
          )}
          <p class="nav-title">Workspace · {account.name}</p>
          <ul>{workspaceNav(account, project).map(navLink)}</ul>
          <p class="nav-title">You</p>
          <ul>{navLink({ href: "/account", label: "Profile and sessions" })}</ul>
        </nav>
        <main id="main" tabIndex={-1}>
          {props.children}
        </main>
      </div>
    </div>
  );
}
