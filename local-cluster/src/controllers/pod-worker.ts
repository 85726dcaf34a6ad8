// One pod on the local node, from admission to its terminal status: set up
// the pod directory and volumes, run init containers one after another and
// then the regular containers side by side, restart them as restartPolicy
// says (with CrashLoopBackOff), and on deletion SIGTERM everything, SIGKILL
// after the grace period, report the final status and complete the delete.
// The worker owns the pod's status while it lives; every transition
// recomputes and writes the whole status.
import fs from 'node:fs';
import path from 'node:path';
import type { ClusterApi } from '../cluster-api.js';
import { StatusError } from '../errors.js';
import { deepEqual, rfc3339 } from '../object-meta.js';
import type { ResourceType } from '../types.js';
import { expand, mappingFor } from './expansion.js';
import { recordEvent, type EventType } from './events.js';
import type { NodeLog } from './kubelet.js';
import { ContainerConfigError, resolveEnv, type NodeInfo, type ObjectLookup } from './pod-env.js';
import { containerIdentity, type ImageUser, type ProcessIdentity } from './pod-identity.js';
import { ContainerProcess, LogSink, rewritePaths, terminationMessage, type PathMapping, type ProcessExit } from './pod-process.js';
import { podConditions, podPhase } from './pod-status.js';
import type { Container, ContainerStatus, Pod, PodStatus } from './pod-types.js';
import { containerMounts, safeName, setUpVolumes, VolumeSetupError } from './pod-volumes.js';

export interface WorkerSettings {
  api: ClusterApi;
  pods: ResourceType;
  node: NodeInfo;
  podDir: string;
  lookup: ObjectLookup;
  imageCommands: Record<string, string[]>;
  /** Extra process environment, below the container's own. */
  baseEnv: Record<string, string>;
  /** The kubeconfig of the pod's ServiceAccount (KubeletOptions.podKubeconfig); undefined: none. */
  kubeconfig?: () => string | undefined;
  restartBackoffBaseMs: number;
  restartBackoffMaxMs: number;
  retryBaseMs: number;
  retryMaxMs: number;
  /** Overrides every grace period, in seconds. */
  gracePeriodSeconds?: number;
  maxLogBytes: number;
  /**
   * Spawn each container as its effective runAsUser/runAsGroup with fsGroup
   * and supplementalGroups (the kubelet runs as root); false: every process
   * runs as the local cluster's user, whatever the spec says.
   */
  runAsPodUsers: boolean;
  /** The user an image runs as when the spec names none: the local cluster's. */
  imageUser: ImageUser;
  log: NodeLog;
}

/** A container instance's end, with the termination message the kubelet would report. */
type ContainerExit = ProcessExit & { message: string };

type Mode = 'running' | 'deleting' | 'evicting' | 'abandoned' | 'stopping';

interface Slot {
  container: Container;
  isInit: boolean;
  status: ContainerStatus;
  proc?: ContainerProcess;
  current?: LogSink;
  previous?: LogSink;
  /** Why the runtime killed the running instance (OOMKilled), reported as its terminated reason. */
  killedFor?: string;
}

/** Cancellation of the pod's waits: teardown ends them all, a nudge ends the current retry sleeps. */
class Cancel {
  private resolveFn!: () => void;
  readonly promise = new Promise<void>((r) => (this.resolveFn = r));
  cancelled = false;
  private readonly sleepers = new Set<() => void>();
  cancel(): void {
    this.cancelled = true;
    this.resolveFn();
    this.nudge();
  }
  nudge(): void {
    for (const wake of [...this.sleepers]) wake();
  }
  /** Sleep unless torn down; a `nudgeable` sleep also ends on nudge(). */
  sleep(ms: number, nudgeable = true): Promise<void> {
    if (this.cancelled) return Promise.resolve();
    return new Promise((resolve) => {
      const wake = () => {
        clearTimeout(t);
        this.sleepers.delete(wake);
        resolve();
      };
      const t = setTimeout(wake, ms);
      if (nudgeable) this.sleepers.add(wake);
      else void this.promise.then(wake);
    });
  }
}

