// API errors in words. The server's message is kept (it names the field and
// the bound); this adds what it means for the person and what to do, for
// the codes and reasons a dashboard action can meet.

import { RtcError, type ErrorCode } from "@rtcd/web";
import { ApiError, networkErrorCode } from "./api";

const byReason: Record<string, string> = {
  last_owner: "A workspace always keeps at least one owner. Make someone else an owner first.",
  last_project: "A workspace keeps at least one active project. Create another project before archiving this one.",
  project_has_active_rooms: "This project still has rooms that have not ended. Delete them (or let them expire), then archive it.",
  project_archived: "This project is archived; archived projects cannot be changed.",
  archive_in_progress: "This project is already being archived. Wait a moment and reload.",
  already_member: "That person is already a member of this workspace.",
  cannot_revoke_current_key: "This is the key making the request; a key cannot revoke itself.",
  idempotency_key_reused: "This request was already sent with different content.",
  sign_in_link_invalid: "This sign-in link is no longer valid: it was used, it expired (links last 15 minutes), or it was mistyped. Ask for a new one.",
  invitation_invalid: "This invitation is no longer valid: it was used, revoked or expired. Ask for a new one.",
  invitation_email_mismatch: "This invitation was sent to another e-mail address. Sign in with that address to accept it.",
  account_not_found: "This workspace does not exist or you are not a member of it.",
  project_not_found: "This project does not exist or is not in one of your workspaces.",
  member_not_found: "This person is not a member of the workspace.",
  invitation_not_found: "This invitation does not exist.",
  provider_not_enabled: "Google sign-in is not enabled on this server.",
  owned_accounts_per_user: "You already own the most workspaces a person can own.",
  projects_per_account: "This workspace has the most projects it can have.",
  open_invitations_per_account: "This workspace has the most open invitations it can have. Revoke some first.",
  members_per_account: "This workspace has the most members it can have.",
};

const byCode: Record<string, string> = {
  [networkErrorCode]: "The server could not be reached.",
  authentication_failed: "You are not signed in, or your session ended. Sign in again.",
  permission_denied: "Your role does not allow this.",
  insufficient_credit: "The workspace is out of credit. Top up to continue.",
  rate_limited: "Too many requests in a short time. Wait a moment and try again.",
  quota_exceeded: "A limit was reached.",
  room_not_found: "This room does not exist in the project.",
  room_expired: "This room has expired.",
  room_ended: "This room has ended.",
  participant_not_found: "This participant does not exist in the room.",
  api_key_not_found: "This API key does not exist in the project.",
  api_key_limit_reached: "The project has the most active API keys it can have (50). Revoke one first.",
  webhook_endpoint_not_found: "This webhook endpoint does not exist in the project.",
  webhook_endpoint_limit_reached: "The project has the most enabled webhook endpoints it can have (16). Disable one first.",
  last_project: byReason["last_project"] ?? "",
  project_has_active_rooms: byReason["project_has_active_rooms"] ?? "",
  conflict: "This conflicts with the current state.",
  idempotency_in_progress: "The same request is still running. Try again in a moment.",
  service_unavailable: "The service is busy or a dependency is unavailable. Try again shortly.",
  internal_error: "Something went wrong on the server.",
};

/** The web SDK's errors (the call page) in words, by their spec 7 code. */
const byCallCode: Partial<Record<ErrorCode, string>> = {
  authentication_failed: "The participant token was refused. Join again.",
  token_expired: "The participant token expired. Join again.",
  room_not_found: "This room does not exist in the project.",
  room_ended: "This room has ended.",
  participant_limit_reached: "The room is full.",
  permission_denied: "This participant may not do that (its role), or it was removed from the room.",
  device_not_found: "No camera or microphone was found.",
  device_in_use: "The camera or microphone is in use by another program, or could not be started.",
  media_permission_denied: "The browser was not allowed to use the camera or microphone. Allow them for this site and try again.",
  connection_failed: "The media server could not be reached.",
  connection_lost: "The connection to the call was lost.",
  network_unavailable: "The server could not be reached.",
  service_unavailable: "The media service is busy or restarting. Try again shortly.",
  unsupported_platform: "This browser cannot hold a call here (WebRTC, or camera access on a page that is not https).",
  insufficient_credit: "The workspace is out of credit. Top up to continue.",
  rate_limited: "Too many joins in a short time. Wait a moment and try again.",
  timeout: "Joining took too long. Try again.",
};

/** Input the page refuses before sending anything: its message is the summary. */
export class InputError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "InputError";
  }
}

/** A sentence for the person, then the server's own message. */
export function describe(err: unknown): { summary: string; message: string; requestId: string } {
  if (err instanceof InputError) return { summary: err.message, message: "", requestId: "" };
  if (err instanceof ApiError) {
    const summary = byReason[err.reason] ?? byCode[err.code] ?? "The request was refused.";
    return { summary, message: err.message, requestId: err.requestId };
  }
  if (err instanceof RtcError) {
    const summary = byCallCode[err.code] ?? "The call failed.";
    const rid = err.debug["request_id"];
    const wait = err.retryAfter ? ` (wait ${err.retryAfter} s)` : "";
    return { summary: summary + wait, message: err.message, requestId: typeof rid === "string" ? rid : "" };
  }
  return { summary: "Something went wrong in the dashboard.", message: String(err), requestId: "" };
}
