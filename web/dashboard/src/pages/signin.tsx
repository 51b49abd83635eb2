// Signing in: by e-mail link (ask for a link, "check your mail", the link's
// page) or with Google (the authorization URL, the callback), and the
// invitation page. None of these needs a session; the link and invitation
// tokens are taken out of the address bar as soon as they are read.

import type { ComponentChildren } from "preact";
import { useEffect, useState } from "preact/hooks";
import { api } from "../api";
import { roleLabel } from "../roles";
import { dropQuery, Link, navigate, useLocation } from "../router";
import { newGoogleState, sessionToken, setSessionToken, takeGoogleState } from "../session";
import { firstActiveProject, projectPath } from "../state";
import type { Account, EmailSignInLink, InvitationAcceptance, Session } from "../types";
import { ErrorNote, Field, Loading, useAction, useAsync } from "../ui";

function Card(props: { title: string; children: ComponentChildren }) {
  useEffect(() => {
    document.title = `${props.title} · rtcd`;
  }, [props.title]);
  return (
    <div class="auth-page">
      <main id="main" class="auth-card">
        <p class="brand brand-large">rtcd</p>
        <h1>{props.title}</h1>
        {props.children}
      </main>
    </div>
  );
}

/** Where a new session lands: the workspace it joined or created, else home. */
function landing(joined: Account | null, created: Account | null): string {
  const account = joined ?? created;
  const p = account ? firstActiveProject(account) : undefined;
  return p ? projectPath(p.id) : "/";
}

function startSession(s: Session): void {
  setSessionToken(s.token);
  navigate(landing(s.joined_account, s.created_account), true);
}

interface Providers {
  object: "auth_providers";
  providers: string[];
}

/** The e-mail form and the Google button; used by sign-in and the invitation page. */
function SignInForm({ invitationToken }: { invitationToken: string | null }) {
  const providers = useAsync(() => api<Providers>("GET", "/v1/auth/providers", { anonymous: true }), []);
  const [email, setEmail] = useState("");
  const send = useAction(async () => {
    await api("POST", "/v1/auth/email/start", {
      anonymous: true,
      body: invitationToken ? { email, invitation_token: invitationToken } : { email },
    });
    navigate("/sign-in/check-email?email=" + encodeURIComponent(email.trim()));
  });
  const google = useAction(async () => {
    const state = newGoogleState(invitationToken);
    const res = await api<{ url: string }>("GET", "/v1/auth/google/url", { anonymous: true, query: { state } });
    window.location.assign(res.url);
  });
  const hasGoogle = providers.data?.providers.includes("google") ?? false;
  return (
    <>
      <form
        class="stack"
        onSubmit={(e) => {
          e.preventDefault();
          void send.run();
        }}
      >
        <Field label="E-mail address" hint="We send you a link that signs you in. It works once, for 15 minutes.">
          {(id, hint) => (
            <input
              id={id}
              type="email"
              autocomplete="email"
              required
              maxLength={254}
              value={email}
              aria-describedby={hint}
              onInput={(e) => setEmail(e.currentTarget.value)}
            />
          )}
        </Field>
        <button type="submit" class="btn btn-primary" disabled={send.busy}>
          {send.busy ? "Sending…" : "E-mail me a sign-in link"}
        </button>
        <ErrorNote error={send.error} />
      </form>
      {hasGoogle && (
        <>
          <p class="or">or</p>
          <button type="button" class="btn btn-wide" onClick={() => void google.run()} disabled={google.busy}>
            Sign in with Google
          </button>
          <ErrorNote error={google.error} />
        </>
      )}
      <ErrorNote error={providers.error} />
    </>
  );
}

export function SignInPage() {
  return (
    <Card title="Sign in">
      <p>Sign in to manage your rooms, API keys, webhooks, usage and billing.</p>
      <SignInForm invitationToken={null} />
    </Card>
  );
}

export function CheckEmailPage() {
  const loc = useLocation();
  const email = loc.query.get("email") ?? "";
  return (
    <Card title="Check your mail">
      <p>
        If <strong>{email || "that address"}</strong> can sign in, a sign-in link is on its way. Open it in this browser within 15
        minutes.
      </p>
      <p class="hint">No mail? Check your spam folder, or ask for a new link; at most 5 links are sent to one address per hour.</p>
      <p>
        <Link href="/sign-in">Use another address</Link>
      </p>
    </Card>
  );
}

