// A job's progress as waitForJob reports it: status, step and percentage,
// which GET /jobs/{id} always has, and the transfer figures
// (downloaded_bytes, total_bytes, speed_bps, eta_seconds) once the API
// sends them (issue 38 item 6): each is read when present and a number, so
// this code needs no change the day they appear.
import type { Job, JobStatus } from './types.js';

export interface JobProgress {
  status: JobStatus;
  step: Job['step'];
  /** 0 to 100. */
  percent: number;
  downloadedBytes?: number;
  totalBytes?: number;
  speedBps?: number;
  etaSeconds?: number;
  /** The job as that poll read it. */
  job: Job;
}

const TRANSFER_FIELDS = {
  downloadedBytes: 'downloaded_bytes', totalBytes: 'total_bytes', speedBps: 'speed_bps', etaSeconds: 'eta_seconds',
} as const;

export function progressOf(job: Job): JobProgress {
  const progress: JobProgress = { status: job.status, step: job.step, percent: job.progress, job };
  const fields = job as unknown as Record<string, unknown>;
  for (const [ours, theirs] of Object.entries(TRANSFER_FIELDS) as [keyof typeof TRANSFER_FIELDS, string][]) {
    const value = fields[theirs];
    if (typeof value === 'number' && Number.isFinite(value)) progress[ours] = value;
  }
  return progress;
}

/** Whether two readings say the same (the job object itself aside). */
export function sameProgress(a: JobProgress, b: JobProgress): boolean {
  return a.status === b.status && a.step === b.step && a.percent === b.percent && a.downloadedBytes === b.downloadedBytes
    && a.totalBytes === b.totalBytes && a.speedBps === b.speedBps && a.etaSeconds === b.etaSeconds;
}
