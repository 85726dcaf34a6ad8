// The batch/v1 Job controller, ported from kube-controller-manager's
// pkg/controller/job/job_controller.go (NonIndexed completion mode).
// Level-triggered: subscribe() only enqueues Job keys; each sync re-reads the
// Job and its Pods and derives everything from them:
//   - pods are created from the template (owner reference, tracking finalizer),
//     min(parallelism, remaining completions) at a time, after the failure
//     backoff;
//   - a finished pod is first recorded in status.uncountedTerminatedPods, then
//     its batch.kubernetes.io/job-tracking finalizer is removed, then it is
//     moved into succeeded/failed, so no pod is ever counted twice;
//   - success adds SuccessCriteriaMet then Complete; failure (backoff limit,
//     active deadline) adds FailureTarget, terminates active pods and adds
//     Failed once none is left terminating.
// The ClusterApi is synchronous, so a sync is atomic with respect to other
// writers; what the real controller needs expectations for cannot happen.
import type { Change, ClusterApi } from '../cluster-api.js';
import { StatusError } from '../errors.js';
import { deepCopy, deepEqual, hasFinalizer, rfc3339, withoutFinalizer } from '../object-meta.js';
import type { KubeObject, ResourceType } from '../types.js';
import { recordEvent, type EventType } from './events.js';
import type { Condition, Job, JobStatus, Pod } from './pod-types.js';
import { controllerOf, findCondition, isPodReady, isPodTerminal } from './pod-types.js';
import { WorkQueue } from '@mediajobs/lib/work-queue';

export { TtlController } from './ttl-controller.js';

export const JOB_TRACKING_FINALIZER = 'batch.kubernetes.io/job-tracking';
const JOB_CONTROLLER_NAME = 'kubernetes.io/job-controller';
const MAX_POD_CREATE_DELETE_PER_SYNC = 500;
const SOURCE = { component: 'job-controller' };
/** The job controller runs in kube-controller-manager: its writes carry that name in managedFields. */
const CONTROLLER_MANAGER = 'kube-controller-manager';

export interface JobControllerOptions {
  /** Delay before a failed pod is replaced, doubling per consecutive failure (real: 10 s). */
  backoffBaseMs?: number;
  /** Cap of that delay (real: 10 min in the source; the docs say 6). */
  backoffMaxMs?: number;
  /** Delay of syncs triggered by pod changes, to batch them (real: 1 s). */
  syncBatchMs?: number;
  /** Full resync period, a safety net for missed events (default 30 s). */
  resyncMs?: number;
  logger?: (msg: string, extra?: Record<string, unknown>) => void;
}

interface BackoffRecord {
  failuresAfterLastSuccess: number;
  lastFailureTime?: number;
}

interface SyncCounts {
  active: number;
  ready: number;
  terminating: number;
}

export class JobController {
  private readonly jobs: ResourceType;
  private readonly pods: ResourceType;
  private readonly queue: WorkQueue;
  private readonly backoff = new Map<string, BackoffRecord>();
  private readonly skipped = new Set<string>();
  /** Pods by their controller's uid, kept from the watch, as the real controller's controllerUID index. */
  private readonly podsByController = new Map<string, Set<string>>();
  private readonly controllerOfPod = new Map<string, string>();
  private unsubscribe: (() => void) | undefined;
  private resync: NodeJS.Timeout | undefined;
  private readonly backoffBaseMs: number;
  private readonly backoffMaxMs: number;
  private readonly log: (msg: string, extra?: Record<string, unknown>) => void;

  constructor(private readonly api: ClusterApi, private readonly opts: JobControllerOptions = {}) {
    const jobs = api.resourceForKind('batch/v1', 'Job');
    const pods = api.resourceForKind('v1', 'Pod');
    if (!jobs || !pods) throw new Error('the API server does not serve batch/v1 Jobs and v1 Pods');
    this.jobs = jobs;
    this.pods = pods;
    this.backoffBaseMs = opts.backoffBaseMs ?? 10_000;
    this.backoffMaxMs = opts.backoffMaxMs ?? 10 * 60_000;
    this.log = opts.logger ?? (() => {});
    this.queue = new WorkQueue((key) => this.process(key), {
      onError: (key, err) => this.log('job sync failed', { key, err: String(err) }),
    });
  }

