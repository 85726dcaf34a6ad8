// The MediaJob controller: informers enqueue "namespace/name" keys, and
// each pass re-reads the caches, derives the status from what exists
// (status.ts), and says when to look again (lib/src/reconcile.ts). The
// concerns live in their own modules: admission.ts (the cap on running
// Jobs), children.ts (credentials Secret and runner Job), pod-index.ts,
// job-record.ts (Postgres and webhooks), ttl.ts (deleting finished jobs).
//
// A failure no retry can mend (a spec the CRD's rules refuse, an
// unresolvable destination, an owner key that does not exist, a runner name
// taken) is thrown as a PermanentError and recorded in one place,
// recordFailure(): the MediaJob ends Failed with the error's reason, like
// any finished job (docs/adr/0010). The spec is checked first of all
// (lib/src/mediajob/spec-check.ts), since the apiserver may not have: a CRD
// installed without its rules, an object stored before a rule existed.
//
// Retries (docs/adr/0018, retry-policy.ts): an attempt that failed of a
// cause another attempt can fix is recorded in status.attempts and the job
// waits Pending until status.retryAt, holding no runner slot and no
// credentials; the pass returns requeueAfter for the wait, so the state
// lives in the status and an operator restart neither loses nor doubles
// it. The next attempt asks for a slot again and runs in a Job of its own
// (job-builder.ts runnerJobName with the attempt), created only once the
// last one has finished.
//
// Cancellation (docs/adr/0013, cancellation.ts): every unfinished MediaJob
// holds a finalizer; spec.cancel, a delete, or a row cancelled through the
// API or the admin CLI (a NOTIFY, or the row refusing a status) make a pass
// record the cancellation if nobody ended the job first, delete the runner
// Job, and finish the MediaJob with the row's status.
import type * as k8s from '@kubernetes/client-node';
import type pg from 'pg';
import { cancelJob, cancelledAmong, findFinishedJob, type FinishedJob } from '@mediajobs/lib/db/jobs';
import { isCancelStatus, type CancelNotice, type CancelStatus } from '@mediajobs/lib/job-cancellation';
import { isNotFound, MERGE_PATCH, waitIfThrottled } from '@mediajobs/lib/kube-client';
import { errFields, type Logger } from '@mediajobs/lib/logger';
import { isErrorCategory } from '@mediajobs/lib/mediajob/error-categories';
import { INVALID_SPEC, invalidSpecMessage, mediaJobSpecProblems } from '@mediajobs/lib/mediajob/spec-check';
import { DONE, PermanentError, TemporaryError, type ReconcileResult } from '@mediajobs/lib/reconcile';
import type { SecretBox } from '@mediajobs/lib/secret-box';
import { WorkQueue } from '@mediajobs/lib/work-queue';
import {
  GROUP, MEDIAJOB_PLURAL, VERSION, jobIdOf, type MediaJob, type MediaJobStatus,
} from '@mediajobs/lib/mediajob/types';
import { Admission, ownerOf } from './admission.js';
import {
  CancelNotices, cancellationWanted, cancelledStatus, hasFinalizer, setFinalizer,
} from './cancellation.js';
import { RunnerChildren } from './children.js';
import { retrySettings, type OperatorConfig } from './config.js';
import { JobDestinations } from './destinations.js';
import type { EventRecorder } from './events.js';
import { MANAGED_BY, currentAttempt, currentJobName } from './job-builder.js';
import { logTransition } from './transition-log.js';
import { PLATFORM_DISABLED, PLATFORM_DISABLED_MESSAGE, PLATFORM_ENV, Platforms } from './platforms.js';
import type { RetrySettings } from './retry-policy.js';
import { JobRecord, type ManagedStorageAccess } from './job-record.js';
import type { OperatorMetrics } from './metrics.js';
import type { KeyAuthor } from '@mediajobs/lib/storage/types';
import type { Kube } from './kube.js';
import type { NamespaceOwners } from './namespace-owners.js';
import { PodIndex } from './pod-index.js';
import {
  WAIT_FOR_POD, deriveStatus, failedBeforeRunning, isTerminal, restoredStatus, rowEndedStatus, statusChanged, statusPatch,
} from './status.js';
import { PgGrantLedger } from '@mediajobs/lib/storage/grant-ledger';
import {
  checkedResult, keyAuthorOf, orphanedFiles, refusedClaims, removeFiles, resultKeys, type RemovalDeps, type StoredRecord,
} from './stored-files.js';
import {
  Announced, admitted, hasWaited, mediaJobRef, mediaJobTransition, runnerJobCreated, type Announcement,
} from './transition-events.js';
import { deleteAfterTtl, finishedTtlSeconds } from './ttl.js';
import { customResourceWatch, resourcePath, ScopedInformer, watches, watchScope, type WatchScope } from './watch-scope.js';

