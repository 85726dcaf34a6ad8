// Usage: GET /usage's totals and limits, and the last 30 days as charts
// (inline SVG). The API keeps totals, not days, so the days are counted
// from the key's jobs (GET /jobs, 100 a page, newest first, until a job
// older than 30 days), at most PAGES_MAX pages; a key with more jobs than
// that in 30 days is told so under the chart.
import { html } from './html.js';
import { api } from './api.js';
import { ErrorLine, bytes, useLoad } from './ui.js';

const DAYS = 30;
const DAY_MS = 86_400_000;
const PAGES_MAX = 50;

function dayStart(ms) {
  const d = new Date(ms);
  d.setHours(0, 0, 0, 0);
  return d.getTime();
}

async function loadDays(signal) {
  const first = dayStart(Date.now()) - (DAYS - 1) * DAY_MS;
  const days = Array.from({ length: DAYS }, (_, i) => ({ start: first + i * DAY_MS, jobs: 0, bytes: 0 }));
  let complete = false;
  for (let page = 0; page < PAGES_MAX && !complete; page++) {
    const r = await api('GET', `/jobs?limit=100&offset=${page * 100}`, { signal });
    for (const j of r.jobs) {
      if (j.created_at < first) { complete = true; break; }
      const d = days[Math.floor((dayStart(j.created_at) - first) / DAY_MS)];
      if (!d) continue;
      d.jobs++;
      d.bytes += j.file_size ?? 0;
    }
    if (r.jobs.length < 100) complete = true;
  }
  return { days, complete };
}

const W = 640;
const H = 180;
const PAD = { l: 44, r: 8, t: 10, b: 26 };

/** A bar chart of one figure per day; each bar says its day and value (SVG title), and a table holds the same numbers. */
export function Chart({ id, title, days, value, fmt }) {
  const max = Math.max(1, ...days.map(value));
  const bw = (W - PAD.l - PAD.r) / days.length;
  const y = (v) => PAD.t + (H - PAD.t - PAD.b) * (1 - v / max);
  const day = (ms) => new Date(ms).toLocaleDateString(undefined, { month: 'short', day: 'numeric' });
  const total = days.reduce((s, d) => s + value(d), 0);
  return html`<figure class="chart" aria-labelledby=${`${id}-cap`}>
    <figcaption id=${`${id}-cap`}>${title}: ${fmt(total)} in ${days.length} days</figcaption>
    <svg viewBox=${`0 0 ${W} ${H}`} role="img" aria-labelledby=${`${id}-cap`} data-chart=${id}>
      <line x1=${PAD.l} x2=${W - PAD.r} y1=${H - PAD.b} y2=${H - PAD.b} class="axis" />
      <text x=${PAD.l - 6} y=${PAD.t + 4} class="tick" text-anchor="end">${fmt(max)}</text>
      <text x=${PAD.l - 6} y=${H - PAD.b} class="tick" text-anchor="end">0</text>
      ${days.map((d, i) => {
        const v = value(d);
        return html`<rect class="bar" x=${PAD.l + i * bw + 1} width=${Math.max(1, bw - 2)} y=${y(v)} height=${H - PAD.b - y(v)}>
          <title>${day(d.start)}: ${fmt(v)}</title></rect>`;
      })}
      <text class="tick" x=${PAD.l} y=${H - 8} text-anchor="start">${day(days[0].start)}</text>
      <text class="tick" x=${PAD.l + (W - PAD.l - PAD.r) / 2} y=${H - 8} text-anchor="middle">${day(days[Math.floor(days.length / 2)].start)}</text>
      <text class="tick" x=${W - PAD.r} y=${H - 8} text-anchor="end">${day(days[days.length - 1].start)}</text>
    </svg>
    <details><summary>Numbers</summary>
      <table><thead><tr><th scope="col">Day</th><th scope="col" class="num">${title}</th></tr></thead>
        <tbody>${days.map((d) => html`<tr><td>${day(d.start)}</td><td class="num">${fmt(value(d))}</td></tr>`)}</tbody></table>
    </details>
  </figure>`;
}

const GB = (gb) => `${Number(gb).toFixed(gb < 10 ? 2 : 1)} GB`;
const LIMITS = [
  ['storage_limit_gb', 'Storage limit', GB], ['storage_remaining_gb', 'Storage remaining', GB],
  ['max_resolution_limit', 'Maximum resolution', String], ['max_duration_limit_seconds', 'Maximum duration', (s) => `${s} s`],
  ['max_filesize_limit_bytes', 'Maximum file size', bytes], ['billing_period_start', 'Billing period from', String],
  ['billing_period_end', 'Billing period to', String], ['current_period_usage_gb', 'This billing period', GB], ['billing_error', 'Billing', String],
];

export function UsageView() {
  const usage = useLoad((signal) => api('GET', '/usage', { signal }), []);
  const days = useLoad(loadDays, []);
  const u = usage.data;
  return html`<h1 tabindex="-1">Usage</h1>
    <${ErrorLine} error=${usage.error ?? days.error} />
    ${u ? html`<dl class="fields totals">
      <dt>Jobs created</dt><dd>${u.usage_count}</dd>
      <dt>Stored</dt><dd>${GB(u.storage_usage_gb)}</dd>
      <dt>Reserved by jobs in progress</dt><dd>${GB(u.storage_reserved_gb)}</dd>
      <dt>Counted against the quota</dt><dd>${GB(u.storage_effective_usage_gb)}</dd>
      ${LIMITS.filter(([k]) => u[k] !== undefined).map(([k, label, fmt]) => html`<dt>${label}</dt><dd>${fmt(u[k])}</dd>`)}
    </dl>` : null}
    <h2>Last ${DAYS} days</h2>
    ${days.data ? html`
      <${Chart} id="jobs-per-day" title="Jobs created" days=${days.data.days} value=${(d) => d.jobs} fmt=${(n) => String(n)} />
      <${Chart} id="bytes-per-day" title="Data delivered" days=${days.data.days} value=${(d) => d.bytes} fmt=${bytes} />
      ${days.data.complete ? null : html`<p class="hint">Counted from the newest ${PAGES_MAX * 100} jobs only.</p>`}`
    : html`<p aria-busy="true">Counting…</p>`}`;
}