export class PodWorker {
  readonly uid: string;
  readonly namespace: string;
  readonly name: string;
  readonly done: Promise<void>;
  private pod: Pod;
  private mode: Mode = 'running';
  private graceSeconds = 30;
  private readonly cancel = new Cancel();
  private readonly slots = new Map<string, Slot>();
  private readonly init: Slot[] = [];
  private readonly main: Slot[] = [];
  private sandboxReady = false;
  private startTime = rfc3339();
  private lastFailedMountMessage: string | undefined;
  private finished = false;
  /** The pod's copy of the cluster kubeconfig, readable by its users (see readableKubeconfig). */
  private podKubeconfig: string | undefined;
  /** Set when the node evicted the pod: its terminal status says so. */
  private evicted: { message: string } | undefined;

  constructor(pod: Pod, private readonly s: WorkerSettings) {
    this.pod = pod;
    this.uid = pod.metadata.uid!;
    this.namespace = pod.metadata.namespace ?? 'default';
    this.name = pod.metadata.name!;
    const spec = pod.spec ?? {};
    for (const c of spec.initContainers ?? []) this.addSlot(c, true, 'PodInitializing');
    const mainWaiting = (spec.initContainers ?? []).length ? 'PodInitializing' : 'ContainerCreating';
    for (const c of spec.containers ?? []) this.addSlot(c, false, mainWaiting);
    this.done = this.run().catch((err) => this.s.log('pod worker crashed', { pod: this.key, err: String(err) }));
  }

  get key(): string {
    return `${this.namespace}/${this.name}`;
  }

  /** Still holds node capacity (not yet in a terminal state). */
  get active(): boolean {
    return !this.finished;
  }

  private addSlot(c: Container, isInit: boolean, waitingReason: string): void {
    const name = c.name ?? '';
    const slot: Slot = {
      container: c,
      isInit,
      status: {
        name, state: { waiting: { reason: waitingReason } }, lastState: {}, ready: false, restartCount: 0,
        image: c.image ?? '', imageID: '', started: false,
      },
    };
    this.slots.set(name, slot);
    (isInit ? this.init : this.main).push(slot);
  }

  get podDir(): string {
    return this.s.podDir;
  }

  /** Retry now whatever waits on a Secret, ConfigMap or volume. */
  nudge(): void {
    this.cancel.nudge();
  }

  /** A newer version of the pod object (same uid) was observed. */
  update(pod: Pod): void {
    this.pod = pod;
    if (pod.metadata.deletionTimestamp && this.mode === 'running' && !this.finished) {
      this.terminate('deleting', this.gracePeriodFor(pod));
    }
  }

  /** The pod object is gone (force-deleted or replaced): stop without reporting anything. */
  abandon(): void {
    if (this.mode === 'running' || this.mode === 'deleting') this.terminate('abandoned', this.gracePeriodFor(this.pod));
  }

  /**
   * The container's memory cgroup ran out: the kernel SIGKILLs the process
   * and the runtime reports exit 137 with reason OOMKilled. Then the
   * restart policy applies as for any exit. False when it is not running.
   */
  oomKill(container?: string): boolean {
    const slot = container ? this.slots.get(container) : this.main[0];
    if (!slot?.proc?.running || this.mode !== 'running') return false;
    slot.killedFor = 'OOMKilled';
    void slot.proc.kill();
    return true;
  }

  /**
   * Node-pressure eviction (the kubelet's eviction manager, killPodFunc):
   * every container is stopped (SIGTERM, SIGKILL after `graceSeconds`; 0,
   * a hard threshold, kills at once), never restarted, and the pod ends
   * phase Failed with reason Evicted, the message, and a DisruptionTarget
   * condition (TerminationByKubelet). The pod object stays. False when the
   * pod is not running here any more.
   */
  evict(message: string, graceSeconds = 0): boolean {
    if (this.mode !== 'running' || this.finished) return false;
    this.evicted = { message };
    this.event('Warning', 'Evicted', message);
    this.terminate('evicting', graceSeconds);
    return true;
  }

