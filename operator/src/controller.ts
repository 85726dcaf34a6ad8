// The MediaJob controller. Level-triggered: informer events only enqueue
// "namespace/name"; each pass re-reads the caches and derives the status
// from what exists (the Job, its pod, the runner's report), creates what is
// missing (credentials Secret, runner Job) under a global cap on running
// Jobs, and mirrors every change into Postgres with its webhook events.
import type * as k8s from '@kubernetes/client-node';
import type pg from 'pg';
import type { Logger } from '@mediajobs/lib/logger';
import type { SecretBox } from '@mediajobs/lib/secret-box';
import { WorkQueue } from '@mediajobs/lib/work-queue';
import { normaliseSpecOptions } from '@mediajobs/lib/job-options';
import {
  GROUP, MEDIAJOB_PLURAL, VERSION, jobIdOf, type MediaJob, type MediaJobStatus,
} from '@mediajobs/lib/mediajob/types';
import type { OperatorConfig } from './config.js';
import { OperatorDb, type JobRow, type OutboxEvent } from './db.js';
import { withProgressEvents } from './progress.js';
import { ResilientInformer } from './informer.js';
import {
  MANAGED_BY, buildCredentialsSecret, buildRunnerJob, credentialsSecretName, runnerJobName,
} from './job-builder.js';
import { MERGE_PATCH, isAlreadyExists, isNotFound, type Kube } from './kube.js';
import { WAIT_FOR_POD, deriveStatus, failedBeforeRunning, isTerminal, statusChanged } from './status.js';
import { DestinationUnresolvable, JobDestinations, STORAGE_UNREACHABLE_MESSAGE } from './destinations.js';

/** What the controller needs from managed storage. */
export interface ManagedStorageAccess {
  /** Presigned download URL (24 h) of a delivered object. */
  presign(key: string): Promise<string>;
  /** The destination document the runner gets in its credentials Secret. */
  destination(): Record<string, unknown>;
}

export interface ControllerDeps {
  kube: Kube;
  pool: pg.Pool;
  box: SecretBox;
  storage: ManagedStorageAccess;
  log: Logger;
  cfg: OperatorConfig;
}

const keyOf = (ns: string | undefined, name: string | undefined) => `${ns}/${name}`;

export class MediaJobController {
  readonly queue: WorkQueue;
  private readonly db: OperatorDb;
  private readonly mediajobs: ResilientInformer<MediaJob & k8s.KubernetesObject>;
  private readonly jobs: ResilientInformer<k8s.V1Job>;
  private readonly pods: ResilientInformer<k8s.V1Pod>;
  /** MediaJobs holding a runner slot (a Job exists or is being made). */
  private readonly admitted = new Set<string>();
  /** MediaJobs waiting for a slot, with their creation time (FIFO admission). */
  private readonly waiting = new Map<string, number>();
  /** Runner pods by "namespace/jobName", so a pass finds its pod without scanning every pod. */
  private readonly podsByJob = new Map<string, Map<string, k8s.V1Pod>>();
  /**
   * Per MediaJob key, the job id known to be in Postgres, and what was last
   * mirrored there (to skip no-op writes). Keyed by MediaJob, so both are
   * dropped when it goes, and a long-running operator holds only live jobs.
   */
  private readonly recorded = new Map<string, string>();
  private readonly synced = new Map<string, string>();
  private active = false;
  private readonly destinations: JobDestinations;

