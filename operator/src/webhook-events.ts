// Every webhook payload the operator sends (spec "Events"): the transition
// events (job_processing, job_completed, job_failed, job_skipped; job_warning
// and job_cancelled, additions to the spec's, docs/adr/0029: every job that
// ends sends exactly one terminal event; job_cancelled's payload is
// lib/src/job-cancellation.ts's) and the progress stages of jobs that asked
// for them (enable_progress_webhook). Which of them a job's webhook gets is
// its webhookEvents filter's, applied where they are queued (the outbox).
// Pure: given the row's old status and the status being mirrored, the
// events to write to the outbox in the same transaction (lib/src/db/jobs.ts
// syncStatus writes them through lib/src/db/outbox.ts; operator/src/outbox.ts
// delivers them). The stage figures are
// the table shared with the runner (lib/src/mediajob/progress-stages.ts).
//
// Progress: every time the operator mirrors a status it queues the stages
// that status has reached. Each stage has its own stable event id
// (`progress:<stage>`), so a stage goes out at most once, however often the
// status is seen again (resyncs, operator restarts): the outbox insert is
// ON CONFLICT DO NOTHING. Stages are queued in spec order, after
// job_processing and before the terminal event; job_completed stands for the
// final "completed 100" stage.
import type { DownloadUrls } from './destinations.js';
import type { MediaJob, MediaJobStatus } from '@mediajobs/lib/mediajob/types';
import { PROGRESS_STAGES, stagesReachedAt } from '@mediajobs/lib/mediajob/progress-stages';
import type { JobRow } from '@mediajobs/lib/db/jobs';
import type { OutboxEvent } from '@mediajobs/lib/db/outbox';
import { isCancelStatus, jobCancelledEvent } from '@mediajobs/lib/job-cancellation';
import { cleanCause } from '@mediajobs/lib/cause-line';
import { downloadFigures } from '@mediajobs/lib/mediajob/download-figures';

export { PROGRESS_STAGES, type ProgressStage } from '@mediajobs/lib/mediajob/progress-stages';

type RowRef = Pick<JobRow, 'id' | 'url'>;

/** Everything a mirrored status announces: its transition's events with the progress stages in their place. */
export function transitionEvents(old: string, s: MediaJobStatus, row: JobRow, mj: MediaJob, urls: DownloadUrls): OutboxEvent[] {
  return withProgressEvents(eventsFor(old, s, row, mj, urls), s, row, mj);
}

/** The webhook events a move from `old` to `s.status` announces (spec: Events). */
export function eventsFor(old: string, s: MediaJobStatus, row: JobRow, mj: MediaJob, urls: DownloadUrls): OutboxEvent[] {
  if (old === s.status) return [];
  const base = { job_id: row.id, url: row.url };
  const events: OutboxEvent[] = [];
  const processing = { type: 'job_processing', payload: { type: 'job_processing', ...base, status: 'processing', message: 'The job is being processed' } };
  if (s.status === 'Processing') return [processing];
  // A cancellation is recorded by lib/src/db/jobs.ts cancelJob with its job_cancelled; never a job_failed or a chat notification.
  if (isCancelStatus(s.status)) return [jobCancelledEvent(row, s.status)];
  if (old === 'Pending' && s.status !== 'Pending') events.push(processing);
  switch (s.status) {
    case 'Completed':
      events.push({ type: 'job_completed', payload: completedPayload(s, base, mj, urls) });
      break;
    case 'Failed':
      events.push({ type: 'job_failed', payload: { type: 'job_failed', ...base, status: 'failed', error: s.error ?? 'Processing failed', ...detail(s, row.url) } });
      break;
    case 'Warning':
      // A content issue sends no job_failed (spec), but its own terminal event (ADR 0029).
      events.push({
        type: 'job_warning', payload: { type: 'job_warning', ...base, status: 'warning', error: s.error ?? 'The media is not available', ...detail(s, row.url) },
      });
      break;
    case 'Skipped':
      events.push({ type: 'job_skipped', payload: { type: 'job_skipped', ...base, status: 'skipped', reason: s.reason ?? s.error ?? 'skipped' } });
      break;
    default:
      break;
  }
  return events;
}

