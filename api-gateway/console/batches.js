// Batches: the API lists none (GET /batch/{id} only), so the console offers
// the batches submitted in this tab and opens any by its id. A batch page
// shows its counts, each episode's job with its progress, and, while it is
// paused, renaming (PATCH /batch/{id}/jobs) and starting (POST /batch/{id}/start).
import { useState } from 'preact/hooks';
import { html } from './html.js';
import { api, seg } from './api.js';
import { ErrorLine, Notice, Progress, StatusBadge, TERMINAL, limited, useAction, useLoad, when } from './ui.js';

const KEPT = 'mediajobs.batches';
/** Episodes shown with their job's state; a larger batch lists the rest by id only. */
const EPISODES_SHOWN = 100;

function kept() {
  try { return JSON.parse(sessionStorage.getItem(KEPT) ?? '[]'); } catch { return []; }
}

/**
 * A batch this tab created, newest first: its id, show URL and episode
 * titles by job id (POST /jobs answers them; GET /batch/{id} does not). No secret.
 */
export function rememberBatch(id, url, episodes = []) {
  const titles = Object.fromEntries(episodes.filter((e) => e.title).map((e) => [e.job_id, e.title]));
  sessionStorage.setItem(KEPT, JSON.stringify([{ id, url, at: Date.now(), titles }, ...kept().filter((b) => b.id !== id)].slice(0, 20)));
}

/** The episode titles this tab was told for a batch, by job id. */
const titlesOf = (id) => kept().find((b) => b.id === id)?.titles ?? {};

