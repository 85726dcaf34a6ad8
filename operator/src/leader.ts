// Leader election over a coordination.k8s.io/v1 Lease, as client-go's
// leaderelection does: acquire when the lease is free or expired, renew
// while leading, give up leadership when renewal keeps failing past the
// renew deadline (shorter than the lease duration, so the old leader has
// stopped before anyone else may take the expired lease), and release on a
// clean stop so a successor need not wait.
import * as k8s from '@kubernetes/client-node';
import { errFields, type Logger } from '@mediajobs/lib/logger';
import { isConflict, isNotFound } from './kube.js';

export interface LeaderOptions {
  namespace: string;
  name: string;
  identity: string;
  leaseDurationSeconds: number;
  renewSeconds: number;
  /** Stop leading when no renewal succeeded for this long; less than leaseDurationSeconds. */
  renewDeadlineSeconds: number;
  onStartedLeading: () => void | Promise<void>;
  onStoppedLeading: () => void | Promise<void>;
}

export class LeaderElector {
  private timer: NodeJS.Timeout | undefined;
  private leading = false;
  private lastRenew = 0;
  private turnedAt = 0;
  private stopped = false;

  constructor(private readonly api: k8s.CoordinationV1Api, private readonly log: Logger, private readonly o: LeaderOptions) {}

  get isLeader(): boolean {
    return this.leading;
  }

  /**
   * When the loop last finished a turn (an attempt to acquire or renew,
   * successful or not, and the leadership change it led to), or started;
   * 0 before start(). The operator's liveness: a loop that stops turning
   * is stuck (the probes, probes.ts).
   */
  get lastTurn(): number {
    return this.turnedAt;
  }

  start(): void {
    this.stopped = false;
    this.turnedAt = Date.now();
    void this.loop();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    if (this.leading) {
      await this.release().catch(() => undefined);
      await this.setLeading(false);
    }
  }

  private async loop(): Promise<void> {
    if (this.stopped) return;
    let acquired = false;
    try {
      acquired = await this.tryAcquireOrRenew();
    } catch (err) {
      this.log.warn({ err: errFields(err) }, 'lease update failed');
    }
    // stop() may have run while the lease call was in flight: a renewal that
    // lands after it must not make a stopped elector lead again.
    if (this.stopped) {
      if (acquired && !this.leading) await this.release().catch(() => undefined);
      return;
    }
    if (acquired) this.lastRenew = Date.now();
    if (acquired && !this.leading) await this.setLeading(true);
    const deadline = this.lastRenew + this.o.renewDeadlineSeconds * 1000;
    if (!acquired && this.leading && Date.now() >= deadline) await this.setLeading(false);
    this.turnedAt = Date.now();
    if (this.stopped) return;
    // A leader whose renewal failed tries again sooner, and looks again at
    // its deadline exactly, so it steps down on time even between renewals.
    const retry = Math.max(200, (this.o.renewSeconds * 1000) / 2);
    const next = !this.leading ? retry : acquired ? this.o.renewSeconds * 1000 : Math.max(50, Math.min(retry, deadline - Date.now()));
    this.timer = setTimeout(() => void this.loop(), next);
    this.timer.unref();
  }

  private async setLeading(v: boolean): Promise<void> {
    this.leading = v;
    this.log.info({ identity: this.o.identity, lease: this.o.name }, v ? 'became leader' : 'stopped leading');
    await (v ? this.o.onStartedLeading() : this.o.onStoppedLeading());
  }

  private async tryAcquireOrRenew(): Promise<boolean> {
    const now = new k8s.V1MicroTime();
    let lease: k8s.V1Lease;
    try {
      lease = await this.api.readNamespacedLease({ name: this.o.name, namespace: this.o.namespace });
    } catch (err) {
      if (!isNotFound(err)) throw err;
      try {
        await this.api.createNamespacedLease({
          namespace: this.o.namespace,
          body: {
            metadata: { name: this.o.name, namespace: this.o.namespace },
            spec: { holderIdentity: this.o.identity, leaseDurationSeconds: this.o.leaseDurationSeconds, acquireTime: now, renewTime: now, leaseTransitions: 0 },
          },
        });
        return true;
      } catch (e) {
        if (isConflict(e)) return false;
        throw e;
      }
    }
    const spec = lease.spec ?? {};
    const holder = spec.holderIdentity ?? '';
    const renewed = spec.renewTime ? new Date(spec.renewTime).getTime() : 0;
    const expired = renewed + (spec.leaseDurationSeconds ?? this.o.leaseDurationSeconds) * 1000 < Date.now();
    if (holder !== this.o.identity && holder !== '' && !expired) return false;
    const takeover = holder !== this.o.identity;
    lease.spec = {
      ...spec,
      holderIdentity: this.o.identity,
      leaseDurationSeconds: this.o.leaseDurationSeconds,
      renewTime: now,
      acquireTime: takeover ? now : spec.acquireTime ? new k8s.V1MicroTime(spec.acquireTime) : now,
      leaseTransitions: (spec.leaseTransitions ?? 0) + (takeover && holder !== '' ? 1 : 0),
    };
    try {
      await this.api.replaceNamespacedLease({ name: this.o.name, namespace: this.o.namespace, body: lease });
      return true;
    } catch (err) {
      if (isConflict(err)) return false;
      throw err;
    }
  }

  /** Hand the lease back: an empty holder lets the next contender take it at once. */
  private async release(): Promise<void> {
    const lease = await this.api.readNamespacedLease({ name: this.o.name, namespace: this.o.namespace });
    if (lease.spec?.holderIdentity !== this.o.identity) return;
    lease.spec = { ...lease.spec, holderIdentity: '', leaseDurationSeconds: 1, renewTime: new k8s.V1MicroTime(), acquireTime: lease.spec.acquireTime ? new k8s.V1MicroTime(lease.spec.acquireTime) : undefined };
    await this.api.replaceNamespacedLease({ name: this.o.name, namespace: this.o.namespace, body: lease });
  }
}
