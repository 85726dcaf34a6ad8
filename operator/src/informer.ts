// client-node informers stop for good on a watch error and can stall
// silently on a half-open connection. This wrapper restarts one after an
// error (with backoff), restarts it when no event arrived for a watchdog
// period, and calls onResync periodically so every object is reconciled
// again even if an event was missed.
import * as k8s from '@kubernetes/client-node';
import type { Logger } from '@mediajobs/lib/logger';

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
  log: Logger;
}

export class ResilientInformer<T extends k8s.KubernetesObject> {
  private informer: k8s.Informer<T> & k8s.ObjectCache<T>;
  private lastEvent = Date.now();
  private restarts = 0;
  private timers: NodeJS.Timeout[] = [];
  private stopped = false;

  constructor(private readonly o: ResilientInformerOptions<T>) {
    this.informer = this.make();
  }

  private make(): k8s.Informer<T> & k8s.ObjectCache<T> {
    const inf = k8s.makeInformer<T>(this.o.kc, this.o.path, this.o.list, this.o.labelSelector);
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
      if (this.stopped) return;
      const delay = Math.min(30_000, 250 * 2 ** Math.min(this.restarts++, 7));
      this.o.log.warn({ informer: this.o.name, err: String(err), delayMs: delay }, 'informer stopped; restarting');
      const t = setTimeout(() => void this.restart(), delay);
      t.unref();
      this.timers.push(t);
    });
    return inf;
  }

  async start(): Promise<void> {
    this.stopped = false;
    await this.informer.start();
    this.lastEvent = Date.now();
    const resync = setInterval(() => this.o.onResync?.(), this.o.resyncMs);
    const watchdog = setInterval(() => {
      if (Date.now() - this.lastEvent > this.o.watchdogMs) {
        this.o.log.info({ informer: this.o.name }, 'no watch events for a while; restarting the informer');
        void this.restart();
      }
    }, Math.max(1000, Math.floor(this.o.watchdogMs / 4)));
    resync.unref();
    watchdog.unref();
    this.timers.push(resync, watchdog);
  }

  private async restart(): Promise<void> {
    if (this.stopped) return;
    this.lastEvent = Date.now();
    try {
      await this.informer.stop();
    } catch {
      // already stopped
    }
    try {
      // start() relists, so the cache is whole again and changes made meanwhile arrive as events.
      await this.informer.start();
      this.restarts = 0;
      this.o.onResync?.();
    } catch (err) {
      this.o.log.warn({ informer: this.o.name, err: String(err) }, 'informer restart failed');
      const t = setTimeout(() => void this.restart(), Math.min(30_000, 500 * 2 ** Math.min(this.restarts++, 6)));
      t.unref();
      this.timers.push(t);
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    for (const t of this.timers) clearTimeout(t);
    this.timers = [];
    await this.informer.stop().catch(() => undefined);
  }

  get(name: string, namespace?: string): T | undefined {
    return this.informer.get(name, namespace);
  }

  list(namespace?: string): readonly T[] {
    return this.informer.list(namespace);
  }
}