export type { ManagedStorageAccess };

/** The category (and reason) of a job whose runner reported a file it may not have written. */
const OUTPUT_UNVERIFIED = 'output_unverified';

export interface ControllerDeps {
  kube: Kube;
  pool: pg.Pool;
  box: SecretBox;
  storage: ManagedStorageAccess;
  log: Logger;
  cfg: OperatorConfig;
  /** Kubernetes Events at the transitions a person looks for (transition-events.ts). */
  events: EventRecorder;
  /** Who each manifest acts for (namespace-owners.ts). */
  owners: NamespaceOwners;
  metrics?: OperatorMetrics;
}

/** How soon a Job that finished is looked at again when its pod's exit code has not been seen (its event usually comes first). */
const POD_RECHECK_MS = 1000;

const keyOf = (ns: string | undefined, name: string | undefined) => `${ns}/${name}`;

/** How long a job waiting for its next attempt still waits (status.retryAt); 0 when it waits no more. */
function retryWaitMs(mj: MediaJob, now: number): number {
  const at = mj.status?.retryAt ? Date.parse(mj.status.retryAt) : NaN;
  return Number.isFinite(at) ? Math.max(0, at - now) : 0;
}

/** The runner container's env of a Job, by name: what the operator gave the attempt (its platform, proxy, cookie file). */
function runnerEnv(job: k8s.V1Job | undefined): Record<string, string> {
  const env = job?.spec?.template?.spec?.containers?.[0]?.env ?? [];
  return Object.fromEntries(env.flatMap((e) => (e.value === undefined ? [] : [[e.name, e.value]])));
}

/** A MediaJob's place in its key's line. */
const createdAtOf = (mj: MediaJob) => Date.parse(mj.metadata.creationTimestamp ?? '') || Date.now();

export class MediaJobController {
  readonly queue: WorkQueue;
  private readonly scope: WatchScope;
  private readonly mediajobs: ScopedInformer<MediaJob & k8s.KubernetesObject>;
  private readonly jobs: ScopedInformer<k8s.V1Job>;
  private readonly pods: ScopedInformer<k8s.V1Pod>;
  private readonly podIndex = new PodIndex();
  private readonly admission: Admission;
  private readonly destinations: JobDestinations;
  private readonly children: RunnerChildren;
  private readonly record: JobRecord;
  /** What removing a job's files needs (stored-files.ts). */
  private readonly removal: RemovalDeps;
  private readonly notices: CancelNotices;
  /** MediaJob keys whose row was cancelled (API, admin CLI), with the status it got. */
  private readonly cancelled = new Map<string, CancelStatus>();
  /** Transitions announced as Events, per MediaJob key. */
  private readonly announced = new Announced();
  /**
   * Per MediaJob key, the last attempt whose runner phases were observed
   * (mediajobs_runner_phase_seconds): a pass over a cache that lags the
   * write it made records the same attempt again, and must not observe it
   * again. Dropped when the MediaJob goes.
   */
  private readonly phasesObserved = new Map<string, number>();
  /** Keys each MediaJob's runner claimed and was refused, recorded once each (claimRefused). Dropped when the MediaJob goes. */
  private readonly claimsRefused = new Map<string, Set<string>>();
  private readonly retry: RetrySettings;
  /** On managed S3, what the upload grants stored (stored-files.ts resultAsStored). */
  private readonly ledger: StoredRecord | undefined;
  /** MediaPlatforms and ProxyPools: per-platform admission, each attempt's route, breaker and health (docs/adr/0027). */
  private readonly platforms: Platforms;
  private active = false;

