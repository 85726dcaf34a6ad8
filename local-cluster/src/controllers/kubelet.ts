// The local node: a kubelet that runs Pods as local processes. It watches
// Pods through the in-process API (subscribe + an initial list), admits
// pending ones while the node has capacity (the rest stay Pending with
// PodScheduled=False/Unschedulable, as the scheduler would leave them), binds
// them to this node and hands each to a PodWorker. Deletion follows the real
// handshake: the API server marks a bound pod with deletionTimestamp, the
// worker SIGTERMs, SIGKILLs after the grace period, writes the terminal
// status and then deletes with gracePeriodSeconds=0.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Change, ClusterApi } from '../cluster-api.js';
import { StatusError } from '../errors.js';
import { rfc3339 } from '../object-meta.js';
import type { KubeObject, ResourceType } from '../types.js';
import { recordEvent } from './events.js';
import type { NodeInfo, ObjectLookup } from './pod-env.js';
import { podConditions } from './pod-status.js';
import type { ContainerStatus, Pod } from './pod-types.js';
import { isPodTerminal } from './pod-types.js';
import { safeName } from './pod-volumes.js';
import { PodWorker } from './pod-worker.js';
import { WorkQueue } from '@mediajobs/lib/work-queue';

export interface KubeletOptions {
  /**
   * Image → argv prefix standing in for the image's entrypoint when a
   * container has no `command` (e.g. {"mediajobs/runner:dev": ["node", "/path/runner.js"]});
   * the container's args are appended. A container with neither stays
   * waiting with reason ErrImagePull, as a real node that cannot pull it.
   */
  imageCommands?: Record<string, string[]>;
  /** Cap on pods running at once, like a node's capacity; others stay Pending (Unschedulable). */
  maxRunningPods?: number;
  /** Root for per-pod directories (volumes, termination logs, container logs, HOME, TMPDIR). */
  workDir: string;
  nodeName?: string;
  /** Overrides every pod's grace period (seconds) between SIGTERM and SIGKILL. */
  gracePeriodSeconds?: number;
  /** Environment every container gets below its own env. */
  env?: Record<string, string>;
  /** CrashLoopBackOff of restarted containers (real kubelet: 10 s doubling to 5 min). */
  restartBackoffBaseMs?: number;
  restartBackoffMaxMs?: number;
  /** Retry of pods waiting on a Secret/ConfigMap or a volume (doubling, capped). */
  retryBaseMs?: number;
  retryMaxMs?: number;
  /** Log bytes kept per container instance (default 10 MiB, the kubelet's containerLogMaxSize). */
  maxLogBytes?: number;
  /** How long stop() waits after SIGTERM before SIGKILL (default 5 s). */
  stopGraceMs?: number;
  /**
   * Run each container as its securityContext's runAsUser/runAsGroup with
   * the pod's fsGroup and supplementalGroups, as a real node does. Needs
   * root; default: on when the local cluster runs as root. Off (or not
   * root), every process runs as the local cluster's user; runAsNonRoot and
   * volume modes and fsGroup ownership are honoured either way.
   */
  runAsPodUsers?: boolean;
  /** The token the API server accepts for a ServiceAccount, projected where a pod asks for one (credentials.ts). */
  serviceAccountToken?: (namespace: string, serviceAccount: string) => string;
  /**
   * A kubeconfig (YAML) that authenticates as a ServiceAccount: what a pod's
   * processes get as KUBECONFIG, standing in for the token a real kubelet
   * mounts at /var/run/secrets/kubernetes.io/serviceaccount, so a pod has
   * exactly its account's rights. None for a pod that sets
   * automountServiceAccountToken: false.
   */
  podKubeconfig?: (namespace: string, serviceAccount: string) => string;
  logger?: NodeLog;
}

/** How the node reports what happens on it: warnings unless said otherwise (a container's start is only info). */
export type NodeLog = (msg: string, extra?: Record<string, unknown>, level?: 'info' | 'warn') => void;

// What `kubectl describe pod` shows for a pod the one-node cluster cannot place.
const UNSCHEDULABLE_MESSAGE = '0/1 nodes are available: 1 Too many pods. preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod.';
const RESYNC_MS = 10_000;

