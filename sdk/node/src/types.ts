// The API's objects (v0.1), as the server sends them. Field names are the
// wire's (snake_case), so an object can be stored or forwarded as is.
// Timestamps are ISO 8601 UTC strings with milliseconds
// ("2026-11-22T12:30:07.723Z"); money is a decimal string, never a number.
// An optional field is always present, null when unset. A later minor
// release may add fields and enum values (see CHANGELOG.md).

/** An ISO 8601 UTC timestamp with millisecond precision. */
export type Timestamp = string;

/** A decimal amount as a string ("25.00", "-0.000533"). */
export type Money = string;

/** Application data: a JSON object of at most 4096 bytes as sent; {} when none. */
export type Metadata = { [key: string]: unknown };

/** Scopes an API key can hold. */
export type Scope =
  | "rooms:read"
  | "rooms:write"
  | "participants:read"
  | "participants:write"
  | "usage:read"
  | "billing:read"
  | "billing:write"
  | "api_keys:read"
  | "api_keys:write"
  | "webhooks:read"
  | "webhooks:write"
  | "project:read"
  | "audit_logs:read";

/** Every scope, e.g. for a key that holds them all. */
export const SCOPES: readonly Scope[] = [
  "rooms:read", "rooms:write", "participants:read", "participants:write", "usage:read",
  "billing:read", "billing:write", "api_keys:read", "api_keys:write", "webhooks:read",
  "webhooks:write", "project:read", "audit_logs:read",
];

/** One page of a list, newest first. */
export interface Page<T> extends Iterable<T> {
  /** The items, newest first. */
  readonly data: T[];
  /**
   * True when items exist beyond this page. The API has no cursor in v0.1:
   * only the newest `limit` (at most MAX_PAGE_LIMIT) items can be read.
   */
  readonly hasMore: boolean;
  /** The rooms list's `next_cursor`: always null in v0.1; null on other lists. */
  readonly nextCursor: string | null;
}

/** Parameters of the list calls. */
export interface ListParams {
  /** Page size, an integer from 1 to MAX_PAGE_LIMIT; the server's default is 50. */
  limit?: number | undefined;
}

export type RoomStatus = "waiting" | "active" | "ending" | "ended";

/** A real-time audio/video session. */
export interface Room {
  object: "room";
  id: string;
  name: string | null;
  status: RoomStatus;
  region: string;
  max_participants: number;
  metadata: Metadata;
  created_at: Timestamp;
  expires_at: Timestamp;
  ended_at: Timestamp | null;
  end_reason: "deleted" | "expired" | null;
}

/** The body of createRoom; every field is optional. */
export interface CreateRoomParams {
  /** At most 128 bytes, no control characters; need not be unique. */
  name?: string | null | undefined;
  /** 1 to the project's max_participants_per_room (its default). */
  max_participants?: number | null | undefined;
  /** The room's lifetime in seconds, 60 to 604800; default 86400. */
  expires_in?: number | null | undefined;
  /** Must be the server's region when given. */
  region?: string | null | undefined;
  metadata?: Metadata | null | undefined;
}

export type ParticipantRole = "publisher" | "subscriber";
export type ParticipantStatus = "created" | "connected" | "joined" | "left" | "removed" | "ended";

/** One person's admission to one room. */
export interface Participant {
  object: "participant";
  id: string;
  room_id: string;
  external_id: string | null;
  name: string | null;
  role: ParticipantRole;
  status: ParticipantStatus;
  metadata: Metadata;
  created_at: Timestamp;
  expires_at: Timestamp;
  connected_at: Timestamp | null;
  ended_at: Timestamp | null;
}

/**
 * The answer of createParticipant: the participant and its token
 * (rtc_pt_…), shown only once. Hand the token to the client SDK.
 */
export interface ParticipantSession extends Participant {
  token: string;
}

/** The body of createParticipant; every field is optional. */
export interface CreateParticipantParams {
  /** Your own identifier for the person. */
  external_id?: string | null | undefined;
  name?: string | null | undefined;
  /** "publisher" (the default) or "subscriber". */
  role?: ParticipantRole | null | undefined;
  /** The token's lifetime in seconds, 60 to 86400; default 3600. */
  expires_in?: number | null | undefined;
  metadata?: Metadata | null | undefined;
}

/** A secret API key's public record (never the secret). */
export interface APIKey {
  object: "api_key";
  id: string;
  name: string | null;
  scopes: Scope[];
  last4: string;
  status: "active" | "revoked";
  created_at: Timestamp;
  revoked_at: Timestamp | null;
  /** The key's last use, recorded to the minute; null if never used. */
  last_used_at: Timestamp | null;
}

/** The answer of createAPIKey: the key and its secret (sk_live_…), returned exactly once. */
export interface CreatedAPIKey extends APIKey {
  secret: string;
}

/** The body of createAPIKey. */
export interface CreateAPIKeyParams {
  name?: string | null | undefined;
  /** 1 to 13 distinct scopes, each held by the calling key. */
  scopes: Scope[];
}

/** The project's effective limits. */
export interface ProjectLimits {
  object: "project_limits";
  project_id: string;
  max_active_rooms: number;
  max_active_participants: number;
  max_participants_per_room: number;
  room_creates_per_minute: number;
  participant_creates_per_minute: number;
  connect_requests_per_minute: number;
}

/** Who did something, or what it was done to. */
export interface AuditRef {
  type: string;
  id: string;
}

/** One audited operation of the project. */
export interface AuditLogEntry {
  object: "audit_log_entry";
  id: string;
  /** For example api_key.created or room.deleted. */
  action: string;
  actor: { type: "api_key" | "user" | "operator" | "system"; id: string };
  target: AuditRef;
  request_id: string | null;
  source_ip: string | null;
  created_at: Timestamp;
  details: { [key: string]: unknown };
}

