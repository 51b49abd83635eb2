// Compile-time check of the SDK's types against the types
// openapi-typescript generates from docs/openapi.yaml (which the e2e suite
// holds to the live server): each object the server sends fits the SDK's
// type, each body the SDK sends fits the document's, and both name the
// same fields. `npm run check` and `npm test` regenerate
// test/generated/openapi.d.ts first, so drift fails the type-check.

import type { components } from "./generated/openapi.js";
import type * as sdk from "../src/index.js";

type S = components["schemas"];
type Assert<T extends true> = T;
type Fits<A, B> = [A] extends [B] ? true : false;
type SameKeys<A, B> = [Exclude<keyof A, keyof B>, Exclude<keyof B, keyof A>] extends [never, never] ? true : false;
/** What the server sends (Wire) fits the SDK's type, with the same fields. */
type Answer<Wire, T> = Fits<Wire, T> extends true ? SameKeys<Wire, T> : false;
/** T without explicit undefined in its optional fields (JSON.stringify leaves those out). */
type Sent<T> = { [K in keyof T]: Exclude<T[K], undefined> };
/** What the SDK sends (T) fits the document's request body, with the same fields. */
type Request<T, Wire> = Fits<Sent<T>, Wire> extends true ? SameKeys<Wire, T> : false;

export type Checks = [
  Assert<Answer<S["Room"], sdk.Room>>,
  Assert<Answer<S["Participant"], sdk.Participant>>,
  Assert<Answer<S["ParticipantCreated"], sdk.ParticipantSession>>,
  Assert<Answer<S["APIKey"], sdk.APIKey>>,
  Assert<Answer<S["APIKeyCreated"], sdk.CreatedAPIKey>>,
  Assert<Answer<S["ProjectLimits"], sdk.ProjectLimits>>,
  Assert<Answer<S["AuditLogEntry"], sdk.AuditLogEntry>>,
  Assert<Answer<S["SystemInfo"], sdk.SystemInfo>>,
  Assert<Answer<S["UsageSummary"], sdk.UsageSummary>>,
  Assert<Answer<S["UsageDaily"], sdk.UsageDaily>>,
  Assert<Answer<S["UsageDay"], sdk.UsageDay>>,
  Assert<Answer<S["Balance"], sdk.Balance>>,
  Assert<Answer<S["Pricing"], sdk.Pricing>>,
  Assert<Answer<S["LedgerEntry"], sdk.LedgerEntry>>,
  Assert<Answer<S["Topup"], sdk.Topup>>,
  Assert<Answer<S["WebhookEndpoint"], sdk.WebhookEndpoint>>,
  Assert<Answer<S["WebhookEndpointCreated"], sdk.CreatedWebhookEndpoint>>,
  Assert<Answer<S["WebhookDelivery"], sdk.WebhookDelivery>>,
  Assert<Answer<S["WebhookDeliveryAttempt"], sdk.WebhookDeliveryAttempt>>,
  Assert<Answer<S["WebhookEvent"], sdk.WebhookEvent>>,
  Assert<Fits<S["Error"]["error"]["code"], sdk.ErrorCode>>,
  Assert<Fits<sdk.ErrorCode, S["Error"]["error"]["code"]>>,
  Assert<Fits<S["Scope"], sdk.Scope>>,
  Assert<Fits<sdk.Scope, S["Scope"]>>,
  Assert<Fits<S["EventType"], sdk.EventType>>,
  Assert<Fits<sdk.EventType, S["EventType"]>>,
  Assert<Request<sdk.CreateRoomParams, S["RoomCreateParams"]>>,
  Assert<Request<sdk.CreateParticipantParams, S["ParticipantCreateParams"]>>,
  Assert<Request<sdk.CreateAPIKeyParams, S["APIKeyCreateParams"]>>,
  Assert<Request<sdk.CreateTopupParams, S["TopupCreateParams"]>>,
  Assert<Request<sdk.CreateWebhookEndpointParams, S["WebhookEndpointCreateParams"]>>,
];
