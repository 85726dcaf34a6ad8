// The webhook_attempts table: the delivery log, one row per attempt of an
// outbox event (operator/src/outbox.ts writes it, GET /jobs/{id}/webhooks
// reads it). This module owns its statements; what an attempt's outcome and
// excerpt are is the dispatcher's, the events themselves lib/src/db/outbox.ts's.
import type pg from 'pg';

export interface AttemptRecord {
  /** The outbox row's id. */
  outboxId: string;
  /** 0 for the event's first delivery, n for its n-th redelivery. */
  round: number;
  /** 1.. within the round. */
  attempt: number;
  attemptedAt: Date;
  durationMs: number;
  statusCode: number | null;
  /** An error class or `HTTP <status>`; null for a 2xx. */
  error: string | null;
  responseExcerpt: string | null;
}

export async function recordAttempt(pool: pg.Pool, a: AttemptRecord): Promise<void> {
  await pool.query(
    `INSERT INTO webhook_attempts (outbox_id, round, attempt, attempted_at, duration_ms, status_code, error, response_excerpt)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
    [a.outboxId, a.round, a.attempt, a.attemptedAt, Math.round(a.durationMs), a.statusCode, a.error, a.responseExcerpt]);
}

/** The attempts of these events, oldest first. */
export async function attemptsOf(pool: pg.Pool, outboxIds: readonly string[]): Promise<AttemptRecord[]> {
  if (!outboxIds.length) return [];
  const r = await pool.query<{
    outbox_id: string; round: number; attempt: number; attempted_at: Date; duration_ms: number;
    status_code: number | null; error: string | null; response_excerpt: string | null;
  }>(
    `SELECT outbox_id::text, round, attempt, attempted_at, duration_ms, status_code, error, response_excerpt
       FROM webhook_attempts WHERE outbox_id = ANY($1::bigint[]) ORDER BY outbox_id, id`,
    [outboxIds]);
  return r.rows.map((x) => ({
    outboxId: x.outbox_id, round: x.round, attempt: x.attempt, attemptedAt: x.attempted_at, durationMs: x.duration_ms,
    statusCode: x.status_code, error: x.error, responseExcerpt: x.response_excerpt,
  }));
}