  start(): void {
    if (this.unsubscribe) return;
    this.unsubscribe = this.api.subscribe((c) => this.observe(c));
    for (const pod of this.api.listReadonly(this.pods)) this.index(pod, false);
    this.resyncAll();
    this.resync = setInterval(() => this.resyncAll(), this.opts.resyncMs ?? 30_000);
    this.resync.unref();
  }

  stop(): void {
    this.unsubscribe?.();
    this.unsubscribe = undefined;
    if (this.resync) clearInterval(this.resync);
    void this.queue.stop();
  }

  private resyncAll(): void {
    for (const job of this.api.list(this.jobs)) this.queue.add(jobKey(job));
    // Pods whose Job is gone or finished may still carry the tracking finalizer.
    for (const pod of this.api.list(this.pods)) if (hasFinalizer(pod, JOB_TRACKING_FINALIZER)) this.queue.add(orphanKey(pod));
  }

  // ---- event handlers: enqueue only ------------------------------------------------

  private observe(c: Change): void {
    if (c.rt.group === 'batch' && c.rt.kind === 'Job') this.observeJob(c);
    else if (c.rt.group === '' && c.rt.kind === 'Pod') this.observePod(c);
  }

  private observeJob(c: Change): void {
    const job = c.object as Job;
    const key = jobKey(job);
    this.queue.add(key);
    if (c.type === 'DELETED' || isJobFinished(job)) this.cleanupPodFinalizers(job);
    const old = c.old as Job | undefined;
    const ads = job.spec?.activeDeadlineSeconds;
    if (c.type === 'MODIFIED' && job.status?.startTime && typeof ads === 'number' && ads !== old?.spec?.activeDeadlineSeconds) {
      this.queue.addAfter(key, Date.parse(job.status.startTime) + ads * 1000 - Date.now());
    }
  }

  private observePod(c: Change): void {
    const pod = c.object as Pod;
    this.index(pod, c.type === 'DELETED');
    const ref = controllerOf(pod);
    const oldRef = c.old ? controllerOf(c.old) : undefined;
    if (oldRef && oldRef.uid !== ref?.uid) this.enqueueOwner(pod, oldRef);
    if (ref) this.enqueueOwner(pod, ref);
    else if (hasFinalizer(pod, JOB_TRACKING_FINALIZER)) this.queue.add(orphanKey(pod));
  }

  private enqueueOwner(pod: Pod, ref: { apiVersion: string; kind: string; name: string; uid: string }): void {
    if (ref.kind !== 'Job' || !ref.apiVersion.startsWith('batch/')) return;
    // Read, never changed: the stored object itself, as an informer's cache hands it out.
    const job = this.api.getReadonly(this.jobs, pod.metadata.namespace, ref.name) as Job | undefined;
    if (!job || job.metadata.uid !== ref.uid || isJobFinished(job)) {
      // Nobody will count this pod any more: just release it.
      if (hasFinalizer(pod, JOB_TRACKING_FINALIZER)) this.queue.add(orphanKey(pod));
      return;
    }
    this.queue.addAfter(jobKey(job), this.opts.syncBatchMs ?? 0);
  }

  private cleanupPodFinalizers(job: Job): void {
    for (const pod of this.podsOf(job)) if (hasFinalizer(pod, JOB_TRACKING_FINALIZER)) this.queue.add(orphanKey(pod));
  }

  /** Keep podsByController current: a pod's controller can change (orphaning, adoption) and pods go. */
  private index(pod: KubeObject, deleted: boolean): void {
    const key = `${pod.metadata.namespace}/${pod.metadata.name}`;
    const uid = deleted ? undefined : controllerOf(pod)?.uid;
    const was = this.controllerOfPod.get(key);
    if (was === uid) return;
    if (was !== undefined) {
      const set = this.podsByController.get(was);
      set?.delete(key);
      if (set?.size === 0) this.podsByController.delete(was);
      this.controllerOfPod.delete(key);
    }
    if (uid === undefined) return;
    this.controllerOfPod.set(key, uid);
    let set = this.podsByController.get(uid);
    if (!set) this.podsByController.set(uid, (set = new Set()));
    set.add(key);
  }

  private process(key: string): void {
    if (key.startsWith('pod:')) this.syncOrphanPod(key.slice(4));
    else this.syncJob(key);
  }

  // ---- orphan pods ---------------------------------------------------------------

