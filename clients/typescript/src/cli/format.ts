// What the CLI prints for people: sizes, durations, times, a job, a table
// of jobs, usage, and the progress line. Pure; ./run.ts writes it out.
import type { JobProgress } from '../progress.js';
import type { Batch, Job, JobSummary, Usage, WebhookDeliveries, WebhookSecret } from '../types.js';

const UNITS = ['B', 'kB', 'MB', 'GB', 'TB'];

/** 1234567 → "1.2 MB" (decimal units, as download tools show them). */
export function formatBytes(bytes: number): string {
  let value = bytes;
  let unit = 0;
  while (value >= 1000 && unit < UNITS.length - 1) {
    value /= 1000;
    unit++;
  }
  return `${unit === 0 ? value : value.toFixed(1)} ${UNITS[unit]}`;
}

/** 75 → "1:15", 3725 → "1:02:05". */
export function formatDuration(seconds: number): string {
  const s = Math.max(0, Math.round(seconds));
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  const rest = String(s % 60).padStart(2, '0');
  return h > 0 ? `${h}:${String(m).padStart(2, '0')}:${rest}` : `${m}:${rest}`;
}

/** Milliseconds since the epoch as local "YYYY-MM-DD HH:MM:SS". */
export function formatTime(ms: number | null): string {
  if (ms === null) return '-';
  const d = new Date(ms);
  const p = (n: number) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
}

const BAR_WIDTH = 24;

/** One line of progress: `Downloading [######------]  45%  12.3 MB / 27.0 MB  1.2 MB/s  0:12 left`, with the figures the API gave. */
export function progressLine(p: JobProgress): string {
  const filled = Math.round((Math.min(100, Math.max(0, p.percent)) / 100) * BAR_WIDTH);
  const parts = [
    `${(p.status === 'Processing' ? p.step : p.status).padEnd(11)} [${'#'.repeat(filled)}${'-'.repeat(BAR_WIDTH - filled)}] ${String(p.percent).padStart(3)}%`,
  ];
  if (p.downloadedBytes !== undefined) parts.push(p.totalBytes !== undefined ? `${formatBytes(p.downloadedBytes)} / ${formatBytes(p.totalBytes)}` : formatBytes(p.downloadedBytes));
  if (p.speedBps !== undefined) parts.push(`${formatBytes(p.speedBps)}/s`);
  if (p.etaSeconds !== undefined) parts.push(`${formatDuration(p.etaSeconds)} left`);
  return parts.join('  ');
}

/** Label-value lines, the labels aligned; null and undefined values left out. */
export function fields(rows: [string, string | number | boolean | null | undefined][]): string {
  const shown = rows.filter((r): r is [string, string | number | boolean] => r[1] !== null && r[1] !== undefined);
  const width = Math.max(...shown.map(([k]) => k.length));
  return shown.map(([k, v]) => `${k.padEnd(width)}  ${v}`).join('\n');
}

export function jobText(job: Job): string {
  return fields([
    ['Job', job.id], ['Status', job.status], ['Step', job.step], ['Progress', `${job.progress}%`], ['URL', job.url],
    ['Created', formatTime(job.created_at)], ['Finished', job.finished_at === null ? undefined : formatTime(job.finished_at)],
    ['Title', job.title], ['Quality', job.actual_quality], ['Size', job.file_size === null ? undefined : formatBytes(job.file_size)],
    ['Error', job.error === null ? undefined : `${job.error}${job.error_type ? ` (${job.error_type})` : ''}`], ['Reason', job.reason],
    ['Key', job.s3_key], ['File', job.s3_url], ['Subtitles', job.subtitle_url], ['Thumbnail', job.thumbnail_url],
  ]);
}

/** Rows under a header, columns padded to their widest cell; the last column is not padded. */
export function table(header: string[], rows: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: string[]) => cells.map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i]!))).join('  ');
  return [line(header), ...rows.map(line)].join('\n');
}

export function jobsTable(jobs: JobSummary[]): string {
  return table(['ID', 'STATUS', 'STEP', 'CREATED', 'SIZE', 'URL'], jobs.map((j) => [
    j.id, j.status, j.step, formatTime(j.created_at), j.file_size === null ? '-' : formatBytes(j.file_size), j.url,
  ]));
}

export function batchText(b: Batch): string {
  return fields([
    ['Batch', b.id], ['Kind', b.kind], ['Status', b.status], ['Source', b.show_url], ['Folder', b.folder],
    ['Episodes', `${b.total_episodes} (${b.completed_episodes} completed, ${b.failed_episodes} failed, ${b.skipped_episodes} skipped)`],
    ['Progress', `${b.progress}%`], ['Created', formatTime(b.created_at)], ['Finished', b.finished_at === null ? undefined : formatTime(b.finished_at)],
  ]);
}

export function usageText(u: Usage): string {
  const gb = (n: number | undefined) => (n === undefined ? undefined : `${n} GB`);
  return fields([
    ['Client', u.client_name], ['Jobs', u.usage_count], ['Stored', gb(u.storage_usage_gb)], ['Reserved', gb(u.storage_reserved_gb)],
    ['Effective', gb(u.storage_effective_usage_gb)], ['Limit', gb(u.storage_limit_gb)], ['Remaining', gb(u.storage_remaining_gb)],
    ['This period', gb(u.current_period_usage_gb)],
    ['Billing period', u.billing_period_start && u.billing_period_end ? `${u.billing_period_start} to ${u.billing_period_end}` : undefined],
    ['Billing error', u.billing_error], ['Max resolution', u.max_resolution_limit],
    ['Max duration', u.max_duration_limit_seconds === undefined ? undefined : formatDuration(u.max_duration_limit_seconds)],
    ['Max file size', u.max_filesize_limit_bytes === undefined ? undefined : formatBytes(u.max_filesize_limit_bytes)],
  ]);
}

export function webhookSecretText(s: WebhookSecret): string {
  if (!s.configured) return 'No webhook signing secret: deliveries are not signed (create one: mediajobs webhooks rotate)';
  return fields([
    ['Signing secret', `set ${formatTime(s.created_at)}`],
    ['Previous secret', s.previous_secret_expires_at === null ? undefined : `still signs until ${formatTime(s.previous_secret_expires_at)}`],
  ]);
}

export function deliveriesText(d: WebhookDeliveries): string {
  if (d.events.length === 0) return `No webhook events for job ${d.job_id}`;
  return table(['EVENT', 'TYPE', 'STATUS', 'ATTEMPTS', 'CREATED', 'LAST ERROR'], d.events.map((e) => [
    e.event_id, e.stage ? `${e.type} (${e.stage})` : e.type, e.status, String(e.attempts.length), formatTime(e.created_at), e.last_error ?? '-',
  ]));
}