  constructor(private readonly d: ControllerDeps) {
    const { kube, cfg, log } = d;
    this.retry = retrySettings(cfg);
    this.ledger = cfg.MANAGED_STORAGE === 's3' ? new PgGrantLedger(d.pool) : undefined;
    this.destinations = new JobDestinations(kube.core, d.pool, d.box, (jobId, apiKeyId) => d.storage.destination(jobId, apiKeyId), cfg);
    this.children = new RunnerChildren({
      kube, cfg, destinations: this.destinations, log,
      onJobCreated: (mj, job) => this.announce(keyOf(mj.metadata.namespace, mj.metadata.name), mj, [runnerJobCreated(job.metadata!.name!)]),
    });
    this.removal = {
      core: kube.core, cfg, log, authorOf: (mj) => this.authorOf(mj), onRefused: (mj, keys, where) => this.claimRefused(mj, keys, where),
      ...(this.ledger && { ledger: this.ledger }),
    };
    this.record = new JobRecord({
      pool: d.pool, box: d.box, storage: d.storage, destinations: this.destinations, log, ...(d.metrics && { metrics: d.metrics }),
    });
    this.queue = new WorkQueue((key) => this.reconcile(key).catch((err: unknown) => {
      throw waitIfThrottled(err);
    }), {
      concurrency: cfg.RECONCILE_CONCURRENCY,
      retryBaseMs: 500,
      retryMaxMs: 60_000,
      // A TemporaryError (a throttling API server, an object in the way that went) passes by itself: no warning each time.
      onError: (key, err) => {
        if (err instanceof TemporaryError) log.info({ mediajob: key, err: errFields(err) }, 'reconcile must wait; will retry');
        else log.warn({ mediajob: key, err: errFields(err) }, 'reconcile failed; will retry');
      },
      onPermanent: (key, err) => this.recordFailure(key, err),
      ...(d.metrics && { metrics: d.metrics.workQueue('mediajobs', () => this.queue.inFlightSince()) }),
    });
    this.admission = new Admission(
      { maxRunning: cfg.MAX_RUNNING_JOBS, perKey: cfg.MAX_RUNNING_PER_KEY, perOrg: cfg.MAX_RUNNING_PER_ORG },
      (key) => this.queue.add(key),
      d.metrics && ((createdAt) => d.metrics!.admitted(createdAt)),
    );
    d.metrics?.watchAdmission(() => this.admission.counts(), cfg.MAX_RUNNING_JOBS);
    this.notices = new CancelNotices(d.pool, log, (n) => this.onCancelNotice(n), () => void this.catchUpCancelled());
    const common = {
      ...(d.metrics && { metrics: d.metrics }),
      kc: kube.kc, resyncMs: cfg.RESYNC_SECONDS * 1000, watchdogMs: cfg.WATCHDOG_SECONDS * 1000, relistMs: cfg.RELIST_SECONDS * 1000, log,
    };
    const { onResync: _r, ...settings } = { ...common, onResync: undefined };
    this.platforms = new Platforms({ kube, log, events: d.events, ...(d.metrics && { metrics: d.metrics }), settings, wake: (key) => this.queue.add(key) });
    const scope = watchScope(cfg);
    this.scope = scope;
    this.mediajobs = new ScopedInformer(scope, (ns) => ({
      ...common,
      name: 'mediajobs',
      ...customResourceWatch(kube.custom, MEDIAJOB_PLURAL, ns),
      onChange: (mj) => this.enqueue(keyOf(mj.metadata?.namespace, mj.metadata?.name)),
      onResync: () => this.enqueueAll(),
    }));
    const labelSelector = `app.kubernetes.io/managed-by=${MANAGED_BY}`;
    const owner = (o: k8s.V1Job | k8s.V1Pod) => o.metadata?.labels?.['mediajobs.io/mediajob'];
    this.jobs = new ScopedInformer<k8s.V1Job>(scope, (ns) => ({
      ...common,
      name: 'jobs',
      path: resourcePath('/apis/batch/v1', 'jobs', ns),
      labelSelector,
      list: () => (ns === undefined ? kube.batch.listJobForAllNamespaces({ labelSelector }) : kube.batch.listNamespacedJob({ namespace: ns, labelSelector })),
      onChange: (job, type) => {
        if (type === 'delete') this.children.jobDeleted(job);
        this.enqueue(keyOf(job.metadata?.namespace, owner(job)));
      },
    }));
    this.pods = new ScopedInformer<k8s.V1Pod>(scope, (ns) => ({
      ...common,
      name: 'pods',
      path: resourcePath('/api/v1', 'pods', ns),
      labelSelector,
      list: () => (ns === undefined ? kube.core.listPodForAllNamespaces({ labelSelector }) : kube.core.listNamespacedPod({ namespace: ns, labelSelector })),
      onChange: (pod, type) => {
        this.podIndex.update(pod, type === 'delete');
        this.enqueue(keyOf(pod.metadata?.namespace, owner(pod)));
      },
      onResync: () => this.podIndex.rebuild(this.pods.list()),
    }));
  }

  /** Start the informers; caches are warm (listed) when this resolves. */
  async startInformers(): Promise<void> {
    await Promise.all([this.mediajobs.start(), this.jobs.start(), this.pods.start(), this.platforms.start()]);
    this.podIndex.rebuild(this.pods.list());
  }

  async stopInformers(): Promise<void> {
    await Promise.all([this.mediajobs.stop(), this.jobs.stop(), this.pods.stop(), this.platforms.stop()]);
  }

