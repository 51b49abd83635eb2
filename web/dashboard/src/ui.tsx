// Shared pieces of every page: data loading, errors in words with their
// request id, empty and loading states, labelled fields, copy buttons,
// secrets shown once, two-step confirmations, badges and times.
//
// Every control that asks the server to change something (or, in the
// navigation, to read what only some roles may) carries data-action="<name>":
// the browser tests (e2e/dashboard_browser_roles_test.go) read these names to
// check that each role is offered exactly the actions the server allows it.
// An <option> that changes something carries its own data-action.

import type { ComponentChildren } from "preact";
import { useCallback, useEffect, useLayoutEffect, useRef, useState } from "preact/hooks";
import { describe } from "./errors";

export interface Async<T> {
  data: T | undefined;
  error: unknown;
  loading: boolean;
  reload: () => void;
}

/**
 * Runs load when deps change (and on reload), keeping the last data while a
 * reload runs so refreshes do not flash a loading state.
 */
export function useAsync<T>(load: () => Promise<T>, deps: unknown[]): Async<T> {
  const [state, setState] = useState<{ data: T | undefined; error: unknown; loading: boolean }>({
    data: undefined,
    error: undefined,
    loading: true,
  });
  const [tick, setTick] = useState(0);
  const seq = useRef(0);
  useEffect(() => {
    const mine = ++seq.current;
    setState((s) => ({ ...s, loading: true }));
    load().then(
      (data) => {
        if (seq.current === mine) setState({ data, error: undefined, loading: false });
      },
      (error: unknown) => {
        if (seq.current === mine) setState((s) => ({ data: s.data, error, loading: false }));
      },
    );
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [...deps, tick]);
  const reload = useCallback(() => setTick((t) => t + 1), []);
  return { ...state, reload };
}

/** Calls fn every periodMs while active (and the tab is visible). */
export function useInterval(fn: () => void, periodMs: number, active: boolean): void {
  const saved = useRef(fn);
  saved.current = fn;
  useEffect(() => {
    if (!active) return;
    const id = window.setInterval(() => {
      if (document.visibilityState === "visible") saved.current();
    }, periodMs);
    return () => window.clearInterval(id);
  }, [periodMs, active]);
}

/** Runs an action, tracking whether it is busy and what it failed with. */
export function useAction<A extends unknown[]>(act: (...args: A) => Promise<void>) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(undefined);
  const run = async (...args: A) => {
    setBusy(true);
    setError(undefined);
    try {
      await act(...args);
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  return { busy, error, run, clear: () => setError(undefined) };
}

export function ErrorNote({ error }: { error: unknown }) {
  if (error === undefined || error === null) return null;
  const { summary, message, requestId } = describe(error);
  return (
    <div class="error-note" role="alert">
      <p class="error-summary">{summary}</p>
      {message && message !== summary && <p class="error-message">{message}</p>}
      {requestId && (
        <p class="error-request">
          Request id <code>{requestId}</code> (quote it when asking for help)
        </p>
      )}
    </div>
  );
}

export function Loading({ label = "Loading…" }: { label?: string }) {
  return (
    <p class="loading" role="status">
      {label}
    </p>
  );
}

export function Empty({ children }: { children: ComponentChildren }) {
  return <div class="empty">{children}</div>;
}

/** The loading, error and empty states around a list or a record. */
export function Loaded<T>(props: { state: Async<T>; children: (data: T) => ComponentChildren; label?: string }) {
  const { state } = props;
  return (
    <>
      {state.error !== undefined && <ErrorNote error={state.error} />}
      {state.data === undefined ? state.error === undefined && <Loading label={props.label} /> : props.children(state.data)}
    </>
  );
}

export function PageHeader(props: { title: string; subtitle?: ComponentChildren; actions?: ComponentChildren }) {
  useEffect(() => {
    document.title = `${props.title} · rtcd`;
  }, [props.title]);
  return (
    <header class="page-header">
      <div>
        <h1>{props.title}</h1>
        {props.subtitle && <p class="subtitle">{props.subtitle}</p>}
      </div>
      {props.actions && <div class="page-actions">{props.actions}</div>}
    </header>
  );
}

export function Section(props: { title: string; children: ComponentChildren; actions?: ComponentChildren; id?: string }) {
  const headingId = props.id ?? "section-" + props.title.toLowerCase().replace(/[^a-z0-9]+/g, "-");
  return (
    <section class="section" aria-labelledby={headingId}>
      <div class="section-head">
        <h2 id={headingId}>{props.title}</h2>
        {props.actions}
      </div>
      {props.children}
    </section>
  );
}

let fieldSeq = 0;

/** A labelled form field; the input gets the label's id. */
export function Field(props: { label: string; hint?: string; children: (id: string, describedBy: string | undefined) => ComponentChildren }) {
  const [id] = useState(() => `f${++fieldSeq}`);
  const hintId = props.hint ? id + "-hint" : undefined;
  return (
    <div class="field">
      <label for={id}>{props.label}</label>
      {props.children(id, hintId)}
      {props.hint && (
        <p class="hint" id={hintId}>
          {props.hint}
        </p>
      )}
    </div>
  );
}

export function CopyButton({ text, label = "Copy" }: { text: string; label?: string }) {
  const [copied, setCopied] = useState(false);
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(text);
      setCopied(true);
      window.setTimeout(() => setCopied(false), 2000);
    } catch {
      setCopied(false);
    }
  };
  return (
    <button type="button" class="btn btn-small" onClick={copy} aria-live="polite">
      {copied ? "Copied" : label}
    </button>
  );
}

