// The workspace's wallet, read through one of its projects: balance and
// credit state, pricing, top-ups (start one, pay on the provider's page,
// come back to its result and receipt), and the ledger.

import { useState } from "preact/hooks";
import { api, pageLimitMax, type Page } from "../api";
import { InputError } from "../errors";
import { can } from "../roles";
import { Link } from "../router";
import { lastProject } from "../session";
import { Shell } from "../shell";
import { findProject, projectPath, useMe, type ProjectScope } from "../state";
import type { Balance, LedgerEntry, Pricing, Topup } from "../types";
import { Badge, Empty, ErrorNote, Field, Loaded, Money, MoreNote, PageHeader, Section, Table, Time, useAction, useAsync, useInterval } from "../ui";

/** The top-up bounds of the API (docs/api.md, POST /v1/billing/topups). */
const topupMin = 5;
const topupMax = 10000;

const creditWords: Record<Pricing["credit_state"], string> = {
  normal: "Credit is fine.",
  low: "Credit is low: top up soon.",
  exhausted: "Credit is exhausted: new participants are refused until you top up.",
};

function TopupForm({ scope }: { scope: ProjectScope }) {
  const [amount, setAmount] = useState("25.00");
  const start = useAction(async () => {
    const v = amount.trim();
    if (!/^\d+(\.\d{1,2})?$/.test(v) || Number(v) < topupMin || Number(v) > topupMax) {
      throw new InputError(`Enter an amount from ${topupMin}.00 to ${topupMax}.00, with at most two decimals.`);
    }
    const t = await api<Topup>("POST", "/v1/billing/topups", { project: scope.project.id, body: { amount: v, method: "checkout" } });
    // The provider's checkout page; it sends the payer back to
    // /billing/topups/<payment_id> on this dashboard.
    window.location.assign(t.authorize_url);
  });
  return (
    <form
      class="panel stack"
      aria-label="Add credit"
      onSubmit={(e) => {
        e.preventDefault();
        void start.run();
      }}
    >
      <h2>Add credit</h2>
      <div class="row">
        <Field label="Amount" hint={`${topupMin}.00 to ${topupMax}.00. You pay on the payment provider's page.`}>
          {(id, hint) => <input id={id} inputMode="decimal" value={amount} aria-describedby={hint} onInput={(e) => setAmount(e.currentTarget.value)} />}
        </Field>
        <button type="submit" class="btn btn-primary" data-action="top-up" disabled={start.busy}>
          {start.busy ? "Starting…" : "Continue to payment"}
        </button>
      </div>
      <ErrorNote error={start.error} />
    </form>
  );
}

