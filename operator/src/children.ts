// What a MediaJob owns in the cluster: its runner's identity (a
// ServiceAccount, Role and RoleBinding: docs/adr/0021), its credentials
// Secret and its runner Job (built by job-builder.ts). Creates what is missing, and checks
// that what it finds under those deterministic names is controlled by this
// MediaJob (an ownerReference with controller=true and the MediaJob's uid,
// as kubernetes/sample-controller's metav1.IsControlledBy): a Job or Secret
// of someone else's is never taken over, and the MediaJob fails instead
// (retrying cannot make the name free). Deciding when to create is the
// controller's (admission); the Secret goes again when the job finishes.
import type * as k8s from '@kubernetes/client-node';
import { isAlreadyExists, isConflict, isNotFound } from '@mediajobs/lib/kube-client';
import type { Logger } from '@mediajobs/lib/logger';
import { PermanentError, TemporaryError } from '@mediajobs/lib/reconcile';
import { jobIdOf, type MediaJob, type Owned } from '@mediajobs/lib/mediajob/types';
import type { OperatorConfig } from './config.js';
import { DestinationUnresolvable, STORAGE_UNREACHABLE_MESSAGE, type JobDestinations } from './destinations.js';
import {
  buildCredentialsSecret, buildRunnerIdentity, buildRunnerJob, credentialsSecretName, currentAttempt, currentJobName, runnerIdentityName,
} from './job-builder.js';
import { withDefaults } from './job-record.js';
import type { Kube } from './kube.js';
import type { PlatformRoute } from './platforms.js';

/** The reason a MediaJob fails with when its runner Job's or Secret's name is taken by an object it does not control. */
export const NAME_TAKEN_REASON = 'runner_name_taken';

export interface ChildrenDeps {
  kube: Pick<Kube, 'core' | 'batch' | 'rbac'>;
  cfg: Pick<OperatorConfig, 'RUNNER_ENV' | 'RUNNER_IMAGE' | 'JOB_BACKOFF_LIMIT' | 'JOB_ACTIVE_DEADLINE_SECONDS' | 'JOB_TTL_SECONDS_AFTER_FINISHED'
    | 'RUNNER_SERVICE_ACCOUNT' | 'RUNNER_RESOURCES' | 'OUTBOUND_ALLOWED_CIDRS' | 'OUTBOUND_ALLOW_PRIVATE'>;
  destinations: Pick<JobDestinations, 'document' | 'runnerEnv'>;
  log: Logger;
  /** Told of each runner Job this created (not of one found made already): the controller records its Event. */
  onJobCreated?: (mj: MediaJob, job: k8s.V1Job) => void;
}

/** True when `obj` names `mj` as its controller (metav1.IsControlledBy). */
export function isControlledBy(obj: k8s.KubernetesObject, mj: MediaJob): boolean {
  const uid = mj.metadata.uid;
  return !!uid && (obj.metadata?.ownerReferences ?? []).some((r) => r.controller === true && r.uid === uid);
}

/**
 * Wait for every one of `work`, then throw the first failure in the list's
 * order, preferring a PermanentError (a name taken ends the job; a
 * transient failure of another create must not hide it behind retries).
 */
async function settleAll(work: Promise<void>[]): Promise<void> {
  const failures = (await Promise.allSettled(work)).flatMap((r) => (r.status === 'rejected' ? [r.reason as unknown] : []));
  if (failures.length) throw failures.find((e) => e instanceof PermanentError) ?? failures[0];
}

function nameTaken(kind: string, name: string): PermanentError {
  return new PermanentError(NAME_TAKEN_REASON, `A ${kind} named ${name} already exists and is not controlled by this MediaJob`);
}

/** MediaJobs whose creates are remembered at most: ones deleted between their first pass and their Job leave their entry. */
const REMEMBERED_MAX = 10_000;
/**
 * How long a runner Job this created stands in for the Job cache: a cache
 * that has not shown it by then is taken to have missed it, and the next
 * pass creates again (AlreadyExists, read back) as it did before.
 */