  constructor(private readonly d: ControllerDeps) {
    this.db = new OperatorDb(d.pool);
    this.destinations = new JobDestinations(d.kube.core, d.pool, d.box, () => d.storage.destination(), d.cfg);
    this.queue = new WorkQueue((key) => this.reconcile(key), {
      concurrency: d.cfg.RECONCILE_CONCURRENCY,
      retryBaseMs: 500,
      retryMaxMs: 60_000,
      onError: (key, err) => d.log.warn({ mediajob: key, err: String(err) }, 'reconcile failed; will retry'),
    });
    const ns = d.cfg.MEDIAJOBS_NAMESPACE;
    const common = {
      kc: d.kube.kc, resyncMs: d.cfg.RESYNC_SECONDS * 1000, watchdogMs: d.cfg.WATCHDOG_SECONDS * 1000, relistMs: d.cfg.RELIST_SECONDS * 1000, log: d.log,
    };
    this.mediajobs = new ResilientInformer({
      ...common,
      name: 'mediajobs',
      path: `/apis/${GROUP}/${VERSION}/namespaces/${ns}/${MEDIAJOB_PLURAL}`,
      list: () => d.kube.custom.listNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: ns, plural: MEDIAJOB_PLURAL }) as never,
      onChange: (mj) => this.enqueue(keyOf(mj.metadata?.namespace, mj.metadata?.name)),
      onResync: () => this.enqueueAll(),
    });
    const selector = `app.kubernetes.io/managed-by=${MANAGED_BY}`;
    const owner = (o: k8s.V1Job | k8s.V1Pod) => o.metadata?.labels?.['mediajobs.io/mediajob'];
    this.jobs = new ResilientInformer<k8s.V1Job>({
      ...common,
      name: 'jobs',
      path: `/apis/batch/v1/namespaces/${ns}/jobs`,
      labelSelector: selector,
      list: () => d.kube.batch.listNamespacedJob({ namespace: ns, labelSelector: selector }),
      onChange: (job) => this.enqueue(keyOf(job.metadata?.namespace, owner(job))),
    });
    this.pods = new ResilientInformer<k8s.V1Pod>({
      ...common,
      name: 'pods',
      path: `/api/v1/namespaces/${ns}/pods`,
      labelSelector: selector,
      list: () => d.kube.core.listNamespacedPod({ namespace: ns, labelSelector: selector }),
      onChange: (pod, type) => {
        this.indexPod(pod, type === 'delete');
        this.enqueue(keyOf(pod.metadata?.namespace, owner(pod)));
      },
      onResync: () => this.reindexPods(),
    });
  }

  /** Start the informers; caches are warm (listed) when this resolves. */
  async startInformers(): Promise<void> {
    await Promise.all([this.mediajobs.start(), this.jobs.start(), this.pods.start()]);
    this.reindexPods();
  }

  async stopInformers(): Promise<void> {
    await Promise.all([this.mediajobs.stop(), this.jobs.stop(), this.pods.stop()]);
  }

  /** Begin reconciling (on becoming leader): rebuild the slot count from the caches, then pass over everything. */
  activate(): void {
    this.admitted.clear();
    this.waiting.clear();
    for (const mj of this.mediajobs.list()) {
      const key = keyOf(mj.metadata.namespace, mj.metadata.name);
      if (isTerminal(mj.status?.status)) continue;
      if (mj.status?.jobName || this.jobs.get(runnerJobName(mj), mj.metadata.namespace)) this.admitted.add(key);
    }
    this.active = true;
    this.enqueueAll();
  }

  deactivate(): void {
    this.active = false;
  }

  /** Stop reconciling; resolves when the reconciles in flight have ended (they hold Postgres clients). */
  stop(): Promise<void> {
    this.active = false;
    return this.queue.stop();
  }

  private enqueue(key: string): void {
    if (this.active && !key.endsWith('/undefined')) this.queue.add(key);
  }

  private enqueueAll(): void {
    for (const mj of this.mediajobs.list()) this.enqueue(keyOf(mj.metadata.namespace, mj.metadata.name));
  }

  /** The MediaJob cache, for the sweeper. */
  hasMediaJob(namespace: string, name: string): boolean {
    return !!this.mediajobs.get(name, namespace);
  }

  // ---- one pass ------------------------------------------------------------

  async reconcile(key: string): Promise<void> {
    if (!this.active) return;
    const [ns, name] = key.split('/') as [string, string];
    const mj = this.mediajobs.get(name, ns);
    if (!mj || mj.metadata.deletionTimestamp) {
      this.release(key);
      this.recorded.delete(key);
      this.synced.delete(key);
      return;
    }
    const jobId = jobIdOf(mj);
    if (!(await this.ensureRecorded(key, mj, jobId))) return;

    if (isTerminal(mj.status?.status)) {
      await this.finish(key, mj, mj.status!);
      return;
    }

    const jobName = runnerJobName(mj);
    let job = this.jobs.get(jobName, ns);
    if (!job && !this.admitted.has(key)) {
      if (!this.admit(key, mj)) {
        await this.writeStatus(mj, deriveStatus({ mj, admitted: false, jobName }, new Date()) as MediaJobStatus);
        // Level-triggered safety net: a waiting job looks at the free slots again
        // soon even if a wake-up was lost (a release while this pass was in flight).
        this.queue.addAfter(key, this.d.cfg.ADMISSION_RECHECK_SECONDS * 1000);
        return;
      }
    }
    if (!job) {
      try {
        job = await this.createChildren(mj);
      } catch (err) {
        if (!(err instanceof DestinationUnresolvable)) throw err;
        // Never delivered elsewhere: the job ends here, before any download.
        this.d.log.warn({ jobId, why: err.why }, 'storage destination cannot be resolved');
        const failed = failedBeforeRunning(mj, { jobId, reason: 'storage_unreachable', error: STORAGE_UNREACHABLE_MESSAGE }, new Date());
        await this.writeStatus(mj, failed);
        await this.finish(key, mj, failed);
        return;
      }
    }
    const pod = this.latestPod(ns, jobName);
    const desired = deriveStatus({ mj, job, pod, admitted: true, jobName }, new Date());
    if (desired === WAIT_FOR_POD) {
      this.queue.addAfter(key, 1000); // the pod's event usually comes first
      return;
    }
    await this.writeStatus(mj, desired);
    if (isTerminal(desired.status)) await this.finish(key, mj, desired);
  }

  /** Make sure Postgres has the job: gateway-made jobs already do; kubectl manifests are recorded here. */
  private async ensureRecorded(key: string, mj: MediaJob, jobId: string): Promise<boolean> {
    if (this.recorded.get(key) === jobId) return true;
    const row = await this.db.findJob(jobId);
    if (row) {
      this.recorded.set(key, jobId);
      return true;
    }
    const webhook = mj.spec.webhookUrl ? this.d.box.seal(mj.spec.webhookUrl) : null;
    if (await this.db.insertFromManifest(jobId, withDefaults(mj), webhook)) {
      this.recorded.set(key, jobId);
      return true;
    }
    // Failed once, and then left alone: a resync must not move its finish
    // time (a patch per pass), and it goes after the TTL like any finished job.
    const failed = failedBeforeRunning(mj, {
      jobId, reason: 'invalid_owner', error: 'spec.owner.apiKeyId does not name an active API key',
      ...(mj.status?.reason === 'invalid_owner' && mj.status.finishTime ? { finishTime: mj.status.finishTime } : {}),
    }, new Date());
    await this.writeStatus(mj, failed);
    await this.deleteAfterTtl(key, mj, failed.finishTime);
    return false;
  }

  /** FIFO admission under the global cap on running Jobs. */
  private admit(key: string, mj: MediaJob): boolean {
    const free = this.d.cfg.MAX_RUNNING_JOBS - this.admitted.size;
    if (!this.waiting.has(key)) this.waiting.set(key, Date.parse(mj.metadata.creationTimestamp ?? '') || Date.now());
    if (free <= 0) return false;
    if (!this.oldestWaiting(free).includes(key)) return false;
    this.waiting.delete(key);
    this.admitted.add(key);
    return true;
  }

  /** A slot freed up: wake the oldest waiting MediaJobs. */
  private release(key: string): void {
    this.waiting.delete(key);
    if (!this.admitted.delete(key)) return;
    const free = this.d.cfg.MAX_RUNNING_JOBS - this.admitted.size;
    for (const k of this.oldestWaiting(free)) this.queue.add(k);
  }

  /**
   * The `n` waiting MediaJobs first in line. admit() and release() must agree
   * on this order: creation timestamps have one-second resolution, so ties
   * are common, and a release that woke a different tied job than the one
   * admit() lets in left the right one asleep until its periodic re-check.
   */
  private oldestWaiting(n: number): string[] {
    if (n <= 0) return [];
    return [...this.waiting.entries()].sort((a, b) => a[1] - b[1] || (a[0] < b[0] ? -1 : 1)).slice(0, n).map(([k]) => k);
  }

  private async createChildren(mj: MediaJob): Promise<k8s.V1Job | undefined> {
    const ns = mj.metadata.namespace!;
    const { cfg, kube } = this.d;
    const secret = buildCredentialsSecret(mj, await this.destinations.document(mj));
    try {
      await kube.core.createNamespacedSecret({ namespace: ns, body: secret });
    } catch (err) {
      if (!isAlreadyExists(err)) throw err;
    }
    // The storage endpoints come last: the runner must upload where the operator signs and the gateway probed.
    const extraEnv = { ...cfg.RUNNER_ENV, ...this.destinations.runnerEnv() };
    const body = buildRunnerJob(withDefaults(mj), {
      image: cfg.RUNNER_IMAGE,
      backoffLimit: cfg.JOB_BACKOFF_LIMIT,
      activeDeadlineSeconds: cfg.JOB_ACTIVE_DEADLINE_SECONDS,
      ttlSecondsAfterFinished: cfg.JOB_TTL_SECONDS_AFTER_FINISHED,
      serviceAccountName: cfg.RUNNER_SERVICE_ACCOUNT,
      resources: cfg.RUNNER_RESOURCES,
      extraEnv,
    });
    try {
      const job = await kube.batch.createNamespacedJob({ namespace: ns, body });
      this.d.log.info({ jobId: jobIdOf(mj), job: body.metadata!.name }, 'runner job created');
      return job;
    } catch (err) {
      if (!isAlreadyExists(err)) throw err;
      return this.jobs.get(body.metadata!.name!, ns);
    }
  }

  private indexPod(pod: k8s.V1Pod, deleted: boolean): void {
    const jobName = pod.metadata?.labels?.['batch.kubernetes.io/job-name'] ?? pod.metadata?.labels?.['job-name'];
    if (!jobName) return;
    const key = keyOf(pod.metadata?.namespace, jobName);
    let pods = this.podsByJob.get(key);
    if (deleted) {
      pods?.delete(pod.metadata!.name!);
      if (pods && !pods.size) this.podsByJob.delete(key);
      return;
    }
    if (!pods) this.podsByJob.set(key, (pods = new Map()));
    pods.set(pod.metadata!.name!, pod);
  }

  /** After a relist the cache is the truth: rebuild the index from it. */
  private reindexPods(): void {
    this.podsByJob.clear();
    for (const pod of this.pods.list()) this.indexPod(pod, false);
  }

  private latestPod(ns: string, jobName: string): k8s.V1Pod | undefined {
    let latest: k8s.V1Pod | undefined;
    let latestAt = -1;
    for (const pod of this.podsByJob.get(keyOf(ns, jobName))?.values() ?? []) {
      const t = pod.metadata?.creationTimestamp ? new Date(pod.metadata.creationTimestamp).getTime() : 0;
      if (t >= latestAt) {
        latest = pod;
        latestAt = t;
      }
    }
    return latest;
  }

  private async writeStatus(mj: MediaJob, desired: MediaJobStatus): Promise<void> {
    if (statusChanged(mj.status, desired)) {
      try {
        await this.d.kube.custom.patchNamespacedCustomObjectStatus({
          group: GROUP, version: VERSION, namespace: mj.metadata.namespace!, plural: MEDIAJOB_PLURAL, name: mj.metadata.name!,
          body: { status: desired },
        }, MERGE_PATCH);
      } catch (err) {
        if (isNotFound(err)) return;
        throw err;
      }
    }
    await this.syncDb(mj, desired);
  }

  /** Mirror status into Postgres; the first write of each transition also queues its webhooks. */
  private async syncDb(mj: MediaJob, s: MediaJobStatus): Promise<void> {
    const jobId = jobIdOf(mj);
    const key = keyOf(mj.metadata.namespace, mj.metadata.name);
    const fingerprint = JSON.stringify([jobId, s.status, s.step, s.progress, s.error, s.result?.storageKey]);
    if (this.synced.get(key) === fingerprint || !s.status) return;
    const urls = s.status === 'Completed' ? await this.presignResult(mj, s) : {};
    await this.db.syncStatus(jobId, s, (old, row) => withProgressEvents(eventsFor(old, s, row, mj, urls), s, row, mj));
    this.synced.set(key, fingerprint);
  }

  private async presignResult(mj: MediaJob, s: MediaJobStatus): Promise<{ s3Url?: string; subtitleUrl?: string; thumbnailUrl?: string }> {
    if (!JobDestinations.isManaged(mj)) {
      try {
        return await this.destinations.presignOwn(mj, s.result);
      } catch (err) {
        this.d.log.warn({ err: err instanceof Error ? err.name : String(err) }, 'presigning on the job destination failed');
        return {};
      }
    }
    const sign = async (key: string | undefined) => {
      if (!key) return undefined;
      try {
        return await this.d.storage.presign(key);
      } catch (err) {
        // The spec: s3_url is null in the webhook when signing failed; GET /jobs/{id} signs again.
        this.d.log.warn({ err: String(err) }, 'presigning failed');
        return undefined;
      }
    };
    return {
      s3Url: await sign(s.result?.storageKey),
      subtitleUrl: await sign(s.result?.subtitleKey),
      thumbnailUrl: await sign(s.result?.thumbnailKey),
    };
  }

  /** A finished MediaJob: free its slot, drop its credentials, and delete it after the TTL. */
  private async finish(key: string, mj: MediaJob, s: MediaJobStatus): Promise<void> {
    this.release(key);
    await this.syncDb(mj, s);
    try {
      await this.d.kube.core.deleteNamespacedSecret({ name: credentialsSecretName(mj), namespace: mj.metadata.namespace! });
    } catch (err) {
      if (!isNotFound(err)) throw err;
    }
    if (mj.spec.destination?.type === 'inline') await this.destinations.forgetInline(mj);
    await this.deleteAfterTtl(key, mj, s.finishTime);
  }

  /** Delete a finished MediaJob once FINISHED_MEDIAJOB_TTL_SECONDS have passed since `finishTime`; until then, look again then. */
  private async deleteAfterTtl(key: string, mj: MediaJob, finishTime: string | undefined): Promise<void> {
    const ttlMs = this.d.cfg.FINISHED_MEDIAJOB_TTL_SECONDS * 1000;
    const finished = Date.parse(finishTime ?? '') || Date.now();
    const remaining = finished + ttlMs - Date.now();
    if (remaining > 0) {
      this.queue.addAfter(key, remaining + 1000);
      return;
    }
    try {
      await this.d.kube.custom.deleteNamespacedCustomObject({
        group: GROUP, version: VERSION, namespace: mj.metadata.namespace!, plural: MEDIAJOB_PLURAL, name: mj.metadata.name!,
        propagationPolicy: 'Background',
      });
      this.d.log.info({ jobId: jobIdOf(mj) }, 'finished MediaJob deleted after its TTL; Postgres keeps the record');
    } catch (err) {
      if (!isNotFound(err)) throw err;
    }
  }
}

