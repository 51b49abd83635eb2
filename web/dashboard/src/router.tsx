// A small history router: the address bar is the state of where the person
// is, so every page has a URL that can be reloaded, bookmarked and shared.
// The server answers every dashboard path with the same page (see
// http/dashboard_pages.go); this decides what to draw.

import type { AnchorHTMLAttributes, ComponentChildren, TargetedMouseEvent } from "preact";
import { useEffect, useState } from "preact/hooks";

export interface Location {
  path: string;
  query: URLSearchParams;
}

function current(): Location {
  return { path: window.location.pathname, query: new URLSearchParams(window.location.search) };
}

const listeners = new Set<() => void>();

function notify(): void {
  for (const fn of listeners) fn();
}

window.addEventListener("popstate", notify);

/** Goes to a dashboard path, adding to the history (or replacing its entry). */
export function navigate(to: string, replace = false): void {
  if (replace) window.history.replaceState(null, "", to);
  else window.history.pushState(null, "", to);
  window.scrollTo(0, 0);
  notify();
}

/**
 * Removes the query from the address bar without a new history entry: a
 * sign-in or invitation token is taken out as soon as it is read, so it is
 * not left in the history, a screenshot or a shared address.
 */
export function dropQuery(): void {
  window.history.replaceState(null, "", window.location.pathname);
}

export function useLocation(): Location {
  const [loc, setLoc] = useState(current);
  useEffect(() => {
    const fn = () => setLoc(current());
    listeners.add(fn);
    // A child's effect may have navigated before this one subscribed
    // (children's effects run first): catch up.
    fn();
    return () => {
      listeners.delete(fn);
    };
  }, []);
  return loc;
}

/**
 * Matches a path against a pattern such as "/p/:project/rooms/:room" and
 * returns its parameters, or null.
 */
export function match(pattern: string, path: string): Record<string, string> | null {
  const want = pattern.split("/");
  const got = path.replace(/\/+$/, "").split("/");
  if (path === "/") got.splice(1);
  if (want.length !== got.length) return null;
  const params: Record<string, string> = {};
  for (let i = 0; i < want.length; i++) {
    const w = want[i] ?? "";
    const g = got[i] ?? "";
    if (w.startsWith(":")) {
      if (g === "") return null;
      params[w.slice(1)] = decodeURIComponent(g);
    } else if (w !== g) {
      return null;
    }
  }
  return params;
}

type AnchorProps = AnchorHTMLAttributes<HTMLAnchorElement> & { href: string; children?: ComponentChildren };

/** A link that moves within the dashboard without reloading the page. */
export function Link(props: AnchorProps) {
  const { href, children, onClick, ...rest } = props;
  return (
    <a
      href={href}
      onClick={(ev: TargetedMouseEvent<HTMLAnchorElement>) => {
        if (typeof onClick === "function") onClick(ev);
        if (ev.defaultPrevented || ev.button !== 0 || ev.metaKey || ev.ctrlKey || ev.shiftKey || ev.altKey) return;
        ev.preventDefault();
        navigate(href);
      }}
      {...rest}
    >
      {children}
    </a>
  );
}
