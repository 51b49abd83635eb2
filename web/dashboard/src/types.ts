// The API's objects as the dashboard reads them (docs/api.md,
// docs/dashboard.md; the OpenAPI document docs/openapi.yaml is the
// authority).

export type Role = "owner" | "admin" | "member";

export interface User {
  object: "user";
  id: string;
  email: string;
  name: string;
  created_at: string;
}

export interface Project {
  object: "project";
  id: string;
  account_id: string;
  name: string;
  status: "active" | "archived";
  created_at: string;
  archived_at: string | null;
}

export interface Account {
  object: "account";
  id: string;
  name: string;
  role: Role;
  created_at: string;
  projects: Project[];
}

export interface Me {
  object: "me";
  user: User;
  accounts: Account[];
}

export interface Session {
  object: "session";
  token: string;
  expires_at: string;
  idle_timeout_seconds: number;
  user: User;
  joined_account: Account | null;
  created_account: Account | null;
}

export interface EmailSignInLink {
  object: "email_sign_in_link";
  email: string;
  expires_at: string;
  invitation: { account_id: string; account_name: string; role: Role } | null;
}

export type RoomStatus = "waiting" | "active" | "ending" | "ended";

export interface Room {
  object: "room";
  id: string;
  name: string | null;
  status: RoomStatus;
  region: string;
  max_participants: number;
  metadata: Record<string, unknown>;
  created_at: string;
  expires_at: string;
  ended_at: string | null;
  end_reason: "deleted" | "expired" | null;
}

export type ParticipantStatus = "created" | "connected" | "joined" | "left" | "removed" | "ended";

export interface Participant {
  object: "participant";
  id: string;
  room_id: string;
  external_id: string | null;
  name: string | null;
  role: "publisher" | "subscriber";
  status: ParticipantStatus;
  metadata: Record<string, unknown>;
  created_at: string;
  expires_at: string;
  connected_at: string | null;
  ended_at: string | null;
  /** Only in the create response. */
  token?: string;
}

export interface ApiKey {
  object: "api_key";
  id: string;
  name: string | null;
  scopes: string[];
  last4: string;
  status: "active" | "revoked";
  created_at: string;
  revoked_at: string | null;
  last_used_at?: string | null;
  /** Only in the create response. */
  secret?: string;
}

export interface WebhookEndpoint {
  object: "webhook_endpoint";
  id: string;
  url: string;
  events: string[];
  status: "enabled" | "disabled";
  created_at: string;
  disabled_at: string | null;
  /** Only in the create response. */
  signing_secret?: string;
}

export interface DeliveryAttempt {
  attempt: number;
  requested_at: string;
  response_status: number;
  latency_ms: number;
  response_body: string;
  error: string | null;
  next_attempt_at: string | null;
}

export interface WebhookDelivery {
  object: "webhook_delivery";
  id: string;
  endpoint_id: string;
  event_id: string;
  event_type: string;
  status: "pending" | "retrying" | "succeeded" | "dead";
  attempt_count: number;
  next_attempt_at: string | null;
  created_at: string;
  attempts: DeliveryAttempt[];
}

export interface UsagePeriod {
  from: string;
  to: string;
}

export interface UsageSummary {
  object: "usage_summary";
  project_id: string;
  period: UsagePeriod;
  participant_seconds: number;
  participant_minutes: number;
  rooms: number;
  participants: number;
  finalized_only: boolean;
}

export interface UsageDay {
  object: "usage_day";
  date: string;
  participant_seconds: number;
  participant_minutes: number;
  rooms: number;
  participants: number;
}

export interface UsageDaily {
  object: "usage_daily";
  project_id: string;
  period: UsagePeriod;
  finalized_only: boolean;
  data: UsageDay[];
}

export interface Balance {
  object: "balance";
  currency: string;
  available: string;
  reserved: string;
}

export interface Pricing {
  object: "pricing";
  currency: string;
  participant_minute_price: string;
  low_credit_threshold: string;
  minimum_credit_to_start: string;
  credit_state: "normal" | "low" | "exhausted";
  billing_enabled: boolean;
}

export interface LedgerEntry {
  object: "ledger_entry";
  id: string;
  type: "topup" | "usage" | "refund" | "adjustment";
  amount: string;
  balance_after: string;
  currency: string;
  description: string;
  reference: Record<string, unknown>;
  created_at: string;
}

export type TopupStatus = "pending" | "succeeded" | "failed" | "expired" | "canceled" | "refunded";

export interface Topup {
  object: "topup";
  payment_id: string;
  amount: string;
  currency: string;
  method: "checkout" | "card";
  status: TopupStatus;
  provider: string;
  authorize_url: string;
  receipt_url: string;
  amount_refunded: string;
  created_at: string;
  expires_at: string;
  completed_at: string | null;
}

export interface Member {
  object: "member";
  user_id: string;
  email: string;
  name: string;
  role: Role;
  joined_at: string;
}

export interface Invitation {
  object: "invitation";
  id: string;
  account_id: string;
  email: string;
  role: "admin" | "member";
  status: "pending" | "accepted" | "revoked" | "expired";
  invited_by: string;
  created_at: string;
  expires_at: string;
  closed_at: string | null;
}

export interface InvitationAcceptance {
  object: "invitation_acceptance";
  invitation_id: string;
  joined_account: Account;
}

export interface AuditEntry {
  object: "audit_log_entry";
  id: string;
  action: string;
  actor: { type: string; id: string };
  target: { type: string; id: string };
  request_id: string | null;
  source_ip: string | null;
  created_at: string;
  details: Record<string, unknown>;
}

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