  /** The informers whose cache does not follow the API server now (the operator's readiness, probes.ts). */
  informersNotFollowing(): string[] {
    return [
      ...Object.entries({ mediajobs: this.mediajobs, jobs: this.jobs, pods: this.pods }).filter(([, i]) => !i.following()).map(([name]) => name),
      ...this.platforms.informersNotFollowing(),
    ];
  }

  /**
   * Begin reconciling (on becoming leader): rebuild the slot counts (in all, per key, per organization) from the caches,
   * then pass over everything. A job holds a slot when its current attempt's Job exists or its status names it; one
   * waiting for its next attempt names the last attempt's, and holds none.
   */
  activate(): void {
    const holding = this.mediajobs.list()
      .filter((mj) => !isTerminal(mj.status?.status)
        && (mj.status?.jobName === currentJobName(mj) || this.jobs.get(currentJobName(mj), mj.metadata.namespace)))
      .flatMap((mj) => {
        // One whose owner is not settled holds nothing: it fails on its next pass.
        const owned = this.d.owners.settled(mj);
        const platform = this.platforms.platformOf(mj);
        return owned ? [[keyOf(mj.metadata.namespace, mj.metadata.name), ownerOf(owned), platform ? this.platforms.admission(platform) : undefined] as const] : [];
      });
    this.admission.reset(holding);
    this.active = true;
    this.platforms.activate();
    this.enqueueAll();
    // Cancellations committed while no one was listening are read once the channel is heard.
    void this.notices.start().then(() => this.catchUpCancelled());
  }

  /** A graceful stop while leading: the platform and pool status writes still waiting for their interval go now. */
  flushStatuses(): Promise<void> {
    return this.platforms.flush();
  }

  deactivate(): void {
    this.active = false;
    this.platforms.deactivate();
    this.cancelled.clear();
    void this.notices.stop();
  }

  /** Stop reconciling; resolves when the reconciles in flight have ended (they hold Postgres clients). */
  async stop(): Promise<void> {
    this.active = false;
    await this.notices.stop();
    await this.queue.stop();
  }

  private onCancelNotice(n: CancelNotice): void {
    if (!watches(this.scope, n.namespace)) return;
    const key = keyOf(n.namespace, n.name);
    this.cancelled.set(key, n.status);
    this.enqueue(key);
  }

  /** Which unfinished MediaJobs' rows say cancelled: on taking the lead, and after a lost LISTEN connection. */
  private async catchUpCancelled(): Promise<void> {
    if (!this.active) return;
    const open = this.mediajobs.list().filter((mj) => !isTerminal(mj.status?.status));
    try {
      const found = await cancelledAmong(this.d.pool, open.map((mj) => jobIdOf(mj)));
      for (const mj of open) {
        const status = found.get(jobIdOf(mj));
        if (status) this.onCancelNotice({ jobId: jobIdOf(mj), namespace: mj.metadata.namespace!, name: mj.metadata.name!, status });
      }
    } catch (err) {
      this.d.log.warn({ err: errFields(err) }, 'reading cancelled jobs failed; their runners stop on their next status');
    }
  }

  private enqueue(key: string): void {
    if (this.active && !key.endsWith('/undefined')) this.queue.add(key);
  }

  private enqueueAll(): void {
    for (const mj of this.mediajobs.list()) this.enqueue(keyOf(mj.metadata.namespace, mj.metadata.name));
  }

  /** The MediaJob cache, for the materializer. */
  hasMediaJob(namespace: string, name: string): boolean {
    return !!this.mediajobs.get(name, namespace);
  }

  // ---- one pass ------------------------------------------------------------