export function BillingPage({ scope }: { scope: ProjectScope }) {
  const pid = scope.project.id;
  const opts = { project: pid };
  const balance = useAsync(() => api<Balance>("GET", "/v1/billing/balance", opts), [pid]);
  const pricing = useAsync(() => api<Pricing>("GET", "/v1/billing/pricing", opts), [pid]);
  const topups = useAsync(() => api<Page<Topup>>("GET", "/v1/billing/topups", { ...opts, query: { limit: pageLimitMax } }), [pid]);
  const ledger = useAsync(() => api<Page<LedgerEntry>>("GET", "/v1/billing/ledger", { ...opts, query: { limit: pageLimitMax } }), [pid]);
  return (
    <>
      <PageHeader title="Billing" subtitle={`The prepaid wallet of ${scope.account.name}, shared by all its projects.`} />
      <div class="cards">
        <Loaded state={balance}>
          {(b) => (
            <div class="card">
              <p class="card-label">Balance</p>
              <p class="card-value">
                <Money amount={b.available} currency={b.currency} />
              </p>
            </div>
          )}
        </Loaded>
        <Loaded state={pricing}>
          {(p) => (
            <>
              <div class="card">
                <p class="card-label">Credit</p>
                <p class="card-value">
                  <Badge status={p.credit_state} />
                </p>
                <p class="card-note">{p.billing_enabled ? creditWords[p.credit_state] : "Billing is off on this server: nothing is refused for credit."}</p>
              </div>
              <div class="card">
                <p class="card-label">Price</p>
                <p class="card-value">
                  <Money amount={p.participant_minute_price} currency={p.currency} />
                </p>
                <p class="card-note">per participant-minute</p>
              </div>
              <div class="card">
                <p class="card-label">Thresholds</p>
                <p class="card-note">
                  Low below <Money amount={p.low_credit_threshold} currency={p.currency} />; new participants need at least{" "}
                  <Money amount={p.minimum_credit_to_start} currency={p.currency} />.
                </p>
              </div>
            </>
          )}
        </Loaded>
      </div>
      {can.topUp(scope.role) ? <TopupForm scope={scope} /> : <p class="hint">Only owners and admins can add credit.</p>}
      <Section title="Top-ups">
        <Loaded state={topups}>
          {(page) =>
            page.data.length === 0 ? (
              <Empty>No top-ups yet.</Empty>
            ) : (
              <>
                <Table caption="Top-ups" head={["Top-up", "Amount", "Status", "Provider", "Created", "Completed", "Receipt"]}>
                  {page.data.map((t) => (
                    <tr key={t.payment_id}>
                      <td>
                        <Link href={`/billing/topups/${encodeURIComponent(t.payment_id)}`}>{t.payment_id}</Link>
                      </td>
                      <td class="num">
                        <Money amount={t.amount} currency={t.currency} />
                      </td>
                      <td>
                        <Badge status={t.status} />
                      </td>
                      <td>{t.provider}</td>
                      <td>
                        <Time iso={t.created_at} />
                      </td>
                      <td>
                        <Time iso={t.completed_at} />
                      </td>
                      <td>
                        {t.receipt_url ? (
                          <a href={t.receipt_url} target="_blank" rel="noopener noreferrer">
                            Receipt
                          </a>
                        ) : (
                          <span class="muted">—</span>
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
      </Section>
      <Section title="Ledger">
        <Loaded state={ledger}>
          {(page) =>
            page.data.length === 0 ? (
              <Empty>No ledger entries yet.</Empty>
            ) : (
              <>
                <Table caption="Ledger entries" head={["When", "Type", "Description", "Amount", "Balance after"]}>
                  {page.data.map((l) => (
                    <tr key={l.id}>
                      <td>
                        <Time iso={l.created_at} />
                      </td>
                      <td>
                        <Badge status={l.type} />
                      </td>
                      <td>
                        {l.description}
                        <div class="sub">{l.id}</div>
                      </td>
                      <td class={`num ${l.amount.startsWith("-") ? "debit" : "credit"}`}>
                        <Money amount={l.amount} currency={l.currency} />
                      </td>
                      <td class="num">
                        <Money amount={l.balance_after} currency={l.currency} />
                      </td>
                    </tr>
                  ))}
                </Table>
                <MoreNote hasMore={page.page.has_more} shown={page.data.length} />
              </>
            )
          }
        </Loaded>
      </Section>
    </>
  );
}

const returnRefreshMs = 2000;

/**
 * Where the payment provider sends the payer back
 * (/billing/topups/<payment_id>): the top-up's result and receipt, read
 * through the project last used (any project of the workspace sees it).
 */
export function TopupReturnPage({ paymentId }: { paymentId: string }) {
  const { me } = useMe();
  const last = lastProject();
  const scope = (last && findProject(me, last)) || null;
  const fallback = me.accounts.flatMap((a) => a.projects.filter((p) => p.status === "active").map((p) => findProject(me, p.id)));
  const candidates = [scope, ...fallback].filter((s): s is ProjectScope => s !== null);
  const topup = useAsync(async () => {
    // The top-up belongs to one workspace; try the last project first,
    // then one project of each other workspace.
    let lastErr: unknown = undefined;
    const tried = new Set<string>();
    for (const s of candidates) {
      if (tried.has(s.account.id)) continue;
      tried.add(s.account.id);
      try {
        const t = await api<Topup>("GET", `/v1/billing/topups/${encodeURIComponent(paymentId)}`, { project: s.project.id });
        return { t, s };
      } catch (e) {
        lastErr = e;
      }
    }
    throw lastErr ?? new InputError("No workspace of yours has this top-up.");
  }, [paymentId]);
  useInterval(topup.reload, returnRefreshMs, topup.data?.t.status === "pending");
  const account = topup.data?.s.account ?? candidates[0]?.account;
  const body = (
    <>
      <PageHeader title="Top-up" subtitle={<code>{paymentId}</code>} />
      <Loaded state={topup}>
        {({ t, s }) => (
          <div class="stack">
            <p class="lead">
              <Money amount={t.amount} currency={t.currency} /> <Badge status={t.status} />
            </p>
            <p>
              {t.status === "succeeded" && "Paid: the credit is in your wallet."}
              {t.status === "pending" && "Waiting for the payment provider's confirmation… this page updates by itself."}
              {t.status === "failed" && "The payment failed; nothing was charged. You can start another top-up."}
              {t.status === "canceled" && "The payment was canceled; nothing was charged."}
              {t.status === "expired" && "The checkout expired before it was paid; nothing was charged."}
              {t.status === "refunded" && `Refunded (${t.amount_refunded} ${t.currency}).`}
            </p>
            {t.receipt_url && (
              <p>
                <a href={t.receipt_url} target="_blank" rel="noopener noreferrer">
                  View the receipt
                </a>
              </p>
            )}
            <p>
              <Link href={projectPath(s.project.id, "billing")}>Back to billing</Link>
            </p>
          </div>
        )}
      </Loaded>
    </>
  );
  return account ? (
    <Shell account={account} project={topup.data?.s.project}>
      {body}
    </Shell>
  ) : (
    body
  );
}