  /** Remove the tracking finalizer from a pod no unfinished Job owns (syncOrphanPod). */
  private syncOrphanPod(key: string): void {
    const [ns, name] = splitKey(key);
    const pod = this.api.get(this.pods, ns, name) as Pod | undefined;
    if (!pod || !hasFinalizer(pod, JOB_TRACKING_FINALIZER)) return;
    const ref = controllerOf(pod);
    if (ref) {
      // Pods of other controllers keep their finalizers.
      if (ref.kind !== 'Job' || ref.apiVersion !== 'batch/v1') return;
      const job = this.api.getReadonly(this.jobs, ns, ref.name) as Job | undefined;
      if (job && job.metadata.uid === ref.uid) {
        if (managedByExternal(job)) return;
        if (!isJobFinished(job)) return; // still counted by its Job
      }
    }
    this.removeTrackingFinalizer(pod);
  }

  // ---- the sync ------------------------------------------------------------------

  private syncJob(key: string): void {
    const [ns, name] = splitKey(key);
    // The stored object itself (an informer's cache entry): the sync works on a copy of its status and writes a new object.
    const job = this.api.getReadonly(this.jobs, ns, name) as Job | undefined;
    if (!job) {
      this.backoff.delete(key);
      return;
    }
    if (managedByExternal(job)) return;
    if (isJobFinished(job)) {
      this.backoff.delete(key);
      return;
    }
    const spec = job.spec ?? {};
    const mode = spec.completionMode ?? 'NonIndexed';
    if (mode !== 'NonIndexed') {
      // Indexed Jobs are not emulated; say so once rather than pretend.
      if (!this.skipped.has(job.metadata.uid!)) {
        this.skipped.add(job.metadata.uid!);
        const why = mode === 'Indexed' ? 'the local cluster does not run Indexed Jobs' : 'completion mode is unknown';
        this.event(job, 'Warning', 'UnknownCompletionMode', `Skipped Job sync because ${why}`);
      }
      return;
    }

    const now = Date.now();
    const status: JobStatus = deepCopy(job.status ?? {});
    const uncounted = {
      succeeded: [...(status.uncountedTerminatedPods?.succeeded ?? [])],
      failed: [...(status.uncountedTerminatedPods?.failed ?? [])],
    };
    status.uncountedTerminatedPods = uncounted;
    const pods = this.podsOf(job);
    const activePods = pods.filter(isActive);
    const counts: SyncCounts = {
      active: activePods.length,
      ready: activePods.filter(isPodReady).length,
      terminating: pods.filter(isTerminating).length,
    };
    const tracked = (p: Pod) => hasFinalizer(p, JOB_TRACKING_FINALIZER);
    const newSucceeded = pods.filter((p) => tracked(p) && !uncounted.succeeded.includes(uidOf(p)) && p.status?.phase === 'Succeeded');
    const newFailed = pods.filter((p) => tracked(p) && !uncounted.failed.includes(uidOf(p)) && isPodFailed(p, job));
    const succeeded = (status.succeeded ?? 0) + newSucceeded.length + uncounted.succeeded.length;
    const failed = (status.failed ?? 0) + newFailed.length + uncounted.failed.length;

    const suspended = spec.suspend === true;
    if (!status.startTime && !suspended) status.startTime = rfc3339(new Date(now));
    const backoffRecord = this.newBackoffRecord(key, newSucceeded, newFailed);

    // The terminal condition, if this Job has reached one.
    let finished: Condition | undefined;
    const successMet = trueCondition(status, 'SuccessCriteriaMet');
    if (successMet) finished = { ...successMet };
    if (!finished) {
      const failureTarget = trueCondition(status, 'FailureTarget');
      if (failureTarget) finished = newCondition('Failed', failureTarget.reason ?? '', failureTarget.message ?? '');
    }
    if (!finished) {
      const backoffLimit = spec.backoffLimit ?? 6;
      if (failed > backoffLimit || pastBackoffLimitOnFailure(job, pods)) {
        finished = newCondition('FailureTarget', 'BackoffLimitExceeded', 'Job has reached the specified backoff limit');
      } else if (pastActiveDeadline(job, status, now)) {
        finished = newCondition('FailureTarget', 'DeadlineExceeded', 'Job was active longer than specified deadline');
      } else if (typeof spec.activeDeadlineSeconds === 'number' && !suspended && status.startTime) {
        this.queue.addAfter(key, Date.parse(status.startTime) + spec.activeDeadlineSeconds * 1000 - now);
      }
    }

    let suspendCondChanged = false;
    let manageError: unknown;
    if (finished) {
      // Terminate what still runs; the Job is finished once nothing is left.
      const r = this.deletePods(job, activePods, false);
      if (r.deleted !== counts.active) finished = undefined;
      counts.active -= r.deleted;
      counts.terminating += r.deleted;
      counts.ready -= r.deletedReady;
      manageError = r.error;
    } else {
      let manageCalled = false;
      if (!job.metadata.deletionTimestamp) {
        manageError = this.manageJob(job, key, activePods, counts, succeeded, backoffRecord);
        manageCalled = true;
      }
      const complete = spec.completions == null
        ? succeeded > 0 && counts.active === 0
        : succeeded >= spec.completions && counts.active === 0;
      if (complete) {
        finished = newCondition('SuccessCriteriaMet', 'CompletionsReached', 'Reached expected number of succeeded pods');
      } else if (manageCalled) {
        const conditions = (status.conditions ??= []);
        if (suspended) {
          if (ensureCondition(conditions, 'Suspended', 'True', 'JobSuspended', 'Job suspended')) {
            suspendCondChanged = true;
            this.event(job, 'Normal', 'Suspended', 'Job suspended');
          }
        } else if (ensureCondition(conditions, 'Suspended', 'False', 'JobResumed', 'Job resumed')) {
          suspendCondChanged = true;
          this.event(job, 'Normal', 'Resumed', 'Job resumed');
          // ActiveDeadlineSeconds counts continuous activity: a resumed Job starts over.
          status.startTime = rfc3339();
        }
      }
    }

    const needsFlush = suspendCondChanged || counts.active !== (job.status?.active ?? 0)
      || counts.ready !== job.status?.ready || counts.terminating !== job.status?.terminating
      || status.startTime !== job.status?.startTime;
    status.active = counts.active;
    status.ready = counts.ready;
    status.terminating = counts.terminating;
    this.trackStatusAndRemoveFinalizers(key, job, status, pods, finished, counts, needsFlush, backoffRecord);
    if (manageError) throw manageError;
  }

