// What a MediaJob's status should be, derived from what exists: its Job, the
// Job's latest pod (exit code and termination message) and what the runner
// reported through /status. Pure, so every rule is unit-tested; the
// controller only writes the difference. An attempt that failed of a cause
// the retry policy retries (retry-policy.ts) does not end the job: it is
// recorded in status.attempts and the job waits Pending for its next
// attempt (docs/adr/0018).
import type { V1Job, V1JobCondition, V1Pod } from '@kubernetes/client-node';
import type { FinishedJob } from '@mediajobs/lib/db/jobs';
import {
  RUNNER_EXIT, RUNNER_PHASES, TERMINAL_STATUSES, type AttemptOutcome, type Condition, type JobStatus, type MediaJob, type MediaJobAttempt,
  type MediaJobResult, type MediaJobStatus, type RunnerPhaseSeconds, type RunnerReport, jobIdOf,
} from '@mediajobs/lib/mediajob/types';
import type { WaitReason } from './admission.js';
import { failureCause, retryDelaySeconds, type RetrySettings } from './retry-policy.js';

export interface Observed {
  mj: MediaJob;
  job?: V1Job;
  pod?: V1Pod;
  /** The operator has admitted the job (a Job exists or is being created). */
  admitted: boolean;
  /** Why a job that is not admitted waits, and the cap that holds it (admission.ts); unset: for a free slot. */
  waiting?: { reason: WaitReason; limit: number };
  /** The runner Job of the current attempt (job-builder.ts currentJobName). */
  jobName: string;
  /** The retry policy's settings; absent: a failed attempt is the job's (no retries). */
  retry?: RetrySettings;
  /**
   * Since when (ms) the pod cache has followed the API server without a
   * break (ResilientInformer.followingSince), or 'down' while it does not.
   * Absent: a cache that always followed.
   */
  podsFollowingSince?: number | 'down';
}

/** status.reason while a job waits for its next attempt (GET /jobs/{id}'s `reason`). */
export const RETRY_SCHEDULED_REASON = 'retry_scheduled';

/** deriveStatus's answer when the Job finished but its pod's exit code has not been seen yet. */
export const WAIT_FOR_POD = 'wait-for-pod' as const;

/** How long a finished Job waits for its pod's termination state before status is concluded without it. */
export const POD_REPORT_GRACE_MS = 15_000;

/**
 * How a waiting job shows why: its Admitted condition, and for a job its
 * own key or organization holds back, status.reason (mirrored into the row:
 * GET /jobs/{id}'s `reason`), gone once it is admitted.
 */
const WAITING: Record<WaitReason, { reason?: string; condition: string; message: (limit: number) => string }> = {
  capacity: { condition: 'WaitingForCapacity', message: () => 'Waiting for a free runner slot' },
  key_limit: {
    reason: 'key_running_limit', condition: 'KeyAtRunningLimit',
    message: (n) => `Waiting: its API key runs as many jobs as it may at once (${n})`,
  },
  organization_limit: {
    reason: 'organization_running_limit', condition: 'OrganizationAtRunningLimit',
    message: (n) => `Waiting: its organization's keys run as many jobs as they may at once (${n})`,
  },
  // The job's MediaPlatform (docs/adr/0027): its maxRunning, startsPerMinute or per-proxy starts; its circuit breaker.
  platform_limit: {
    reason: 'platform_limit', condition: 'PlatformAtLimit',
    message: (n) => `Waiting: its platform runs or starts as many jobs as it may (${n})`,
  },
  platform_paused: {
    reason: 'platform_paused', condition: 'PlatformPaused',
    message: () => 'Waiting: its platform answered with defences and its circuit breaker is open; jobs start again after its cool-down',
  },
};

const WAIT_STATUS_REASONS = new Set([...Object.values(WAITING).flatMap((w) => (w.reason ? [w.reason] : [])), RETRY_SCHEDULED_REASON]);

export function isTerminal(status: JobStatus | undefined): boolean {
  return !!status && TERMINAL_STATUSES.includes(status);
}

function jobCondition(job: V1Job | undefined, type: string) {
  return job?.status?.conditions?.find((c) => c.type === type && c.status === 'True');
}

/**
 * A runner log line (pino: `level` and `msg`), which FallbackToLogsOnError
 * puts in the message of a runner killed before its report; one line alone
 * parses as JSON. Taken for a report, it made an OOM-killed or evicted
 * runner's failure `unknown`, never retried (found by the fault suite).
 */