/**
 * A secret the server shows once (an API key, a signing secret, a
 * participant token): it lives in this component's memory only, never in
 * browser storage, and is gone when the person dismisses it or leaves.
 */
export function SecretOnce(props: {
  title: string;
  label: string;
  value: string;
  onDone: () => void;
  children?: ComponentChildren;
  /** The title's heading level: 2 at the top of a page (the default), 3 inside a section. */
  level?: 2 | 3;
}) {
  const ref = useRef<HTMLDivElement>(null);
  useEffect(() => {
    ref.current?.focus();
  }, []);
  const Heading = props.level === 3 ? "h3" : "h2";
  return (
    <div class="secret-once" role="region" aria-label={props.title} tabIndex={-1} ref={ref}>
      <Heading>{props.title}</Heading>
      <p class="warning">
        <strong>Copy it now.</strong> This is the only time it is shown: rtcd keeps only a hash of it.
      </p>
      <Field label={props.label}>
        {(id) => (
          <div class="secret-row">
            <input id={id} class="secret" readOnly value={props.value} onFocus={(e) => e.currentTarget.select()} />
            <CopyButton text={props.value} />
          </div>
        )}
      </Field>
      {props.children}
      <button type="button" class="btn" onClick={props.onDone}>
        I have copied it
      </button>
    </div>
  );
}

/**
 * A destructive action in two steps, in the page (no browser dialog): the
 * first press asks, the second does it. action is its data-action name.
 */
export function ConfirmButton(props: {
  label: string;
  action?: string;
  confirm: string;
  onConfirm: () => void | Promise<void>;
  busy?: boolean;
  danger?: boolean;
  small?: boolean;
}) {
  const [asking, setAsking] = useState(false);
  const cls = `btn${props.danger ? " btn-danger" : ""}${props.small ? " btn-small" : ""}`;
  if (!asking) {
    return (
      <button type="button" class={cls} onClick={() => setAsking(true)} disabled={props.busy} data-action={props.action}>
        {props.label}
      </button>
    );
  }
  return (
    <span class="confirm" role="group" aria-label={props.confirm}>
      <span class="confirm-text">{props.confirm}</span>
      <button
        type="button"
        class={cls}
        disabled={props.busy}
        onClick={async () => {
          await props.onConfirm();
          setAsking(false);
        }}
      >
        Yes, {props.label.toLowerCase()}
      </button>
      <button type="button" class={`btn${props.small ? " btn-small" : ""}`} onClick={() => setAsking(false)}>
        Cancel
      </button>
    </span>
  );
}