  /** Create or delete pods toward the wanted number of active ones (manageJob). */
  private manageJob(job: Job, key: string, active: Pod[], counts: SyncCounts, succeeded: number, record: BackoffRecord): unknown {
    const spec = job.spec ?? {};
    if (spec.suspend === true) {
      const r = this.deletePods(job, sortForRemoval(active), true);
      counts.active -= r.deleted;
      counts.terminating += r.deleted;
      counts.ready -= r.deletedReady;
      return r.error;
    }
    const parallelism = spec.parallelism ?? 1;
    let wantActive: number;
    if (spec.completions == null) {
      // Work-queue Jobs: once one pod succeeded, let the rest finish but start no more.
      wantActive = succeeded > 0 ? counts.active : parallelism;
    } else {
      wantActive = Math.max(0, Math.min(spec.completions - succeeded, parallelism));
    }
    const rmAtLeast = Math.max(0, counts.active - wantActive);
    if (rmAtLeast > 0) {
      const toDelete = sortForRemoval(active).slice(0, Math.min(rmAtLeast, MAX_POD_CREATE_DELETE_PER_SYNC));
      const r = this.deletePods(job, toDelete, true);
      counts.active -= r.deleted;
      counts.terminating += r.deleted;
      counts.ready -= r.deletedReady;
      return r.error;
    }
    // With podReplacementPolicy Failed, a terminating pod still holds its place.
    const holding = onlyReplaceFailedPods(job) ? counts.terminating : 0;
    let diff = wantActive - holding - counts.active;
    if (diff <= 0) return undefined;
    const remaining = this.backoffRemaining(record);
    if (remaining > 0) {
      this.queue.addAfter(key, Math.max(remaining, this.opts.syncBatchMs ?? 0));
      return undefined;
    }
    diff = Math.min(diff, MAX_POD_CREATE_DELETE_PER_SYNC);
    let error: unknown;
    for (let i = 0; i < diff; i++) {
      try {
        const pod = this.api.create(this.pods, job.metadata.namespace, podFromTemplate(job), { fieldManager: CONTROLLER_MANAGER });
        counts.active++;
        this.event(job, 'Normal', 'SuccessfulCreate', `Created pod: ${pod.metadata.name}`);
      } catch (err) {
        error = err;
        this.event(job, 'Warning', 'FailedCreate', `Error creating: ${(err as Error).message}`);
        // Slow start: after a failure, do not hammer the API with the rest.
        break;
      }
    }
    return error;
  }