export class Kubelet {
  private readonly workers = new Map<string, PodWorker>(); // by "ns/name"
  /**
   * Pods waiting for this node, by key, with when they were first seen (a
   * sequence number): the scheduler's queue runs them in that order. Only
   * `unconsidered` ones are looked at while the node is full, as the
   * scheduler parks an unschedulable pod until capacity frees.
   */
  private readonly waiting = new Map<string, number>();
  private seen = 0;
  private readonly unconsidered = new Set<string>();
  private readonly queue: WorkQueue;
  private readonly node: NodeInfo;
  private readonly pods: ResourceType;
  private unsubscribe: (() => void) | undefined;
  private resync: NodeJS.Timeout | undefined;
  private admitScheduled = false;
  private stopped = false;
  private runAsPodUsers = false;
  private readonly imageUser = { uid: process.getuid?.() ?? 0, gid: process.getgid?.() ?? 0 };
  private readonly log: NodeLog;

  constructor(private readonly api: ClusterApi, private readonly opts: KubeletOptions) {
    const pods = api.resourceForKind('v1', 'Pod');
    if (!pods) throw new Error('the API server does not serve v1 Pods');
    this.pods = pods;
    this.node = { nodeName: opts.nodeName ?? 'local-node', hostIP: '127.0.0.1', podIP: '127.0.0.1' };
    this.log = opts.logger ?? (() => {});
    this.queue = new WorkQueue((key) => this.sync(key), {
      retryBaseMs: 200,
      retryMaxMs: 10_000,
      onError: (key, err) => this.log('pod sync failed', { pod: key, err: String(err) }),
    });
  }

  start(): void {
    if (this.unsubscribe) return;
    fs.mkdirSync(this.opts.workDir, { recursive: true });
    this.runAsPodUsers = this.canRunAsPodUsers();
    this.unsubscribe = this.api.subscribe((c) => this.observe(c));
    // Oldest first, so pods left waiting by an earlier kubelet keep their turn.
    const byAge = [...this.api.listReadonly(this.pods)].sort((a, b) => (a.metadata.creationTimestamp ?? '').localeCompare(b.metadata.creationTimestamp ?? ''));
    for (const pod of byAge) this.queue.add(keyOf(pod));
    // A safety net for anything a missed event would leave behind (it costs one list).
    this.resync = setInterval(() => {
      for (const pod of this.api.list(this.pods)) this.queue.add(keyOf(pod));
    }, RESYNC_MS);
    this.resync.unref();
  }

  /**
   * Whether containers will run as their pods' users: asked for (or root by
   * default), root, and the work dir reachable by other users (its pods
   * dirs are made searchable; a parent folder it does not own, such as a
   * 0700 home, is never changed: the processes then run as root, logged).
   */
  private canRunAsPodUsers(): boolean {
    const wanted = this.opts.runAsPodUsers ?? this.imageUser.uid === 0;
    if (!wanted) return false;
    if (this.imageUser.uid !== 0) {
      this.log('runAsPodUsers needs root: containers run as the local cluster\'s user');
      return false;
    }
    fs.chmodSync(this.opts.workDir, 0o711);
    const closed = unsearchableParent(this.opts.workDir);
    if (closed) {
      this.log('pod work dir is not reachable by other users: containers run as root, their runAsUser/runAsGroup/fsGroup not applied', { closed });
      return false;
    }
    // An image's files are always readable in a real container; here they are the host's, such as a checkout in a 0700 home.
    const imageClosed = imagePaths(this.opts.imageCommands ?? {}).map(unsearchableParent).find((p) => p !== undefined);
    if (imageClosed) {
      this.log('an image command\'s files are not reachable by other users: containers run as root, their runAsUser/runAsGroup/fsGroup not applied', { closed: imageClosed });
      return false;
    }
    return true;
  }

  /** True when containers run as their pods' runAsUser/runAsGroup (see KubeletOptions.runAsPodUsers). */
  get runsAsPodUsers(): boolean {
    return this.runAsPodUsers;
  }

  /** SIGTERM every running process, wait, SIGKILL what is left. Pod statuses are left as they are. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.unsubscribe?.();
    this.unsubscribe = undefined;
    if (this.resync) clearInterval(this.resync);
    void this.queue.stop();
    const grace = this.opts.stopGraceMs ?? 5000;
    await Promise.all([...this.workers.values()].map((w) => w.stop(grace)));
  }

  /** Current log text of a container (undefined if it never started); `previous` is the instance before the last restart. */
  logs(namespace: string, pod: string, container?: string, opts: { previous?: boolean } = {}): string | undefined {
    return this.workers.get(`${namespace}/${pod}`)?.logs(container, opts.previous);
  }

