// The dashboard's pages and which address shows which. Pages that need no
// session (sign-in, the mailed links) come first; every other page needs a
// session and the GET /v1/me answer, and sits in the Shell of its
// workspace (and project).

import type { ComponentChildren } from "preact";
import { useCallback, useEffect, useState } from "preact/hooks";
import { api, setSessionEndedHandler } from "./api";
import { AccountPage } from "./pages/account";
import { ApiKeysPage } from "./pages/apikeys";
import { ProjectAuditPage, WorkspaceAuditPage } from "./pages/audit";
import { BillingPage, TopupReturnPage } from "./pages/billing";
import { CallPage } from "./pages/call";
import { LimitsPage } from "./pages/limits";
import { ProjectsPage } from "./pages/projects";
import { RoomPage } from "./pages/room";
import { RoomsPage } from "./pages/rooms";
import { SettingsPage } from "./pages/settings";
import { CheckEmailPage, EmailLinkPage, GoogleCallbackPage, InvitationPage, SignInPage } from "./pages/signin";
import { TeamPage } from "./pages/team";
import { UsagePage } from "./pages/usage";
import { EndpointPage, WebhooksPage } from "./pages/webhooks";
import { match, navigate, useLocation } from "./router";
import { lastProject, sessionToken, setLastProject } from "./session";
import { Shell } from "./shell";
import { MeContext, useMe, accountPath, findAccount, findProject, firstActiveProject, projectPath, type ProjectScope, type WorkspaceScope } from "./state";
import type { Me } from "./types";
import { ErrorNote, Loading } from "./ui";

type ProjectPage = (p: { scope: ProjectScope; params: Record<string, string> }) => ComponentChildren;
type WorkspacePage = (p: { scope: WorkspaceScope; params: Record<string, string> }) => ComponentChildren;

const projectPages: [string, ProjectPage][] = [
  ["/p/:project/rooms", (p) => <RoomsPage scope={p.scope} />],
  ["/p/:project/rooms/:room", (p) => <RoomPage scope={p.scope} roomId={p.params["room"] ?? ""} />],
  ["/p/:project/rooms/:room/call", (p) => <CallPage scope={p.scope} roomId={p.params["room"] ?? ""} />],
  ["/p/:project/usage", (p) => <UsagePage scope={p.scope} />],
  ["/p/:project/api-keys", (p) => <ApiKeysPage scope={p.scope} />],
  ["/p/:project/webhooks", (p) => <WebhooksPage scope={p.scope} />],
  ["/p/:project/webhooks/:endpoint", (p) => <EndpointPage scope={p.scope} endpointId={p.params["endpoint"] ?? ""} />],
  ["/p/:project/audit-logs", (p) => <ProjectAuditPage scope={p.scope} />],
  ["/p/:project/limits", (p) => <LimitsPage scope={p.scope} />],
  ["/p/:project/billing", (p) => <BillingPage scope={p.scope} />],
];

const workspacePages: [string, WorkspacePage][] = [
  ["/a/:account/team", (p) => <TeamPage scope={p.scope} />],
  ["/a/:account/projects", (p) => <ProjectsPage scope={p.scope} />],
  ["/a/:account/audit-logs", (p) => <WorkspaceAuditPage scope={p.scope} />],
  ["/a/:account/settings", (p) => <SettingsPage scope={p.scope} />],
];

function NotFound({ what }: { what: string }) {
  return (
    <div class="not-found">
      <h1>Not found</h1>
      <p>{what}</p>
      <p>
        <a href="/">Go to the dashboard</a>
      </p>
    </div>
  );
}

/** Paths for which GET /v1/me was already fetched again (see Unknown). */
const refreshedFor = new Set<string>();

/**
 * A project or workspace the loaded GET /v1/me does not know: it may be
 * new (an invitation just accepted, a workspace made in another tab), so
 * the person's workspaces are fetched again, once per address, before the
 * page says it is not found.
 */
function Unknown({ path, what }: { path: string; what: string }) {
  const { reloadMe } = useMe();
  const [waiting, setWaiting] = useState(() => !refreshedFor.has(path));
  useEffect(() => {
    if (!waiting) return;
    refreshedFor.add(path);
    reloadMe()
      .catch(() => undefined)
      .finally(() => setWaiting(false));
  }, [path, waiting]);
  return waiting ? <Loading /> : <NotFound what={what} />;
}