  /** One pass over a MediaJob: read the caches, act, and say when to look again. */
  async reconcile(key: string): Promise<ReconcileResult> {
    const found = this.current(key);
    if (!found) return DONE;
    // The runner patches status.tools itself; each pass after its patch sees them (mediajobs_runner_tool_info).
    this.d.metrics?.runnerTools(found.status);
    if (found.metadata.deletionTimestamp) return this.deleted(key, found);
    const invalid = await this.checkSpec(key, found);
    if (invalid) return invalid;
    // A finished job keeps what it was: a binding changed since does not fail it again.
    if (isTerminal(found.status?.status) && !this.d.owners.settled(found)) return this.finish(key, found, found.status!);
    const mj = this.d.owners.resolve(found);
    const earlier = await this.record.ensureRecorded(key, mj);
    if (earlier) return this.restore(key, mj, earlier);
    if (isTerminal(mj.status?.status)) return this.finish(key, mj, mj.status!);
    const cancelled = await this.cancelIfWanted(key, mj);
    if (cancelled) return cancelled;
    if (!hasFinalizer(mj)) await setFinalizer(this.d.kube.custom, mj, true);

    const ns = mj.metadata.namespace!;
    const jobName = currentJobName(mj);
    const cached = this.jobs.get(jobName, ns);
    const wait = cached ? 0 : retryWaitMs(mj, Date.now());
    if (wait > 0) return this.awaitRetry(key, mj, wait);
    // A platform's switch refuses jobs that never ran; one running or between attempts goes on (docs/adr/0027).
    const platform = this.platforms.platformOf(mj);
    if (platform && !mj.status?.jobName && !cached && this.platforms.disabled(platform)) throw new PermanentError(PLATFORM_DISABLED, PLATFORM_DISABLED_MESSAGE);
    const asked = cached || this.admission.has(key)
      ? undefined : this.admission.admit(key, ownerOf(mj), createdAtOf(mj), platform ? this.platforms.admission(platform) : undefined);
    if (asked && !asked.admitted) {
      const waiting = { reason: asked.waitingFor, limit: asked.limit };
      await this.writeStatus(key, mj, deriveStatus({ mj, admitted: false, waiting, jobName }, new Date()) as MediaJobStatus);
      // Level-triggered safety net: a waiting job looks at the free slots again
      // soon even if a wake-up was lost (a release while this pass was in flight).
      return { requeueAfter: this.d.cfg.ADMISSION_RECHECK_SECONDS * 1000 };
    }
    if (!cached && mj.status?.jobName !== jobName) this.announce(key, mj, [admitted(jobName, hasWaited(mj.status))]);
    // A Job this made that the cache has not shown yet is not made again (its status write woke this pass first).
    const made = cached ? this.children.owned(cached, mj) : this.children.created(mj);
    const route = platform && !made ? await this.platforms.route(mj, platform, currentAttempt(mj)) : undefined;
    const job = made ?? await this.children.ensure(mj, route);
    const env = runnerEnv(job);
    const retry = env[PLATFORM_ENV.platform] ? { ...this.retry, newSessionReady: this.platforms.newSessionReady(env[PLATFORM_ENV.platform], env[PLATFORM_ENV.proxy]) } : this.retry;
    const desired = deriveStatus({
      mj, job, pod: this.podIndex.latest(ns, jobName), podsFollowingSince: this.pods.followingSince(ns) ?? 'down', admitted: true, jobName, retry,
    }, new Date());
    if (desired === WAIT_FOR_POD) return { requeueAfter: POD_RECHECK_MS };
    const written = await this.writeStatus(key, mj, desired);
    if (isTerminal(written.status)) return this.finish(key, mj, written);
    if (written.retryAt) return this.awaitRetry(key, mj, Math.max(0, Date.parse(written.retryAt) - Date.now()));
    return DONE;
  }

  /**
   * A spec the CRD's rules refuse, which reached the operator because the
   * apiserver did not apply them: the job fails invalid_spec, naming the
   * fields, before anything is recorded, admitted or run, and its row (a
   * job the gateway accepted has one) fails with it. Checked until the job
   * is admitted (status.jobName): the CRD freezes an admitted job's spec, and
   * a later attempt's runner checks the options again. A finished job keeps
   * what it was (undefined: the spec is fine, go on).
   */
  private async checkSpec(key: string, mj: MediaJob): Promise<ReconcileResult | undefined> {
    if (mj.status?.jobName) return undefined;
    const problems = mediaJobSpecProblems(mj.spec);
    if (!problems.length) return undefined;
    if (isTerminal(mj.status?.status)) return this.finish(key, mj, mj.status!);
    await this.record.attachExisting(key, mj);
    throw new PermanentError(INVALID_SPEC, invalidSpecMessage(problems));
  }

  /**
   * A job waiting for its next attempt: its slot goes to others, its
   * credentials go (the next attempt gets them afresh, with an upload grant
   * that has not run out), and the pass looks again when the wait is over.
   */
  private async awaitRetry(key: string, mj: MediaJob, waitMs: number): Promise<ReconcileResult> {
    this.admission.release(key);
    await this.children.removeCredentials(mj);
    return { requeueAfter: Math.max(waitMs, 1) };
  }

  /**
   * spec.cancel, or a row cancelled through the API or the admin CLI: record
   * CancelledByAdmin unless the row ended first, then follow the row. A job
   * that ended otherwise first (Completed…) goes on as any job: undefined.
   */
  private async cancelIfWanted(key: string, mj: MediaJob): Promise<ReconcileResult | undefined> {
    const wanted = cancellationWanted(mj, this.cancelled.get(key));
    if (!wanted) return undefined;
    let status: string = wanted;
    if (!this.cancelled.has(key)) {
      const r = await cancelJob(this.d.pool, jobIdOf(mj), wanted);
      if (r.outcome === 'finished') status = r.status;
      if (r.outcome === 'cancelled') this.d.metrics?.jobCancelled(wanted);
    }
    if (!isCancelStatus(status)) return undefined;
    return this.followCancelled(key, mj, status);
  }

