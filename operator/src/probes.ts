// The operator's liveness and readiness, answered on its metrics listener
// (GET /healthz, GET /readyz; operator.ts wires them, metrics.ts serves them).
// Pure functions of what the process knows; no call to the API server or
// Postgres is made to answer a probe.
//
// The semantics are controller-runtime's manager's: the probes are served on
// every replica from the start, before the caches have synced and whether
// or not it leads (its health probe server is not a leader-election
// runnable), readiness waits for the informer caches (the usual
// WaitForCacheSync readyz check), and leadership is no part of either: a
// standby whose Lease loop turns is healthy and ready, as client-go's
// leader-election healthz adaptor answers for a replica that does not lead.
// Who leads is the metric mediajobs_operator_leader, and no leader anywhere
// is the alert MediaJobsNoOperatorLeader (docs/runbook.md).
//
// - Live: the Lease loop turns (LeaderElector.lastTurn is recent). A turn
//   that fails (the API server down) still turns: an outage is no reason to
//   restart, a stuck loop is (client-go's adaptor fails a leader that has not
//   renewed for the lease duration plus a tolerance; ours asks the same of
//   every replica's loop). Without leader election, live while it answers.
// - Ready: live, not stopping, every informer cache listed once and
//   following the API server now (ResilientInformer.followingSince).

export interface ProbeState {
  now: number;
  /** stop() has begun. */
  stopping: boolean;
  /** Every informer has listed once (the controllers' startInformers resolved). */
  synced: boolean;
  /** The informers whose cache does not follow the API server now (their followingSince is undefined). */
  notFollowing: readonly string[];
  /** With leader election: when its loop last turned (0: not started), and how long a turn may take before it counts as stuck. */
  election?: { lastTurn: number; stalledAfterMs: number };
}

/** How long a Lease loop turn may take: its wait, its two API calls at their timeout, and the lease duration as slack. */
export function stalledAfterMs(lease: { durationSeconds: number; renewSeconds: number }, kubeRequestTimeoutMs: number): number {
  return (lease.durationSeconds + lease.renewSeconds) * 1000 + 2 * kubeRequestTimeoutMs;
}

/** Undefined when live, else why not (GET /healthz's 503 error). */
export function liveness(s: ProbeState): string | undefined {
  const e = s.election;
  if (!e || e.lastTurn === 0) return undefined;
  const idle = s.now - e.lastTurn;
  return idle > e.stalledAfterMs ? `Leader election loop stalled: no turn for ${Math.floor(idle / 1000)} s` : undefined;
}

/** Undefined when ready, else what is missing (GET /readyz's 503 error). */
export function readiness(s: ProbeState): string | undefined {
  if (s.stopping) return 'Shutting down';
  const dead = liveness(s);
  if (dead) return dead;
  if (!s.synced) return 'Informer caches not synced';
  if (s.notFollowing.length) return `Informers not following the API server: ${s.notFollowing.join(', ')}`;
  return undefined;
}