/** Pages for a signed-in person, inside the Shell. */
function SignedIn({ me, path }: { me: Me; path: string }) {
  for (const [pattern, page] of projectPages) {
    const params = match(pattern, path);
    if (!params) continue;
    const scope = findProject(me, params["project"] ?? "");
    if (!scope) return <Unknown path={path} what="This project does not exist or is not in one of your workspaces." />;
    if (scope.project.status !== "active") {
      return (
        <Shell account={scope.account}>
          <NotFound what={`The project “${scope.project.name}” is archived: its keys are revoked and it serves no requests.`} />
        </Shell>
      );
    }
    return (
      <Shell account={scope.account} project={scope.project}>
        {page({ scope, params })}
      </Shell>
    );
  }
  for (const [pattern, page] of workspacePages) {
    const params = match(pattern, path);
    if (!params) continue;
    const scope = findAccount(me, params["account"] ?? "");
    if (!scope) return <Unknown path={path} what="This workspace does not exist or you are not a member of it." />;
    return <Shell account={scope.account}>{page({ scope, params })}</Shell>;
  }
  const topup = match("/billing/topups/:payment", path);
  if (topup) return <TopupReturnPage paymentId={topup["payment"] ?? ""} />;
  if (path === "/account") {
    // The frame of the workspace in use (the last project's), else the first.
    const last = lastProject();
    const current = (last && findProject(me, last)?.account) || me.accounts[0];
    return current ? (
      <Shell account={current}>
        <AccountPage />
      </Shell>
    ) : (
      <AccountPage />
    );
  }
  return <NotFound what="There is no page at this address." />;
}

/** Where "/" leads: the project last opened, else the first active one. */
function home(me: Me): string {
  const last = lastProject();
  if (last) {
    const s = findProject(me, last);
    if (s && s.project.status === "active") return projectPath(s.project.id);
  }
  for (const a of me.accounts) {
    const p = firstActiveProject(a);
    if (p) return projectPath(p.id);
  }
  const a = me.accounts[0];
  return a ? accountPath(a.id, "projects") : "/account";
}

/** Replaces the current address with another (after drawing, not during). */
function Redirect({ to }: { to: string }) {
  useEffect(() => navigate(to, true), [to]);
  return <Loading />;
}

const publicPages: [string, () => ComponentChildren][] = [
  ["/sign-in", () => <SignInPage />],
  ["/sign-in/check-email", () => <CheckEmailPage />],
  ["/sign-in/email", () => <EmailLinkPage />],
  ["/sign-in/google", () => <GoogleCallbackPage />],
  ["/invitations/accept", () => <InvitationPage />],
];

export function App() {
  const loc = useLocation();
  const [me, setMe] = useState<Me | null>(null);
  const [meError, setMeError] = useState<unknown>(undefined);
  const token = sessionToken();

  const reloadMe = useCallback(async () => {
    const m = await api<Me>("GET", "/v1/me");
    setMe(m);
    return m;
  }, []);

  useEffect(() => {
    setSessionEndedHandler(() => {
      setMe(null);
      navigate("/sign-in", true);
    });
  }, []);

  useEffect(() => {
    if (!token) {
      setMe(null);
      return;
    }
    setMeError(undefined);
    reloadMe().catch((e: unknown) => setMeError(e));
  }, [token, reloadMe]);

  // Remember the project in use, so "/" comes back to it.
  const projectInPath = /^\/p\/([^/]+)/.exec(loc.path)?.[1];
  useEffect(() => {
    if (projectInPath) setLastProject(decodeURIComponent(projectInPath));
  }, [projectInPath]);

  for (const [pattern, page] of publicPages) {
    if (match(pattern, loc.path)) return <>{page()}</>;
  }
  if (!token) return <Redirect to="/sign-in" />;
  if (meError !== undefined) {
    return (
      <main id="main" class="auth-page">
        <div class="auth-card">
          <ErrorNote error={meError} />
          <button type="button" class="btn" onClick={() => reloadMe().catch((e: unknown) => setMeError(e))}>
            Try again
          </button>
        </div>
      </main>
    );
  }
  if (!me) return <Loading />;
  if (loc.path === "/") return <Redirect to={home(me)} />;
  return (
    <MeContext.Provider value={{ me, reloadMe }}>
      <SignedIn me={me} path={loc.path} />
    </MeContext.Provider>
  );
}
