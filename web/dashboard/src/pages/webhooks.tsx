// Webhook endpoints: create one with the events it wants (its signing
// secret shown once), disable one, and each endpoint's delivery log with
// every attempt and a retry button.

import { useState } from "preact/hooks";
import { api, pageLimitMax, type Page } from "../api";
import { can } from "../roles";
import { Link } from "../router";
import { projectPath, type ProjectScope } from "../state";
import type { WebhookDelivery, WebhookEndpoint } from "../types";
import { Badge, ConfirmButton, Empty, ErrorNote, Field, Loaded, MoreNote, PageHeader, SecretOnce, Table, Time, useAction, useAsync, useInterval } from "../ui";

export const eventTypes = [
  "room.started",
  "room.ended",
  "participant.joined",
  "participant.left",
  "usage.finalized",
  "credit.low",
  "credit.exhausted",
  "credit.restored",
  "payment.succeeded",
  "payment.failed",
  "payment.expired",
  "payment.canceled",
  "payment.refunded",
] as const;

function CreateEndpoint({ scope, onCreated, onCancel }: { scope: ProjectScope; onCreated: () => void; onCancel: () => void }) {
  const [url, setUrl] = useState("");
  const [all, setAll] = useState(true);
  const [picked, setPicked] = useState<Set<string>>(new Set());
  const [created, setCreated] = useState<WebhookEndpoint | null>(null);
  const create = useAction(async () => {
    const body: Record<string, unknown> = { url: url.trim() };
    if (!all) body["events"] = eventTypes.filter((t) => picked.has(t));
    setCreated(await api<WebhookEndpoint>("POST", "/v1/webhook-endpoints", { project: scope.project.id, body }));
    onCreated();
  });
  if (created?.signing_secret) {
    return (
      <SecretOnce title="Webhook endpoint created" label="Signing secret" value={created.signing_secret} onDone={onCancel}>
        <p class="hint">
          Your receiver checks each delivery's <code>webhook-signature</code> header with this secret (see docs/webhooks.md).
        </p>
      </SecretOnce>
    );
  }
  return (
    <form
      class="panel stack"
      aria-label="Add a webhook endpoint"
      onSubmit={(e) => {
        e.preventDefault();
        void create.run();
      }}
    >
      <h2>Add a webhook endpoint</h2>
      <Field label="URL" hint="An https:// address your receiver listens on.">
        {(id, hint) => (
          <input
            id={id}
            type="url"
            required
            maxLength={2048}
            placeholder="https://hooks.example.com/rtcd"
            value={url}
            aria-describedby={hint}
            onInput={(e) => setUrl(e.currentTarget.value)}
          />
        )}
      </Field>
      <fieldset class="scopes">
        <legend>Events</legend>
        <label class="check">
          <input type="checkbox" checked={all} onChange={(e) => setAll(e.currentTarget.checked)} />
          Every event (also types added later)
        </label>
        {!all && (
          <div class="checks">
            {eventTypes.map((t) => (
              <label key={t} class="check">
                <input
                  type="checkbox"
                  checked={picked.has(t)}
                  onChange={(e) => {
                    const next = new Set(picked);
                    if (e.currentTarget.checked) next.add(t);
                    else next.delete(t);
                    setPicked(next);
                  }}
                />
                <code>{t}</code>
              </label>
            ))}
          </div>
        )}
      </fieldset>
      <div class="row">
        <button type="submit" class="btn btn-primary" data-action="add-webhook-endpoint" disabled={create.busy}>
          {create.busy ? "Adding…" : "Add endpoint"}
        </button>
        <button type="button" class="btn" onClick={onCancel}>
          Cancel
        </button>
      </div>
      <ErrorNote error={create.error} />
    </form>
  );
}

export function WebhooksPage({ scope }: { scope: ProjectScope }) {
  const pid = scope.project.id;
  const endpoints = useAsync(() => api<Page<WebhookEndpoint>>("GET", "/v1/webhook-endpoints", { project: pid, query: { limit: pageLimitMax } }), [pid]);
  const [creating, setCreating] = useState(false);
  const disable = useAction(async (e: WebhookEndpoint) => {
    await api("DELETE", `/v1/webhook-endpoints/${encodeURIComponent(e.id)}`, { project: pid });
    endpoints.reload();
  });
  const manage = can.manageWebhooks(scope.role);
  return (
    <>
      <PageHeader
        title="Webhooks"
        subtitle="rtcd posts signed events to these endpoints, at least once, retrying failures."
        actions={
          manage &&
          !creating && (
            <button type="button" class="btn btn-primary" data-action="add-webhook-endpoint" onClick={() => setCreating(true)}>
              Add endpoint
            </button>
          )
        }
      />
      {creating && <CreateEndpoint scope={scope} onCreated={endpoints.reload} onCancel={() => setCreating(false)} />}
      <ErrorNote error={disable.error} />
      <Loaded state={endpoints}>
        {(page) =>
          page.data.length === 0 ? (
            <Empty>No webhook endpoints. {manage ? "Add one to receive events." : "An owner or admin can add one."}</Empty>
          ) : (
            <>
              <Table caption="Webhook endpoints" head={["Endpoint", "Events", "Status", "Created", ""]}>
                {page.data.map((e) => (
                  <tr key={e.id}>
                    <td>
                      <Link href={projectPath(pid, "webhooks/" + e.id)}>{e.url}</Link>
                      <div class="sub">{e.id}</div>
                    </td>
                    <td class="scope-list">{e.events.length === eventTypes.length ? "every event" : e.events.map((t) => <code key={t}>{t}</code>)}</td>
                    <td>
                      <Badge status={e.status} />
                    </td>
                    <td>
                      <Time iso={e.created_at} />
                    </td>
                    <td class="actions">
                      {manage && e.status === "enabled" && (
                        <ConfirmButton
                          small
                          danger
                          action="disable-webhook-endpoint"
                          label="Disable"
                          confirm="Disable this endpoint? It gets no more events; this cannot be undone."
                          busy={disable.busy}
                          onConfirm={() => disable.run(e)}
                        />
                      )}
                    </td>
                  </tr>
                ))}
              </Table>
              <MoreNote hasMore={page.page.has_more} shown={page.data.length} />
            </>
          )
        }
      </Loaded>
    </>
  );
}

