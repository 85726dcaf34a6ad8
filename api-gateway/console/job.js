// One job: GET /jobs/{id} (polled until it ends), what was delivered with
// a player, its webhook deliveries (GET /jobs/{id}/webhooks) with
// redelivery, and cancel (POST /jobs/{id}/cancel).
import { useRef } from 'preact/hooks';
import { html } from './html.js';
import { api, seg } from './api.js';
import { ErrorLine, Notice, Progress, StatusBadge, TERMINAL, bytes, duration, useAction, useLoad, when } from './ui.js';

const AUDIO = new Set(['m4a', 'mp3', 'ogg', 'opus']);

/** The fields the console knows how to say, in order; any other scalar field the API adds is listed after them. */
const FIELDS = [
  ['id', 'Id'], ['url', 'Source'], ['status', 'Status'], ['step', 'Step'], ['error_type', 'Error type'], ['reason', 'Reason'],
  ['created_at', 'Created', when], ['finished_at', 'Finished', when],
  ['file_size', 'Size', bytes], ['actual_quality', 'Delivered quality'], ['title', 'Title'], ['release_date', 'Released'],
  ['downloaded_bytes', 'Downloaded', bytes], ['total_bytes', 'Total size', bytes],
  ['speed_bps', 'Speed', (v) => `${bytes(v)}/s`], ['eta_seconds', 'Time left', duration], ['s3_key', 'Storage key'],
];
const SHOWN_ELSEWHERE = new Set(['error', 'error_detail', 'progress', 's3_url', 'subtitle_url', 'thumbnail_url', 'description', 'options', 'subtitle_key', 'thumbnail_key']);

function Details({ job }) {
  const known = new Set(FIELDS.map(([k]) => k));
  const rows = FIELDS.filter(([k]) => job[k] !== undefined && job[k] !== null)
    .map(([k, label, fmt]) => [label, fmt ? fmt(job[k]) : String(job[k])]);
  for (const [k, v] of Object.entries(job)) {
    if (!known.has(k) && !SHOWN_ELSEWHERE.has(k) && v !== null && typeof v !== 'object') rows.push([k, String(v)]);
  }
  return html`<dl class="fields">${rows.map(([label, value]) => html`<dt>${label}</dt><dd>${value}</dd>`)}</dl>`;
}

/** The options the job was accepted with, as the service normalised them (when the answer carries them). */
function Options({ options }) {
  if (!options || typeof options !== 'object') return null;
  const rows = Object.entries(options).filter(([, v]) => v !== null && v !== undefined && typeof v !== 'object');
  if (rows.length === 0) return null;
  return html`<section aria-labelledby="options-title"><h2 id="options-title">Options</h2>
    <dl class="fields">${rows.map(([k, v]) => html`<dt>${k}</dt><dd>${String(v)}</dd>`)}</dl></section>`;
}

/** What happened when: creation, every event the job emitted (with its delivery attempts), the end. */
function Timeline({ job, events }) {
  const items = [{ at: job.created_at, what: 'Accepted (Pending)' }];
  for (const e of events ?? []) {
    items.push({ at: e.created_at, what: e.stage ? `${e.type}: ${e.stage}` : e.type });
    for (const a of e.attempts) {
      items.push({
        at: a.attempted_at, sub: true,
        what: `${a.round > 0 ? `redelivery ${a.round}, ` : ''}webhook attempt ${a.attempt}: ${a.status_code ?? a.error ?? 'no answer'}${a.duration_ms !== null ? ` in ${a.duration_ms} ms` : ''}`,
      });
    }
  }
  if (job.finished_at) items.push({ at: job.finished_at, what: `Ended: ${job.status}` });
  items.sort((a, b) => (a.at ?? 0) - (b.at ?? 0));
  return html`<section aria-labelledby="timeline-title"><h2 id="timeline-title">Timeline</h2>
    <ol class="timeline">${items.map((i) => html`<li class=${i.sub ? 'sub' : ''}><time datetime=${i.at ? new Date(i.at).toISOString() : ''}>${when(i.at)}</time> ${i.what}</li>`)}</ol>
  </section>`;
}

function Delivered({ job }) {
  // Each read signs the URL anew: the player keeps the first one for the file, or every poll would reload it.
  const kept = useRef({});
  if (kept.current.key !== job.s3_key || !kept.current.src) kept.current = { key: job.s3_key, src: job.s3_url };
  if (job.status !== 'Completed') return null;
  const ext = String(job.s3_key ?? '').split('.').pop().toLowerCase();
  const src = webUrl(kept.current.src);
  return html`<section aria-labelledby="file-title"><h2 id="file-title">Delivered file</h2>
    ${src ? html`
      ${AUDIO.has(ext)
        ? html`<audio controls preload="metadata" src=${src} aria-label="Delivered audio"></audio>`
        : html`<video controls preload="metadata" src=${src} aria-label="Delivered video"></video>`}
      <ul class="links">
        <li><a href=${src} download>Download ${job.s3_key?.split('/').pop() ?? 'file'}</a> (link valid 24 hours)</li>
        ${webUrl(job.subtitle_url) ? html`<li><a href=${webUrl(job.subtitle_url)} download>Subtitles</a></li>` : null}
        ${webUrl(job.thumbnail_url) ? html`<li><a href=${webUrl(job.thumbnail_url)} download>Thumbnail</a></li>` : null}
      </ul>` : html`<p>The download link could not be signed right now; reload to try again.</p>`}
  </section>`;
}