function isLogLine(o: object): boolean {
  return 'msg' in o && 'level' in o;
}

/** The runner's final report from the pod's termination message, if it wrote one. */
export function terminationReport(pod: V1Pod | undefined): { exitCode?: number; report?: RunnerReport } {
  const term = pod?.status?.containerStatuses?.[0]?.state?.terminated;
  if (!term) return {};
  let report: RunnerReport | undefined;
  try {
    const parsed: unknown = term.message ? JSON.parse(term.message) : undefined;
    if (parsed && typeof parsed === 'object' && !isLogLine(parsed)) report = parsed as RunnerReport;
  } catch {
    // FallbackToLogsOnError put log lines there: not a report.
  }
  return { exitCode: term.exitCode, report };
}

/**
 * The phase seconds of a runner's report as the CRD takes them: the known
 * phases with finite numbers of 0 or more. A termination message is not
 * checked by anyone before this, and one bad number must not make the
 * apiserver refuse the whole status write. Undefined when none is left.
 */
export function phaseSecondsOf(v: unknown): RunnerPhaseSeconds | undefined {
  if (!v || typeof v !== 'object') return undefined;
  const out: RunnerPhaseSeconds = {};
  for (const phase of RUNNER_PHASES) {
    const n = (v as Record<string, unknown>)[phase];
    if (typeof n === 'number' && Number.isFinite(n) && n >= 0) out[phase] = n;
  }
  return Object.keys(out).length ? out : undefined;
}

function timeOf(t: Date | string | undefined): string | undefined {
  if (!t) return undefined;
  return (typeof t === 'string' ? new Date(t) : t).toISOString().replace(/\.\d{3}Z$/, 'Z');
}

/**
 * Whether a finished Job's pod may yet show its exit code. The Job's verdict
 * can reach the cache before its pod's: wait a little from the verdict.
 * And a pod cache that stopped following the API server (an outage, a
 * relist under way) holds what the pod was before it: wait until it
 * follows again, then a little from then, so that a runner that finished
 * and reported while the API server was away is not judged as lost.
 */
function podReportMayCome(o: Observed, failed: V1JobCondition | undefined, now: Date): boolean {
  const following = o.podsFollowingSince ?? 0;
  if (following === 'down') return true;
  if (!o.pod) return false;
  const finishedAt = Date.parse(String(failed?.lastTransitionTime ?? o.job?.status?.completionTime ?? '')) || now.getTime();
  return now.getTime() - Math.max(finishedAt, following) < POD_REPORT_GRACE_MS;
}

/**
 * The status fields the operator owns (status, step and progress at the
 * ends, error on failure, times, jobName, conditions). Runner-reported
 * fields (result, live step/progress) are kept as they are.
 */