/**
 * The cause's cleaned line (the runner's status.errorDetail, cleaned again: a
 * runner writes its own status), naming no host but the job's source, when
 * there is one.
 */
function detail(s: MediaJobStatus, source: string): { error_detail?: string } {
  const line = cleanCause(s.errorDetail, source);
  return line ? { error_detail: line } : {};
}

function completedPayload(s: MediaJobStatus, base: { job_id: string; url: string }, mj: MediaJob, urls: DownloadUrls): Record<string, unknown> {
  const r = s.result!;
  const payload: Record<string, unknown> = {
    type: 'job_completed', ...base, status: 'completed',
    key: r.storageKey, s3_url: urls.s3Url ?? null, folder: mj.spec.folder ?? null,
    title: r.title ?? null, description: r.description ?? null, release_date: r.releaseDate ?? null,
    subtitle_key: r.subtitleKey ?? null, thumbnail_key: r.thumbnailKey ?? null,
  };
  if (r.subtitleKey) payload.subtitle_url = urls.subtitleUrl ?? null;
  if (r.thumbnailKey) payload.thumbnail_url = urls.thumbnailUrl ?? null;
  return payload;
}

/** How many of PROGRESS_STAGES a status has reached (a completed job has reached them all). */
export function stagesReached(s: Pick<MediaJobStatus, 'status' | 'step' | 'progress'>): number {
  if (s.status === 'Completed') return PROGRESS_STAGES.length;
  return stagesReachedAt(s.step, s.progress);
}

/**
 * The progress events a status announces (the outbox keeps only the first
 * of each), with the download's figures as the status has them (API
 * field names, each only when known): a stage of the step the runner is in
 * gets them all; a stage of an earlier step, reached on the way, gets the
 * bytes once the download is over (they are final then) and never a speed
 * or time left.
 */
export function progressEvents(s: MediaJobStatus, row: RowRef): OutboxEvent[] {
  const now = downloadFields(s);
  const { speed_bps: _s, eta_seconds: _e, ...settled } = now;
  const downloaded = s.step !== undefined && s.step !== 'Queued' && s.step !== 'Downloading';
  return PROGRESS_STAGES.slice(0, stagesReached(s)).map(({ stage, step, percent }) => ({
    type: 'progress',
    key: `progress:${stage}`,
    payload: {
      type: 'progress', job_id: row.id, url: row.url, stage, progress_percent: percent,
      ...(step === s.step ? now : downloaded ? settled : {}),
    },
  }));
}

/**
 * status.download as the API names its fields, by the rule the job's row
 * keeps them (lib/src/mediajob/download-figures.ts: GET /jobs/{id} shows the
 * same); a figure not kept is left out.
 */
export function downloadFields(s: Pick<MediaJobStatus, 'status' | 'step' | 'download'>): Record<string, number> {
  const d = downloadFigures(s);
  return Object.fromEntries(Object.entries({
    downloaded_bytes: d.downloadedBytes, total_bytes: d.totalBytes, speed_bps: d.speedBps, eta_seconds: d.etaSeconds,
  }).filter((e): e is [string, number] => e[1] !== undefined));
}

/**
 * A transition's events with the progress stages in their place: after
 * job_processing (the job has started), before the terminal event. Jobs
 * that did not ask for progress webhooks get the transition's events only.
 */
export function withProgressEvents(events: OutboxEvent[], s: MediaJobStatus, row: RowRef, mj: Pick<MediaJob, 'spec'>): OutboxEvent[] {
  if (mj.spec.enableProgressWebhook !== true) return events;
  const progress = progressEvents(s, row);
  if (!progress.length) return events;
  const started = events.filter((e) => e.type === 'job_processing');
  const rest = events.filter((e) => e.type !== 'job_processing');
  return [...started, ...progress, ...rest];
}