const CREATED_JOB_TRUST_MS = 30_000;

export class RunnerChildren {
  /**
   * By MediaJob uid, the objects ("Kind/name") an earlier pass made, or found
   * its own, while its runner Job does not exist yet: a pass after a failure
   * (a 429 from a throttling API server, say) creates only what is missing,
   * instead of spending a write on each AlreadyExists again. Forgotten once
   * the Job exists, when the job fails, and when its Secret is removed.
   */
  private readonly made = new Map<string, Set<string>>();
  /**
   * By MediaJob uid, the runner Job this created, until the Job cache shows
   * it (owned()): the status write that follows the create wakes the next
   * pass, often before the Job's own watch event has come, and that pass
   * would otherwise send every create again, each answered AlreadyExists
   * and read back (ten requests for nothing, at every job under load).
   */
  private readonly createdJobs = new Map<string, { job: k8s.V1Job; at: number }>();

  constructor(private readonly d: ChildrenDeps) {}

  /**
   * The runner Job of the MediaJob's current attempt, created (with its Secret first) when missing.
   * Throws PermanentError when the destination cannot be resolved
   * (storage_unreachable) or a name is taken (NAME_TAKEN_REASON). `route`:
   * the attempt's way through its platform (platforms.ts): its secrets go
   * into the Secret, its facts into the runner's env.
   */
  async ensure(mj: Owned<MediaJob>, route?: PlatformRoute): Promise<k8s.V1Job> {
    // Resolved first: a destination that cannot be is the job's end, before anything is created for it.
    const document = await this.destinationDocument(mj);
    // The identity's three objects and the Secret do not refer to one another: made at once, they cost one
    // round trip instead of four. The Job comes after them all, so its pod never waits for its account or Secret.
    try {
      await settleAll([
        ...(this.d.cfg.RUNNER_SERVICE_ACCOUNT ? [] : this.ensureIdentity(mj)),
        this.ensureSecret(mj, document, route?.secretData),
      ]);
      const job = await this.ensureJob(mj, route?.env);
      this.made.delete(mj.metadata.uid!);
      return job;
    } catch (err) {
      if (err instanceof PermanentError) this.made.delete(mj.metadata.uid!);
      throw err;
    }
  }

  /**
   * The runner's own ServiceAccount, Role and RoleBinding (docs/adr/0021),
   * unless RUNNER_SERVICE_ACCOUNT names a shared one. Each is created when
   * missing and must be this MediaJob's when found: a Role of someone
   * else's under that name could grant the runner anything.
   */
  private ensureIdentity(mj: MediaJob): Promise<void>[] {
    const { core, rbac } = this.d.kube;
    const namespace = mj.metadata.namespace!;
    const id = buildRunnerIdentity(mj);
    const name = runnerIdentityName(mj);
    return [
      this.ensureOwned(mj, 'ServiceAccount', name, () => core.createNamespacedServiceAccount({ namespace, body: id.serviceAccount }),
        () => core.readNamespacedServiceAccount({ name, namespace })),
      this.ensureOwned(mj, 'Role', name, () => rbac.createNamespacedRole({ namespace, body: id.role }),
        () => rbac.readNamespacedRole({ name, namespace })),
      this.ensureOwned(mj, 'RoleBinding', name, () => rbac.createNamespacedRoleBinding({ namespace, body: id.roleBinding }),
        () => rbac.readNamespacedRoleBinding({ name, namespace })),
    ];
  }

  /**
   * Create an object (unless an earlier pass did); when its name is taken,
   * what is there must be controlled by this MediaJob.
   */
  private async ensureOwned(mj: MediaJob, kind: string, name: string, create: () => Promise<unknown>, read: () => Promise<k8s.KubernetesObject>): Promise<void> {
    const what = `${kind}/${name}`;
    if (this.made.get(mj.metadata.uid!)?.has(what)) return;
    try {
      await create();
    } catch (err) {
      if (!isAlreadyExists(err)) throw err;
      const existing = await this.readExisting(kind, read);
      if (!isControlledBy(existing, mj)) throw nameTaken(kind, existing.metadata!.name!);
    }
    this.remember(mj.metadata.uid!, what);
  }