  /**
   * Delete pods; with `releaseFinalizer` their tracking finalizer goes first so
   * they are not counted (suspend, scale down), otherwise they stay to be
   * counted as failed (a Job that failed).
   */
  private deletePods(job: Job, pods: Pod[], releaseFinalizer: boolean): { deleted: number; deletedReady: number; error?: unknown } {
    let deleted = 0;
    let deletedReady = 0;
    let error: unknown;
    for (const pod of pods) {
      try {
        if (releaseFinalizer) this.removeTrackingFinalizer(pod);
        this.api.delete(this.pods, pod.metadata.namespace, pod.metadata.name!, { preconditions: { uid: pod.metadata.uid } });
        this.event(job, 'Normal', 'SuccessfulDelete', `Deleted pod: ${pod.metadata.name}`);
      } catch (err) {
        if (!(err instanceof StatusError && err.code === 404)) {
          error = err;
          this.event(job, 'Warning', 'FailedDelete', `Error deleting: ${(err as Error).message}`);
          continue;
        }
      }
      deleted++;
      if (isPodReady(pod)) deletedReady++;
    }
    return { deleted, deletedReady, error };
  }

  /**
   * Count finished pods exactly once: record them as uncounted, release their
   * finalizers, then move them into the counters; finally add the terminal
   * condition (trackJobStatusAndRemoveFinalizers + flushUncountedAndRemoveFinalizers).
   */
  private trackStatusAndRemoveFinalizers(
    key: string, job: Job, status: JobStatus, pods: Pod[], finished: Condition | undefined,
    counts: SyncCounts, needsFlush: boolean, record: BackoffRecord,
  ): void {
    const uncounted = status.uncountedTerminatedPods as { succeeded: string[]; failed: string[] };
    const withFinalizer = new Set(pods.filter((p) => hasFinalizer(p, JOB_TRACKING_FINALIZER)).map(uidOf));
    if (cleanUncounted(status, withFinalizer)) needsFlush = true;

    const toRelease: Pod[] = [];
    for (const pod of pods) {
      if (!hasFinalizer(pod, JOB_TRACKING_FINALIZER)) continue; // counted in an earlier sync
      const failed = isPodFailed(pod, job);
      const canRelease = job.metadata.deletionTimestamp || finished || pod.status?.phase === 'Succeeded' || failed;
      if (!canRelease) continue;
      toRelease.push(pod);
      const uid = uidOf(pod);
      if (pod.status?.phase === 'Succeeded' && !uncounted.failed.includes(uid)) {
        if (!uncounted.succeeded.includes(uid)) {
          uncounted.succeeded.push(uid);
          needsFlush = true;
        }
      } else if (failed || (finished && finished.type !== 'SuccessCriteriaMet')) {
        // Once the Job has failed, every pod that did not succeed counts as failed.
        if (!uncounted.failed.includes(uid)) {
          uncounted.failed.push(uid);
          needsFlush = true;
        }
      }
    }

    const conditions = (status.conditions ??= []);
    if (finished?.type === 'FailureTarget') {
      conditions.push(finished);
      needsFlush = true;
      finished = newCondition('Failed', finished.reason ?? '', finished.message ?? '');
    }
    if (finished?.type === 'SuccessCriteriaMet') {
      if (!trueCondition(status, 'SuccessCriteriaMet')) {
        conditions.push(finished);
        needsFlush = true;
      }
      finished = newCondition('Complete', finished.reason ?? '', finished.message ?? '');
    }

    let current = job;
    if (needsFlush) {
      current = this.writeStatus(current, status);
      this.backoff.set(key, record);
      needsFlush = false;
    }
    let releaseError: unknown;
    for (const pod of toRelease) {
      try {
        this.removeTrackingFinalizer(pod);
        withFinalizer.delete(uidOf(pod));
      } catch (err) {
        releaseError = err;
      }
    }
    if (cleanUncounted(status, withFinalizer)) needsFlush = true;
    if (releaseError) {
      if (needsFlush) this.writeStatus(current, status);
      throw releaseError;
    }

    // enactJobFinished: only once every pod is counted and none is still terminating.
    let jobFinished = false;
    if (finished && uncounted.succeeded.length + uncounted.failed.length === 0 && counts.terminating === 0) {
      ensureCondition(conditions, finished.type, 'True', finished.reason ?? '', finished.message ?? '');
      if (finished.type === 'Complete') status.completionTime = findCondition(conditions, 'Complete')!.lastTransitionTime;
      jobFinished = true;
      needsFlush = true;
    }
    if (needsFlush) {
      current = this.writeStatus(current, status);
      if (jobFinished) this.recordJobFinished(current, finished!);
    }
  }

