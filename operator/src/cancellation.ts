// Cancelling a MediaJob, the operator's half (docs/adr/0013-cancellation.md).
// The jobs row decides who won (lib/src/db/jobs.ts cancelJob: the first
// terminal write); this module makes the cluster follow it:
// - what asks for a cancellation: spec.cancel, a delete of an unfinished
//   MediaJob (held by the FINALIZER until the row says so), or a row
//   cancelled through the API or the admin CLI (CANCEL_CHANNEL notices,
//   and a catch-up read when this operator takes the lead);
// - the MediaJob status a cancelled job gets (pure);
// - the finalizer's add and removal.
// Stopping the runner (deleting its Job) is children.ts's; removing the files
// of a completion that lost the race (its report came after the row was
// cancelled) is stored-files.ts's; the pass that puts these together is
// controller.ts's.
import type * as k8s from '@kubernetes/client-node';
import type pg from 'pg';
import { CANCEL_CHANNEL, parseCancelNotice, type CancelNotice, type CancelStatus } from '@mediajobs/lib/job-cancellation';
import { isConflict, isNotFound, MERGE_PATCH } from '@mediajobs/lib/kube-client';
import { errFields, type Logger } from '@mediajobs/lib/logger';
import { listenOn, type Listening } from '@mediajobs/lib/pg-client';
import { CANCEL_ON_DELETE_FINALIZER } from '@mediajobs/lib/mediajob/build';
import {
  GROUP, MEDIAJOB_PLURAL, VERSION, jobIdOf, type Condition, type MediaJob, type MediaJobStatus,
} from '@mediajobs/lib/mediajob/types';

/**
 * Held on every unfinished MediaJob the operator manages, so a delete becomes
 * CancelledByAdmin in Postgres first. buildMediaJob sets it at creation (the
 * gateway's, the sweeper's and the batch controller's MediaJobs); the first
 * pass adds it to a kubectl-made one.
 */
export const FINALIZER = CANCEL_ON_DELETE_FINALIZER;

const MESSAGES: Record<CancelStatus, string> = {
  Cancelled: 'The job was cancelled',
  CancelledByAdmin: 'The job was cancelled by an administrator',
};

const timeOf = (d: Date) => d.toISOString().replace(/\.\d{3}Z$/, 'Z');

/**
 * The status of a MediaJob whose row ended `status`: step and progress as
 * they were, no result, Running=False and Succeeded=False with the status as
 * reason. Admitted stays as it was (it tells whether a runner was started).
 * An already cancelled status (same status) is returned as it is, so passing
 * over it again writes nothing.
 */
export function cancelledStatus(mj: MediaJob, status: CancelStatus, now: Date): MediaJobStatus {
  const cur = mj.status ?? {};
  if (cur.status === status && cur.finishTime && !cur.result && !cur.storedFiles) return cur;
  const nowStr = timeOf(now);
  // A wait for another attempt (retryAt) ends with the job: no attempt follows a cancellation (docs/adr/0018).
  // Nothing stored is delivered: stored-files.ts deletes what storedFiles named once this is written.
  const { result: _r, error: _e, errorType: _t, reason: _x, category: _c, retryAt: _w, storedFiles: _s, ...kept } = cur;
  const gen = mj.metadata.generation;
  const prev = cur.conditions ?? [];
  const at = (c: Omit<Condition, 'lastTransitionTime'>): Condition => {
    const before = prev.find((p) => p.type === c.type);
    return { ...c, lastTransitionTime: before && before.status === c.status ? before.lastTransitionTime : nowStr };
  };
  const admitted = prev.find((c) => c.type === 'Admitted' && c.status === 'True');
  const conditions: Condition[] = [
    admitted ?? at({ type: 'Admitted', status: 'False', reason: 'NotRun', message: 'The job ended before a runner was started', observedGeneration: gen }),
    at({ type: 'Running', status: 'False', reason: 'Finished', message: '', observedGeneration: gen }),
    at({ type: 'Succeeded', status: 'False', reason: status, message: MESSAGES[status], observedGeneration: gen }),
  ];
  return {
    ...kept, jobId: jobIdOf(mj), status, step: cur.step ?? 'Queued', progress: cur.progress ?? 0,
    finishTime: nowStr, observedGeneration: gen, conditions,
  };
}

/** What a pass over an unfinished MediaJob should do about cancellation: the status to record, or nothing. */
export function cancellationWanted(mj: MediaJob, notified: CancelStatus | undefined): CancelStatus | undefined {
  if (notified) return notified;
  if (mj.spec.cancel === true || mj.metadata.deletionTimestamp) return 'CancelledByAdmin';
  return undefined;
}

export function hasFinalizer(mj: MediaJob): boolean {
  return (mj.metadata.finalizers ?? []).includes(FINALIZER);
}

/**
 * Add or remove the finalizer with a merge patch of the whole list, guarded
 * by the resourceVersion it was read at: a list someone changed meanwhile
 * is a conflict, and the pass runs again on the newer object.
 */
export async function setFinalizer(custom: k8s.CustomObjectsApi, mj: MediaJob, on: boolean): Promise<void> {
  const others = (mj.metadata.finalizers ?? []).filter((f) => f !== FINALIZER);
  const finalizers = on ? [...others, FINALIZER] : others;
  try {
    await custom.patchNamespacedCustomObject({
      group: GROUP, version: VERSION, namespace: mj.metadata.namespace!, plural: MEDIAJOB_PLURAL, name: mj.metadata.name!,
      body: { metadata: { finalizers, resourceVersion: mj.metadata.resourceVersion } },
    }, MERGE_PATCH);
  } catch (err) {
    // Gone: nothing to hold. A conflict: the newer object brings the key back.
    if (!isNotFound(err) && !isConflict(err)) throw err;
  }
}

/**
 * Listens on CANCEL_CHANNEL while this operator leads. A lost connection is
 * replaced after a pause, and `onReconnect` then catches up with what was
 * missed (the controller reads which of its jobs were cancelled).
 */
export class CancelNotices {
  private listening: Listening | undefined;
  private stopped = true;
  private retry: NodeJS.Timeout | undefined;

  constructor(
    private readonly pool: pg.Pool,
    private readonly log: Logger,
    private readonly onNotice: (n: CancelNotice) => void,
    private readonly onReconnect: () => void,
    private readonly retryMs = 2000,
  ) {}

  async start(): Promise<void> {
    this.stopped = false;
    await this.connect(false);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.retry) clearTimeout(this.retry);
    const listening = this.listening;
    this.listening = undefined;
    await listening?.end();
  }

  private async connect(catchUp: boolean): Promise<void> {
    if (this.stopped) return;
    let listening: Listening;
    try {
      listening = await listenOn(this.pool, CANCEL_CHANNEL, (payload) => {
        const notice = parseCancelNotice(payload);
        if (notice) this.onNotice(notice);
      }, (err) => {
        this.log.warn({ err: errFields(err) }, 'cancellation LISTEN connection lost; reconnecting');
        if (this.listening === listening) this.listening = undefined;
        this.later();
      });
    } catch (err) {
      this.log.warn({ err: errFields(err) }, 'cancellation LISTEN unavailable; retrying');
      this.later();
      return;
    }
    if (this.stopped) {
      await listening.end();
      return;
    }
    this.listening = listening;
    if (catchUp) this.onReconnect();
  }

  private later(): void {
    if (this.stopped || this.retry) return;
    this.retry = setTimeout(() => {
      this.retry = undefined;
      void this.connect(true);
    }, this.retryMs);
    this.retry.unref();
  }
}
