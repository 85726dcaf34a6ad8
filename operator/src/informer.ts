// client-node informers stop for good on a watch error and can stall
// silently on a half-open connection. This wrapper relists (relist(): a
// fresh informer and a fresh LIST) after an error (with backoff), when no
// event arrived for a watchdog period, and every relistMs, so a change whose
// watch event was lost, or a watch that delivers nothing yet looks alive,
// is corrected; and it calls onResync periodically so every object is
// reconciled again.
import * as k8s from '@kubernetes/client-node';
import { errFields, type Logger } from '@mediajobs/lib/logger';
import type { OperatorMetrics, RelistTrigger } from './metrics.js';

export interface ResilientInformerOptions<T extends k8s.KubernetesObject> {
  name: string;
  kc: k8s.KubeConfig;
  path: string;
  list: () => Promise<k8s.KubernetesListObject<T>>;
  labelSelector?: string;
  onChange: (obj: T, type: 'add' | 'update' | 'delete') => void;
  onResync?: () => void;
  resyncMs: number;
  watchdogMs: number;
  relistMs: number;
  log: Logger;
  /** Counts relists by trigger, and failed ones. */
  metrics?: Pick<OperatorMetrics, 'relisted' | 'relistFailed'>;
}

export class ResilientInformer<T extends k8s.KubernetesObject> {
  private informer: k8s.ListWatch<T>;
  private lastEvent = Date.now();
  private restarts = 0;
  private timers: NodeJS.Timeout[] = [];
  private stopped = false;
  private restarting = false;
  /** Informers that reported an error: a relist's fresh one may fail its first watch while it starts. */
  private readonly failed = new WeakSet<k8s.ListWatch<T>>();
  /** Since when the cache has followed the API server without a break; undefined while its watch is down. */
  private following: number | undefined;

  constructor(private readonly o: ResilientInformerOptions<T>) {
    this.informer = this.make();
  }

  // What makeInformer builds, typed as the ListWatch it is: its
  // latestResourceVersion() tells whether its list went through.
  private make(): k8s.ListWatch<T> {
    const inf = new k8s.ListWatch<T>(this.o.path, new k8s.Watch(this.o.kc), this.o.list, false, this.o.labelSelector);
    for (const type of ['add', 'update', 'delete'] as const) {
      inf.on(type, (obj) => {
        this.lastEvent = Date.now();
        this.o.onChange(obj, type);
      });
    }
    inf.on('connect', () => {
      this.lastEvent = Date.now();
    });
    inf.on('error', (err) => {
      this.failed.add(inf);
      // A replaced informer's aborted watch, or a relist's fresh one still starting (relist looks at it), is not ours to restart.
      if (this.stopped || inf !== this.informer) return;
      this.following = undefined;
      this.o.log.warn({ informer: this.o.name, err: errFields(err) }, 'informer stopped; restarting');
      this.restartLater('error');
    });
    return inf;
  }

  async start(): Promise<void> {
    this.stopped = false;
    await this.informer.start();
    this.lastEvent = Date.now();
    if (this.informer.latestResourceVersion() && !this.failed.has(this.informer)) this.following = Date.now();
    const resync = setInterval(() => this.o.onResync?.(), this.o.resyncMs);
    const watchdog = setInterval(() => {
      if (Date.now() - this.lastEvent > this.o.watchdogMs) {
        this.o.log.info({ informer: this.o.name }, 'no watch events for a while; restarting the informer');
        void this.restart('watchdog');
      }
    }, Math.max(1000, Math.floor(this.o.watchdogMs / 4)));
    const relist = setInterval(() => {
      this.o.log.debug({ informer: this.o.name }, 'periodic relist');
      void this.restart('periodic');
    }, this.o.relistMs);
    resync.unref();
    watchdog.unref();
    relist.unref();
    this.timers.push(resync, watchdog, relist);
  }

  /** restart() after a failure, waiting longer after each one in a row (250 ms doubling, at most 30 s). */
  private restartLater(trigger: RelistTrigger): void {
    const t = setTimeout(() => void this.restart(trigger), Math.min(30_000, 250 * 2 ** Math.min(this.restarts++, 7)));
    t.unref();
    this.timers.push(t);
  }

  private async restart(trigger: RelistTrigger): Promise<void> {
    // One at a time: the watchdog, the relist timer and an error may all ask at once.
    if (this.stopped || this.restarting) return;
    this.restarting = true;
    try {
      this.o.metrics?.relisted(this.o.name, trigger);
      await this.relist(trigger);
    } finally {
      this.restarting = false;
    }
  }

  /**
   * A fresh informer, which LISTs, in place of the old one. Stopping and
   * starting a client-node informer does not list again: it resumes its
   * watch from the last resourceVersion, so a change the old watch lost
   * would stay lost. The fresh one announces every object as added; what
   * the old cache held and the list no longer has is announced as deleted.
   */
  private async relist(trigger: RelistTrigger): Promise<void> {
    this.lastEvent = Date.now();
    const old = this.informer;
    this.following = undefined;
    try {
      await old.stop();
    } catch {
      // already stopped
    }
    const fresh = this.make();
    await fresh.start();
    if (this.stopped) {
      // stop() ran during the list and stopped the old one: this one would watch on for no one.
      await fresh.stop().catch(() => undefined);
      return;
    }
    if (!fresh.latestResourceVersion()) {
      // The list failed (client-node reports it as an error event, not a
      // rejection): keep the old cache, whole but stale, rather than an empty one.
      await fresh.stop().catch(() => undefined);
      this.o.log.warn({ informer: this.o.name }, 'informer relist failed; keeping the cache and trying again');
      this.o.metrics?.relistFailed(this.o.name);
      this.restartLater(trigger);
      return;
    }
    this.informer = fresh;
    for (const obj of old.list()) {
      if (!fresh.get(obj.metadata?.name ?? '', obj.metadata?.namespace)) this.o.onChange(obj, 'delete');
    }
    this.o.onResync?.();
    if (this.failed.has(fresh)) {
      // Listed, but its watch failed as it began (an API server going away
      // between the two): the cache is fresh and will not stay so, and
      // nothing else would notice before the watchdog.
      this.o.log.warn({ informer: this.o.name }, 'informer watch failed as it started; restarting');
      this.restartLater(trigger);
      return;
    }
    this.restarts = 0;
    this.following = Date.now();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    for (const t of this.timers) clearTimeout(t);
    this.timers = [];
    await this.informer.stop().catch(() => undefined);
  }

  /**
   * Since when (ms) the cache has followed the API server without a break:
   * its last successful list, or its start. Undefined while the watch is
   * down (after an error, and while a relist runs), when what the cache
   * says may be behind by any amount.
   */
  followingSince(): number | undefined {
    return this.following;
  }

  get(name: string, namespace?: string): T | undefined {
    return this.informer.get(name, namespace);
  }

  list(namespace?: string): readonly T[] {
    return this.informer.list(namespace);
  }
}
