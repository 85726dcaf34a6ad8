// Webhook delivery from the outbox table: POST JSON with a per-attempt
// timeout, a fixed number of attempts with exponential backoff, and a stable
// event id in a header and the body so receivers can drop duplicates. Rows
// are claimed with SKIP LOCKED and a lease, so a crash mid-delivery means a
// retry later, never a lost event; Postgres NOTIFY wakes the loop at once.
import type pg from 'pg';
import type { Logger } from '@mediajobs/lib/logger';
import type { SecretBox } from '@mediajobs/lib/secret-box';

export interface OutboxOptions {
  timeoutMs: number;
  attempts: number;
  backoffMs: number;
  pollMs?: number;
  batch?: number;
}

interface OutboxRow {
  id: string;
  event_id: string;
  type: string;
  target_enc: string;
  payload: Record<string, unknown>;
  attempts: number;
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
        this.log.warn({ err: err.message }, 'outbox LISTEN connection lost; polling only');
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
      await listener.query('LISTEN mediajobs_outbox');
    } catch (err) {
      this.log.warn({ err }, 'outbox LISTEN unavailable; polling only');
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
      this.log.error({ err }, 'outbox pass failed');
    }
  }

  /**
   * Claim due events; the lease (next_attempt_at pushed forward) keeps others
   * off them meanwhile. Only the oldest open event of each job is due, so a
   * job's events reach the receiver in the order they were written (progress
   * stages, then job_completed) even when one of them needs a retry; jobs
   * still go out in parallel.
   */
  private async claim(): Promise<OutboxRow[]> {
    const lease = Math.ceil(this.opts.timeoutMs / 1000) + 30;
    const r = await this.pool.query<OutboxRow>(
      `UPDATE outbox SET next_attempt_at = now() + make_interval(secs => $2), attempts = attempts + 1
       WHERE id IN (SELECT o.id FROM outbox o WHERE o.delivered_at IS NULL AND o.failed_at IS NULL AND o.next_attempt_at <= now()
                      AND NOT EXISTS (SELECT 1 FROM outbox p WHERE p.job_id = o.job_id AND p.id < o.id
                                        AND p.delivered_at IS NULL AND p.failed_at IS NULL)
                    ORDER BY o.id LIMIT $1 FOR UPDATE OF o SKIP LOCKED)
       RETURNING id, event_id, type, target_enc, payload, attempts`,
      [this.opts.batch ?? 16, lease]);
    return r.rows;
  }

  private async deliver(row: OutboxRow): Promise<void> {
    // Counted when claimed, so an attempt cut short by a crash (its POST
    // perhaps sent) still counts: never more POSTs than attempts.
    const attempt = row.attempts;
    if (attempt > this.opts.attempts) {
      await this.pool.query(`UPDATE outbox SET failed_at = now(), last_error = coalesce(last_error, 'interrupted') WHERE id = $1`, [row.id]);
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
      await this.pool.query('UPDATE outbox SET delivered_at = now(), last_error = NULL WHERE id = $1', [row.id]);
      this.log.info({ eventId: row.event_id, type: row.type, attempt }, 'webhook delivered');
      return;
    }
    if (attempt >= this.opts.attempts) {
      await this.pool.query('UPDATE outbox SET failed_at = now(), last_error = $2 WHERE id = $1', [row.id, error]);
      this.log.warn({ eventId: row.event_id, type: row.type, attempt, error }, 'webhook given up');
      return;
    }
    const delayMs = this.opts.backoffMs * 2 ** (attempt - 1);
    await this.pool.query(
      `UPDATE outbox SET last_error = $2, next_attempt_at = now() + make_interval(secs => $3) WHERE id = $1`,
      [row.id, error, delayMs / 1000]);
    this.log.info({ eventId: row.event_id, type: row.type, attempt, error, retryInMs: delayMs }, 'webhook attempt failed');
  }
}