  /** The row says cancelled: stop the runner, give the MediaJob the row's status, finish it. */
  private async followCancelled(key: string, mj: MediaJob, status: CancelStatus): Promise<ReconcileResult> {
    return this.finish(key, mj, await this.stopCancelled(key, mj, status));
  }

  /** Delete the runner Job of a cancelled job and write the MediaJob's cancelled status; returns that status. */
  private async stopCancelled(key: string, mj: MediaJob, status: CancelStatus): Promise<MediaJobStatus> {
    this.cancelled.set(key, status);
    await this.children.removeRunner(this.jobs.get(currentJobName(mj), mj.metadata.namespace), mj);
    const s = cancelledStatus(mj, status, new Date());
    await this.patchStatus(mj, s);
    return s;
  }

  /**
   * A MediaJob being deleted while it holds the finalizer: an unfinished one
   * is cancelled (CancelledByAdmin, unless the row ended first) and its
   * runner stopped before the finalizer goes, so the row never stays
   * Pending or Processing and the materializer has nothing to re-create.
   */
  private async deleted(key: string, mj: MediaJob): Promise<ReconcileResult> {
    if (!isTerminal(mj.status?.status)) {
      if (!this.cancelled.has(key) && (await cancelJob(this.d.pool, jobIdOf(mj), 'CancelledByAdmin')).outcome === 'cancelled') {
        this.d.metrics?.jobCancelled('CancelledByAdmin');
      }
      await this.children.removeRunner(this.jobs.get(currentJobName(mj), mj.metadata.namespace), mj);
      this.announce(key, mj, [{ type: 'Normal', reason: 'Cancelled', message: 'Deleted before it finished: the job was cancelled' }]);
      logTransition(this.d.log, this.announced, key, mj, { ...mj.status, status: 'CancelledByAdmin' });
    }
    this.admission.release(key);
    this.platforms.forget(mj);
    await setFinalizer(this.d.kube.custom, mj, false);
    this.record.forget(key);
    this.announced.forget(key);
    this.phasesObserved.delete(key);
    this.claimsRefused.delete(key);
    this.cancelled.delete(key);
    return DONE;
  }

  /**
   * The one place a permanent failure is recorded on the MediaJob: status
   * Failed with the error's reason and message (Succeeded=False), the row
   * and its job_failed webhook, then clean-up like any finished job. A
   * MediaJob that already records this failure keeps its finish time, so
   * passing over it again writes nothing and its TTL does not move.
   */
  private async recordFailure(key: string, err: PermanentError): Promise<ReconcileResult> {
    const mj = this.current(key);
    if (!mj) return DONE;
    const jobId = jobIdOf(mj);
    const cur = mj.status;
    const recorded = cur?.status === 'Failed' && cur.reason === err.reason && cur.finishTime ? { finishTime: cur.finishTime } : {};
    // A reason that is an error category (invalid_spec, storage_unreachable) is the failure's category too, as a runner reports it.
    const category = isErrorCategory(err.reason) ? { category: err.reason } : {};
    const failed = failedBeforeRunning(mj, { jobId, reason: err.reason, error: err.message, ...category, ...recorded }, new Date());
    // The job's end is said once, by logTransition; this is the error behind it.
    if (!('finishTime' in recorded)) this.d.log.debug({ jobId, reason: err.reason, err: errFields(err.cause ?? err) }, 'job failed; retrying cannot help');
    return this.finish(key, mj, await this.writeStatus(key, mj, failed));
  }

  /** The MediaJob to act on; undefined when not leading, or when it is gone or going (its bookkeeping then goes too). */
  private current(key: string): MediaJob | undefined {
    if (!this.active) return undefined;
    const [ns, name] = key.split('/') as [string, string];
    const mj = this.mediajobs.get(name, ns);
    // One being deleted is still acted on while it holds the finalizer (cancelled first, then let go).
    if (mj && (!mj.metadata.deletionTimestamp || hasFinalizer(mj))) return mj;
    this.admission.release(key);
    this.record.forget(key);
    this.announced.forget(key);
    this.phasesObserved.delete(key);
    this.claimsRefused.delete(key);
    this.cancelled.delete(key);
    return undefined;
  }