  /** Follow a running container's output; undefined when it is not running. */
  followLogs(namespace: string, pod: string, container: string | undefined, listener: (chunk: Buffer) => void): (() => void) | undefined {
    return this.workers.get(`${namespace}/${pod}`)?.followLogs(container, listener);
  }

  /**
   * What the node does to a container over its memory limit: kill it, as
   * the kernel's OOM killer (exit 137, reason OOMKilled). Local processes
   * have no cgroup, so tests and people ask for it. False when the pod's
   * container is not running here.
   */
  oomKill(namespace: string, pod: string, container?: string): boolean {
    return this.workers.get(`${namespace}/${pod}`)?.oomKill(container) ?? false;
  }

  /**
   * Node-pressure eviction of a running pod: its containers are stopped
   * (SIGKILL at once, as a hard threshold, unless `graceSeconds`) and it
   * ends Failed with reason Evicted and a DisruptionTarget condition; the
   * pod object stays, as a real kubelet leaves it. False when the pod is
   * not running here.
   */
  evict(namespace: string, pod: string, opts: { message?: string; graceSeconds?: number } = {}): boolean {
    const message = opts.message ?? 'The node was low on resource: memory. ';
    return this.workers.get(`${namespace}/${pod}`)?.evict(message, opts.graceSeconds ?? 0) ?? false;
  }

  private observe(c: Change): void {
    if (this.stopped) return;
    const kind = c.rt.kind;
    if (c.rt.group !== '') return;
    if (kind === 'Pod') {
      this.queue.add(keyOf(c.object));
    } else if (kind === 'Secret' || kind === 'ConfigMap') {
      // Pods waiting on this object retry now rather than at their next backoff.
      const ns = c.object.metadata.namespace;
      for (const w of this.workers.values()) if (w.namespace === ns && w.active) w.nudge();
    }
  }

  private sync(key: string): void {
    if (this.stopped) return;
    const pod = this.getPod(key);
    const seenAt = this.waiting.get(key);
    this.waiting.delete(key); // put back below while it still waits
    let worker = this.workers.get(key);
    if (worker && (!pod || pod.metadata.uid !== worker.uid)) {
      this.forget(worker);
      worker = undefined;
    }
    if (!pod) return;
    const boundTo = pod.spec?.nodeName;
    if (boundTo && boundTo !== this.node.nodeName) return;
    if (worker) {
      worker.update(pod);
      if (isPodTerminal(pod) && pod.metadata.deletionTimestamp && !worker.active) this.completeDeletion(pod);
      return;
    }
    if (isPodTerminal(pod)) {
      if (pod.metadata.deletionTimestamp) this.completeDeletion(pod);
      return;
    }
    if (pod.metadata.deletionTimestamp) {
      // Deleted before it ever ran here: report it terminal so the delete can complete.
      if (boundTo) this.markTerminal(pod, 'ContainerStatusUnknown', 'The container could not be located when the pod was terminated');
      this.completeDeletion(pod);
      return;
    }
    if (pod.status?.startTime) {
      // It ran under an earlier kubelet process: its processes are gone.
      this.markTerminal(pod, 'ContainerStatusUnknown', 'The container could not be located when the pod was deleted.  The container used to be Running');
      return;
    }
    if (seenAt === undefined) this.unconsidered.add(key);
    this.waiting.set(key, seenAt ?? this.seen++);
    this.scheduleAdmission();
  }

  private get running(): number {
    let n = 0;
    for (const w of this.workers.values()) if (w.active) n++;
    return n;
  }

  private scheduleAdmission(): void {
    if (this.admitScheduled || this.stopped) return;
    this.admitScheduled = true;
    setImmediate(() => {
      this.admitScheduled = false;
      this.admitPending();
    });
  }

  /**
   * Admit waiting pods oldest first while there is capacity; mark the rest
   * Unschedulable. While the node is full only newly seen pods are looked
   * at, so a long queue costs nothing per new pod.
   */
  private admitPending(): void {
    if (this.stopped) return;
    const max = this.opts.maxRunningPods ?? Infinity;
    let running = this.running;
    if (running < max && this.waiting.size) {
      const oldestFirst = [...this.waiting].sort(([, a], [, b]) => a - b);
      for (const [key] of oldestFirst) {
        if (running >= max) break;
        const pod = this.getPod(key);
        this.waiting.delete(key);
        this.unconsidered.delete(key);
        if (pod && this.waitsHere(pod) && this.admit(pod)) running++;
      }
    }
    for (const key of this.unconsidered) {
      const pod = this.getPod(key);
      if (pod && this.waitsHere(pod)) this.markUnschedulable(pod);
    }
    this.unconsidered.clear();
  }

