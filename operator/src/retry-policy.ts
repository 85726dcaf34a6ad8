// The retry policy (docs/adr/0018-retry-policy.md): which failures of a
// runner attempt another attempt can fix, and how long to wait before it.
// One table, RETRY_POLICY, over every cause an attempt can fail of: the
// runner's error categories (lib/src/mediajob/error-categories.ts), what
// the cluster did to its pod (failureSignal), and the operator's own
// endings. Pure: status.ts asks it when an attempt failed; the controller
// waits and starts the next attempt. Everyone else reads this table.
import type { V1Pod } from '@kubernetes/client-node';
import { ERROR_CATEGORIES, type ErrorCategory } from '@mediajobs/lib/mediajob/error-categories';
import { defenceAnswer } from './platform-decisions.js';

/** What the cluster did to a runner's pod, read from the pod (failureSignal). */
export const INFRASTRUCTURE_SIGNALS = ['evicted', 'oom_killed', 'node_lost'] as const;
export type InfrastructureSignal = (typeof INFRASTRUCTURE_SIGNALS)[number];

/**
 * Endings the operator decides itself: a deadline, a failure with no
 * category (an older runner, a Job that completed without a result), and
 * those that never reach a runner's end (cancellations; validation and
 * setup failures thrown as PermanentError): listed so the table is complete.
 */
export const OPERATOR_CAUSES = ['timeout', 'unknown', 'cancelled', 'invalid_owner', 'runner_name_taken'] as const;
export type OperatorCause = (typeof OPERATOR_CAUSES)[number];

export type FailureCause = ErrorCategory | InfrastructureSignal | OperatorCause;

/** no: the attempt's failure is the job's. backoff: again after RETRY_BACKOFF_SECONDS, doubling. platform: again after RETRY_PLATFORM_BACKOFF_SECONDS, doubling. */
export type RetryKind = 'no' | 'backoff' | 'platform';

/** The one table. The reasons for each row are in docs/adr/0018-retry-policy.md. */
export const RETRY_POLICY: Readonly<Record<FailureCause, RetryKind>> = {
  // The platform pushes back: hammering it again soon makes it worse; later, it often lets the same request through.
  bot_detection: 'platform',
  rate_limited: 'platform',
  // Transient on the way: the network, the source's or the destination's 5xx, a transfer cut off, our own runner.
  connection_error: 'backoff',
  download_failed: 'backoff',
  upload_failed: 'backoff',
  storage_unreachable: 'backoff',
  internal_error: 'backoff',
  // The pod was taken away: nothing about the media says the next pod fails too.
  evicted: 'backoff',
  oom_killed: 'backoff',
  node_lost: 'backoff',
  // Deterministic for the same input and settings: another attempt does the same thing.
  processing_failed: 'no',
  output_unverified: 'no',
  timeout: 'no',
  unknown: 'no',
  // Content: the media is not there for us; retrying only hammers the platform.
  private: 'no',
  members_only: 'no',
  age_restricted: 'no',
  geo_blocked: 'no',
  channel_terminated: 'no',
  copyright: 'no',
  upcoming: 'no',
  unavailable: 'no',
  drm_protected: 'no',
  // The key's limits: the same media exceeds them again.
  duration_limit_exceeded: 'no',
  filesize_limit_exceeded: 'no',
  // Decided by someone, or about the request: never a runner's to retry.
  invalid_spec: 'no',
  cancelled: 'no',
  invalid_owner: 'no',
  runner_name_taken: 'no',
};

export interface RetrySettings {
  /** Attempts in all, the first included (1: never retried). */
  maxAttempts: number;
  /** The first wait of a 'backoff' cause, in seconds; doubles with each attempt. */
  backoffSeconds: number;
  /** The first wait of a 'platform' cause (bot detection, rate limiting), in seconds; doubles with each attempt. */
  platformBackoffSeconds: number;
  /** No wait is longer than this. */
  maxBackoffSeconds: number;
  /**
   * The job's platform's pool has a Ready proxy other than the failed
   * attempt's (platforms.ts): a defence of that exit is tried again at once
   * on another proxy session instead of after the platform backoff.
   */
  newSessionReady?: boolean;
}