/**
 * A kubectl-applied MediaJob with the gateway's defaults and corrections
 * (format, audio bitrate and codec rules the CRD cannot express); gateway
 * specs (with jobId) are normalised already.
 */
function withDefaults(mj: MediaJob): MediaJob {
  if (mj.spec.jobId) return mj;
  return { ...mj, spec: { ...mj.spec, ...normaliseSpecOptions(mj.spec) } };
}

/** The webhook events a move from `old` to `s.status` announces (spec: Events). */
export function eventsFor(
  old: string, s: MediaJobStatus, row: JobRow, mj: MediaJob,
  urls: { s3Url?: string; subtitleUrl?: string; thumbnailUrl?: string },
): OutboxEvent[] {
  if (old === s.status) return [];
  const base = { job_id: row.id, url: row.url };
  const events: OutboxEvent[] = [];
  const processing = { type: 'job_processing', payload: { type: 'job_processing', ...base, status: 'processing', message: 'The job is being processed' } };
  if (s.status === 'Processing') return [processing];
  if (old === 'Pending' && s.status !== 'Pending') events.push(processing);
  switch (s.status) {
    case 'Completed': {
      const r = s.result!;
      const payload: Record<string, unknown> = {
        type: 'job_completed', ...base, status: 'completed',
        key: r.storageKey, s3_url: urls.s3Url ?? null, folder: mj.spec.folder ?? null,
        title: r.title ?? null, description: r.description ?? null, release_date: r.releaseDate ?? null,
        subtitle_key: r.subtitleKey ?? null, thumbnail_key: r.thumbnailKey ?? null,
      };
      if (r.subtitleKey) payload.subtitle_url = urls.subtitleUrl ?? null;
      if (r.thumbnailKey) payload.thumbnail_url = urls.thumbnailUrl ?? null;
      events.push({ type: 'job_completed', payload });
      break;
    }
    case 'Failed':
      events.push({ type: 'job_failed', payload: { type: 'job_failed', ...base, status: 'failed', error: s.error ?? 'Processing failed' } });
      break;
    case 'Skipped':
      events.push({ type: 'job_skipped', payload: { type: 'job_skipped', ...base, status: 'skipped', reason: s.reason ?? s.error ?? 'skipped' } });
      break;
    default:
      // Warning: a content issue sends no job_failed (spec); Cancelled moves come with cancellation.
      break;
  }
  return events;
}