  /** Not yet run by this kubelet, not finished or deleted, and not bound to another node. */
  private waitsHere(pod: Pod): boolean {
    return !this.workers.has(keyOf(pod)) && !isPodTerminal(pod) && !pod.metadata.deletionTimestamp
      && (!pod.spec?.nodeName || pod.spec.nodeName === this.node.nodeName) && !pod.status?.startTime;
  }

  private getPod(key: string): Pod | undefined {
    const [ns, name] = splitKey(key);
    return this.api.get(this.pods, ns, name) as Pod | undefined;
  }

  private admit(pod: Pod): boolean {
    const bound = this.bind(pod);
    if (!bound) return false;
    const key = keyOf(bound);
    const podDir = path.join(this.opts.workDir, `${safeName(bound.metadata.namespace ?? 'default')}_${safeName(bound.metadata.name!)}_${bound.metadata.uid}`);
    const lookup: ObjectLookup = {
      secret: (n) => this.getCore('Secret', bound.metadata.namespace, n),
      configMap: (n) => this.getCore('ConfigMap', bound.metadata.namespace, n),
      serviceAccountToken: (sa) => this.opts.serviceAccountToken?.(bound.metadata.namespace ?? 'default', sa),
    };
    const worker = new PodWorker(bound, {
      api: this.api,
      pods: this.pods,
      node: this.node,
      podDir,
      lookup,
      imageCommands: this.opts.imageCommands ?? {},
      baseEnv: this.opts.env ?? {},
      kubeconfig: () => (bound.spec?.automountServiceAccountToken === false ? undefined
        : this.opts.podKubeconfig?.(bound.metadata.namespace ?? 'default', bound.spec?.serviceAccountName || 'default')),
      restartBackoffBaseMs: this.opts.restartBackoffBaseMs ?? 10_000,
      restartBackoffMaxMs: this.opts.restartBackoffMaxMs ?? 300_000,
      retryBaseMs: this.opts.retryBaseMs ?? 1000,
      retryMaxMs: this.opts.retryMaxMs ?? 30_000,
      gracePeriodSeconds: this.opts.gracePeriodSeconds,
      maxLogBytes: this.opts.maxLogBytes ?? 10 * 1024 * 1024,
      runAsPodUsers: this.runAsPodUsers,
      imageUser: this.imageUser,
      log: this.log,
    });
    this.workers.set(key, worker);
    void worker.done.then(() => {
      // Capacity freed: the next pending pod may run; the pod may also be ready for its final delete.
      this.queue.add(key);
      this.scheduleAdmission();
    });
    return true;
  }

  /**
   * Bind the pod to this node, as the scheduler would (spec.nodeName,
   * PodScheduled=True, a Scheduled event). The API server uses nodeName to
   * decide that a delete must wait for the kubelet.
   */
  private bind(pod: Pod): Pod | undefined {
    let bound: Pod | undefined;
    try {
      bound = this.api.mutate(this.pods, pod.metadata.namespace, pod.metadata.name!, (o) => {
        if (o.metadata.uid !== pod.metadata.uid) throw new StatusError(409, 'Conflict', 'pod was replaced');
        const spec = (o.spec ??= {}) as Record<string, unknown>;
        spec.nodeName = this.node.nodeName;
      }, { untracked: true }) as Pod | undefined;
    } catch (err) {
      if (!(err instanceof StatusError)) this.log('pod binding failed', { pod: keyOf(pod), err: String(err) });
      return undefined;
    }
    if (!bound || bound.metadata.uid !== pod.metadata.uid) return undefined;
    recordEvent(this.api, bound, 'Normal', 'Scheduled', `Successfully assigned ${bound.metadata.namespace}/${bound.metadata.name} to ${this.node.nodeName}`, { component: 'default-scheduler' });
    return bound;
  }

