// Progress webhooks (spec "Events": `progress` with enable_progress_webhook).
// The runner reports step and progress through /status; every time the
// operator mirrors a status into Postgres it also queues the stages that
// status has reached. Each stage has its own stable event id
// (`progress:<stage>`), so a stage goes out at most once, however often the
// status is seen again (resyncs, operator restarts): the outbox insert is
// ON CONFLICT DO NOTHING. A stage the operator never saw on its own (a mux
// shorter than a watch event) is still announced, because a later step
// implies it; stages are queued in spec order, before the job_completed that
// stands for the final "completed 100" stage.
import type { MediaJob, MediaJobStatus } from '@mediajobs/lib/mediajob/types';
import type { JobRow, OutboxEvent } from './db.js';

/** The spec's stages and their percents, in order ("completed 100" is job_completed). */
export const PROGRESS_STAGES = [
  { stage: 'downloading', percent: 0 },
  { stage: 'download_complete', percent: 33 },
  { stage: 'muxing', percent: 33 },
  { stage: 'mux_complete', percent: 66 },
  { stage: 'uploading', percent: 66 },
] as const;

export type ProgressStage = (typeof PROGRESS_STAGES)[number]['stage'];

/**
 * How many of PROGRESS_STAGES a status has reached. A step is reached when
 * the runner enters it; the "complete" stages when the step's progress has
 * come to its end (33 for the download) or the next step has begun.
 */
export function stagesReached(s: Pick<MediaJobStatus, 'status' | 'step' | 'progress'>): number {
  if (s.status === 'Completed') return PROGRESS_STAGES.length;
  switch (s.step) {
    case 'Downloading':
      return (s.progress ?? 0) >= 33 ? 2 : 1;
    case 'Muxing':
      return (s.progress ?? 0) >= 66 ? 4 : 3;
    case 'Uploading':
    case 'Finished':
      return 5;
    default:
      return 0;
  }
}

/** The progress events a status announces (the outbox keeps only the first of each). */
export function progressEvents(s: MediaJobStatus, row: Pick<JobRow, 'id' | 'url'>): OutboxEvent[] {
  return PROGRESS_STAGES.slice(0, stagesReached(s)).map(({ stage, percent }) => ({
    type: 'progress',
    key: `progress:${stage}`,
    payload: { type: 'progress', job_id: row.id, url: row.url, stage, progress_percent: percent },
  }));
}

/**
 * A transition's events with the progress stages in their place: after
 * job_processing (the job has started), before the terminal event. Jobs
 * that did not ask for progress webhooks get the transition's events only.
 */
export function withProgressEvents(events: OutboxEvent[], s: MediaJobStatus, row: Pick<JobRow, 'id' | 'url'>, mj: Pick<MediaJob, 'spec'>): OutboxEvent[] {
  if (mj.spec.enableProgressWebhook !== true) return events;
  const progress = progressEvents(s, row);
  if (!progress.length) return events;
  const started = events.filter((e) => e.type === 'job_processing');
  const rest = events.filter((e) => e.type !== 'job_processing');
  return [...started, ...progress, ...rest];
}
