// Webhook delivery from the outbox table: POST JSON with a per-attempt
// timeout, a fixed number of attempts with exponential backoff, and a stable
// event id in a header and the body so receivers can drop duplicates. Rows
// are claimed with SKIP LOCKED and a lease, so a crash mid-delivery means a
// retry later, never a lost event; Postgres NOTIFY wakes the loop at once.
// The statements on the outbox table are lib/src/db/outbox.ts's.
import type pg from 'pg';
import {
  OUTBOX_CHANNEL, claimDueEvents, markDelivered, markFailed, scheduleRetry, type ClaimedEvent,
} from '@mediajobs/lib/db/outbox';
import { errFields, type Logger } from '@mediajobs/lib/logger';
import type { SecretBox } from '@mediajobs/lib/secret-box';

export interface OutboxOptions {
  timeoutMs: number;
  attempts: number;
  backoffMs: number;
  pollMs?: number;
  batch?: number;
}

export class OutboxDispatcher {
  private timer: NodeJS.Timeout | undefined;
  private listener: pg.PoolClient | undefined;
  private unlisten: (client: pg.PoolClient) => void = () => undefined;
  private running = false;
  private again = false;
  private stopped = false;

  constructor(private readonly pool: pg.Pool, private readonly box: SecretBox, private readonly log: Logger, private readonly opts: OutboxOptions) {}

  async start(): Promise<void> {
    this.stopped = false;
    try {
      const listener = await this.pool.connect();
      this.listener = listener;
      const onNotification = () => this.kick();
      // A lost LISTEN connection leaves polling, which still delivers everything; the broken client is destroyed.
      const onError = (err: Error) => {
        this.log.warn({ err: errFields(err) }, 'outbox LISTEN connection lost; polling only');
        this.unlisten(listener);
        listener.release(err);
      };
      listener.on('notification', onNotification);
      listener.on('error', onError);
      this.unlisten = (client) => {
        // Once given back to the pool the client is someone else's: its errors are not ours to release again.
        client.off('notification', onNotification);
        client.off('error', onError);
        if (this.listener === client) this.listener = undefined;
      };
      await listener.query(`LISTEN ${OUTBOX_CHANNEL}`);
    } catch (err) {
      this.log.warn({ err: errFields(err) }, 'outbox LISTEN unavailable; polling only');
    }
    this.timer = setInterval(() => this.kick(), this.opts.pollMs ?? 1000);
    this.timer.unref();
    this.kick();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
    const listener = this.listener;
    if (listener) {
      await listener.query('UNLISTEN *').catch(() => undefined);
      // The connection may have failed meanwhile, and its handler released it already.
      if (this.listener === listener) {
        this.unlisten(listener);
        listener.release();
      }
    }
    while (this.running) await new Promise((r) => setTimeout(r, 20));
  }

  kick(): void {
    if (this.stopped) return;
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = true;
    void this.drain().finally(() => {
      this.running = false;
      if (this.again && !this.stopped) {
        this.again = false;
        this.kick();
      }
    });
  }

  private async drain(): Promise<void> {
    try {
      // Stop between batches, never between claiming and delivering: a claimed
      // row left undelivered would sit out its whole lease before a retry.
      while (!this.stopped) {
        const rows = await this.claim();
        if (!rows.length) return;
        await Promise.all(rows.map((r) => this.deliver(r)));
      }
    } catch (err) {
      this.log.error({ err: errFields(err) }, 'outbox pass failed');
    }
  }

  /** Due events, claimed under a lease long enough for one attempt (lib/src/db/outbox.ts claimDueEvents). */
  private claim(): Promise<ClaimedEvent[]> {
    return claimDueEvents(this.pool, { batch: this.opts.batch ?? 16, leaseSeconds: Math.ceil(this.opts.timeoutMs / 1000) + 30 });
  }

  private async deliver(row: ClaimedEvent): Promise<void> {
    // Counted when claimed, so an attempt cut short by a crash (its POST
    // perhaps sent) still counts: never more POSTs than attempts.
    const attempt = row.attempts;
    if (attempt > this.opts.attempts) {
      await markFailed(this.pool, row.id);
      this.log.warn({ eventId: row.event_id, type: row.type, attempt: attempt - 1 }, 'webhook given up');
      return;
    }
    let error: string | undefined;
    try {
      const target = this.box.open(row.target_enc);
      const res = await fetch(target, {
        method: 'POST',
        headers: {
          'Content-Type': 'application/json',
          'User-Agent': 'mediajobs-webhooks/1',
          'X-Mediajobs-Event-Id': row.event_id,
          'X-Mediajobs-Event-Type': row.type,
        },
        body: JSON.stringify(row.payload),
        redirect: 'manual',
        signal: AbortSignal.timeout(this.opts.timeoutMs),
      });
      await res.body?.cancel();
      if (res.status < 200 || res.status >= 300) error = `HTTP ${res.status}`;
    } catch (err) {
      // The cause names the receiver's host; keep only its kind.
      error = err instanceof Error && err.name === 'TimeoutError' ? 'timeout' : 'connection failed';
    }
    if (!error) {
      await markDelivered(this.pool, row.id);
      this.log.info({ eventId: row.event_id, type: row.type, attempt }, 'webhook delivered');
      return;
    }
    if (attempt >= this.opts.attempts) {
      await markFailed(this.pool, row.id, error);
      this.log.warn({ eventId: row.event_id, type: row.type, attempt, error }, 'webhook given up');
      return;
    }
    const delayMs = this.opts.backoffMs * 2 ** (attempt - 1);
    await scheduleRetry(this.pool, row.id, error, delayMs);
    this.log.info({ eventId: row.event_id, type: row.type, attempt, error, retryInMs: delayMs }, 'webhook attempt failed');
  }
}