export function deriveStatus(o: Observed, now: Date): MediaJobStatus | typeof WAIT_FOR_POD {
  const cur: MediaJobStatus = o.mj.status ?? {};
  if (isTerminal(cur.status)) return cur;
  const nowStr = timeOf(now)!;
  const next: MediaJobStatus = { ...cur, jobId: jobIdOf(o.mj), observedGeneration: o.mj.metadata.generation };
  if (o.admitted) next.jobName = o.jobName;
  // A reason that said why the job waited no longer holds once it is admitted (or waits for another).
  if (next.reason && WAIT_STATUS_REASONS.has(next.reason)) delete next.reason;
  // The wait for the next attempt is over once it is due, or its runner is admitted.
  if (next.retryAt && (o.admitted || Date.parse(next.retryAt) <= now.getTime())) delete next.retryAt;

  const complete = jobCondition(o.job, 'Complete');
  const failed = jobCondition(o.job, 'Failed');
  if (complete || failed) {
    const { exitCode, report } = terminationReport(o.pod);
    if (exitCode === undefined && podReportMayCome(o, failed, now)) return WAIT_FOR_POD;
    const finishTime = timeOf(o.job?.status?.completionTime) ?? timeOf(failed?.lastTransitionTime) ?? nowStr;
    const result = cur.result ?? report?.result;
    // The attempt is over: what it stored is the result's now, or nobody's (stored-files.ts deletes that).
    delete next.storedFiles;
    next.finishTime = finishTime;
    next.startTime ??= timeOf(o.job?.status?.startTime) ?? finishTime;
    const attemptStart = timeOf(o.job?.status?.startTime) ?? timeOf(o.pod?.status?.startTime);
    // The termination message is this pod's own; the status may still hold an earlier attempt's when the final patch was lost.
    const phases = phaseSecondsOf(report?.phaseSeconds) ?? phaseSecondsOf(cur.phaseSeconds);
    // The read of the source is over: its speed and time left say nothing more.
    const settled = next.download && settledDownload(next.download);
    if (settled) next.download = settled;
    else delete next.download;
    if (report?.errorDetail) next.errorDetail = report.errorDetail;
    if (complete && result) {
      Object.assign(next, { status: 'Completed', step: 'Finished', progress: 100, result });
      delete next.error;
      delete next.errorType;
      delete next.category;
      delete next.errorDetail;
    } else if (exitCode === RUNNER_EXIT.warning || (exitCode === undefined && cur.errorType === 'warning')) {
      Object.assign(next, { status: 'Warning', errorType: 'warning', error: report?.error ?? cur.error ?? 'The media is not available' });
    } else if (exitCode === RUNNER_EXIT.skipped) {
      Object.assign(next, { status: 'Skipped', reason: report?.reason ?? cur.reason ?? 'drm_protected', error: report?.error ?? cur.error });
    } else {
      const deadline = failed?.reason === 'DeadlineExceeded';
      Object.assign(next, {
        status: 'Failed',
        errorType: 'error',
        error: deadline ? 'Processing timed out' : report?.error ?? cur.error ?? (complete ? 'Processing failed: no result was reported' : 'Processing failed'),
      });
      const reason = deadline ? 'timeout' : report?.reason ?? cur.reason;
      if (reason) next.reason = reason;
      const cause = failureCause({
        deadlineExceeded: deadline, category: report?.category ?? cur.category, reported: !!(report || cur.error), pod: o.pod, exitCode,
      });
      const attempt = attemptRecord(o, next, cause, attemptStart, finishTime, phases, report?.defence ?? cur.defence);
      const delay = o.retry ? retryDelaySeconds(cause, attempt.attempt, o.retry, attempt.defence) : undefined;
      if (delay !== undefined) return awaitingRetry(o, next, { ...attempt, retryAfterSeconds: delay }, Date.parse(finishTime), nowStr);
      next.attempts = withAttempt(cur.attempts, attempt);
    }
    if (next.status !== 'Failed') {
      const category = next.status === 'Completed' ? undefined : report?.category ?? cur.category;
      next.attempts = withAttempt(cur.attempts, attemptRecord(o, next, category, attemptStart, finishTime, phases));
    }
  } else if (o.job && (o.pod?.status?.phase === 'Running' || (cur.step && cur.step !== 'Queued'))) {
    next.status = 'Processing';
    next.startTime ??= timeOf(o.pod?.status?.startTime) ?? nowStr;
    next.step ??= 'Downloading';
  } else {
    next.status = 'Pending';
    next.step ??= 'Queued';
    next.progress ??= 0;
    const held = !o.admitted && o.waiting && WAITING[o.waiting.reason].reason;
    if (held) next.reason = held;
    if (next.retryAt) next.reason = RETRY_SCHEDULED_REASON;
  }
  next.conditions = conditionsFor(next, o, cur.conditions ?? [], nowStr);
  return next;
}

/** Download figures once the read is over: bytes only. */
function settledDownload(d: NonNullable<MediaJobStatus['download']>): MediaJobStatus['download'] {
  const { speedBps: _s, etaSeconds: _e, ...bytes } = d;
  return Object.keys(bytes).length ? bytes : undefined;
}

/** The record of the attempt that just ended, as `next` says it ended. */
function attemptRecord(
  o: Observed, next: MediaJobStatus, category: string | undefined, startTime: string | undefined, finishTime: string, phases: RunnerPhaseSeconds | undefined,
  defence?: MediaJobStatus['defence'],
): MediaJobAttempt {
  return {
    attempt: o.mj.status?.attempt ?? 1,
    jobName: o.jobName,
    ...(startTime && { startTime }),
    finishTime,
    outcome: next.status as AttemptOutcome,
    ...(category && { category }),
    ...(next.reason && { reason: next.reason }),
    ...(next.error && { error: next.error }),
    ...(phases && { phaseSeconds: phases }),
    ...(defence && { defence }),
  };
}

/** The most attempts status.attempts keeps (RETRY_MAX_ATTEMPTS' bound): the newest. */
export const MAX_ATTEMPTS_KEPT = 10;