  private recordJobFinished(job: Job, cond: Condition): void {
    if (cond.type === 'Complete') {
      const completions = job.spec?.completions;
      if (completions != null && (job.status?.succeeded ?? 0) > completions) {
        this.event(job, 'Warning', 'TooManySucceededPods', 'Too many succeeded pods running after completion count reached');
      }
      this.event(job, 'Normal', 'Completed', 'Job completed');
    } else {
      this.event(job, 'Warning', cond.reason ?? '', cond.message ?? '');
    }
  }

  private writeStatus(job: Job, status: JobStatus): Job {
    const wire = wireStatus(status);
    if (deepEqual(wire, job.status)) return job;
    return this.api.update(this.jobs, job.metadata.namespace, { ...job, status: wire }, { subresource: 'status', fieldManager: CONTROLLER_MANAGER }) as Job;
  }

  // ---- pods ----------------------------------------------------------------------

  /** The Job's pods: those it controls, by uid (adoption of orphans is not done). */
  private podsOf(job: Job): Pod[] {
    const pods: Pod[] = [];
    for (const key of this.podsByController.get(job.metadata.uid!) ?? []) {
      const [ns, name] = splitKey(key);
      if (ns !== job.metadata.namespace) continue; // an owner reference across namespaces is not honoured
      const pod = this.api.get(this.pods, ns, name) as Pod | undefined; // a copy: the sync may change it
      if (pod && controllerOf(pod)?.uid === job.metadata.uid) pods.push(pod);
    }
    // In the store's (etcd's) key order, as a list would give them.
    return pods.sort((a, b) => (a.metadata.name! < b.metadata.name! ? -1 : 1));
  }

  /** Remove the tracking finalizer; a pod already gone counts as done. */
  private removeTrackingFinalizer(pod: KubeObject): void {
    const current = this.api.get(this.pods, pod.metadata.namespace, pod.metadata.name!);
    if (!current || current.metadata.uid !== pod.metadata.uid || !hasFinalizer(current, JOB_TRACKING_FINALIZER)) return;
    try {
      this.api.update(this.pods, current.metadata.namespace, withoutFinalizer(current, JOB_TRACKING_FINALIZER));
    } catch (err) {
      if (!(err instanceof StatusError && err.code === 404)) throw err;
    }
  }

  // ---- pod failure backoff (backoff_utils.go) ----------------------------------

  private newBackoffRecord(key: string, newSucceeded: Pod[], newFailed: Pod[]): BackoffRecord {
    const old = this.backoff.get(key);
    const record: BackoffRecord = { failuresAfterLastSuccess: old?.failuresAfterLastSuccess ?? 0, lastFailureTime: old?.lastFailureTime };
    const failedTimes = newFailed.map(finishedTime).sort((a, b) => a - b);
    if (newSucceeded.length === 0) {
      if (failedTimes.length === 0) return record;
      record.failuresAfterLastSuccess += failedTimes.length;
      record.lastFailureTime = failedTimes[failedTimes.length - 1];
      return record;
    }
    // Only failures after the latest success count.
    const lastSuccess = Math.max(...newSucceeded.map(finishedTime));
    record.failuresAfterLastSuccess = 0;
    record.lastFailureTime = undefined;
    for (let i = failedTimes.length - 1; i >= 0 && failedTimes[i]! > lastSuccess; i--) {
      record.lastFailureTime ??= failedTimes[i];
      record.failuresAfterLastSuccess++;
    }
    return record;
  }