const badgeTone: Record<string, string> = {
  active: "ok",
  enabled: "ok",
  succeeded: "ok",
  joined: "ok",
  connected: "info",
  normal: "ok",
  waiting: "info",
  pending: "info",
  created: "info",
  retrying: "warn",
  low: "warn",
  ending: "warn",
  accepted: "ok",
  ended: "muted",
  left: "muted",
  expired: "muted",
  archived: "muted",
  revoked: "muted",
  disabled: "muted",
  canceled: "muted",
  removed: "muted",
  refunded: "muted",
  failed: "bad",
  dead: "bad",
  exhausted: "bad",
};

export function Badge({ status }: { status: string }) {
  return <span class={`badge badge-${badgeTone[status] ?? "info"}`}>{status}</span>;
}

const timeFormat = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "short" });
const timeFormatSeconds = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "medium" });

/**
 * A timestamp in the person's local time, the exact UTC value on hover;
 * with seconds where they matter (webhook attempts seconds apart).
 */
export function Time({ iso, empty = "—", seconds = false }: { iso: string | null | undefined; empty?: string; seconds?: boolean }) {
  if (!iso) return <span class="muted">{empty}</span>;
  const d = new Date(iso);
  return (
    <time dateTime={iso} title={iso}>
      {(seconds ? timeFormatSeconds : timeFormat).format(d)}
    </time>
  );
}

/** Money as the API renders it (a decimal string), with its currency. */
export function Money({ amount, currency }: { amount: string; currency: string }) {
  return (
    <span class="money">
      {amount} {currency}
    </span>
  );
}

/** An id in monospace with a copy button, for ids people paste elsewhere. */
export function Id({ value }: { value: string }) {
  return (
    <span class="id">
      <code>{value}</code>
    </span>
  );
}

/**
 * A table with a caption and column heads; an empty head ("") is the column
 * of a row's buttons, named "Actions" for screen readers only. On narrow
 * screens each row is drawn as a card, every cell under its column's name
 * (app.css, data-label); the frame can still scroll sideways when a wide
 * table does not fit, so it takes keyboard focus (arrow keys scroll it) and
 * is named after the caption (a group, not a landmark: the section around a
 * table often has the same name).
 */
export function Table(props: { caption: string; head: string[]; children: ComponentChildren; captionHidden?: boolean }) {
  const table = useRef<HTMLTableElement>(null);
  // After every draw: each body cell carries its column's name.
  useLayoutEffect(() => {
    const body = table.current?.tBodies[0];
    if (!body) return;
    for (const row of Array.from(body.rows)) {
      Array.from(row.cells).forEach((cell, i) => {
        const label = props.head[i] ?? "";
        if (cell.getAttribute("data-label") !== label) cell.setAttribute("data-label", label);
      });
    }
  });
  return (
    <div class="table-wrap" role="group" aria-label={props.caption} tabIndex={0}>
      <table ref={table}>
        <caption class={props.captionHidden === false ? "" : "visually-hidden"}>{props.caption}</caption>
        <thead>
          <tr>
            {props.head.map((h) => (
              <th scope="col" key={h}>
                {h || <span class="visually-hidden">Actions</span>}
              </th>
            ))}
          </tr>
        </thead>
        <tbody>{props.children}</tbody>
      </table>
    </div>
  );
}

/** A note that the list shows only the newest page (the API has no cursor). */
export function MoreNote({ hasMore, shown }: { hasMore: boolean; shown: number }) {
  if (!hasMore) return null;
  return <p class="hint">Showing the newest {shown}; older ones exist but the API lists only the newest {shown}.</p>;
}
