// The operator's side of Postgres: keeping the jobs row (the API's read
// model) in step with MediaJob status, and writing webhook events to the
// outbox in the same transaction as the state change they announce.
import { createHash } from 'node:crypto';
import type pg from 'pg';
import { withTransaction } from '@mediajobs/lib/pg-client';
import { TERMINAL_STATUSES, type Destination, type MediaJob, type MediaJobStatus } from '@mediajobs/lib/mediajob/types';

export interface JobRow {
  id: string;
  api_key_id: string;
  url: string;
  status: string;
  webhook_url_enc: string | null;
  options: Record<string, unknown>;
}

export interface OutboxEvent {
  type: string;
  payload: Record<string, unknown>;
  /** What makes the event unique for its job (its event id's seed) when the type alone does not: `progress:<stage>`. */
  key?: string;
}

const COUNTER_SHARDS = 16;

/** A stable event id per job and event type: a replayed transition inserts nothing new. */
export function eventId(jobId: string, type: string): string {
  const h = createHash('sha256').update(`${jobId}:${type}`).digest('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-5${h.slice(13, 16)}-${((parseInt(h[16]!, 16) & 0x3) | 0x8).toString(16)}${h.slice(17, 20)}-${h.slice(20, 32)}`;
}

export class OperatorDb {
  constructor(private readonly pool: pg.Pool) {}

  async findJob(id: string): Promise<JobRow | undefined> {
    const r = await this.pool.query<JobRow>(
      'SELECT id, api_key_id, url, status, webhook_url_enc, options FROM jobs WHERE id = $1', [id]);
    return r.rows[0];
  }

  /**
   * Record a MediaJob that came from kubectl or GitOps, owned by the key its
   * spec names; counts toward that key's total. Returns false when the key
   * does not exist or is revoked.
   */
  async insertFromManifest(id: string, mj: MediaJob, webhookUrlSealed: string | null): Promise<boolean> {
    const { webhookUrl: _w, owner: _o, destination: _d, jobId: _j, ...options } = mj.spec;
    const r = await this.pool.query(
      `WITH ins AS (
         INSERT INTO jobs (id, api_key_id, url, status, step, progress, options, webhook_url_enc, cr_namespace, cr_name, created_at, updated_at,
                           destination)
         SELECT $1, k.id, $3, 'Pending', 'Queued', 0, $4, $5, $6, $7, $8, now(), $10
         FROM api_keys k WHERE k.id = $2 AND k.revoked_at IS NULL
         ON CONFLICT (id) DO NOTHING
         RETURNING api_key_id),
       counted AS (
         INSERT INTO job_counters (api_key_id, shard, count) SELECT api_key_id, $9, 1 FROM ins
         ON CONFLICT (api_key_id, shard) DO UPDATE SET count = job_counters.count + 1
         RETURNING 1)
       SELECT (SELECT count(*) FROM ins)::int AS inserted, (SELECT count(*) FROM counted)::int AS counted,
              EXISTS (SELECT 1 FROM jobs WHERE id = $1) AS existed`,
      [id, mj.spec.owner.apiKeyId, mj.spec.url, JSON.stringify(options), webhookUrlSealed, mj.metadata.namespace, mj.metadata.name,
        mj.metadata.creationTimestamp ?? new Date().toISOString(), Math.floor(Math.random() * COUNTER_SHARDS),
        // Where the file goes decides how GET /jobs/{id} signs its URL (managed storage, or the operator's sealed URLs).
        JSON.stringify(mj.spec.destination ?? { type: 'managed' })],
    );
    const row = r.rows[0] as { inserted: number; existed: boolean };
    return row.inserted === 1 || row.existed;
  }

  /**
   * Bring the jobs row to `s`. Terminal rows never change again. Returns the
   * status the row had before, or undefined when nothing was updated; events
   * built by `eventsFor(oldStatus)` go to the outbox in the same transaction.
   */
  async syncStatus(
    jobId: string, s: MediaJobStatus,
    eventsFor: (oldStatus: string, row: JobRow) => OutboxEvent[],
  ): Promise<string | undefined> {
    return withTransaction(this.pool, async (client) => {
      const cur = await client.query<JobRow & { step: string; progress: number }>(
        `SELECT id, api_key_id, url, status, step, progress, webhook_url_enc, options FROM jobs WHERE id = $1 FOR UPDATE`, [jobId]);
      const row = cur.rows[0];
      if (!row || TERMINAL_STATUSES.includes(row.status as never)) return undefined;
      const r = s.result;
      await client.query(
        `UPDATE jobs SET status = $2, step = $3, progress = $4, error = $5, error_type = $6, reason = $7,
           s3_key = $8, file_size = $9, actual_quality = $10, title = $11, description = $12, release_date = $13,
           subtitle_key = $14, thumbnail_key = $15, started_at = $16, finished_at = $17, updated_at = now()
         WHERE id = $1`,
        [jobId, s.status, s.step ?? row.step, s.progress ?? row.progress, s.error ?? null, s.errorType ?? null, s.reason ?? null,
          r?.storageKey ?? null, r?.fileSize ?? null, r?.actualQuality ?? null, r?.title ?? null, r?.description ?? null,
          r?.releaseDate ?? null, r?.subtitleKey ?? null, r?.thumbnailKey ?? null, s.startTime ?? null, s.finishTime ?? null],
      );
      const events = row.webhook_url_enc ? eventsFor(row.status, row) : [];
      for (const e of events) {
        await client.query(
          `INSERT INTO outbox (event_id, job_id, type, target_enc, payload, attempts, next_attempt_at, created_at)
           VALUES ($1, $2, $3, $4, $5, 0, now(), now()) ON CONFLICT (event_id) DO NOTHING`,
          [eventId(jobId, e.key ?? e.type), jobId, e.type, row.webhook_url_enc, JSON.stringify({ ...e.payload, event_id: eventId(jobId, e.key ?? e.type) })],
        );
      }
      if (events.length) await client.query(`NOTIFY mediajobs_outbox`);
      return row.status;
    });
  }

  /** Pending rows whose MediaJob should exist by now (the gateway could not create it). */
  async strandedPending(olderThanSeconds: number, limit = 200): Promise<(JobRow & {
    cr_namespace: string; cr_name: string; created_at: Date; destination: Destination | null;
  })[]> {
    const r = await this.pool.query(
      `SELECT id, api_key_id, url, status, webhook_url_enc, options, cr_namespace, cr_name, created_at, destination FROM jobs
       WHERE status = 'Pending' AND cr_name IS NOT NULL
         AND created_at < now() - make_interval(secs => $1) AND created_at > now() - interval '1 hour'
       ORDER BY created_at LIMIT $2`, [olderThanSeconds, limit]);
    return r.rows;
  }
}