  /**
   * Mirror into the row first (it decides who won, ADR 0013), then the
   * MediaJob. A row cancelled meanwhile wins: a completion's files are
   * removed and the MediaJob gets the cancelled status. A row that ended
   * otherwise first wins too: the MediaJob gets the row's outcome (and
   * keeps the files it names), not the pass's. Returns the status written.
   */
  private async writeStatus(key: string, mj: MediaJob, reported: MediaJobStatus): Promise<MediaJobStatus> {
    const desired = await this.checkClaims(mj, reported);
    const row = await this.record.sync(key, mj, desired);
    if (isCancelStatus(row)) {
      await this.removeLateFiles(mj, desired.result);
      return this.stopCancelled(key, mj, row);
    }
    const ended = row && await findFinishedJob(this.d.pool, jobIdOf(mj));
    const written = ended ? rowEndedStatus(mj, ended, new Date()) : desired;
    await this.patchStatus(mj, written);
    return written;
  }

  /**
   * What a runner reports is a claim (issue 35 item 1): a result naming a
   * file its job may not have written (stored-files.ts refusedClaims) is
   * never recorded or signed. The job fails output_unverified instead,
   * without the result and the stored files: those it may have written are
   * removed as any failed attempt's (patchStatus), the others left alone.
   */
  private async checkClaims(mj: MediaJob, desired: MediaJobStatus): Promise<MediaJobStatus> {
    const keys = resultKeys(desired.result);
    let refused = keys.length ? refusedClaims(this.authorOf(mj), keys) : [];
    if (!refused.length && keys.length) {
      // The storage says who stored each key and how big it is (the grant ledger on managed S3, else each object's metadata): sizes from it, never from the runner.
      const stored = await checkedResult(this.removal, mj, desired.result!, () => findFinishedJob(this.d.pool, jobIdOf(mj)));
      if (!('refused' in stored)) return stored.result === desired.result ? desired : { ...desired, result: stored.result };
      refused = stored.refused;
    }
    if (!refused.length) return desired;
    this.claimRefused(mj, refused, 'status.result');
    const failed = failedBeforeRunning(mj, {
      jobId: jobIdOf(mj), reason: OUTPUT_UNVERIFIED, error: 'the runner reported a file it did not store', category: OUTPUT_UNVERIFIED,
    }, new Date());
    const { result: _r, storedFiles: _s, progress: _p, ...rest } = failed;
    return rest;
  }

  /**
   * The job as the author of its keys: its owner settled (a bound
   * namespace's key), on managed storage the prefix of the document its
   * runner was given.
   */
  private authorOf(mj: MediaJob): KeyAuthor {
    const owned = this.d.owners.settled(mj);
    return keyAuthorOf(owned ?? mj, () => {
      if (!owned) return undefined;
      const prefix = this.d.storage.destination(jobIdOf(owned), owned.spec.owner.apiKeyId).folder_prefix;
      return typeof prefix === 'string' && prefix ? prefix : undefined;
    });
  }

  /** A runner's claim refused: a Warning Event and the counter, once per key and MediaJob (a key is refused again by each pass that sees it). */
  private claimRefused(mj: MediaJob, keys: string[], where: string): void {
    const key = keyOf(mj.metadata.namespace, mj.metadata.name);
    const seen = this.claimsRefused.get(key) ?? new Set<string>();
    const fresh = keys.filter((k) => !seen.has(k));
    if (!fresh.length) return;
    for (const k of fresh) seen.add(k);
    this.claimsRefused.set(key, seen);
    this.d.log.warn({ jobId: jobIdOf(mj), where, refused: fresh.length }, 'the runner reported a file it did not store: not acted on');
    this.d.metrics?.runnerClaimRefused();
    this.d.events.event(mediaJobRef(mj), 'Warning', 'FileClaimRefused',
      `The runner reported ${fresh.length === 1 ? 'a file' : `${fresh.length} files`} it did not store (${where}): not deleted, signed or recorded`);
  }

  /**
   * Files a runner reported after its job was cancelled (the row won):
   * nobody is told of them, so they go (stored-files.ts). Reported as the
   * status's result, or in the Completed derived from its termination message.
   */
  private async removeLateFiles(mj: MediaJob, result: MediaJobStatus['result']): Promise<void> {
    await removeFiles(this.removal, mj, resultKeys(result ?? mj.status?.result), 'a completion that lost to a cancellation');
  }

  /**
   * The same manifest applied again after its finished MediaJob went: the
   * earlier run's record answers, nothing runs, no webhook is sent again
   * (docs/gitops.md).
   */
  private async restore(key: string, mj: MediaJob, earlier: FinishedJob): Promise<ReconcileResult> {
    const s = restoredStatus(mj, earlier, new Date());
    await this.patchStatus(mj, s, [{
      type: 'Normal', reason: 'Restored', message: `The same manifest finished before as job ${earlier.id} (${earlier.status}): restored from its record, not run again`,
    }]);
    return this.finish(key, { ...mj, status: s }, s);
  }

