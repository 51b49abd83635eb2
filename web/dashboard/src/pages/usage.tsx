// The project's finalized usage over a range of UTC days: totals, and a
// chart of participant-minutes per day (with the same numbers in a table
// for screen readers and exact reading).

import { useLayoutEffect, useRef, useState } from "preact/hooks";
import { api } from "../api";
import type { ProjectScope } from "../state";
import type { UsageDaily, UsageDay, UsageSummary } from "../types";
import { Empty, Field, Loaded, PageHeader, Section, Table, useAsync } from "../ui";

/** The spec's bound on a usage range (docs/usage.md). */
const maxRangeDays = 366;

function utcDay(d: Date): string {
  return d.toISOString().slice(0, 10);
}

function daysBefore(n: number): string {
  const d = new Date();
  d.setUTCDate(d.getUTCDate() - n);
  return utcDay(d);
}

const minutes = new Intl.NumberFormat(undefined, { maximumFractionDigits: 1 });

/** The chart's narrowest drawing, in CSS pixels. */
const minChartWidth = 240;

/**
 * The width the chart is drawn at: the box's own, in CSS pixels, so that
 * its text keeps its size on a phone instead of being scaled down with it.
 */
function useBoxWidth(initial: number) {
  const ref = useRef<SVGSVGElement>(null);
  const [width, setWidth] = useState(initial);
  useLayoutEffect(() => {
    const el = ref.current;
    if (!el) return;
    const measure = () => setWidth(Math.max(minChartWidth, Math.floor(el.getBoundingClientRect().width)));
    measure();
    const ro = new ResizeObserver(measure);
    ro.observe(el);
    return () => ro.disconnect();
  }, []);
  return { ref, width };
}

function Chart({ days }: { days: UsageDay[] }) {
  const { ref, width } = useBoxWidth(720);
  const height = 220;
  const padLeft = 48;
  const padBottom = 28;
  const plotW = width - padLeft - 8;
  const plotH = height - padBottom - 12;
  const peak = Math.max(...days.map((d) => d.participant_minutes), 0);
  const top = peak > 0 ? niceCeiling(peak) : 1;
  const slot = plotW / Math.max(days.length, 1);
  const barW = Math.max(Math.min(slot * 0.7, 28), 1);
  const ticks = [0, top / 2, top];
  // A date label needs about 44 px.
  const labelEvery = Math.ceil(days.length / Math.max(2, Math.min(8, Math.floor(plotW / 44))));
  const total = days.reduce((s, d) => s + d.participant_minutes, 0);
  return (
    <figure class="chart">
      <svg
        ref={ref}
        viewBox={`0 0 ${width} ${height}`}
        height={height}
        role="img"
        aria-label={`Participant-minutes per day, ${days[0]?.date ?? ""} to ${days[days.length - 1]?.date ?? ""}: ${minutes.format(total)} in total, at most ${minutes.format(peak)} on one day.`}
      >
        {ticks.map((t) => {
          const y = 12 + plotH - (t / top) * plotH;
          return (
            <g key={t}>
              <line x1={padLeft} x2={width - 8} y1={y} y2={y} class="grid" />
              <text x={padLeft - 6} y={y + 4} text-anchor="end" class="axis">
                {minutes.format(t)}
              </text>
            </g>
          );
        })}
        {days.map((d, i) => {
          const h = (d.participant_minutes / top) * plotH;
          const x = padLeft + i * slot + (slot - barW) / 2;
          return (
            <g key={d.date}>
              <rect x={x} y={12 + plotH - h} width={barW} height={Math.max(h, d.participant_minutes > 0 ? 1 : 0)} class="bar">
                <title>
                  {d.date}: {minutes.format(d.participant_minutes)} participant-minutes
                </title>
              </rect>
              {i % labelEvery === 0 && (
                <text x={x + barW / 2} y={height - 8} text-anchor="middle" class="axis">
                  {d.date.slice(5)}
                </text>
              )}
            </g>
          );
        })}
      </svg>
      <figcaption>Participant-minutes per UTC day</figcaption>
    </figure>
  );
}

/** 1, 2 or 5 times a power of ten, at least v: a round top for the axis. */
function niceCeiling(v: number): number {
  const p = Math.pow(10, Math.floor(Math.log10(v)));
  for (const m of [1, 2, 5, 10]) if (m * p >= v) return m * p;
  return 10 * p;
}

export function UsagePage({ scope }: { scope: ProjectScope }) {
  const pid = scope.project.id;
  const [from, setFrom] = useState(daysBefore(29));
  const [to, setTo] = useState(utcDay(new Date()));
  const range = { from, to };
  const summary = useAsync(() => api<UsageSummary>("GET", "/v1/usage/summary", { project: pid, query: range }), [pid, from, to]);
  const daily = useAsync(() => api<UsageDaily>("GET", "/v1/usage/daily", { project: pid, query: range }), [pid, from, to]);
  return (
    <>
      <PageHeader title="Usage" subtitle="Finalized participant time of this project, by UTC day. Sessions still running count once they end." />
      <div class="toolbar">
        <Field label="From">{(id) => <input id={id} type="date" value={from} max={to} onChange={(e) => setFrom(e.currentTarget.value)} />}</Field>
        <Field label="To" hint={`At most ${maxRangeDays} days.`}>
          {(id, hint) => <input id={id} type="date" value={to} min={from} aria-describedby={hint} onChange={(e) => setTo(e.currentTarget.value)} />}
        </Field>
      </div>
      <Loaded state={summary}>
        {(s) => (
          <div class="cards">
            <div class="card">
              <p class="card-label">Participant-minutes</p>
              <p class="card-value">{minutes.format(s.participant_minutes)}</p>
            </div>
            <div class="card">
              <p class="card-label">Participant-seconds</p>
              <p class="card-value">{s.participant_seconds}</p>
            </div>
            <div class="card">
              <p class="card-label">Rooms</p>
              <p class="card-value">{s.rooms}</p>
            </div>
            <div class="card">
              <p class="card-label">Participants</p>
              <p class="card-value">{s.participants}</p>
            </div>
          </div>
        )}
      </Loaded>
      <Section title="Per day">
        <Loaded state={daily}>
          {(d) =>
            d.data.every((day) => day.participant_seconds === 0 && day.rooms === 0) ? (
              <Empty>No finalized usage in this range yet.</Empty>
            ) : (
              <>
                <Chart days={d.data} />
                <details>
                  <summary>The numbers per day</summary>
                  <Table caption="Usage per day" head={["Day", "Participant-minutes", "Participant-seconds", "Rooms", "Participants"]}>
                    {d.data
                      .filter((day) => day.participant_seconds > 0 || day.rooms > 0)
                      .map((day) => (
                        <tr key={day.date}>
                          <td>{day.date}</td>
                          <td>{minutes.format(day.participant_minutes)}</td>
                          <td>{day.participant_seconds}</td>
                          <td>{day.rooms}</td>
                          <td>{day.participants}</td>
                        </tr>
                      ))}
                  </Table>
                </details>
              </>
            )
          }
        </Loaded>
      </Section>
    </>
  );
}