export function BatchesView() {
  const list = kept();
  const [id, setId] = useState('');
  return html`<h1 tabindex="-1">Batches</h1>
    <form class="row" onSubmit=${(e) => { e.preventDefault(); if (id.trim()) location.hash = `#/batches/${seg(id.trim())}`; }}>
      <label for="batch-id">Batch id</label>
      <input id="batch-id" value=${id} onInput=${(e) => setId(e.currentTarget.value)} required spellcheck="false" />
      <button type="submit">Open</button>
    </form>
    <h2>Submitted in this tab</h2>
    ${list.length === 0 ? html`<p>None yet. A show or playlist URL submitted on the Jobs page makes a batch.</p>` : html`
      <ul class="links">${list.map((b) => html`<li><a href=${`#/batches/${seg(b.id)}`}>${b.url}</a> <span class="hint">${when(b.at)}</span></li>`)}</ul>`}`;
}

async function loadBatch(id, signal) {
  const batch = await api('GET', `/batch/${seg(id)}`, { signal });
  const ids = batch.episode_jobs.slice(0, EPISODES_SHOWN);
  const titles = titlesOf(batch.id);
  const jobs = await limited(ids, 6, (j) => api('GET', `/jobs/${seg(j)}`, { signal }).catch(() => ({ id: j, status: 'Unknown' })));
  // A job's own title comes once it ran; before, the title the batch was created with.
  return { batch, jobs: jobs.map((j) => ({ ...j, title: j.title ?? titles[j.id] })) };
}

function Rename({ batch, jobs, onDone }) {
  const action = useAction();
  const submit = (e) => {
    e.preventDefault();
    const f = new FormData(e.currentTarget);
    const renames = jobs.map((j) => ({ job_id: j.id, filename: String(f.get(`name-${j.id}`) ?? '').trim() })).filter((r) => r.filename);
    return action.run(async () => {
      if (renames.length === 0) throw new Error('Enter at least one file name');
      const r = await api('PATCH', `/batch/${seg(batch.id)}/jobs`, { body: { renames } });
      onDone();
      return `${r.updated} renamed${r.errors.length ? `; ${r.errors.join('; ')}` : ''}`;
    });
  };
  return html`<form onSubmit=${submit} aria-labelledby="rename-title">
    <h2 id="rename-title">File names</h2>
    <p class="hint">The batch is paused: name episode files (no extension) before starting it.</p>
    <ol class="rename">${jobs.map((j, i) => html`<li>
      <label for=${`name-${j.id}`}>${j.title ?? j.url ?? `Episode ${i + 1}`}</label>
      <input id=${`name-${j.id}`} name=${`name-${j.id}`} maxlength="255" placeholder="File name" />
    </li>`)}</ol>
    <button type="submit" disabled=${action.busy}>Save names</button>
    <${ErrorLine} error=${action.error} />
    <${Notice} text=${action.done} />
  </form>`;
}

export function BatchView({ id }) {
  const state = useLoad((signal) => loadBatch(id, signal), [id], (d) => d.batch.status === 'processing');
  const action = useAction();
  const d = state.data;
  if (!d) {
    return html`<h1 tabindex="-1">Batch</h1>${state.error ? html`<${ErrorLine} error=${state.error} />` : html`<p aria-busy="true">Loading…</p>`}
      <p><a href="#/batches">Batches</a></p>`;
  }
  const { batch, jobs } = d;
  const start = () => action.run(async () => {
    const r = await api('POST', `/batch/${seg(id)}/start`);
    state.reload();
    return `Started ${r.started_jobs} jobs`;
  });
  const cancel = () => action.run(async () => {
    const r = await api('POST', `/batch/${seg(id)}/cancel`);
    state.reload();
    return `Cancelled ${r.cancelled_jobs ?? 0} jobs`;
  });
  const open = batch.status === 'paused' || batch.status === 'processing';
  return html`<p class="crumbs"><a href="#/batches">Batches</a></p>
    <h1 tabindex="-1">${batch.show_url}</h1>
    <div class="status-line">
      <${StatusBadge} status=${batch.status} />
      <${Progress} value=${batch.progress ?? 0} label="Batch progress" />
      ${batch.status === 'paused' ? html`<button type="button" onClick=${start} disabled=${action.busy}>Start batch</button>` : null}
      ${open ? html`<button type="button" class="danger" onClick=${cancel} disabled=${action.busy}>Cancel batch</button>` : null}
    </div>
    <${ErrorLine} error=${action.error} />
    <${Notice} text=${action.done} />
    <dl class="fields">
      <dt>Id</dt><dd>${batch.id}</dd><dt>Folder</dt><dd>${batch.folder ?? '—'}</dd>
      <dt>Episodes</dt><dd>${batch.total_episodes}: ${batch.completed_episodes} completed, ${batch.failed_episodes} failed${batch.skipped_episodes ? `, ${batch.skipped_episodes} skipped` : ''}</dd>
      <dt>Created</dt><dd>${when(batch.created_at)}</dd><dt>Finished</dt><dd>${when(batch.finished_at)}</dd>
    </dl>
    ${batch.status === 'paused' ? html`<${Rename} batch=${batch} jobs=${jobs} onDone=${state.reload} />` : null}
    <h2>Episodes</h2>
    <table>
      <thead><tr><th scope="col">#</th><th scope="col">Episode</th><th scope="col">Status</th><th scope="col">Step or progress</th></tr></thead>
      <tbody>${jobs.map((j, i) => html`<tr key=${j.id}>
        <td class="num">${i + 1}</td>
        <td><a href=${`#/jobs/${seg(j.id)}`}>${j.title ?? j.url ?? j.id}</a></td>
        <td><${StatusBadge} status=${j.status} /></td>
        <td>${j.status === 'Processing' ? html`<${Progress} value=${j.progress} label=${`Progress of episode ${i + 1}`} />` : TERMINAL.has(j.status) ? '' : j.step}</td>
      </tr>`)}</tbody>
    </table>
    ${batch.episode_jobs.length > EPISODES_SHOWN ? html`<p class="hint">${batch.episode_jobs.length - EPISODES_SHOWN} more episodes: open them by id from the API.</p>` : null}
    <${ErrorLine} error=${state.error} />`;
}