  private remember(uid: string, what: string): void {
    let set = this.made.get(uid);
    if (!set) {
      if (this.made.size >= REMEMBERED_MAX) this.made.delete(this.made.keys().next().value!);
      this.made.set(uid, (set = new Set()));
    }
    set.add(what);
  }

  /** The runner Job of the MediaJob's current attempt that this created, while the Job cache has not shown it yet. */
  created(mj: MediaJob): k8s.V1Job | undefined {
    const made = this.createdJobs.get(mj.metadata.uid!);
    return made && made.job.metadata?.name === currentJobName(mj) && Date.now() - made.at < CREATED_JOB_TRUST_MS ? made.job : undefined;
  }

  /**
   * The Job informer saw a runner Job deleted: the stand-in for it goes, or
   * a Job deleted before the cache ever showed it would be hidden from the
   * next passes for up to CREATED_JOB_TRUST_MS (its MediaJob's owner uid and
   * the Job's name must both match: another attempt's Job leaves it be).
   */
  jobDeleted(job: k8s.V1Job): void {
    const owner = job.metadata?.ownerReferences?.find((r) => r.controller)?.uid;
    const made = owner === undefined ? undefined : this.createdJobs.get(owner);
    if (made && made.job.metadata?.name === job.metadata?.name) this.createdJobs.delete(owner!);
  }

  /** A Job found in the cache under the MediaJob's Job name: its own, or a PermanentError. */
  owned(job: k8s.V1Job, mj: MediaJob): k8s.V1Job {
    if (!isControlledBy(job, mj)) throw nameTaken('Job', job.metadata!.name!);
    this.createdJobs.delete(mj.metadata.uid!);
    return job;
  }

  /** The job finished: its credentials go (only its own Secret, and only that one, by uid). */
  async removeCredentials(mj: MediaJob): Promise<void> {
    const name = credentialsSecretName(mj);
    const namespace = mj.metadata.namespace!;
    this.made.get(mj.metadata.uid!)?.delete(`Secret/${name}`);
    this.createdJobs.delete(mj.metadata.uid!);
    let secret: k8s.V1Secret;
    try {
      secret = await this.d.kube.core.readNamespacedSecret({ name, namespace });
    } catch (err) {
      if (isNotFound(err)) return;
      throw err;
    }
    if (!isControlledBy(secret, mj)) return;
    try {
      await this.d.kube.core.deleteNamespacedSecret({ name, namespace, body: { preconditions: { uid: secret.metadata!.uid! } } });
    } catch (err) {
      // Gone already, or replaced since it was read: either way not ours to delete any more.
      if (!isNotFound(err) && !isConflict(err)) throw err;
    }
  }

  /**
   * Stop the runner of a cancelled job: delete its Job (only the one this
   * MediaJob controls, by uid) with Background propagation, so the garbage
   * collector deletes the pod at once and the kubelet sends it SIGTERM; the
   * runner then stops its children and removes partial uploads.
   */
  async removeRunner(job: k8s.V1Job | undefined, mj: MediaJob): Promise<void> {
    if (!job || !isControlledBy(job, mj) || job.metadata?.deletionTimestamp) return;
    try {
      await this.d.kube.batch.deleteNamespacedJob({
        name: job.metadata!.name!, namespace: mj.metadata.namespace!, propagationPolicy: 'Background',
        body: { preconditions: { uid: job.metadata!.uid! } },
      });
      // Debug: the job's cancellation is its transition's line (transition-log.ts).
      this.d.log.debug({ jobId: jobIdOf(mj), job: job.metadata!.name }, 'runner job deleted: the job was cancelled');
    } catch (err) {
      if (!isNotFound(err) && !isConflict(err)) throw err;
    }
  }