  private backoffRemaining(record: BackoffRecord): number {
    if (record.failuresAfterLastSuccess === 0 || record.lastFailureTime === undefined) return 0;
    let delay = this.backoffBaseMs;
    for (let i = 1; i < record.failuresAfterLastSuccess; i++) {
      delay *= 2;
      if (delay >= this.backoffMaxMs) {
        delay = this.backoffMaxMs;
        break;
      }
    }
    const elapsed = Date.now() - record.lastFailureTime;
    return elapsed > delay ? 0 : delay - elapsed;
  }

  private event(job: Job, type: EventType, reason: string, message: string): void {
    recordEvent(this.api, job, type, reason, message, SOURCE);
  }
}

// ---- helpers -----------------------------------------------------------------------

function jobKey(job: KubeObject): string {
  return `${job.metadata.namespace}/${job.metadata.name}`;
}

function orphanKey(pod: KubeObject): string {
  return `pod:${pod.metadata.namespace}/${pod.metadata.name}`;
}

function splitKey(key: string): [string, string] {
  const i = key.indexOf('/');
  return [key.slice(0, i), key.slice(i + 1)];
}

function uidOf(obj: KubeObject): string {
  return obj.metadata.uid ?? '';
}

export function isJobFinished(job: Job): boolean {
  return (job.status?.conditions ?? []).some((c) => (c.type === 'Complete' || c.type === 'Failed') && c.status === 'True');
}

function managedByExternal(job: Job): boolean {
  const by = job.spec?.managedBy;
  return typeof by === 'string' && by !== JOB_CONTROLLER_NAME;
}

function trueCondition(status: JobStatus, type: string): Condition | undefined {
  const c = findCondition(status.conditions, type);
  return c?.status === 'True' ? c : undefined;
}

function newCondition(type: string, reason: string, message: string, status = 'True'): Condition {
  const now = rfc3339();
  const c: Condition = { type, status, lastProbeTime: now, lastTransitionTime: now };
  if (reason) c.reason = reason;
  if (message) c.message = message;
  return c;
}

/** ensureJobConditionStatus: update or append (never append a False); true when changed. */
function ensureCondition(list: Condition[], type: string, status: string, reason: string, message: string): boolean {
  const i = list.findIndex((c) => c.type === type);
  if (i >= 0) {
    const c = list[i]!;
    if (c.status === status && (c.reason ?? '') === reason && (c.message ?? '') === message) return false;
    list[i] = newCondition(type, reason, message, status);
    return true;
  }
  if (status === 'False') return false;
  list.push(newCondition(type, reason, message, status));
  return true;
}

/** Move uncounted pods whose finalizer is gone into the counters; true when anything moved. */
function cleanUncounted(status: JobStatus, withFinalizer: Set<string>): boolean {
  const u = status.uncountedTerminatedPods as { succeeded: string[]; failed: string[] };
  const keepS = u.succeeded.filter((uid) => withFinalizer.has(uid));
  const keepF = u.failed.filter((uid) => withFinalizer.has(uid));
  const moved = u.succeeded.length - keepS.length + u.failed.length - keepF.length;
  status.succeeded = (status.succeeded ?? 0) + u.succeeded.length - keepS.length;
  status.failed = (status.failed ?? 0) + u.failed.length - keepF.length;
  u.succeeded = keepS;
  u.failed = keepF;
  return moved > 0;
}

/** JobStatus as the API serializes it: zero counters and empty lists omitted, ready/terminating kept. */
function wireStatus(status: JobStatus): JobStatus {
  const u = status.uncountedTerminatedPods ?? {};
  const out: JobStatus = {};
  if (status.conditions?.length) out.conditions = status.conditions;
  if (status.startTime) out.startTime = status.startTime;
  if (status.completionTime) out.completionTime = status.completionTime;
  if (status.active) out.active = status.active;
  if (status.succeeded) out.succeeded = status.succeeded;
  if (status.failed) out.failed = status.failed;
  out.terminating = status.terminating ?? 0;
  out.uncountedTerminatedPods = {
    ...(u.succeeded?.length ? { succeeded: u.succeeded } : {}),
    ...(u.failed?.length ? { failed: u.failed } : {}),
  };
  out.ready = status.ready ?? 0;
  for (const [k, v] of Object.entries(status)) {
    if (!(k in out) && !['conditions', 'active', 'succeeded', 'failed', 'uncountedTerminatedPods'].includes(k) && v !== undefined) out[k] = v;
  }
  return out;
}

