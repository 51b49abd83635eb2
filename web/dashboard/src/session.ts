// Where the dashboard keeps the session token: localStorage, under one key,
// so every tab of the dashboard shares one sign-in and a reload keeps it.
// Why not a cookie: the dashboard is a client of the public API like any
// other, and the API takes bearer tokens only (no cookie, so no CSRF
// surface); why not memory or sessionStorage: a person would sign in again
// in every tab and after every reload. The risk of script-readable storage
// is cross-site scripting; docs/dashboard.md ("Security") lists what closes
// that door (a strict Content-Security-Policy with no inline script, no
// third-party code, text rendered as text). Nothing else secret is stored:
// API key secrets, webhook signing secrets and participant tokens live only
// in the page's memory while shown.

const tokenKey = "rtcd.session";
const projectKey = "rtcd.project";
const googleStateKey = "rtcd.google_state";
const googleInvitationKey = "rtcd.google_invitation";

function read(store: Storage, key: string): string | null {
  try {
    return store.getItem(key);
  } catch {
    return null;
  }
}

function write(store: Storage, key: string, value: string | null): void {
  try {
    if (value === null) store.removeItem(key);
    else store.setItem(key, value);
  } catch {
    // Storage refused (private mode quota): the session lasts this page.
  }
}

let memoryToken: string | null = null;

export function sessionToken(): string | null {
  return read(localStorage, tokenKey) ?? memoryToken;
}

export function setSessionToken(token: string): void {
  memoryToken = token;
  write(localStorage, tokenKey, token);
}

export function clearSession(): void {
  memoryToken = null;
  write(localStorage, tokenKey, null);
}

/** The project last opened, to come back to it (not a secret). */
export function lastProject(): string | null {
  return read(localStorage, projectKey);
}

export function setLastProject(id: string): void {
  write(localStorage, projectKey, id);
}

/**
 * Google sign-in binds a random state to this tab (sessionStorage): the
 * callback page compares Google's state with it, the OAuth CSRF check.
 */
export function newGoogleState(invitationToken: string | null): string {
  const bytes = new Uint8Array(24);
  crypto.getRandomValues(bytes);
  const state = btoa(String.fromCharCode(...bytes)).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
  write(sessionStorage, googleStateKey, state);
  write(sessionStorage, googleInvitationKey, invitationToken);
  return state;
}

/** The bound state and invitation, removed as they are read (one use). */
export function takeGoogleState(): { state: string | null; invitationToken: string | null } {
  const state = read(sessionStorage, googleStateKey);
  const invitationToken = read(sessionStorage, googleInvitationKey);
  write(sessionStorage, googleStateKey, null);
  write(sessionStorage, googleInvitationKey, null);
  return { state, invitationToken };
}