/** The instants a usage report covers: from the first day's start to the instant after the last day. */
export interface UsagePeriod {
  from: Timestamp;
  to: Timestamp;
}

/** The project's finalized usage over a period. */
export interface UsageSummary {
  object: "usage_summary";
  project_id: string;
  period: UsagePeriod;
  participant_seconds: number;
  participant_minutes: number;
  rooms: number;
  participants: number;
  finalized_only: true;
}

/** One UTC day of usage. */
export interface UsageDay {
  object: "usage_day";
  /** YYYY-MM-DD */
  date: string;
  participant_seconds: number;
  participant_minutes: number;
  rooms: number;
  participants: number;
}

/** The project's finalized usage per day, oldest first. */
export interface UsageDaily {
  object: "usage_daily";
  project_id: string;
  period: UsagePeriod;
  finalized_only: true;
  data: UsageDay[];
}

/** The days of a usage report: UTC calendar days YYYY-MM-DD, both included, at most 366. */
export interface UsageParams {
  from: string;
  to: string;
}

/** The workspace's prepaid credit. */
export interface Balance {
  object: "balance";
  currency: string;
  /** Can be negative. */
  available: Money;
  reserved: Money;
}

export type CreditState = "normal" | "low" | "exhausted";

/** The price list and credit policy, with the workspace's credit state. */
export interface Pricing {
  object: "pricing";
  currency: string;
  participant_minute_price: Money;
  low_credit_threshold: Money;
  minimum_credit_to_start: Money;
  credit_state: CreditState;
  billing_enabled: boolean;
}

/** One change of the balance. */
export interface LedgerEntry {
  object: "ledger_entry";
  id: string;
  type: "topup" | "usage" | "refund" | "adjustment";
  /** Signed, six decimals. */
  amount: Money;
  balance_after: Money;
  currency: string;
  description: string;
  reference: { [key: string]: unknown };
  created_at: Timestamp;
}

export type TopupStatus = "pending" | "succeeded" | "failed" | "expired" | "canceled" | "refunded";

/** One payment adding credit to the workspace. */
export interface Topup {
  object: "topup";
  payment_id: string;
  amount: Money;
  currency: string;
  method: "checkout" | "card";
  status: TopupStatus;
  provider: "sandbox" | "stripe";
  /** Send the payer here. */
  authorize_url: string;
  /** "" until the payment succeeded. */
  receipt_url: string;
  amount_refunded: Money;
  created_at: Timestamp;
  expires_at: Timestamp;
  completed_at: Timestamp | null;
}

/** The body of createTopup. */
export interface CreateTopupParams {
  /** A decimal string from "5.00" to "10000.00" with at most two decimals. */
  amount: string;
  /** "checkout" (the default) or "card". */
  method?: "checkout" | "card" | null | undefined;
}

/** Webhook event types. */
export type EventType =
  | "room.started"
  | "room.ended"
  | "participant.joined"
  | "participant.left"
  | "usage.finalized"
  | "credit.low"
  | "credit.exhausted"
  | "credit.restored"
  | "payment.succeeded"
  | "payment.failed"
  | "payment.expired"
  | "payment.canceled"
  | "payment.refunded";

/** Every event type. */
export const EVENT_TYPES: readonly EventType[] = [
  "room.started", "room.ended", "participant.joined", "participant.left", "usage.finalized",
  "credit.low", "credit.exhausted", "credit.restored", "payment.succeeded", "payment.failed",
  "payment.expired", "payment.canceled", "payment.refunded",
];

/** A registered webhook destination (never its secret). */
export interface WebhookEndpoint {
  object: "webhook_endpoint";
  id: string;
  url: string;
  events: EventType[];
  status: "enabled" | "disabled";
  created_at: Timestamp;
  disabled_at: Timestamp | null;
}

/**
 * The answer of createWebhookEndpoint: the endpoint and its signing secret
 * (whsec_…), returned exactly once. Keep it for verifyWebhook.
 */
export interface CreatedWebhookEndpoint extends WebhookEndpoint {
  signing_secret: string;
}

/** The body of createWebhookEndpoint. */
export interface CreateWebhookEndpointParams {
  /** An https:// address on the public internet. */
  url: string;
  /** The types to receive; omitted or null: every type, including types added later. */
  events?: EventType[] | null | undefined;
}

/** One recorded attempt of a delivery. */
export interface WebhookDeliveryAttempt {
  attempt: number;
  requested_at: Timestamp;
  /** 0 when no response arrived. */
  response_status: number;
  latency_ms: number;
  /** The first 4096 bytes of the response body. */
  response_body: string;
  error: string | null;
  next_attempt_at: Timestamp | null;
}

/** One event sent (or to be sent) to one endpoint. */
export interface WebhookDelivery {
  object: "webhook_delivery";
  id: string;
  endpoint_id: string;
  event_id: string;
  event_type: EventType;
  status: "pending" | "retrying" | "succeeded" | "dead";
  attempt_count: number;
  next_attempt_at: Timestamp | null;
  created_at: Timestamp;
  /** The newest 32 attempt records, oldest first. */
  attempts: WebhookDeliveryAttempt[];
}

/** What the deployment is. */
export interface SystemInfo {
  object: "system_info";
  service: "rtcd";
  api_version: "v0.1";
  version: string;
  region: string;
}

/** The body of a webhook delivery, returned by verifyWebhook. */
export interface WebhookEvent {
  /** evt_…; process events idempotently by it. */
  id: string;
  type: EventType;
  created_at: Timestamp;
  project_id: string;
  /**
   * Per type (docs/webhooks.md#event-types), for example room_id and
   * sequence for room.ended. Receivers must accept keys they do not know.
   */
  data: { [key: string]: unknown };
}