/** The attempts with `a` in its place (a pass over the same attempt again replaces it), the newest MAX_ATTEMPTS_KEPT. */
function withAttempt(list: MediaJobAttempt[] | undefined, a: MediaJobAttempt): MediaJobAttempt[] {
  const kept = (list ?? []).filter((x) => x.attempt !== a.attempt);
  return [...kept, a].slice(-MAX_ATTEMPTS_KEPT);
}

/**
 * A failed attempt another attempt may fix: not the job's end. The job
 * waits Pending (step Queued, progress 0, reason retry_scheduled) until
 * retryAt, with the attempt recorded and what the runner reported of it
 * cleared, so the next attempt starts from a clean status.
 */
function awaitingRetry(o: Observed, failed: MediaJobStatus, attempt: MediaJobAttempt, finishedAt: number, nowStr: string): MediaJobStatus {
  const cur = o.mj.status ?? {};
  const {
    error: _e, errorType: _t, category: _c, result: _r, finishTime: _f, phaseSeconds: _p, defence: _d, errorDetail: _x, download: _l, ...kept
  } = failed;
  const retryAt = timeOf(new Date(finishedAt + attempt.retryAfterSeconds! * 1000))!;
  const next: MediaJobStatus = {
    ...kept, status: 'Pending', step: 'Queued', progress: 0, reason: RETRY_SCHEDULED_REASON,
    attempt: attempt.attempt + 1, attempts: withAttempt(cur.attempts, attempt), retryAt,
  };
  next.conditions = conditionsFor(next, o, cur.conditions ?? [], nowStr);
  return next;
}

/**
 * A job that ends before any runner ran it (its spec is invalid, its
 * destination cannot be resolved, its owner key does not exist): Failed,
 * with its conditions like any other finished job (Succeeded=False with the
 * error as its message). `finishTime` defaults to now; `category`, when
 * given, is the failure's error category (else an earlier attempt's goes).
 */
export function failedBeforeRunning(
  mj: MediaJob, why: { jobId: string; reason: string; error: string; category?: string; finishTime?: string }, now: Date,
): MediaJobStatus {
  const nowStr = timeOf(now)!;
  // A job that waited for another attempt waits no more.
  const { retryAt: _w, category: _c, ...before } = mj.status ?? {};
  const s: MediaJobStatus = {
    ...before, jobId: why.jobId, status: 'Failed', step: mj.status?.step ?? 'Queued', errorType: 'error',
    reason: why.reason, error: why.error, ...(why.category && { category: why.category }), finishTime: why.finishTime ?? nowStr,
  };
  s.conditions = conditionsFor(s, { mj, admitted: false, jobName: '' }, mj.status?.conditions ?? [], nowStr);
  return s;
}

/** What a finished job's record says of its outcome, as status fields. */
function recordedOutcome(rec: FinishedJob, nowStr: string): MediaJobStatus {
  const result: MediaJobResult | undefined = rec.s3_key === null ? undefined : withoutNulls({
    storageKey: rec.s3_key, fileSize: rec.file_size === null ? null : Number(rec.file_size), actualQuality: rec.actual_quality,
    title: rec.title, description: rec.description, releaseDate: rec.release_date, subtitleKey: rec.subtitle_key, thumbnailKey: rec.thumbnail_key,
  }) as MediaJobResult;
  return withoutNulls({
    jobId: rec.id, status: rec.status, step: rec.step, progress: rec.status === 'Completed' ? 100 : undefined, result,
    error: rec.error, errorType: rec.error_type, reason: rec.reason,
    startTime: timeOf(rec.started_at ?? undefined), finishTime: timeOf(rec.finished_at ?? undefined) ?? nowStr,
  }) as MediaJobStatus;
}

/**
 * A re-applied manifest's MediaJob that the record of an earlier run
 * answers (docs/gitops.md): that run's outcome, under that run's job id, and
 * conditions saying nothing ran this time.
 */
export function restoredStatus(mj: MediaJob, rec: FinishedJob, now: Date): MediaJobStatus {
  const nowStr = timeOf(now)!;
  const s: MediaJobStatus = { ...recordedOutcome(rec, nowStr), restoredTime: nowStr, observedGeneration: mj.metadata.generation };
  const notRun = { type: 'Admitted', status: 'False', reason: 'Restored', message: `Finished before as job ${rec.id}: restored from its record, nothing ran again` } as const;
  s.conditions = conditionsFor(s, { mj, admitted: false, jobName: '' }, [], nowStr)
    .map((c) => (c.type === 'Admitted' ? { ...c, ...notRun } : c));
  return s;
}

