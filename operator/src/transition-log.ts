// The one log line per job transition (issue 38): accepted, started,
// retrying, completed (size, run time, where), failed or warning (category
// and the cause's first line, cleaned), skipped, cancelled, restored. The
// operator sees every transition, so it alone says them; the gateway's
// request lines and the runner's own stay out of it. transitionLine is a pure
// function of the status before and after a write; logTransition says it
// once per transition (a pass over a cache that lags the write it made
// writes the same change again), remembering what it said with the Events'
// memory, which forgets a job when it goes. What a line may never carry: a
// signed URL, a credential, a query string (the storage key and the
// destination type say where; lib's cleanCause cleans the cause).
import { cleanCause } from '@mediajobs/lib/cause-line';
import { redactUrls, type Logger } from '@mediajobs/lib/logger';
import { jobIdOf, type MediaJob, type MediaJobStatus } from '@mediajobs/lib/mediajob/types';
import { isCancelStatus } from '@mediajobs/lib/job-cancellation';
import type { Announced } from './transition-events.js';
import { isTerminal } from './status.js';

export interface TransitionLine {
  level: 'info' | 'warn';
  msg: string;
  fields: Record<string, unknown>;
  /** What this line says about the job, once: the transition and its attempt. */
  once: string;
}

/** The line a status write from `cur` to `next` makes, if it is a transition. */
export function transitionLine(mj: MediaJob, cur: MediaJobStatus | undefined, next: MediaJobStatus): TransitionLine | undefined {
  const attempt = next.attempt ?? 1;
  const base = { jobId: next.jobId ?? jobIdOf(mj), ...(attempt > 1 && { attempt }) };
  const line = (level: TransitionLine['level'], what: string, msg: string, fields: Record<string, unknown> = {}): TransitionLine => ({
    level, msg, fields: { ...base, ...fields }, once: `log:${what}#${what === 'retrying' ? cur?.attempt ?? 1 : attempt}`,
  });
  if (next.restoredTime && !cur?.restoredTime) {
    return line('info', 'restored', 'job restored from an earlier run of the same manifest', { status: next.status });
  }
  if (isTerminal(next.status)) return cur?.status === next.status ? undefined : ended(mj, next, line);
  if (next.retryAt && next.attempt !== cur?.attempt) {
    const failed = next.attempts?.at(-1);
    return line('warn', 'retrying', 'job attempt failed; retrying', {
      failedAttempt: failed?.attempt, category: failed?.category ?? failed?.reason ?? 'error',
      ...cause(failed?.error, mj), retryInSeconds: failed?.retryAfterSeconds ?? 0,
    });
  }
  if (next.status === 'Processing' && (cur?.status !== 'Processing' || cur.attempt !== next.attempt)) return line('info', 'started', 'job started');
  if (!cur?.status && next.status === 'Pending') {
    return line('info', 'accepted', 'job accepted', { source: redactUrls(mj.spec.url), format: mj.spec.format });
  }
  return undefined;
}

type Line = (level: TransitionLine['level'], what: string, msg: string, fields?: Record<string, unknown>) => TransitionLine;

/** The line of a job's end. */
function ended(mj: MediaJob, s: MediaJobStatus, line: Line): TransitionLine | undefined {
  if (isCancelStatus(s.status)) return line('info', 'cancelled', 'job cancelled', { by: s.status === 'CancelledByAdmin' ? 'admin' : 'client' });
  const category = s.category ?? s.reason ?? (s.status === 'Warning' ? 'media_unavailable' : 'error');
  switch (s.status) {
    case 'Completed': {
      const bytes = s.result?.fileSize;
      const d = mj.spec.destination;
      return line('info', 'completed', 'job completed', {
        ...(bytes !== undefined && { size: sizeText(bytes), bytes }),
        ...runTime(s),
        ...(s.result?.storageKey && { where: `${d?.type ?? 'managed'}${d?.provider ? `/${d.provider}` : ''}:${s.result.storageKey}` }),
      });
    }
    case 'Failed':
      return line('warn', 'failed', 'job failed', { category, ...cause(s.error, mj), ...runTime(s) });
    case 'Warning':
      return line('warn', 'warning', 'job ended with a warning', { category, ...cause(s.error, mj) });
    case 'Skipped':
      return line('info', 'skipped', 'job skipped', { reason: s.reason ?? 'skipped' });
    default:
      return undefined;
  }
}

/**
 * The cause as a log field, cleaned (lib/src/cause-line.ts); nothing when
 * there is none. By the same rule as the API's error_detail, though this line
 * is for operators who may want the proxy's or the service's host: the
 * runner's own "job did not complete" line already gives them the tool's
 * output with its hosts, while this one is shipped wherever the operator's
 * logs go, and saying what the client is told lets them match a client's
 * report to it word for word.
 */
function cause(error: string | undefined, mj: MediaJob): { cause?: string } {
  const clean = cleanCause(error, mj.spec.url);
  return clean ? { cause: clean } : {};
}

/** From the start of the run to its end, when the status has both. */
function runTime(s: MediaJobStatus): { duration?: string } {
  const ms = Date.parse(s.finishTime ?? '') - Date.parse(s.startTime ?? '');
  return Number.isFinite(ms) && ms >= 0 ? { duration: `${(ms / 1000).toFixed(1)} s` } : {};
}

/** Bytes as a person reads them: 1000-based units with one decimal, as `ls -h --si` and most download tools show them. */
export function sizeText(bytes: number): string {
  const units = ['B', 'kB', 'MB', 'GB', 'TB'];
  let v = bytes;
  let i = 0;
  while (v >= 1000 && i < units.length - 1) {
    v /= 1000;
    i++;
  }
  return i === 0 ? `${bytes} B` : `${v.toFixed(1)} ${units[i]}`;
}

/** Log the transition a status write made, once per transition and job. */
export function logTransition(log: Logger, announced: Announced, key: string, mj: MediaJob, next: MediaJobStatus): void {
  const t = transitionLine(mj, mj.status, next);
  if (t && announced.once(key, t.once)) log[t.level](t.fields, t.msg);
}
