// Pod phase and conditions derived from container statuses, as the kubelet
// computes them (kubelet_pods.go getPhase, status/generate.go). Pure, so the
// worker can recompute the whole status after every container transition.
import type { Condition, ContainerStatus, PodSpec } from './pod-types.js';

/** getPhase: the pod phase from its container statuses. */
export function podPhase(spec: PodSpec, init: readonly ContainerStatus[], main: readonly ContainerStatus[], podIsTerminal: boolean): string {
  const restartPolicy = spec.restartPolicy ?? 'Always';
  // Init containers: any not yet succeeded keeps the pod pending, or fails it under Never.
  let pendingInitialization = 0;
  let failedInitialization = 0;
  for (const s of init) {
    const t = s.state.terminated;
    if (t && t.exitCode === 0) continue;
    if (t || (s.state.waiting && s.lastState.terminated && s.lastState.terminated.exitCode !== 0)) failedInitialization++;
    pendingInitialization++;
  }
  let unknown = 0;
  let running = 0;
  let waiting = 0;
  let stopped = 0;
  let succeeded = 0;
  for (const s of main) {
    if (s.state.running) {
      running++;
    } else if (s.state.terminated) {
      stopped++;
      if (s.state.terminated.exitCode === 0) succeeded++;
    } else if (s.state.waiting) {
      if (s.lastState.terminated) {
        stopped++;
        if (s.lastState.terminated.exitCode === 0) succeeded++;
      } else {
        waiting++;
      }
    } else {
      unknown++;
    }
  }
  if (failedInitialization > 0 && restartPolicy === 'Never') return 'Failed';
  if (pendingInitialization > 0 && !podIsTerminal) return 'Pending';
  if (podIsTerminal) {
    // A terminal pod's containers will not run again, whatever the restart policy.
    if (pendingInitialization > 0) return 'Failed';
    return stopped + waiting + running > 0 && succeeded === main.length ? 'Succeeded' : 'Failed';
  }
  if (waiting > 0) return 'Pending';
  if (running > 0 && unknown === 0) return 'Running';
  if (running === 0 && stopped > 0 && unknown === 0) {
    if (restartPolicy === 'Always') return 'Running';
    if (stopped === succeeded) return 'Succeeded';
    if (restartPolicy === 'Never') return 'Failed';
    return 'Running';
  }
  return 'Pending';
}

export interface ConditionInputs {
  spec: PodSpec;
  phase: string;
  init: readonly ContainerStatus[];
  main: readonly ContainerStatus[];
  /** Volumes are set up and the "sandbox" exists. */
  sandboxReady: boolean;
  scheduled: boolean;
  unschedulableMessage?: string;
}

/** The pod conditions in the kubelet's order, keeping transition times of unchanged ones. */
export function podConditions(inp: ConditionInputs, previous: readonly Condition[] | undefined, now: string): Condition[] {
  const out: Condition[] = [];
  if (!inp.scheduled) {
    out.push({ type: 'PodScheduled', status: 'False', reason: 'Unschedulable', message: inp.unschedulableMessage });
    return withTimes(out, previous, now);
  }
  const terminal = inp.phase === 'Succeeded' || inp.phase === 'Failed';
  out.push({ type: 'PodReadyToStartContainers', status: inp.sandboxReady && !terminal ? 'True' : 'False' });
  out.push(initializedCondition(inp));
  const containersReady = containersReadyCondition(inp);
  out.push({ ...containersReady, type: 'Ready' });
  out.push(containersReady);
  out.push({ type: 'PodScheduled', status: 'True' });
  return withTimes(out, previous, now);
}

function initializedCondition(inp: ConditionInputs): Condition {
  if (inp.phase === 'Succeeded') return { type: 'Initialized', status: 'True', reason: 'PodCompleted' };
  // Once any regular container has started, the pod was initialized.
  if (inp.main.some((s) => s.state.running || s.state.terminated || s.lastState.terminated)) return { type: 'Initialized', status: 'True' };
  const incomplete = inp.init.filter((s) => !(s.state.terminated && s.state.terminated.exitCode === 0)).map((s) => s.name);
  if (incomplete.length) {
    return { type: 'Initialized', status: 'False', reason: 'ContainersNotInitialized', message: `containers with incomplete status: [${incomplete.join(' ')}]` };
  }
  return { type: 'Initialized', status: 'True' };
}

function containersReadyCondition(inp: ConditionInputs): Condition {
  if (inp.phase === 'Succeeded') return { type: 'ContainersReady', status: 'False', reason: 'PodCompleted' };
  if (inp.phase === 'Failed') return { type: 'ContainersReady', status: 'False', reason: 'PodFailed' };
  const unready = inp.main.filter((s) => !s.ready).map((s) => s.name);
  if (unready.length) {
    return { type: 'ContainersReady', status: 'False', reason: 'ContainersNotReady', message: `containers with unready status: [${unready.join(' ')}]` };
  }
  return { type: 'ContainersReady', status: 'True' };
}

function withTimes(conds: Condition[], previous: readonly Condition[] | undefined, now: string): Condition[] {
  return conds.map((c) => {
    const prev = previous?.find((p) => p.type === c.type);
    const lastTransitionTime = prev && prev.status === c.status && prev.lastTransitionTime ? prev.lastTransitionTime : now;
    const out: Condition = { type: c.type, status: c.status, lastProbeTime: null, lastTransitionTime };
    if (c.reason) out.reason = c.reason;
    if (c.message) out.message = c.message;
    return out;
  });
}