function isActive(p: Pod): boolean {
  return !isPodTerminal(p) && !p.metadata.deletionTimestamp;
}

function isTerminating(p: Pod): boolean {
  return !!p.metadata.deletionTimestamp && !isPodTerminal(p);
}

function onlyReplaceFailedPods(job: Job): boolean {
  return job.spec?.podReplacementPolicy === 'Failed' || job.spec?.podFailurePolicy != null;
}

/** Failed phase, or (TerminatingOrFailed) deleted without having succeeded. */
function isPodFailed(p: Pod, job: Job): boolean {
  if (p.status?.phase === 'Failed') return true;
  if (onlyReplaceFailedPods(job)) return false;
  return !!p.metadata.deletionTimestamp && p.status?.phase !== 'Succeeded';
}

/** restartPolicy OnFailure: container restarts of live pods count against backoffLimit. */
function pastBackoffLimitOnFailure(job: Job, pods: Pod[]): boolean {
  if (job.spec?.template?.spec?.restartPolicy !== 'OnFailure') return false;
  let restarts = 0;
  for (const p of pods) {
    const phase = p.status?.phase;
    if (phase !== 'Running' && phase !== 'Pending') continue;
    for (const s of [...(p.status?.initContainerStatuses ?? []), ...(p.status?.containerStatuses ?? [])]) restarts += s.restartCount ?? 0;
  }
  const limit = job.spec?.backoffLimit ?? 6;
  return limit === 0 ? restarts > 0 : restarts >= limit;
}

function pastActiveDeadline(job: Job, status: JobStatus, now: number): boolean {
  const ads = job.spec?.activeDeadlineSeconds;
  if (typeof ads !== 'number' || !status.startTime || job.spec?.suspend === true) return false;
  return now - Date.parse(status.startTime) >= ads * 1000;
}

/** When a pod finished (getFinishedTime), in ms. */
function finishedTime(p: Pod): number {
  const statuses = p.status?.containerStatuses ?? [];
  if (statuses.length && statuses.every((s) => s.state?.terminated?.finishedAt)) {
    return Math.max(...statuses.map((s) => Date.parse(s.state.terminated!.finishedAt!)));
  }
  const ready = findCondition(p.status?.conditions, 'Ready');
  if (ready?.status === 'False' && ready.lastTransitionTime) return Date.parse(ready.lastTransitionTime);
  if (p.metadata.deletionTimestamp) return Date.parse(p.metadata.deletionTimestamp) - (p.metadata.deletionGracePeriodSeconds ?? 0) * 1000;
  return Date.parse(p.metadata.creationTimestamp ?? '') || Date.now();
}

/** controller.ActivePods order: unscheduled, pending, not ready, then newer pods go first. */
function sortForRemoval(pods: Pod[]): Pod[] {
  const phaseRank = (p: Pod) => ({ Pending: 0, Unknown: 1, Running: 2 } as Record<string, number>)[p.status?.phase ?? 'Pending'] ?? 0;
  return [...pods].sort((a, b) =>
    Number(!!a.spec?.nodeName) - Number(!!b.spec?.nodeName)
    || phaseRank(a) - phaseRank(b)
    || Number(isPodReady(a)) - Number(isPodReady(b))
    || (b.metadata.creationTimestamp ?? '').localeCompare(a.metadata.creationTimestamp ?? ''));
}

/** A new Pod from the Job's template (controller.GetPodFromTemplate). */
function podFromTemplate(job: Job): KubeObject {
  const template = deepCopy(job.spec?.template ?? {});
  const tm = template.metadata ?? {};
  const finalizers = [...(tm.finalizers ?? [])];
  if (!finalizers.includes(JOB_TRACKING_FINALIZER)) finalizers.push(JOB_TRACKING_FINALIZER);
  const metadata: KubeObject['metadata'] = {
    generateName: `${job.metadata.name}-`,
    namespace: job.metadata.namespace,
    labels: { ...(tm.labels ?? {}) },
    finalizers,
    ownerReferences: [{
      apiVersion: 'batch/v1', kind: 'Job', name: job.metadata.name!, uid: job.metadata.uid!, controller: true, blockOwnerDeletion: true,
    }],
  };
  if (tm.annotations && Object.keys(tm.annotations).length) metadata.annotations = { ...tm.annotations };
  return { apiVersion: 'v1', kind: 'Pod', metadata, spec: template.spec ?? {} };
}