  /** The kubelet is shutting down. */
  stop(graceMs: number): Promise<void> {
    if (this.mode !== 'abandoned') this.terminate('stopping', graceMs / 1000);
    return this.done;
  }

  logs(container: string | undefined, previous = false): string | undefined {
    const slot = container ? this.slots.get(container) : this.main.length === 1 ? this.main[0] : undefined;
    if (!slot) return undefined;
    const sink = previous ? slot.previous : slot.current;
    return sink?.text();
  }

  followLogs(container: string | undefined, listener: (chunk: Buffer) => void): (() => void) | undefined {
    const slot = container ? this.slots.get(container) : this.main.length === 1 ? this.main[0] : undefined;
    const sink = slot?.current;
    if (!sink || sink.isClosed) return undefined;
    return sink.follow(listener);
  }

  private gracePeriodFor(pod: Pod): number {
    if (this.s.gracePeriodSeconds !== undefined) return this.s.gracePeriodSeconds;
    // The API server's deletion grace period, unless it could not know the pod
    // was running (an unbound pod gets 0); then the pod's own setting.
    const fromDelete = pod.metadata.deletionGracePeriodSeconds;
    if (fromDelete !== undefined && (fromDelete > 0 || pod.spec?.nodeName)) return fromDelete;
    return pod.spec?.terminationGracePeriodSeconds ?? 30;
  }

  private terminate(mode: Mode, graceSeconds: number): void {
    if (this.mode === 'running' || (this.mode === 'deleting' && mode !== 'deleting')) {
      this.mode = mode;
      this.graceSeconds = Math.max(0, graceSeconds);
      this.cancel.cancel();
      for (const slot of this.slots.values()) {
        if (slot.proc?.running) {
          if (mode === 'deleting') this.event('Normal', 'Killing', `Stopping container ${slot.status.name}`);
          void slot.proc.terminate(this.graceSeconds * 1000);
        }
      }
    }
  }

  private get reporting(): boolean {
    return this.mode === 'running' || this.mode === 'deleting' || this.mode === 'evicting';
  }

  // ---- lifecycle -------------------------------------------------------------

  private async run(): Promise<void> {
    this.writeStatus();
    const volumes = await this.setUpVolumes();
    if (volumes) {
      this.sandboxReady = true;
      this.writeStatus();
      let initialized = true;
      for (const slot of this.init) {
        if (!(await this.runContainer(slot, volumes))) {
          initialized = false;
          break;
        }
      }
      if (initialized && !this.cancel.cancelled) {
        await Promise.all(this.main.map((slot) => this.runContainer(slot, volumes)));
      }
    }
    // Wait out anything still running (a terminate in progress).
    await Promise.all([...this.slots.values()].map((s) => s.proc?.exited));
    this.finish();
  }

  private async setUpVolumes(): Promise<Map<string, string> | undefined> {
    for (let attempt = 0; !this.cancel.cancelled; attempt++) {
      try {
        // Containers running as other users must reach their volumes and files: search, not list.
        fs.mkdirSync(this.s.podDir, { recursive: true, mode: this.s.runAsPodUsers ? 0o711 : 0o700 });
        fs.mkdirSync(path.join(this.s.podDir, 'tmp'), { recursive: true });
        // Like a container's own /tmp, writable by any user of the pod.
        if (this.s.runAsPodUsers) fs.chmodSync(path.join(this.s.podDir, 'tmp'), 0o1777);
        this.podKubeconfig = this.writeKubeconfig();
        return setUpVolumes(this.pod, path.join(this.s.podDir, 'volumes'), this.s.lookup, this.s.node);
      } catch (err) {
        const message = err instanceof VolumeSetupError ? err.message : `MountVolume.SetUp failed: ${(err as Error).message}`;
        // The kubelet repeats FailedMount events; one per distinct message is enough here.
        if (message !== this.lastFailedMountMessage) this.event('Warning', 'FailedMount', message);
        this.lastFailedMountMessage = message;
        await this.cancel.sleep(this.retryDelay(attempt));
      }
    }
    return undefined;
  }