/**
 * A link the page may show: http(s) only. The CSP already blocks a javascript: URL's script; a data: or
 * blob: one, or anything else a storage answer might carry, is not a file a person should be sent to.
 */
function webUrl(v) {
  if (typeof v !== 'string') return undefined;
  try {
    const { protocol } = new URL(v, location.href);
    return protocol === 'https:' || protocol === 'http:' ? v : undefined;
  } catch {
    return undefined;
  }
}

function Deliveries({ id, events, onChange }) {
  const action = useAction();
  if (!events) return null;
  const redeliver = (e) => action.run(async () => {
    await api('POST', `/jobs/${seg(id)}/webhooks/${seg(e.event_id)}/redeliver`);
    onChange();
    return `${e.type} queued for redelivery`;
  });
  return html`<section aria-labelledby="hooks-title"><h2 id="hooks-title">Webhook deliveries</h2>
    ${events.length === 0 ? html`<p>No webhook events (the job has no webhook URL, or none was due yet).</p>` : html`
    <table>
      <thead><tr><th scope="col">Event</th><th scope="col">Delivery</th><th scope="col">Attempts</th><th scope="col">Last error</th><th scope="col"><span class="sr-only">Action</span></th></tr></thead>
      <tbody>${events.map((e) => html`<tr key=${e.event_id}>
        <td>${e.type}${e.stage ? ` (${e.stage})` : ''}</td>
        <td>${e.status}${e.delivered_at ? ` ${when(e.delivered_at)}` : e.failed_at ? ` ${when(e.failed_at)}` : ''}${e.redeliveries ? `, redelivered ${e.redeliveries}×` : ''}</td>
        <td class="num">${e.attempts.length}</td>
        <td>${e.last_error ?? ''}</td>
        <td><button type="button" class="secondary" disabled=${e.status === 'pending' || action.busy}
          onClick=${() => redeliver(e)} aria-label=${`Redeliver ${e.type}${e.stage ? ` ${e.stage}` : ''}`}>Redeliver</button></td>
      </tr>`)}</tbody>
    </table>`}
    <${ErrorLine} error=${action.error} />
    <${Notice} text=${action.done} />
  </section>`;
}

async function loadJob(id, signal) {
  const [job, hooks] = await Promise.all([
    api('GET', `/jobs/${seg(id)}`, { signal }),
    api('GET', `/jobs/${seg(id)}/webhooks`, { signal }).catch(() => undefined),
  ]);
  return { job, events: hooks?.events };
}

export function JobView({ id }) {
  // Polled while the job runs or a delivery is still being attempted.
  const state = useLoad((signal) => loadJob(id, signal), [id], (d) => !TERMINAL.has(d.job.status) || d.events?.some((e) => e.status === 'pending'));
  const cancel = useAction();
  const d = state.data;
  if (!d) {
    return html`<h1 tabindex="-1">Job</h1>${state.error ? html`<${ErrorLine} error=${state.error} />` : html`<p aria-busy="true">Loading…</p>`}
      <p><a href="#/jobs">All jobs</a></p>`;
  }
  const { job, events } = d;
  const doCancel = () => cancel.run(async () => {
    await api('POST', `/jobs/${seg(id)}/cancel`);
    state.reload();
    return 'Job cancelled';
  });
  return html`<p class="crumbs"><a href="#/jobs">All jobs</a></p>
    <h1 tabindex="-1">${job.title ?? job.url}</h1>
    <div class="status-line">
      <${StatusBadge} status=${job.status} />
      ${job.status === 'Processing' ? html`<${Progress} value=${job.progress} label="Job progress" />` : null}
      ${!TERMINAL.has(job.status) ? html`<button type="button" class="danger" onClick=${doCancel} disabled=${cancel.busy}>Cancel job</button>` : null}
    </div>
    <${ErrorLine} error=${cancel.error} />
    <${Notice} text=${cancel.done} />
    ${job.error ? html`<p class="failure"><strong>${job.error_type === 'warning' ? 'Content warning' : 'Error'}:</strong> ${job.error}${job.error_detail ? html`<br /><span class="hint">Cause: ${job.error_detail}</span>` : null}</p>` : null}
    <${Delivered} job=${job} />
    <section aria-labelledby="details-title"><h2 id="details-title">Details</h2><${Details} job=${job} />
      ${job.description ? html`<details><summary>Description</summary><p class="pre">${job.description}</p></details>` : null}</section>
    <${Options} options=${job.options} />
    <${Timeline} job=${job} events=${events} />
    <${Deliveries} id=${id} events=${events} onChange=${state.reload} />
    <${ErrorLine} error=${state.error} />`;
}