  private markUnschedulable(pod: Pod): void {
    const current = pod.status?.conditions?.find((c) => c.type === 'PodScheduled');
    if (current?.status === 'False' && current.reason === 'Unschedulable') return;
    const now = rfc3339();
    const status = { ...(pod.status ?? {}), phase: 'Pending' };
    status.conditions = podConditions({ spec: pod.spec ?? {}, phase: 'Pending', init: [], main: [], sandboxReady: false, scheduled: false, unschedulableMessage: UNSCHEDULABLE_MESSAGE }, pod.status?.conditions, now);
    this.writeStatus(pod, status);
    recordEvent(this.api, pod, 'Warning', 'FailedScheduling', UNSCHEDULABLE_MESSAGE, { component: 'default-scheduler' });
  }

  /** Report a pod whose containers cannot be found as terminated (exit 137), phase Failed. */
  private markTerminal(pod: Pod, reason: string, message: string): void {
    const now = rfc3339();
    const terminated = (name: string, image: string, prev?: ContainerStatus): ContainerStatus => ({
      name, image, imageID: prev?.imageID ?? '', ready: false, started: false, restartCount: prev?.restartCount ?? 0,
      lastState: prev?.lastState ?? {},
      state: prev?.state.terminated ? prev.state : { terminated: { exitCode: 137, reason, message, startedAt: null, finishedAt: null } },
    });
    const spec = pod.spec ?? {};
    const prevMain = pod.status?.containerStatuses ?? [];
    const prevInit = pod.status?.initContainerStatuses ?? [];
    const main = (spec.containers ?? []).map((c) => terminated(c.name ?? '', c.image ?? '', prevMain.find((s) => s.name === c.name)));
    const init = (spec.initContainers ?? []).map((c) => terminated(c.name ?? '', c.image ?? '', prevInit.find((s) => s.name === c.name)));
    const status = { ...(pod.status ?? {}), phase: 'Failed', containerStatuses: main };
    if (init.length) (status as Record<string, unknown>).initContainerStatuses = init;
    status.conditions = podConditions({ spec, phase: 'Failed', init, main, sandboxReady: false, scheduled: true }, pod.status?.conditions, now);
    this.writeStatus(pod, status);
  }

  private writeStatus(pod: Pod, status: Pod['status']): void {
    try {
      this.api.update(this.pods, pod.metadata.namespace, { ...pod, status }, { subresource: 'status', fieldManager: 'kubelet' });
    } catch (err) {
      if (!(err instanceof StatusError)) throw err;
      this.queue.add(keyOf(pod)); // changed under us (409) or gone (404): look again
    }
  }

  /** The kubelet's half of a graceful delete: the pod is terminal, let the API server remove it. */
  private completeDeletion(pod: Pod): void {
    try {
      this.api.delete(this.pods, pod.metadata.namespace, pod.metadata.name!, { gracePeriodSeconds: 0, preconditions: { uid: pod.metadata.uid } });
    } catch (err) {
      if (!(err instanceof StatusError)) throw err;
    }
  }

  private forget(worker: PodWorker): void {
    worker.abandon();
    this.workers.delete(worker.key);
    const dir = worker.podDir;
    void worker.done.then(() => fs.promises.rm(dir, { recursive: true, force: true }).catch(() => {}));
  }

  private getCore(kind: 'Secret' | 'ConfigMap', namespace: string | undefined, name: string): KubeObject | undefined {
    const rt = this.api.resourceForKind('v1', kind);
    return rt ? this.api.get(rt, namespace, name) : undefined;
  }
}

function keyOf(obj: KubeObject): string {
  return `${obj.metadata.namespace ?? 'default'}/${obj.metadata.name}`;
}

function splitKey(key: string): [string, string] {
  const i = key.indexOf('/');
  return [key.slice(0, i), key.slice(i + 1)];
}

/** The first folder above `dir` that other users cannot search (no o+x), if any. */
/** The files the image commands name: absolute paths and file: URLs (a loader given to --import). */
function imagePaths(commands: Record<string, string[]>): string[] {
  return Object.values(commands).flat()
    .map((arg) => (arg.startsWith('file://') ? fileURLToPath(arg) : arg))
    .filter((p) => path.isAbsolute(p) && fs.existsSync(p));
}

function unsearchableParent(dir: string): string | undefined {
  for (let p = path.dirname(path.resolve(dir)); ; p = path.dirname(p)) {
    if ((fs.statSync(p).mode & 0o001) === 0) return p;
    if (p === path.dirname(p)) return undefined;
  }
}
