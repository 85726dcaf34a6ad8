// The jobs view: the submit form (POST /jobs) and the key's jobs (GET /jobs,
// newest first) with the spec's status filters, polled while the tab is
// visible; a job in progress shows its progress from GET /jobs/{id}.
import { useEffect, useState } from 'preact/hooks';
import { html } from './html.js';
import { api, seg } from './api.js';
import { ErrorLine, Notice, Progress, StatusBadge, TERMINAL, bytes, useAction, useLoad, when } from './ui.js';
import { rememberBatch } from './batches.js';

/** GET /jobs's filter values (spec), with the words the console shows. */
const FILTERS = [['', 'All'], ['pending', 'Pending'], ['processing', 'Processing'], ['completed', 'Completed'], ['failed', 'Failed'], ['warning', 'Warning']];
const PAGE = 20;

const FORMATS = ['mp4', 'mkv', 'webm', 'mov', 'm4a', 'mp3', 'ogg', 'opus'];
const RESOLUTIONS = ['best', 'lowest', '2160', '1440', '1080', '720', '480', '360', '240', '144'];

/** The form's fields as POST /jobs's body: empty fields left out, so the service's defaults apply. */
function jobBody(form) {
  const f = new FormData(form);
  const body = { url: String(f.get('url')).trim() };
  for (const name of ['format', 'max_resolution', 'filename', 'folder', 'clip_start', 'clip_end', 'webhook_url']) {
    const v = String(f.get(name) ?? '').trim();
    if (v) body[name] = v;
  }
  for (const name of ['audio_only', 'download_subtitles', 'download_thumbnail', 'enable_progress_webhook', 'paused']) {
    if (f.get(name)) body[name] = true;
  }
  return body;
}

function SubmitForm({ onCreated }) {
  const action = useAction();
  const submit = async (e) => {
    e.preventDefault();
    const form = e.currentTarget;
    const body = jobBody(form);
    await action.run(async () => {
      const created = await api('POST', '/jobs', { body });
      form.reset();
      onCreated();
      if (created.batch_id) {
        rememberBatch(created.batch_id, body.url, created.episodes);
        return html`Batch accepted: <a href=${`#/batches/${seg(created.batch_id)}`}>${created.total_episodes ?? ''} episodes</a>`;
      }
      return html`Job accepted: <a href=${`#/jobs/${seg(created.job_id)}`}>${created.job_id}</a>`;
    });
  };
  return html`<form class="submit" onSubmit=${submit} aria-labelledby="submit-title">
    <h2 id="submit-title">New job</h2>
    <div class="row">
      <label for="job-url">Media URL</label>
      <input id="job-url" name="url" type="url" required placeholder="https://…" />
      <button type="submit" disabled=${action.busy}>${action.busy ? 'Submitting…' : 'Submit'}</button>
    </div>
    <details>
      <summary>Options</summary>
      <div class="grid">
        <label>Format <select name="format"><option value="">Default (mp4, m4a for audio)</option>${FORMATS.map((f) => html`<option>${f}</option>`)}</select></label>
        <label>Maximum resolution <select name="max_resolution"><option value="">Default (best)</option>${RESOLUTIONS.map((r) => html`<option>${r}</option>`)}</select></label>
        <label>File name <input name="filename" maxlength="255" /></label>
        <label>Folder <input name="folder" maxlength="200" /></label>
        <label>Clip start <input name="clip_start" placeholder="HH:MM:SS" /></label>
        <label>Clip end <input name="clip_end" placeholder="HH:MM:SS" /></label>
        <label>Webhook URL <input name="webhook_url" type="url" /></label>
        <label class="check"><input type="checkbox" name="audio_only" /> Audio only</label>
        <label class="check"><input type="checkbox" name="download_subtitles" /> Subtitles</label>
        <label class="check"><input type="checkbox" name="download_thumbnail" /> Thumbnail</label>
        <label class="check"><input type="checkbox" name="enable_progress_webhook" /> Progress webhooks</label>
        <label class="check"><input type="checkbox" name="paused" /> Show: create paused</label>
      </div>
    </details>
    <${ErrorLine} error=${action.error} />
    <${Notice} text=${action.done} />
  </form>`;
}