  /**
   * The pod's ServiceAccount credentials as a kubeconfig in its directory,
   * 0644 as a real pod's projected token, so that any of its users may read
   * it; it authenticates as that account and no one else.
   */
  private writeKubeconfig(): string | undefined {
    const text = this.s.kubeconfig?.();
    if (text === undefined) return undefined;
    const file = path.join(this.s.podDir, 'kubeconfig');
    fs.writeFileSync(file, text);
    fs.chmodSync(file, 0o644);
    return file;
  }

  /** Run one container until it is done for good; false if the pod cannot go on (init failure). */
  private async runContainer(slot: Slot, volumes: Map<string, string>): Promise<boolean> {
    const policy = this.pod.spec?.restartPolicy ?? 'Always';
    let configAttempt = 0;
    let deaths = 0;
    while (!this.cancel.cancelled) {
      const started = this.startContainer(slot, volumes);
      if (started === 'retry') {
        await this.cancel.sleep(this.retryDelay(configAttempt++));
        continue;
      }
      if (started === 'stuck') {
        await this.cancel.promise;
        break;
      }
      const exit = await started;
      this.containerExited(slot, exit);
      if (this.cancel.cancelled) break;
      const restart = policy === 'Always' || (policy === 'OnFailure' && exit.exitCode !== 0);
      if (!restart) return exit.exitCode === 0 || !slot.isInit;
      deaths++;
      if (deaths > 1) {
        // kubelet backoff: the first restart is immediate, then 10 s doubling to 5 min.
        const delay = Math.min(this.s.restartBackoffMaxMs, this.s.restartBackoffBaseMs * 2 ** (deaths - 2));
        slot.status = {
          ...slot.status,
          lastState: slot.status.state,
          state: { waiting: { reason: 'CrashLoopBackOff', message: `back-off ${goDuration(delay)} restarting failed container=${slot.status.name} pod=${this.name}_${this.namespace}(${this.uid})` } },
        };
        this.event('Warning', 'BackOff', `Back-off restarting failed container ${slot.status.name} in pod ${this.name}_${this.namespace}(${this.uid})`);
        this.writeStatus();
        await this.cancel.sleep(delay, false);
      }
      if (this.cancel.cancelled) break;
      slot.status = { ...slot.status, lastState: slot.status.state.terminated ? slot.status.state : slot.status.lastState, restartCount: slot.status.restartCount + 1 };
    }
    return false;
  }