/**
 * A MediaJob whose row ended first (ADR 0013: the row decides), with a
 * status other than the one a pass derived: a Completed mirrored into the
 * row just before an operator restart lost the MediaJob's copy, and the
 * restarted pass then saw the runner's pod lost. The row's outcome, what
 * it delivered included, replaces the pass's; the attempts, the runner Job
 * and the start stay, and nothing waits for another attempt.
 */
export function rowEndedStatus(mj: MediaJob, rec: FinishedJob, now: Date): MediaJobStatus {
  const nowStr = timeOf(now)!;
  const { retryAt: _w, storedFiles: _s, category: _c, result: _r, error: _e, errorType: _t, reason: _x, ...kept } = mj.status ?? {};
  const s: MediaJobStatus = { ...kept, ...recordedOutcome(rec, nowStr), observedGeneration: mj.metadata.generation };
  if (kept.startTime) s.startTime = kept.startTime;
  s.conditions = conditionsFor(s, { mj, admitted: !!kept.jobName, jobName: kept.jobName ?? '' }, mj.status?.conditions ?? [], nowStr);
  return s;
}

function withoutNulls<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== null && v !== undefined)) as Partial<T>;
}

function conditionsFor(s: MediaJobStatus, o: Observed, prev: Condition[], now: string): Condition[] {
  const gen = o.mj.metadata.generation;
  const last = s.attempts?.at(-1);
  const want: Omit<Condition, 'lastTransitionTime'>[] = [
    s.retryAt && last
      ? {
        type: 'Admitted', status: 'False', reason: 'WaitingToRetry', observedGeneration: gen,
        message: `Attempt ${last.attempt} failed (${last.category ?? 'error'}): attempt ${s.attempt ?? last.attempt + 1} starts at ${s.retryAt}`,
      }
      : o.admitted
      ? { type: 'Admitted', status: 'True', reason: 'JobCreated', message: `Job ${o.jobName} runs the download`, observedGeneration: gen }
      : isTerminal(s.status)
        ? { type: 'Admitted', status: 'False', reason: 'NotRun', message: 'The job ended before a runner was started', observedGeneration: gen }
        : { type: 'Admitted', status: 'False', ...waitingCondition(o.waiting), observedGeneration: gen },
    s.status === 'Processing'
      ? { type: 'Running', status: 'True', reason: 'RunnerStarted', message: `Step ${s.step ?? 'Downloading'}`, observedGeneration: gen }
      : { type: 'Running', status: 'False', reason: s.status === 'Pending' ? 'NotStarted' : 'Finished', message: '', observedGeneration: gen },
  ];
  if (isTerminal(s.status)) {
    const ok = s.status === 'Completed';
    want.push({ type: 'Succeeded', status: ok ? 'True' : 'False', reason: s.status!, message: ok ? 'The media was delivered' : s.error ?? '', observedGeneration: gen });
  }
  return want.map((c) => {
    const before = prev.find((p) => p.type === c.type);
    const lastTransitionTime = before && before.status === c.status ? before.lastTransitionTime : now;
    return { ...c, lastTransitionTime };
  });
}

function waitingCondition(w: Observed['waiting']): { reason: string; message: string } {
  const shown = WAITING[w?.reason ?? 'capacity'];
  return { reason: shown.condition, message: shown.message(w?.limit ?? 0) };
}

/**
 * The merge patch that turns status `cur` into `desired`. A merge patch
 * keeps what it does not name, so the fields `desired` dropped (a wait
 * reason that no longer holds, a completed job's error) are named null.
 */
export function statusPatch(cur: MediaJobStatus | undefined, desired: MediaJobStatus): Record<string, unknown> {
  const dropped = Object.keys(cur ?? {}).filter((k) => desired[k as keyof MediaJobStatus] === undefined);
  return { ...desired, ...Object.fromEntries(dropped.map((k) => [k, null])) };
}

/** Fields whose change is worth a status write (conditions' times alone are not). */
export function statusChanged(a: MediaJobStatus | undefined, b: MediaJobStatus): boolean {
  return JSON.stringify(normalise(a ?? {})) !== JSON.stringify(normalise(b));
}

function normalise(s: MediaJobStatus): unknown {
  const keys = Object.keys(s).sort() as (keyof MediaJobStatus)[];
  return keys.map((k) => [k, k === 'conditions' ? s.conditions?.map(({ lastTransitionTime: _t, ...c }) => c) : s[k]]);
}
