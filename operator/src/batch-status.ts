// A MediaBatch's status as a pure function of its batch row (the counts the
// rollup in lib/src/db/batches.ts keeps) and of what the controller's pass
// found: the fields `kubectl get mb` prints (Status, Done, Failed) and the
// conditions `kubectl describe mb` reads (Accepted, EpisodesCreated,
// Complete), each keeping its transition time while its status holds. The
// status is written by the batch controller (batch-controller.ts) only when
// this says something changed.
import type { BatchRecord } from '@mediajobs/lib/db/batches';
import type { Condition, MediaBatch, MediaBatchStatus } from '@mediajobs/lib/mediajob/types';

/** What the controller's pass knows beyond the row. */
export interface BatchObserved {
  mb: MediaBatch;
  row: BatchRecord;
  /** Episodes still without a MediaJob after this pass: none, some (creating), or not looked at (paused). */
  creating: 'done' | 'more' | 'paused';
  /** Why nothing is created although the row is processing (spec.paused); undefined when that is not the case. */
  heldBySpec?: boolean;
}

type Want = Omit<Condition, 'lastTransitionTime'>;

/** The batch's status fields and conditions from its row. */
export function deriveBatchStatus(o: BatchObserved, now: Date): MediaBatchStatus {
  const { row, mb } = o;
  const done = row.completed_episodes + row.failed_episodes;
  const gen = mb.metadata.generation;
  const s: MediaBatchStatus = {
    batchId: row.id,
    status: row.status,
    totalEpisodes: row.total_episodes,
    completedEpisodes: row.completed_episodes,
    failedEpisodes: row.failed_episodes,
    skippedEpisodes: row.skipped_episodes,
    done: `${done}/${row.total_episodes}`,
    episodeJobs: row.episode_jobs,
    ...(gen !== undefined && { observedGeneration: gen }),
  };
  const want: Want[] = [
    { type: 'Accepted', status: 'True', reason: 'Recorded', message: `Batch ${row.id}: ${row.total_episodes} ${row.kind === 'show' ? 'episodes' : 'videos'} for API key ${row.api_key_id}` },
    createdCondition(o),
    completeCondition(row, done),
  ];
  s.conditions = withTimes(want.map((c) => ({ ...c, ...(gen !== undefined && { observedGeneration: gen }) })), mb.status?.conditions ?? [], now);
  return s;
}

function createdCondition(o: BatchObserved): Want {
  if (o.creating === 'done' || o.row.status === 'completed' || o.row.status === 'finished') {
    return { type: 'EpisodesCreated', status: 'True', reason: 'AllCreated', message: 'Every episode has its MediaJob' };
  }
  if (o.creating === 'paused') {
    const message = o.heldBySpec
      ? 'spec.paused is true: no episode MediaJob is created until it is false'
      : 'The batch is paused: episode MediaJobs are created when it is started (POST /batch/{id}/start)';
    return { type: 'EpisodesCreated', status: 'False', reason: 'Paused', message };
  }
  return { type: 'EpisodesCreated', status: 'False', reason: 'Creating', message: 'Creating the episode MediaJobs at a bounded rate' };
}

function completeCondition(row: BatchRecord, done: number): Want {
  if (row.status === 'completed') {
    return { type: 'Complete', status: 'True', reason: 'Completed', message: `All ${row.total_episodes} episodes completed` };
  }
  if (row.status === 'finished') {
    const skipped = row.skipped_episodes ? ` (${row.skipped_episodes} skipped)` : '';
    return {
      type: 'Complete', status: 'True', reason: 'Finished',
      message: `${row.total_episodes} episodes done: ${row.completed_episodes} completed, ${row.failed_episodes} failed${skipped}`,
    };
  }
  const reason = row.status === 'paused' ? 'Paused' : 'InProgress';
  return { type: 'Complete', status: 'False', reason, message: `${done} of ${row.total_episodes} episodes done` };
}

/**
 * A batch that can never be processed (its owner is not an active key, its
 * URL cannot be expanded): Accepted=False with the reason, the rest of the
 * status left as it was. `reason` is snake_case (PermanentError's), the
 * condition's CamelCase.
 */
export function rejectedBatchStatus(mb: MediaBatch, batchId: string, why: { reason: string; message: string }, now: Date): MediaBatchStatus {
  const gen = mb.metadata.generation;
  const want: Want = {
    type: 'Accepted', status: 'False', reason: camelCase(why.reason), message: why.message,
    ...(gen !== undefined && { observedGeneration: gen }),
  };
  const prev = mb.status?.conditions ?? [];
  const others = prev.filter((c) => c.type !== 'Accepted');
  const before = prev.find((c) => c.type === 'Accepted');
  // The same rejection again keeps its time, so a repeated recording writes nothing.
  const same = before && before.status === 'False' && before.reason === want.reason && before.message === want.message;
  return {
    ...(mb.status ?? {}),
    batchId,
    ...(gen !== undefined && { observedGeneration: gen }),
    conditions: [{ ...want, lastTransitionTime: same ? before.lastTransitionTime : stamp(now) }, ...others],
  };
}

/** Rejected for the current spec: nothing to do until the spec changes (kubectl apply bumps the generation). */
export function rejectedForGeneration(mb: MediaBatch): boolean {
  const accepted = mb.status?.conditions?.find((c) => c.type === 'Accepted');
  return accepted?.status === 'False' && accepted.observedGeneration === mb.metadata.generation;
}

/** `invalid_owner` → `InvalidOwner` (a condition reason's shape). */
export function camelCase(reason: string): string {
  const s = reason.split(/[^A-Za-z0-9]+/).filter(Boolean).map((w) => w[0]!.toUpperCase() + w.slice(1)).join('');
  return /^[A-Za-z]/.test(s) ? s : `Failed${s}`;
}

/** RFC 3339 in whole seconds, as metav1.Time is. */
const stamp = (now: Date) => now.toISOString().replace(/\.\d{3}Z$/, 'Z');

function withTimes(want: Omit<Condition, 'lastTransitionTime'>[], prev: Condition[], now: Date): Condition[] {
  const at = stamp(now);
  return want.map((c) => {
    const before = prev.find((p) => p.type === c.type);
    return { ...c, lastTransitionTime: before && before.status === c.status ? before.lastTransitionTime : at };
  });
}

/** Whether writing `b` over `a` changes anything but the conditions' times. */
export function batchStatusChanged(a: MediaBatchStatus | undefined, b: MediaBatchStatus): boolean {
  return JSON.stringify(normalise(a ?? {})) !== JSON.stringify(normalise(b));
}

function normalise(s: MediaBatchStatus): unknown {
  const keys = (Object.keys(s) as (keyof MediaBatchStatus)[]).filter((k) => s[k] !== undefined).sort();
  return keys.map((k) => [k, k === 'conditions' ? s.conditions?.map(({ lastTransitionTime: _t, ...c }) => c) : s[k]]);
}