  /** Start one instance; 'retry' when its config is not available yet, 'stuck' when it can never run here. */
  private startContainer(slot: Slot, volumes: Map<string, string>): Promise<ContainerExit> | 'retry' | 'stuck' {
    const c = slot.container;
    const name = slot.status.name;
    let env: Map<string, string>;
    try {
      env = resolveEnv(this.pod, c, this.s.lookup, this.s.node);
    } catch (err) {
      const message = err instanceof ContainerConfigError ? err.message : String(err);
      this.setWaiting(slot, 'CreateContainerConfigError', message);
      this.event('Warning', 'Failed', `Error: ${message}`);
      this.writeStatus();
      return 'retry';
    }
    const identity = containerIdentity(this.pod, c, this.s.imageUser);
    if ('refused' in identity) {
      this.setWaiting(slot, 'CreateContainerConfigError', identity.refused);
      this.event('Warning', 'Failed', `Error: ${identity.refused}`);
      this.writeStatus();
      return 'retry';
    }
    const entrypoint = c.command?.length ? c.command : imageCommand(this.s.imageCommands, c.image ?? '');
    if (!entrypoint) {
      const message = `local-cluster cannot run image "${c.image ?? ''}": the container has no command and no imageCommands entry maps the image to a local command`;
      this.setWaiting(slot, 'ErrImagePull', message);
      this.event('Warning', 'Failed', `Failed to pull image "${c.image ?? ''}": ${message}`);
      this.event('Warning', 'Failed', 'Error: ErrImagePull');
      this.writeStatus();
      return 'stuck';
    }

    // A local process cannot mount anything, so each volume is a directory of
    // the pod and the container's view of the filesystem is emulated: every
    // mountPath (and the terminationMessagePath) that appears in the argv,
    // env values or workingDir is rewritten to the local path, and
    // LOCAL_CLUSTER_MOUNTS carries the whole {mountPath: localPath} map for
    // paths a program builds itself. Expansion of $(VAR) comes first, as the
    // kubelet does it on the spec's strings.
    const mapping = mappingFor(env);
    const containerDir = path.join(this.s.podDir, 'containers', safeName(name));
    fs.mkdirSync(containerDir, { recursive: true });
    const terminationLog = path.join(containerDir, 'termination-log');
    fs.writeFileSync(terminationLog, '');
    // The kubelet makes it 0666 so that a container of any user can write its message.
    fs.chmodSync(terminationLog, 0o666);
    const mounts = containerMounts(c, volumes);
    const paths: PathMapping[] = mounts.map((m) => ({ from: m.mountPath, to: m.localPath }));
    const messagePath = c.terminationMessagePath ?? '/dev/termination-log';
    if (messagePath) paths.push({ from: messagePath, to: terminationLog });
    const rewrite = (v: string) => rewritePaths(v, paths);

    // Only what the pod spec says is expanded and mapped; an image entrypoint is taken as is.
    const fromSpec = (list: string[] | undefined) => (list ?? []).map((a) => rewrite(expand(a, mapping)));
    const argv = c.command?.length ? [...fromSpec(c.command), ...fromSpec(c.args)] : [...entrypoint, ...fromSpec(c.args)];
    const processEnv: Record<string, string> = {
      PATH: process.env.PATH ?? '/usr/local/bin:/usr/bin:/bin',
      HOME: this.s.runAsPodUsers ? homeFor(containerDir, identity) : this.s.podDir,
      // A container's /tmp is its volume mounted there, if it has one.
      TMPDIR: mounts.find((m) => m.mountPath === '/tmp')?.localPath ?? path.join(this.s.podDir, 'tmp'),
      HOSTNAME: this.pod.spec?.hostname || this.name,
      ...this.s.baseEnv,
      ...(this.podKubeconfig ? { KUBECONFIG: this.podKubeconfig } : {}),
    };
    for (const [k, v] of env) processEnv[k] = rewrite(v);
    // How a program finds what it would find at fixed paths in a container:
    // every mount and the termination-log file are also given explicitly.
    processEnv.LOCAL_CLUSTER_MOUNTS = JSON.stringify(Object.fromEntries(mounts.map((m) => [m.mountPath, m.localPath])));
    processEnv.LOCAL_CLUSTER_TERMINATION_LOG = terminationLog;
    processEnv.LOCAL_CLUSTER_POD_DIR = this.s.podDir;

    let cwd = this.s.podDir;
    if (c.workingDir) {
      const wd = rewrite(c.workingDir);
      if (isDir(wd)) cwd = wd;
    }

    const logFile = path.join(this.s.podDir, 'logs', safeName(name), `${slot.status.restartCount}.log`);
    this.event('Normal', 'Pulled', `Container image "${c.image ?? ''}" already present on machine`);
    this.event('Normal', 'Created', `Created container ${name}`);
    const proc = ContainerProcess.start({
      argv, env: processEnv, cwd, logFile, maxLogMemoryBytes: this.s.maxLogBytes, maxLogFileBytes: this.s.maxLogBytes,
      ...(this.s.runAsPodUsers ? { identity } : {}),
    });
    if (slot.current) slot.previous = slot.current;
    slot.current = proc.log;
    slot.proc = proc;
    const startedAt = rfc3339(proc.startedAt);
    const containerID = `local://${proc.pid ?? 0}`;
    if (proc.pid !== undefined) {
      this.event('Normal', 'Started', `Started container ${name}`);
      slot.status = {
        ...slot.status,
        state: { running: { startedAt } },
        // No probes: a started regular container is ready; init containers never are while running.
        ready: !slot.isInit,
        started: true,
        containerID,
      };
      this.writeStatus();
    }
    this.s.log('container started', { pod: this.key, container: name, pid: proc.pid, argv }, 'info');
    return proc.exited.then((exit) => ({
      ...exit,
      message: exit.startError ?? terminationMessage(terminationLog, c.terminationMessagePolicy, exit.exitCode, proc.log.text()),
    }));
  }