  /**
   * Write `desired` as a merge patch, announce the transition, and delete
   * the stored files the write left without an owner (stored-files.ts),
   * only once the write is through.
   */
  private async patchStatus(mj: MediaJob, desired: MediaJobStatus, announcements = mediaJobTransition(mj.status, desired)): Promise<void> {
    if (!statusChanged(mj.status, desired)) return;
    const orphans = orphanedFiles(mj.status, desired);
    // A cancelled job's result goes even when the cache has not seen it yet (a late report).
    const status = { ...statusPatch(mj.status, desired), ...(isCancelStatus(desired.status) && { result: null }) };
    try {
      await this.d.kube.custom.patchNamespacedCustomObjectStatus({
        group: GROUP, version: VERSION, namespace: mj.metadata.namespace!, plural: MEDIAJOB_PLURAL, name: mj.metadata.name!,
        body: { status },
      }, MERGE_PATCH);
    } catch (err) {
      if (isNotFound(err)) return;
      throw err;
    }
    const key = keyOf(mj.metadata.namespace, mj.metadata.name);
    this.announce(key, mj, announcements);
    logTransition(this.d.log, this.announced, key, mj, desired);
    this.observeEndedAttempts(key, mj.status, desired);
    this.platformAttemptsEnded(key, mj, desired);
    await removeFiles(this.removal, mj, orphans, 'stored by an attempt that ended without naming them');
  }

  /**
   * The runner phases of each attempt a status write just recorded as ended
   * (status.attempts): once per attempt, retried ones included, since each
   * ran its phases (docs/metrics.md). Written, not derived: a write that
   * failed is tried again by the next pass, which observes then.
   */
  /** Each attempt a status write just recorded as ended, told to its platform once (a defence to answer, a success to count). */
  private platformAttemptsEnded(key: string, mj: MediaJob, written: MediaJobStatus): void {
    const known = new Set((mj.status?.attempts ?? []).map((a) => a.attempt));
    for (const a of written.attempts ?? []) {
      if (!known.has(a.attempt)) this.platforms.attemptEnded(key, mj, a, runnerEnv(this.jobs.get(a.jobName, mj.metadata.namespace)));
    }
  }

  private observeEndedAttempts(key: string, before: MediaJobStatus | undefined, written: MediaJobStatus): void {
    if (!this.d.metrics) return;
    const known = new Set((before?.attempts ?? []).map((a) => a.attempt));
    let last = this.phasesObserved.get(key) ?? 0;
    for (const a of written.attempts ?? []) {
      if (known.has(a.attempt) || a.attempt <= last) continue;
      if (a.phaseSeconds) this.d.metrics.runnerPhases(a.phaseSeconds);
      last = a.attempt;
    }
    if (last) this.phasesObserved.set(key, last);
  }

  /** Record the Events of a transition not announced yet (queued: never delays or fails the pass). */
  private announce(key: string, mj: MediaJob, list: Announcement[]): void {
    for (const a of this.announced.fresh(key, list)) this.d.events.event(mediaJobRef(mj), a.type, a.reason, a.message);
  }

  /** A finished MediaJob: free its slot, drop its credentials, and delete it after the TTL. */
  private async finish(key: string, mj: MediaJob, ended: MediaJobStatus): Promise<ReconcileResult> {
    // An end written straight into the status (a runner's token may patch it) is a claim like any report.
    const checked = isCancelStatus(ended.status) || ended.restoredTime ? ended : await this.checkClaims(mj, ended);
    const s = checked === ended ? ended : await this.writeStatus(key, mj, checked);
    this.admission.release(key);
    this.cancelled.delete(key);
    if (isCancelStatus(s.status)) {
      // The row has it already (followCancelled); a result or a stored file the runner reported since is a late one.
      if (mj.status?.result || mj.status?.storedFiles) {
        await this.removeLateFiles(mj, mj.status.result);
        await this.patchStatus(mj, cancelledStatus(mj, s.status, new Date()));
      }
    } else if (!s.restoredTime) {
      // A restored job's row is the one that finished before: nothing to mirror.
      await this.record.sync(key, mj, s);
    }
    await this.children.removeCredentials(mj);
    if (mj.spec.destination?.type === 'inline') await this.destinations.forgetInline(mj);
    // Finished: a delete has nothing left to cancel, and the TTL's delete must not wait.
    if (hasFinalizer(mj)) await setFinalizer(this.d.kube.custom, mj, false);
    const ttl = finishedTtlSeconds(mj, this.d.cfg.FINISHED_MEDIAJOB_TTL_SECONDS);
    return ttl === undefined ? DONE : deleteAfterTtl(this.d.kube.custom, mj, s.restoredTime ?? s.finishTime, ttl, this.d.log);
  }
}