export function isFailureCause(s: string | undefined): s is FailureCause {
  return s !== undefined && Object.hasOwn(RETRY_POLICY, s);
}

/**
 * Whether attempt `attempt` (1 for the first), failed of `cause`, is
 * followed by another, and after how many seconds: the cause's first wait,
 * doubled for each attempt before it, capped. Undefined: this failure is
 * the job's. A platform's defence the attempt met (docs/adr/0027) changes
 * the wait, never whether: a re-probe (an expired signed URL) and a defence
 * of one exit while another proxy is Ready go again at once; a rate limit
 * waits what the platform's Retry-After said.
 */
export function retryDelaySeconds(
  cause: FailureCause, attempt: number, s: RetrySettings, defence?: { kind: string; retryAfterSeconds?: number | undefined },
): number | undefined {
  const kind = RETRY_POLICY[cause];
  if (kind === 'no' || attempt >= s.maxAttempts) return undefined;
  const answer = defence && defenceAnswer(defence.kind);
  if (answer?.retry === 'reprobe' || (answer?.retry === 'new_session' && s.newSessionReady)) return 0;
  if (answer?.retry === 'backoff' && defence?.retryAfterSeconds !== undefined) return Math.min(s.maxBackoffSeconds, defence.retryAfterSeconds);
  const first = kind === 'platform' ? s.platformBackoffSeconds : s.backoffSeconds;
  return Math.min(s.maxBackoffSeconds, first * 2 ** (attempt - 1));
}

/** DisruptionTarget reasons that mean the node went away, not that the pod was pushed off a healthy one. */
const NODE_GONE = new Set(['DeletionByTaintManager', 'DeletionByPodGC']);

/** Exits of a runner stopped from outside before it reported (SIGKILL, SIGTERM). */
const STOPPED_EXITS = new Set([137, 143]);

/**
 * What the cluster did to a runner that ended without a report of its
 * own, read as kube reports it: the container OOMKilled; the pod Evicted
 * by its kubelet, or disrupted (DisruptionTarget: eviction API,
 * preemption); the node gone (a DisruptionTarget of the taint manager or
 * pod GC, a container whose state could not be found, no pod left, or no
 * exit code ever reported); or the runner stopped by a signal without a
 * report (a pod deleted by someone, a kubelet stopping it). Undefined: the
 * runner ended on its own (an exit code of its own without a report).
 */
export function failureSignal(pod: V1Pod | undefined, exitCode: number | undefined): InfrastructureSignal | undefined {
  if (!pod) return 'node_lost';
  const terminated = pod.status?.containerStatuses?.[0]?.state?.terminated;
  if (terminated?.reason === 'OOMKilled') return 'oom_killed';
  const disruption = pod.status?.conditions?.find((c) => c.type === 'DisruptionTarget' && c.status === 'True');
  if (disruption && NODE_GONE.has(disruption.reason ?? '')) return 'node_lost';
  if (pod.status?.reason === 'Evicted' || disruption) return 'evicted';
  if (exitCode === undefined || terminated?.reason === 'ContainerStatusUnknown') return 'node_lost';
  if (STOPPED_EXITS.has(exitCode)) return 'evicted';
  return undefined;
}

/**
 * The cause of a failed attempt: a deadline is a timeout; else the
 * category the runner reported; else, for a runner that reported nothing,
 * what the cluster did to its pod; else unknown (never retried).
 */
export function failureCause(o: {
  deadlineExceeded: boolean; category?: string; reported: boolean; pod?: V1Pod; exitCode?: number;
}): FailureCause {
  if (o.deadlineExceeded) return 'timeout';
  if (o.category !== undefined) return (ERROR_CATEGORIES as readonly string[]).includes(o.category) ? o.category as ErrorCategory : 'unknown';
  if (!o.reported) return failureSignal(o.pod, o.exitCode) ?? 'unknown';
  return 'unknown';
}