  private containerExited(slot: Slot, exit: ContainerExit): void {
    const message = exit.message;
    const killedFor = slot.killedFor;
    slot.killedFor = undefined;
    const terminated: ContainerStatus['state']['terminated'] = {
      exitCode: exit.exitCode,
      reason: exit.startError ? 'StartError' : killedFor ?? (exit.exitCode === 0 ? 'Completed' : 'Error'),
      // The runtime reports a container that never started as started at the epoch.
      startedAt: exit.startError ? '1970-01-01T00:00:00Z' : rfc3339(exit.startedAt),
      finishedAt: rfc3339(exit.finishedAt),
      containerID: `local://${slot.proc?.pid ?? 0}`,
    };
    if (message) terminated.message = message;
    if (exit.startError) this.event('Warning', 'Failed', `Error: ${exit.startError}`);
    slot.status = {
      ...slot.status,
      state: { terminated },
      ready: false,
      started: false,
      containerID: terminated.containerID,
    };
    // Init containers are "ready" once they completed successfully.
    if (slot.isInit && exit.exitCode === 0) slot.status.ready = true;
    this.writeStatus();
  }

  private setWaiting(slot: Slot, reason: string, message: string): void {
    slot.status = { ...slot.status, state: { waiting: { reason, message } }, ready: false, started: false };
  }

  private finish(): void {
    this.finished = true;
    if (!this.reporting) return;
    if (this.mode === 'deleting' || this.mode === 'evicting') {
      // Containers that never ran cannot be found any more once the pod is terminal.
      for (const slot of this.slots.values()) {
        if (slot.status.state.waiting) {
          slot.status = {
            ...slot.status,
            lastState: slot.status.lastState.terminated ? slot.status.lastState : {},
            state: { terminated: { exitCode: 137, reason: 'ContainerStatusUnknown', message: 'The container could not be located when the pod was terminated', startedAt: null, finishedAt: null } },
            ready: false,
            started: false,
          };
        }
      }
    }
    this.writeStatus(true);
    if (this.mode === 'deleting') this.completeDeletion();
  }

  private completeDeletion(): void {
    try {
      this.s.api.delete(this.s.pods, this.namespace, this.name, { gracePeriodSeconds: 0, preconditions: { uid: this.uid } });
    } catch (err) {
      if (!(err instanceof StatusError && (err.code === 404 || err.code === 409))) this.s.log('final pod delete failed', { pod: this.key, err: String(err) });
    }
  }

  // ---- status ------------------------------------------------------------------