async function loadJobs(filter, offset, signal) {
  const q = new URLSearchParams({ limit: String(PAGE), offset: String(offset) });
  if (filter) q.set('status', filter);
  return api('GET', `/jobs?${q}`, { signal });
}

/**
 * The progress of the page's jobs in progress: GET /jobs carries no
 * percentage, so each is asked for after the list is shown (the list never
 * waits for them), again whenever the list is.
 */
function useProgress(jobs) {
  const [progress, setProgress] = useState(new Map());
  useEffect(() => {
    const running = (jobs ?? []).filter((j) => j.status === 'Processing');
    if (running.length === 0) return undefined;
    const ctl = new AbortController();
    Promise.all(running.map((j) => api('GET', `/jobs/${seg(j.id)}`, { signal: ctl.signal }).catch(() => undefined)))
      .then((details) => setProgress(new Map(details.filter(Boolean).map((d) => [d.id, d.progress]))), () => {});
    return () => ctl.abort();
  }, [jobs]);
  return progress;
}

function JobRow({ job, progress }) {
  return html`<tr>
    <td class="url"><a href=${`#/jobs/${seg(job.id)}`}>${job.url}</a></td>
    <td><${StatusBadge} status=${job.status} /></td>
    <td>${job.status === 'Processing' && progress !== undefined
      ? html`<${Progress} value=${progress} label=${`Progress of ${job.url}`} />` : job.step}</td>
    <td>${when(job.created_at)}</td>
    <td class="num">${bytes(job.file_size)}</td>
  </tr>`;
}

export function JobsView() {
  const [filter, setFilter] = useState('');
  const [offset, setOffset] = useState(0);
  // Polled always: new jobs arrive from other clients too, and a page of 20 is cheap.
  const list = useLoad((signal) => loadJobs(filter, offset, signal), [filter, offset], () => true);
  const page = list.data;
  const progress = useProgress(page?.jobs);
  const live = page?.jobs.some((j) => !TERMINAL.has(j.status));
  return html`<h1 tabindex="-1">Jobs</h1>
    <${SubmitForm} onCreated=${() => { setOffset(0); list.reload(); }} />
    <section aria-labelledby="list-title">
      <h2 id="list-title">Your jobs</h2>
      <fieldset class="filters">
        <legend>Status</legend>
        ${FILTERS.map(([value, label]) => html`<label class="pill">
          <input type="radio" name="status-filter" value=${value} checked=${filter === value}
            onChange=${() => { setFilter(value); setOffset(0); }} /> ${label}</label>`)}
      </fieldset>
      <${ErrorLine} error=${list.error} />
      ${page === undefined ? html`<p aria-busy="true">Loading…</p>` : html`
        <table class="jobs" aria-describedby="jobs-summary">
          <thead><tr><th scope="col">Source</th><th scope="col">Status</th><th scope="col">Step or progress</th><th scope="col">Created</th><th scope="col" class="num">Size</th></tr></thead>
          <tbody>${page.jobs.map((j) => html`<${JobRow} key=${j.id} job=${j} progress=${progress.get(j.id)} />`)}</tbody>
        </table>
        <p id="jobs-summary" class="hint">${page.jobs.length === 0 ? 'No jobs here yet.'
          : `Jobs ${offset + 1}–${offset + page.jobs.length}${filter ? '' : ` of ${page.total}`}, newest first${live ? '; updating every few seconds' : ''}.`}</p>
        <div class="pager">
          <button type="button" class="secondary" disabled=${offset === 0} onClick=${() => setOffset(Math.max(0, offset - PAGE))}>Newer</button>
          <button type="button" class="secondary" disabled=${page.jobs.length < PAGE} onClick=${() => setOffset(offset + PAGE)}>Older</button>
        </div>`}
    </section>`;
}
