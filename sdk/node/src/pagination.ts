// Pagination helpers. The API (v0.1) has no cursor: a list answers the
// newest `limit` items (at most MAX_PAGE_LIMIT) and says whether more exist.

import { MAX_PAGE_LIMIT } from "./client.js";
import type { ListParams, Page } from "./types.js";

/** What readAll got: every item a list can reach, and whether that is all of them. */
export interface Collected<T> {
  /** Newest first. */
  items: T[];
  /** False when more items exist than the API lets a list return (MAX_PAGE_LIMIT in v0.1). */
  complete: boolean;
}

/**
 * Reads as much of a list as the API allows, in as few calls as it takes:
 * one page of MAX_PAGE_LIMIT in v0.1. Pass the list call with its other
 * arguments bound, for example
 * `readAll((p) => rtcd.listParticipants(roomId, p))`; `complete` says
 * whether nothing was left out.
 */
export async function readAll<T>(list: (params: ListParams) => Promise<Page<T>>): Promise<Collected<T>> {
  const page = await list({ limit: MAX_PAGE_LIMIT });
  return { items: page.data, complete: !page.hasMore };
}