  private async ensureSecret(mj: MediaJob, document: Record<string, unknown>, extra?: Record<string, string>): Promise<void> {
    const namespace = mj.metadata.namespace!;
    const body = buildCredentialsSecret(mj, document, extra);
    // Mounting someone else's Secret would hand this job's runner their credentials.
    await this.ensureOwned(mj, 'Secret', body.metadata!.name!, () => this.d.kube.core.createNamespacedSecret({ namespace, body }),
      () => this.d.kube.core.readNamespacedSecret({ name: body.metadata!.name!, namespace }));
  }

  private async ensureJob(mj: MediaJob, platformEnv: Record<string, string> = {}): Promise<k8s.V1Job> {
    const { cfg, kube } = this.d;
    const namespace = mj.metadata.namespace!;
    // The storage endpoints come last: the runner must upload where the operator signs and the gateway probed.
    const body = buildRunnerJob(withDefaults(mj), {
      image: cfg.RUNNER_IMAGE,
      backoffLimit: cfg.JOB_BACKOFF_LIMIT,
      activeDeadlineSeconds: cfg.JOB_ACTIVE_DEADLINE_SECONDS,
      ttlSecondsAfterFinished: cfg.JOB_TTL_SECONDS_AFTER_FINISHED,
      serviceAccountName: cfg.RUNNER_SERVICE_ACCOUNT || runnerIdentityName(mj),
      resources: cfg.RUNNER_RESOURCES,
      // The runner's egress applies the operator's outbound policy (ADR 0014): the networks in force, and the
      // switch after RUNNER_ENV, so the runner's is the operator's own.
      outboundAllowedCidrs: cfg.OUTBOUND_ALLOWED_CIDRS,
      // The platform's facts after RUNNER_ENV too: which proxy and cookie an attempt has is the operator's choice.
      extraEnv: { ...cfg.RUNNER_ENV, ...this.d.destinations.runnerEnv(), ...platformEnv, OUTBOUND_ALLOW_PRIVATE: cfg.OUTBOUND_ALLOW_PRIVATE ? 'true' : 'false' },
    }, currentAttempt(mj));
    const name = body.metadata!.name!;
    try {
      const job = await kube.batch.createNamespacedJob({ namespace, body });
      // Debug: the job's start is its transition's line (transition-log.ts).
      this.d.log.debug({ jobId: jobIdOf(mj), job: name }, 'runner job created');
      if (this.createdJobs.size >= REMEMBERED_MAX) this.createdJobs.delete(this.createdJobs.keys().next().value!);
      this.createdJobs.set(mj.metadata.uid!, { job, at: Date.now() });
      this.d.onJobCreated?.(mj, job);
      return job;
    } catch (err) {
      if (!isAlreadyExists(err)) throw err;
    }
    // Made by an earlier pass (the cache had not shown it yet), or by someone else.
    const existing = await this.readExisting('Job', () => kube.batch.readNamespacedJob({ name, namespace }));
    if (!isControlledBy(existing, mj)) throw nameTaken('Job', name);
    return existing;
  }

  /** The object a create found in the way; gone again by now means: try the pass again. */
  private async readExisting<T>(kind: string, read: () => Promise<T>): Promise<T> {
    try {
      return await read();
    } catch (err) {
      if (isNotFound(err)) throw new TemporaryError(`the ${kind} in the way went away`, undefined, { cause: err });
      throw err;
    }
  }

  private async destinationDocument(mj: Owned<MediaJob>): Promise<Record<string, unknown>> {
    try {
      return await this.d.destinations.document(mj);
    } catch (err) {
      // Never delivered elsewhere: the job ends here, before any download.
      if (err instanceof DestinationUnresolvable) throw new PermanentError('storage_unreachable', STORAGE_UNREACHABLE_MESSAGE, { cause: err });
      throw err;
    }
  }
}
