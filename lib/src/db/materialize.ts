// The materializer's statements (docs/adr/0017): rows accepted by the
// gateway whose custom resource is still to be created, built into the
// exact MediaJob or MediaBatch the row describes, and the mark that says it
// exists, and the poke that wakes the reader once such rows have committed.
// The schema's cr_created_at column and the index these pages read are in
// the api-gateway migration 0013.
// A batch's episodes are not here: the batch controller creates those.
import type pg from 'pg';
import { buildMediaBatch, buildMediaJob } from '../mediajob/build.js';
import type { BatchKind, BatchOptions, Destination, MediaBatch, MediaJob, MediaJobOptions } from '../mediajob/types.js';

/** The LISTEN channel: 'new' when rows to create committed; 'start <namespace>/<name>' when a paused batch started. */
export const MATERIALIZE_CHANNEL = 'mediajobs_materialize';

/** Pokes within this long of the last NOTIFY become one more NOTIFY. */
const POKE_COALESCE_MS = 20;

/**
 * Wakes the materializer after rows to create have committed (call it after
 * the insert's commit). The NOTIFY goes in a statement of its own, never in
 * the insert's transaction: every notifying commit takes Postgres' global
 * notify-queue lock, so a NOTIFY per accepted job serialised the gateway's
 * commits (ADR 0017, "a NOTIFY per commit is not free"). Coalesced: one
 * NOTIFY in flight at a time, and the pokes that arrive meanwhile become one
 * more, a few milliseconds after it. A lost poke (Postgres away) is caught up
 * by the materializer's safety pass; `failed` hears of it.
 */
export function materializePoke(pool: pg.Pool, failed: (err: unknown) => void = () => undefined): () => void {
  let busy = false;
  let again = false;
  const send = (): void => {
    busy = true;
    again = false;
    pool.query({ name: 'mj-materialize-poke', text: `SELECT pg_notify('${MATERIALIZE_CHANNEL}', 'new')` })
      .catch(failed)
      .finally(() => {
        if (again) setTimeout(send, POKE_COALESCE_MS).unref();
        else busy = false;
      });
  };
  return () => {
    if (busy) again = true;
    else send();
  };
}

/**
 * The organization fair admission caps the job under: the key's, or for a
 * marketplace end user (docs/adr/0015) the account's, as the gateway's principal has it.
 */
const ORGANIZATION = 'COALESCE(k.organization_id, parent.organization_id) AS organization_id';

/** Oldest first; `skip` are rows held back after a failed create (their retry is not due). */
const JOBS_TO_CREATE = `
SELECT j.id, j.api_key_id, j.options, j.destination, j.cr_namespace, j.cr_name, ${ORGANIZATION}
  FROM jobs j JOIN api_keys k ON k.id = j.api_key_id LEFT JOIN api_keys parent ON parent.id = k.parent_id
 WHERE j.cr_created_at IS NULL AND j.batch_id IS NULL AND j.status = 'Pending' AND j.cr_name IS NOT NULL
   AND NOT (j.id = ANY($2::uuid[]))
 ORDER BY j.created_at LIMIT $1`;

const BATCHES_TO_CREATE = `
SELECT b.id, b.api_key_id, b.kind, b.show_url, b.status, b.folder, b.destination, b.cr_namespace, b.cr_name, first.options,
       ${ORGANIZATION}
  FROM batches b JOIN api_keys k ON k.id = b.api_key_id LEFT JOIN api_keys parent ON parent.id = k.parent_id
  JOIN LATERAL (SELECT options FROM jobs WHERE batch_id = b.id ORDER BY batch_index LIMIT 1) first ON true
 WHERE b.cr_created_at IS NULL AND b.status IN ('paused', 'processing') AND b.cr_name IS NOT NULL
   AND NOT (b.id = ANY($2::uuid[]))
 ORDER BY b.created_at LIMIT $1`;

interface JobToCreate {
  id: string; api_key_id: string; options: MediaJobOptions; destination: Destination | null;
  cr_namespace: string; cr_name: string; organization_id: string | null;
}

interface BatchToCreate {
  id: string; api_key_id: string; kind: BatchKind; show_url: string; status: string; folder: string | null;
  destination: Destination | null; cr_namespace: string; cr_name: string; options: BatchOptions; organization_id: string | null;
}

/**
 * Single jobs still without their MediaJob, built from the row: its stored
 * options and the destination the gateway resolved (never a fallback to
 * managed storage), so the object is the same whoever builds it.
 */
export async function mediaJobsToCreate(pool: pg.Pool, limit: number, skip: readonly string[] = []): Promise<MediaJob[]> {
  const r = await pool.query<JobToCreate>({ name: 'mj-jobs-to-create', text: JOBS_TO_CREATE, values: [limit, skip] });
  return r.rows.map((row) => buildMediaJob({
    jobId: row.id, apiKeyId: row.api_key_id, organizationId: row.organization_id, namespace: row.cr_namespace,
    options: row.options, ...(row.destination && { destination: row.destination }),
  }));
}

/** Open batches still without their MediaBatch (paused or processing), built from the batch row and its first episode's shared options. */
export async function mediaBatchesToCreate(pool: pg.Pool, limit: number, skip: readonly string[] = []): Promise<MediaBatch[]> {
  const r = await pool.query<BatchToCreate>({ name: 'mj-batches-to-create', text: BATCHES_TO_CREATE, values: [limit, skip] });
  return r.rows.map((row) => buildMediaBatch({
    batchId: row.id, apiKeyId: row.api_key_id, organizationId: row.organization_id, namespace: row.cr_namespace,
    kind: row.kind, showUrl: row.show_url, paused: row.status === 'paused', options: row.options,
    ...(row.folder !== null && { folder: row.folder }), ...(row.destination && { destination: row.destination }),
  }));
}

/**
 * Mark rows whose resource exists (created now, or found: AlreadyExists).
 * One short statement after the creates, never a lock held across them
 * (ADR 0017, "Found when measured"); marking a row twice changes nothing.
 */
export async function markCreated(pool: pg.Pool, table: 'jobs' | 'batches', ids: readonly string[]): Promise<void> {
  if (!ids.length) return;
  await pool.query({
    name: `mj-mark-created-${table}`,
    text: `UPDATE ${table} SET cr_created_at = now() WHERE id = ANY($1::uuid[]) AND cr_created_at IS NULL`,
    values: [ids],
  });
}
