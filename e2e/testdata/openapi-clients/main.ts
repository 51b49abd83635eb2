// Built by e2e/openapi_clients_test.go with the types openapi-typescript
// generates from docs/openapi.yaml (schema.d.ts beside it): a typed fetch
// client that creates a room, finds it in the room list, and prints what it
// got as one JSON line. The types it names (the list page's next_cursor,
// WebhookEvent) must be generated as the document says, or tsc fails.
import type { components, paths } from "./schema.js";

declare const process: { argv: string[]; exitCode?: number };

type CreateRoomBody = NonNullable<paths["/v1/rooms"]["post"]["requestBody"]>["content"]["application/json"];
type Room = paths["/v1/rooms"]["post"]["responses"]["201"]["content"]["application/json"];
type RoomList = paths["/v1/rooms"]["get"]["responses"]["200"]["content"]["application/json"];
type WebhookEvent = components["schemas"]["WebhookEvent"];

// The page's next_cursor is "null or string" (spec section 2): exactly
// string | null, not null alone, so code written for a later cursor compiles.
type Equals<A, B> = (<T>() => T extends A ? 1 : 2) extends (<T>() => T extends B ? 1 : 2) ? true : false;
const nextCursorIsStringOrNull: Equals<RoomList["page"]["next_cursor"], string | null> = true;

async function call<T>(base: string, apiKey: string, method: string, path: string, body?: unknown): Promise<T> {
  const res = await fetch(base + path, {
    method,
    headers: { Authorization: `Bearer ${apiKey}`, "Content-Type": "application/json" },
    body: body === undefined ? null : JSON.stringify(body),
  });
  const text = await res.text();
  if (!res.ok) {
    throw new Error(`${method} ${path}: ${res.status} ${text}`);
  }
  return JSON.parse(text) as T;
}

async function main(): Promise<void> {
  const [, , base, apiKey] = process.argv;
  if (base === undefined || apiKey === undefined) {
    throw new Error("usage: main.js BASE_URL API_KEY");
  }
  const body: CreateRoomBody = { name: "created by a client openapi-typescript typed" };
  const room = await call<Room>(base, apiKey, "POST", "/v1/rooms", body);
  const list = await call<RoomList>(base, apiKey, "GET", "/v1/rooms");
  const nextCursor: string | null = list.page.next_cursor;
  const event: Pick<WebhookEvent, "type"> = { type: "room.ended" };
  console.log(JSON.stringify({
    room_id: room.id, name: room.name, status: room.status,
    listed: list.data.some((r) => r.id === room.id) && nextCursorIsStringOrNull, next_cursor: nextCursor,
    event_type: event.type,
  }));
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
