// Which Kubernetes Events a status change of a MediaJob or a MediaBatch
// makes (docs/design/events.md lists them): pure functions of the status
// before and after, so each rule is unit-tested, and a small per-object
// memory so a pass over a cache that has not seen the last write yet does
// not announce the same transition twice (its log line too, transition-log.ts).
// Writing them is events.ts's.
import {
  GROUP, VERSION, type Condition, type MediaBatch, type MediaBatchStatus, type MediaJob, type MediaJobAttempt, type MediaJobStatus,
} from '@mediajobs/lib/mediajob/types';
import type { EventType, Involved } from './events.js';
import { isTerminal } from './status.js';

export interface Announcement {
  type: EventType;
  reason: string;
  message: string;
}

export const mediaJobRef = (mj: MediaJob): Involved => ({ apiVersion: `${GROUP}/${VERSION}`, kind: 'MediaJob', metadata: mj.metadata });
export const mediaBatchRef = (mb: MediaBatch): Involved => ({ apiVersion: `${GROUP}/${VERSION}`, kind: 'MediaBatch', metadata: mb.metadata });

/** The Admitted condition reasons of a job waiting for a slot (status.ts WAITING). */
const WAITING_REASONS = new Set(['WaitingForCapacity', 'KeyAtRunningLimit', 'OrganizationAtRunningLimit']);

const condition = (conditions: Condition[] | undefined, type: string) => conditions?.find((c) => c.type === type);

/** A job admitted to a runner slot, just before its runner Job is created. */
export function admitted(jobName: string, waited: boolean): Announcement {
  return { type: 'Normal', reason: 'Admitted', message: `${waited ? 'A runner slot came free' : 'A runner slot is free'}: runner Job ${jobName} is created` };
}

export function runnerJobCreated(jobName: string): Announcement {
  return { type: 'Normal', reason: 'RunnerJobCreated', message: `Created Job ${jobName}` };
}

/** An attempt failed of a cause another attempt can fix: the next one is scheduled (docs/adr/0018). */
export function retrying(a: MediaJobAttempt, next: MediaJobStatus): Announcement {
  return {
    type: 'Warning', reason: 'Retrying',
    message: `Attempt ${a.attempt} failed (${a.category ?? 'error'}): attempt ${next.attempt ?? a.attempt + 1} in ${a.retryAfterSeconds ?? 0} s`,
  };
}

/** Whether the MediaJob's status says it has waited for a slot (its Admitted condition). */
export function hasWaited(s: MediaJobStatus | undefined): boolean {
  const a = condition(s?.conditions, 'Admitted');
  return !!a && a.status === 'False' && WAITING_REASONS.has(a.reason);
}

/** The events of a MediaJob's status going from `cur` to `next`: a wait for a slot begins, or the job ends. */
export function mediaJobTransition(cur: MediaJobStatus | undefined, next: MediaJobStatus): Announcement[] {
  const out: Announcement[] = [];
  const was = condition(cur?.conditions, 'Admitted');
  const now = condition(next.conditions, 'Admitted');
  if (now && now.status === 'False' && WAITING_REASONS.has(now.reason) && (was?.reason !== now.reason || was.status !== 'False')) {
    out.push({ type: 'Normal', reason: 'WaitingForSlot', message: now.message });
  }
  const retried = next.retryAt && next.attempt !== cur?.attempt ? next.attempts?.at(-1) : undefined;
  if (retried) out.push(retrying(retried, next));
  if (!isTerminal(next.status) || cur?.status === next.status) return out;
  const category = next.reason ?? 'error';
  switch (next.status) {
    case 'Completed':
      out.push({ type: 'Normal', reason: 'Completed', message: next.result?.storageKey ? `The media was delivered: ${next.result.storageKey}` : 'The media was delivered' });
      break;
    case 'Failed':
      out.push({ type: 'Warning', reason: 'Failed', message: `Failed (${category}): ${next.error ?? 'Processing failed'}` });
      if (category === 'storage_unreachable') {
        out.push({ type: 'Warning', reason: 'StorageUnreachable', message: next.error ?? 'The storage destination is unreachable or rejected the credentials' });
      }
      break;
    case 'Warning':
      out.push({ type: 'Warning', reason: 'MediaUnavailable', message: next.error ?? 'The media is not available' });
      break;
    case 'Skipped':
      out.push({ type: 'Normal', reason: 'Skipped', message: `Skipped (${next.reason ?? 'skipped'})${next.error ? `: ${next.error}` : ''}` });
      break;
    case 'Cancelled':
    case 'CancelledByAdmin':
      out.push({ type: 'Normal', reason: 'Cancelled', message: condition(next.conditions, 'Succeeded')?.message || `The job was cancelled (${next.status})` });
      break;
  }
  return out;
}

/** A condition that became `status` (or changed reason while it holds it) between `cur` and `next`. */
function became(cur: MediaBatchStatus | undefined, next: MediaBatchStatus, type: string, status: Condition['status']): Condition | undefined {
  const was = condition(cur?.conditions, type);
  const now = condition(next.conditions, type);
  if (!now || now.status !== status) return undefined;
  return !was || was.status !== status || was.reason !== now.reason ? now : undefined;
}

/** The events of a MediaBatch's status going from `cur` to `next`: expanded, every episode created, complete, rejected. */
export function mediaBatchTransition(cur: MediaBatchStatus | undefined, next: MediaBatchStatus): Announcement[] {
  const out: Announcement[] = [];
  const accepted = became(cur, next, 'Accepted', 'True');
  if (accepted) out.push({ type: 'Normal', reason: 'Expanded', message: accepted.message });
  const rejected = became(cur, next, 'Accepted', 'False');
  if (rejected) out.push({ type: 'Warning', reason: 'Rejected', message: `${rejected.reason}: ${rejected.message}` });
  const created = became(cur, next, 'EpisodesCreated', 'True');
  if (created) out.push({ type: 'Normal', reason: 'EpisodesCreated', message: `${next.totalEpisodes ?? 0} episode MediaJobs created` });
  const complete = became(cur, next, 'Complete', 'True');
  if (complete) {
    const failed = (next.failedEpisodes ?? 0) > 0;
    out.push({ type: failed ? 'Warning' : 'Normal', reason: complete.reason, message: complete.message });
  }
  return out;
}

/**
 * What was announced about each object, so a transition seen twice (a pass
 * over a cache that lags the write it made) is announced once. Holds live
 * objects only: forget() when one goes.
 */
export class Announced {
  private readonly seen = new Map<string, Set<string>>();

  /** The announcements not made yet for `key`, now remembered as made. */
  fresh(key: string, list: Announcement[]): Announcement[] {
    return list.filter((a) => this.once(key, `${a.reason}\0${a.message}`));
  }

  /** Whether `token` is new for `key`, now remembered: anything else said once per transition (transition-log.ts's lines). */
  once(key: string, token: string): boolean {
    let set = this.seen.get(key);
    if (set?.has(token)) return false;
    if (!set) this.seen.set(key, (set = new Set()));
    set.add(token);
    return true;
  }

  forget(key: string): void {
    this.seen.delete(key);
  }
}
