// The TTL-after-finished controller (pkg/controller/ttlafterfinished): a Job
// with spec.ttlSecondsAfterFinished and a Complete or Failed condition is
// deleted that many seconds after the condition's lastTransitionTime,
// cascading to its pods through the garbage collector. Before deleting it
// re-reads the Job, since the TTL may have changed, and deletes with a uid
// precondition so that a recreated Job of the same name survives.
import type { Change, ClusterApi } from '../cluster-api.js';
import { StatusError } from '../errors.js';
import type { ResourceType } from '../types.js';
import type { Job } from './pod-types.js';
import { WorkQueue } from '@mediajobs/lib/work-queue';

export interface TtlControllerOptions {
  /** The real controller deletes with Foreground propagation. */
  propagationPolicy?: 'Foreground' | 'Background';
  logger?: (msg: string, extra?: Record<string, unknown>) => void;
}

export class TtlController {
  private readonly jobs: ResourceType;
  private readonly queue: WorkQueue;
  private unsubscribe: (() => void) | undefined;

  constructor(private readonly api: ClusterApi, private readonly opts: TtlControllerOptions = {}) {
    const jobs = api.resourceForKind('batch/v1', 'Job');
    if (!jobs) throw new Error('the API server does not serve batch/v1 Jobs');
    this.jobs = jobs;
    this.queue = new WorkQueue((key) => this.process(key), {
      onError: (key, err) => opts.logger?.('ttl cleanup failed', { job: key, err: String(err) }),
    });
  }

  start(): void {
    if (this.unsubscribe) return;
    this.unsubscribe = this.api.subscribe((c) => this.observe(c));
    for (const job of this.api.list(this.jobs)) this.enqueue(job as Job);
  }

  stop(): void {
    this.unsubscribe?.();
    this.unsubscribe = undefined;
    void this.queue.stop();
  }

  private observe(c: Change): void {
    if (c.type === 'DELETED' || c.rt.group !== 'batch' || c.rt.kind !== 'Job') return;
    this.enqueue(c.object as Job);
  }

  private enqueue(job: Job): void {
    if (needsCleanup(job)) this.queue.add(`${job.metadata.namespace}/${job.metadata.name}`);
  }

  private process(key: string): void {
    const i = key.indexOf('/');
    const ns = key.slice(0, i);
    const name = key.slice(i + 1);
    const job = this.api.get(this.jobs, ns, name) as Job | undefined;
    if (!job || job.metadata.deletionTimestamp || !needsCleanup(job)) return;
    const expireAt = expiry(job);
    if (expireAt === undefined) return;
    const left = expireAt - Date.now();
    if (left > 0) {
      this.queue.addAfter(key, left);
      return;
    }
    try {
      this.api.delete(this.jobs, ns, name, {
        propagationPolicy: this.opts.propagationPolicy ?? 'Foreground',
        preconditions: { uid: job.metadata.uid },
      });
    } catch (err) {
      if (err instanceof StatusError && (err.code === 404 || err.code === 409)) return;
      throw err;
    }
  }
}

function finishCondition(job: Job) {
  return job.status?.conditions?.find((c) => (c.type === 'Complete' || c.type === 'Failed') && c.status === 'True');
}

function needsCleanup(job: Job): boolean {
  return typeof job.spec?.ttlSecondsAfterFinished === 'number' && finishCondition(job) !== undefined;
}

/** When the TTL runs out, in ms since the epoch; undefined when the finish time is unknown. */
function expiry(job: Job): number | undefined {
  const finishedAt = Date.parse(finishCondition(job)?.lastTransitionTime ?? '');
  if (Number.isNaN(finishedAt)) return undefined;
  return finishedAt + (job.spec!.ttlSecondsAfterFinished as number) * 1000;
}
