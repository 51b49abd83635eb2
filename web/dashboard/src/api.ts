// The dashboard's only way to the server: the public JSON API under /v1,
// same origin, with the session token as a bearer credential (and
// X-Project-Id on project routes), like any other client. Every error
// becomes an ApiError carrying the envelope's code, message, details and
// request id, so a page can show it in words.

import { clearSession, sessionToken } from "./session";

export type Details = Record<string, unknown>;

export class ApiError extends Error {
  readonly status: number;
  readonly code: string;
  readonly requestId: string;
  readonly details: Details;

  constructor(status: number, code: string, message: string, requestId: string, details: Details) {
    super(message);
    this.name = "ApiError";
    this.status = status;
    this.code = code;
    this.requestId = requestId;
    this.details = details;
  }

  /** details.reason, details.field or details.limit_name: which case of a shared code. */
  get reason(): string {
    const d = this.details;
    for (const k of ["reason", "limit_name", "field"]) {
      const v = d[k];
      if (typeof v === "string") return v;
    }
    return "";
  }
}

/** Thrown for a network failure: no response at all. */
export const networkErrorCode = "network_error";

export interface RequestOptions {
  /** JSON body; sent with Content-Type: application/json. */
  body?: unknown;
  /** The project of a project route (X-Project-Id). */
  project?: string;
  /** Query parameters; undefined values are left out. */
  query?: Record<string, string | number | undefined>;
  /** Send no session (the sign-in routes). */
  anonymous?: boolean;
}

/** Called when the server says the session is no longer valid. */
let onSessionEnded: () => void = () => {};
export function setSessionEndedHandler(fn: () => void): void {
  onSessionEnded = fn;
}

export async function api<T>(method: string, path: string, opts: RequestOptions = {}): Promise<T> {
  const url = new URL(path, window.location.origin);
  for (const [k, v] of Object.entries(opts.query ?? {})) {
    if (v !== undefined) url.searchParams.set(k, String(v));
  }
  const headers: Record<string, string> = { Accept: "application/json" };
  const token = opts.anonymous ? null : sessionToken();
  if (token) headers["Authorization"] = `Bearer ${token}`;
  if (opts.project) headers["X-Project-Id"] = opts.project;
  let body: string | undefined;
  if (opts.body !== undefined) {
    headers["Content-Type"] = "application/json";
    body = JSON.stringify(opts.body);
  }
  let res: Response;
  try {
    res = await fetch(url, { method, headers, body, credentials: "omit", cache: "no-store" });
  } catch {
    throw new ApiError(0, networkErrorCode, "The server could not be reached. Check your connection and try again.", "", {});
  }
  const requestId = res.headers.get("X-Request-Id") ?? "";
  if (res.status === 204) return undefined as T;
  const text = await res.text();
  let json: unknown = undefined;
  if (text) {
    try {
      json = JSON.parse(text);
    } catch {
      json = undefined;
    }
  }
  if (res.ok) return json as T;
  const env = (json as { error?: { code?: string; message?: string; request_id?: string; details?: Details } } | undefined)?.error;
  const err = new ApiError(
    res.status,
    env?.code ?? "http_" + res.status,
    env?.message ?? `The server answered ${res.status}.`,
    env?.request_id ?? requestId,
    env?.details ?? {},
  );
  // A session that ended (signed out elsewhere, expired, idle) sends the
  // person back to sign-in; sign-in routes answer 401 for other reasons.
  if (err.status === 401 && err.code === "authentication_failed" && token && !opts.anonymous) {
    clearSession();
    onSessionEnded();
  }
  throw err;
}

/** A list page as every list route answers it. */
export interface Page<T> {
  object: "list";
  data: T[];
  page: { has_more: boolean; next_cursor?: string | null };
}

/** The largest page a list route serves (spec: limit 1 to 100). */
export const pageLimitMax = 100;