  private buildStatus(terminal: boolean, previous: PodStatus | undefined): PodStatus {
    const spec = this.pod.spec ?? {};
    const init = this.init.map((s) => s.status);
    const main = this.main.map((s) => s.status);
    const phase = podPhase(spec, init, main, terminal);
    const now = rfc3339();
    const status: PodStatus = { ...(previous ?? {}) };
    status.phase = phase;
    status.conditions = podConditions({ spec, phase, init, main, sandboxReady: this.sandboxReady, scheduled: true }, previous?.conditions, now);
    status.hostIP = this.s.node.hostIP;
    status.hostIPs = [{ ip: this.s.node.hostIP }];
    if (this.sandboxReady) {
      status.podIP = this.s.node.podIP;
      status.podIPs = [{ ip: this.s.node.podIP }];
    }
    status.startTime = previous?.startTime ?? this.startTime;
    if (init.length) status.initContainerStatuses = init;
    else delete status.initContainerStatuses;
    status.containerStatuses = main;
    if (this.evicted) {
      // eviction_manager.go evictPod: the kubelet's own terminal status, whatever the containers' exits.
      status.reason = 'Evicted';
      status.message = this.evicted.message;
      if (terminal) status.phase = 'Failed';
      const before = previous?.conditions?.find((c) => c.type === 'DisruptionTarget');
      status.conditions = [...status.conditions.filter((c) => c.type !== 'DisruptionTarget'), {
        type: 'DisruptionTarget', status: 'True', reason: 'TerminationByKubelet', message: this.evicted.message,
        lastProbeTime: null, lastTransitionTime: before?.lastTransitionTime ?? now,
      }];
    }
    return status;
  }

  /** Write the status if it changed; the pod must still be the one this worker runs. */
  private writeStatus(terminal = false): void {
    if (!this.reporting) return;
    const current = this.s.api.get(this.s.pods, this.namespace, this.name) as Pod | undefined;
    if (!current || current.metadata.uid !== this.uid) return;
    const status = this.buildStatus(terminal || (this.mode === 'deleting' || this.mode === 'evicting') && this.finished, current.status);
    if (deepEqual(status, current.status)) return;
    try {
      this.pod = this.s.api.update(this.s.pods, this.namespace, { ...current, status }, { subresource: 'status', fieldManager: 'kubelet' }) as Pod;
    } catch (err) {
      if (!(err instanceof StatusError && err.code === 404)) this.s.log('pod status update failed', { pod: this.key, err: String(err) });
    }
  }

  private event(type: EventType, reason: string, message: string): void {
    if (!this.reporting) return;
    recordEvent(this.s.api, this.pod, type, reason, message, { component: 'kubelet', host: this.s.node.nodeName });
  }

  private retryDelay(attempt: number): number {
    return Math.min(this.s.retryMaxMs, this.s.retryBaseMs * 2 ** Math.min(attempt, 20));
  }
}

/** The local argv prefix standing in for an image's entrypoint. */
export function imageCommand(map: Record<string, string[]>, image: string): string[] | undefined {
  if (map[image]) return map[image];
  // docker.io/library/x and x are the same image.
  const short = image.replace(/^docker\.io\//, '').replace(/^library\//, '');
  for (const [k, v] of Object.entries(map)) {
    if (k.replace(/^docker\.io\//, '').replace(/^library\//, '') === short) return v;
  }
  return undefined;
}

/** A home of the container's own, as its image would give its user, owned by that user. */
function homeFor(containerDir: string, id: ProcessIdentity): string {
  const home = path.join(containerDir, 'home');
  fs.mkdirSync(home, { recursive: true, mode: 0o700 });
  fs.chownSync(home, id.uid, id.gid);
  return home;
}

function isDir(p: string): boolean {
  try {
    return fs.statSync(p).isDirectory();
  } catch {
    return false;
  }
}

/** Go's time.Duration String() for the back-off message ("10s", "2m40s", "5m0s"). */
export function goDuration(ms: number): string {
  const total = Math.round(ms / 1000);
  if (ms < 1000) return `${ms}ms`;
  const h = Math.floor(total / 3600);
  const m = Math.floor((total % 3600) / 60);
  const s = total % 60;
  if (h) return `${h}h${m}m${s}s`;
  if (m) return `${m}m${s}s`;
  return `${s}s`;
}