/** Reads a query parameter once and removes the query from the address bar. */
function useTokenFromQuery(name: string): string | null {
  const [token] = useState(() => new URLSearchParams(window.location.search).get(name));
  useEffect(() => {
    if (window.location.search) dropQuery();
  }, []);
  return token;
}

/**
 * The mailed link's page. Opening it only peeks (mail scanners open
 * links); the person's click signs in, which uses the link up.
 */
export function EmailLinkPage() {
  const token = useTokenFromQuery("token");
  const link = useAsync(
    () => (token ? api<EmailSignInLink>("POST", "/v1/auth/email/peek", { anonymous: true, body: { token } }) : Promise.resolve(null)),
    [token],
  );
  const verify = useAction(async () => {
    startSession(await api<Session>("POST", "/v1/auth/email/verify", { anonymous: true, body: { token } }));
  });
  if (!token) {
    return (
      <Card title="Sign-in link">
        <p>This page needs the link from your sign-in mail. If you opened it already, open the link from the mail again.</p>
        <Link href="/sign-in">Ask for a new link</Link>
      </Card>
    );
  }
  return (
    <Card title="Sign in">
      {link.loading && !link.data && <Loading label="Checking the link…" />}
      <ErrorNote error={link.error} />
      {link.error !== undefined && <Link href="/sign-in">Ask for a new link</Link>}
      {link.data && (
        <div class="stack">
          <p>
            Sign in as <strong>{link.data.email}</strong>
            {link.data.invitation && (
              <>
                {" "}
                and join <strong>{link.data.invitation.account_name}</strong> as {roleLabel[link.data.invitation.role].toLowerCase()}
              </>
            )}
            ?
          </p>
          <button type="button" class="btn btn-primary" onClick={() => void verify.run()} disabled={verify.busy}>
            {verify.busy ? "Signing in…" : "Sign in"}
          </button>
          <ErrorNote error={verify.error} />
        </div>
      )}
    </Card>
  );
}

/** Google's redirect back: compares the state, then exchanges the code. */
export function GoogleCallbackPage() {
  const [params] = useState(() => new URLSearchParams(window.location.search));
  const [bound] = useState(() => takeGoogleState());
  useEffect(() => {
    if (window.location.search) dropQuery();
  }, []);
  const code = params.get("code");
  const state = params.get("state");
  const googleError = params.get("error");
  const sameState = !!state && state === bound.state;
  const exchange = useAsync(async () => {
    if (!code || !sameState) return null;
    const body: Record<string, string> = { code, state: state ?? "" };
    if (bound.invitationToken) body["invitation_token"] = bound.invitationToken;
    const s = await api<Session>("POST", "/v1/auth/google", { anonymous: true, body });
    startSession(s);
    return s;
  }, []);
  let problem: string | null = null;
  if (googleError) problem = "Google did not sign you in (" + googleError + ").";
  else if (!code || !state) problem = "This page is where Google sends you back after signing in; it was opened without Google's answer.";
  else if (!sameState) problem = "This sign-in was not started in this browser tab, so it was not completed. Start again.";
  return (
    <Card title="Signing in with Google">
      {problem ? <p role="alert">{problem}</p> : exchange.loading && <Loading label="Signing in…" />}
      <ErrorNote error={exchange.error} />
      {(problem || exchange.error !== undefined) && <Link href="/sign-in">Back to sign-in</Link>}
    </Card>
  );
}

/** An invitation link: accept with the current session, or sign in with the invitation. */
export function InvitationPage() {
  const token = useTokenFromQuery("invitation_token");
  const signedIn = sessionToken() !== null;
  const accept = useAction(async () => {
    const res = await api<InvitationAcceptance>("POST", "/v1/invitations/accept", { body: { invitation_token: token } });
    navigate(landing(res.joined_account, null), true);
  });
  if (!token) {
    return (
      <Card title="Invitation">
        <p>This page needs the link from your invitation mail. If you opened it already, open the link from the mail again.</p>
      </Card>
    );
  }
  return (
    <Card title="You are invited">
      {signedIn ? (
        <div class="stack">
          <p>Accept the invitation to join the workspace with the role it offers. It must be addressed to the address you are signed in with.</p>
          <button type="button" class="btn btn-primary" onClick={() => void accept.run()} disabled={accept.busy}>
            {accept.busy ? "Joining…" : "Accept the invitation"}
          </button>
          <ErrorNote error={accept.error} />
        </div>
      ) : (
        <>
          <p>Sign in with the address the invitation was sent to; signing in accepts it.</p>
          <SignInForm invitationToken={token} />
        </>
      )}
    </Card>
  );
}
