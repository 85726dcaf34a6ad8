// The upload-grant ledger on Postgres (tables grant_uploads and grant_parts,
// migration 0018): what each grant began, the part lengths it signed, what it
// completed and the size the bucket stores. The broker (upload-grants.ts)
// bounds a grant with it; the operator reads it (storedBy) to accept what a
// runner reports and to take sizes from it, never from the runner. The
// rules (how many objects, bytes, parts) are upload-grants.ts's; this module
// owns the statements. Each bounded step runs under a transaction-scoped
// advisory lock on the grant, so parts in flight at once are counted one
// after the other.
import type pg from 'pg';
import { withTransaction } from '../pg-client.js';
import type { GrantLedger, GrantRef, LedgerRefusal, StoredObject } from './upload-grants.js';

/** Locks one grant's rows for the transaction: the advisory lock's key space is shared, so the grant's id is hashed into it with a tag. */
const LOCK = `SELECT pg_advisory_xact_lock(hashtextextended('mediajobs grant ' || $1, 0))`;

export class PgGrantLedger implements GrantLedger {
  constructor(private readonly pool: pg.Pool) {}

  async reserveObject(g: GrantRef, key: string, maxObjects: number): Promise<number | LedgerRefusal> {
    return withTransaction(this.pool, async (c) => {
      await c.query(LOCK, [g.grantId]);
      const { rows: [n] } = await c.query<{ n: number }>('SELECT count(*)::int AS n FROM grant_uploads WHERE grant_id = $1', [g.grantId]);
      if (n!.n >= maxObjects) return 'objects';
      const { rows: [row] } = await c.query<{ id: string }>(
        'INSERT INTO grant_uploads (grant_id, job_id, key) VALUES ($1, $2, $3) RETURNING id', [g.grantId, g.jobId, key]);
      return Number(row!.id);
    });
  }

  async begun(id: number, uploadId: string): Promise<void> {
    await this.pool.query('UPDATE grant_uploads SET upload_id = $2 WHERE id = $1', [id, uploadId]);
  }

  async release(id: number): Promise<void> {
    await this.pool.query(`DELETE FROM grant_uploads WHERE id = $1 AND state = 'begun'`, [id]);
  }

  async signPart(g: GrantRef, uploadId: string, number: number, bytes: number, caps: { bytes: number; parts: number; signings: number }): Promise<LedgerRefusal | undefined> {
    return withTransaction(this.pool, async (c) => {
      await c.query(LOCK, [g.grantId]);
      const { rows: [up] } = await c.query<{ id: string }>(
        `SELECT id FROM grant_uploads WHERE grant_id = $1 AND upload_id = $2 AND state = 'begun'`, [g.grantId, uploadId]);
      if (!up) return 'upload';
      // The grant's totals without this part as last signed: signing a part again replaces its length.
      const { rows: [t] } = await c.query<{ bytes: string; parts: number; signed: number | null }>(
        `SELECT COALESCE(sum(p.bytes) FILTER (WHERE NOT (p.upload = $2 AND p.number = $3)), 0)::text AS bytes,
                count(*) FILTER (WHERE NOT (p.upload = $2 AND p.number = $3))::int AS parts,
                max(p.signed) FILTER (WHERE p.upload = $2 AND p.number = $3) AS signed
           FROM grant_parts p JOIN grant_uploads u ON u.id = p.upload
          WHERE u.grant_id = $1 AND u.state <> 'aborted'`, [g.grantId, up.id, number]);
      if ((t!.signed ?? 0) >= caps.signings || t!.parts + 1 > caps.parts) return 'parts';
      if (Number(t!.bytes) + bytes > caps.bytes) return 'bytes';
      await c.query(
        `INSERT INTO grant_parts (upload, number, bytes) VALUES ($1, $2, $3)
         ON CONFLICT (upload, number) DO UPDATE SET bytes = EXCLUDED.bytes, signed = grant_parts.signed + 1`, [up.id, number, bytes]);
      return undefined;
    });
  }

  async storedBytes(g: GrantRef): Promise<number> {
    const { rows: [r] } = await this.pool.query<{ bytes: string }>(
      `SELECT COALESCE(sum(size), 0)::text AS bytes FROM grant_uploads WHERE grant_id = $1 AND state = 'completed'`, [g.grantId]);
    return Number(r!.bytes);
  }

  async completed(g: GrantRef, uploadId: string, size: number): Promise<void> {
    await this.pool.query(
      `UPDATE grant_uploads SET state = 'completed', size = $3, completed_at = clock_timestamp() WHERE grant_id = $1 AND upload_id = $2`,
      [g.grantId, uploadId, size]);
  }

  async ended(g: GrantRef, uploadId: string, state: 'aborted' | 'deleted'): Promise<void> {
    await this.pool.query('UPDATE grant_uploads SET state = $3 WHERE grant_id = $1 AND upload_id = $2', [g.grantId, uploadId, state]);
  }

  async deleted(jobId: string, key: string): Promise<void> {
    await this.pool.query(`UPDATE grant_uploads SET state = 'deleted' WHERE job_id = $1 AND key = $2 AND state = 'completed'`, [jobId, key]);
  }

  async forgetEnded(keepSeconds: number, limit: number): Promise<number> {
    // jobs.id is a uuid, grant_uploads.job_id the token's text: compared as text. A job without a row keeps its rows (never seen: rows are archived).
    const r = await this.pool.query(
      `DELETE FROM grant_uploads WHERE id IN (
         SELECT g.id FROM grant_uploads g JOIN jobs j ON j.id::text = g.job_id
          WHERE j.finished_at < now() - make_interval(secs => $1) LIMIT $2)`, [keepSeconds, limit]);
    return r.rowCount ?? 0;
  }

  async storedBy(keys: readonly string[]): Promise<Map<string, StoredObject>> {
    if (!keys.length) return new Map();
    // The last completion of a key is its object: the broker stores a key only where none is, so an
    // earlier completion's object was deleted before (docs/adr/0012, "Whose key is it").
    const { rows } = await this.pool.query<{ key: string; job_id: string; state: string; size: string }>(
      `SELECT DISTINCT ON (key) key, job_id, state, size::text AS size FROM grant_uploads
        WHERE key = ANY($1) AND state IN ('completed', 'deleted') AND completed_at IS NOT NULL
        ORDER BY key, completed_at DESC, id DESC`, [keys]);
    return new Map(rows.filter((r) => r.state === 'completed').map((r) => [r.key, { jobId: r.job_id, size: Number(r.size) }]));
  }
}