const refreshMs = 3000;

function Attempts({ d }: { d: WebhookDelivery }) {
  if (d.attempts.length === 0) return <p class="hint">Not attempted yet.</p>;
  return (
    <Table caption={`Attempts of delivery ${d.id}`} head={["#", "Sent", "Response", "Latency", "Body", "Next attempt"]}>
      {d.attempts.map((a) => (
        <tr key={a.attempt}>
          <td>{a.attempt}</td>
          <td>
            <Time iso={a.requested_at} seconds />
          </td>
          <td>
            {a.response_status === 0 ? <span class="bad">no response</span> : a.response_status}
            {a.error && <div class="sub">{a.error}</div>}
          </td>
          <td>{a.latency_ms} ms</td>
          <td>
            <code class="body-excerpt" title={a.response_body}>
              {a.response_body.length > 120 ? a.response_body.slice(0, 120) + "…" : a.response_body || "(empty)"}
            </code>
          </td>
          <td>
            <Time iso={a.next_attempt_at} seconds />
          </td>
        </tr>
      ))}
    </Table>
  );
}

export function EndpointPage({ scope, endpointId }: { scope: ProjectScope; endpointId: string }) {
  const pid = scope.project.id;
  const base = `/v1/webhook-endpoints/${encodeURIComponent(endpointId)}`;
  const endpoints = useAsync(() => api<Page<WebhookEndpoint>>("GET", "/v1/webhook-endpoints", { project: pid, query: { limit: pageLimitMax } }), [pid]);
  const deliveries = useAsync(() => api<Page<WebhookDelivery>>("GET", base + "/deliveries", { project: pid, query: { limit: pageLimitMax } }), [pid, endpointId]);
  const pendingWork = deliveries.data?.data.some((d) => d.status === "pending" || d.status === "retrying") ?? false;
  useInterval(deliveries.reload, refreshMs, pendingWork);
  const retry = useAction(async (d: WebhookDelivery) => {
    await api<WebhookDelivery>("POST", `${base}/deliveries/${encodeURIComponent(d.id)}/retry`, { project: pid });
    deliveries.reload();
  });
  const endpoint = endpoints.data?.data.find((e) => e.id === endpointId);
  const manage = can.manageWebhooks(scope.role) && endpoint?.status === "enabled";
  return (
    <>
      <p class="crumbs">
        <Link href={projectPath(pid, "webhooks")}>Webhooks</Link> /
      </p>
      <PageHeader
        title={endpoint ? endpoint.url : "Webhook endpoint"}
        subtitle={
          <>
            <code>{endpointId}</code> {endpoint && <Badge status={endpoint.status} />}
          </>
        }
        actions={
          <button type="button" class="btn" onClick={deliveries.reload}>
            Refresh
          </button>
        }
      />
      <ErrorNote error={retry.error} />
      <Loaded state={deliveries}>
        {(page) =>
          page.data.length === 0 ? (
            <Empty>No deliveries yet. Events of the types this endpoint takes appear here as they are sent.</Empty>
          ) : (
            <>
              <ul class="deliveries">
                {page.data.map((d) => (
                  <li key={d.id} class="delivery">
                    <div class="delivery-head">
                      <div>
                        <strong>{d.event_type}</strong> <Badge status={d.status} />
                        <div class="sub">
                          {d.event_id} · {d.id} · created <Time iso={d.created_at} seconds /> · {d.attempt_count} attempt{d.attempt_count === 1 ? "" : "s"}
                          {d.next_attempt_at && (
                            <>
                              {" "}
                              · next <Time iso={d.next_attempt_at} seconds />
                            </>
                          )}
                        </div>
                      </div>
                      {manage && (d.status === "dead" || d.status === "retrying") && (
                        <button type="button" class="btn btn-small" data-action="retry-delivery" disabled={retry.busy} onClick={() => void retry.run(d)}>
                          Retry now
                        </button>
                      )}
                    </div>
                    <Attempts d={d} />
                  </li>
                ))}
              </ul>
              <MoreNote hasMore={page.page.has_more} shown={page.data.length} />
            </>
          )
        }
      </Loaded>
    </>
  );
}
