// The batches table: every statement on it, and the transactions that span a
// batch and its episode rows. A batch (a podcast show or a genuine playlist)
// is one row here and one ordinary jobs row per episode, written together;
// GET /batch/{id}, the paused workflow's renames and start, the batch
// controller's next episodes to create, and the rollup of an episode's end
// into the batch's kept counts (called by ./jobs.ts syncStatus, in its
// transaction), with batch_completed queued exactly once; cancelling a
// batch (cancelBatch, docs/adr/0013). Left to others:
// the statements on the episode rows (./jobs.ts, which this module and that
// one call each other for; neither uses the other's exports while loading),
// rule 9's SQL (the storage_destinations owner's, passed in), the outbox
// (./outbox.ts), the filename rules (lib/src/job-options.ts), and every HTTP
// answer (the gateway's batch routes).
import { randomInt } from 'node:crypto';
import type pg from 'pg';
import { filenameProblem } from '../job-options.js';
import type { BatchKind, BatchStatus, Destination, JobStatus, MediaJobOptions, StorageProviderName } from '../mediajob/types.js';
import { TERMINAL_STATUSES } from '../mediajob/types.js';
import { withTransaction } from '../pg-client.js';
import {
  COUNTER_SHARDS, cancelEpisodes, insertEpisodes, savedDestinationJson, setEpisodeFilenames, uncreatedEpisodes,
  type EpisodeRowsCommon, type EpisodeToCreate, type SavedDestinationSql,
} from './jobs.js';
import { queueBatchEvents, type OutboxEvent } from './outbox.js';
import { insertKeyRow, lockKey, withKeyRow, type NewKeyRow } from './idempotency.js';
import { sealedAt } from './sealed-columns.js';
import type { Sealable } from '../secret-box.js';

/** What the feed or playlist said about an episode, kept with its row for its MediaJob. */
export interface EpisodeInfo {
  title?: string;
  description?: string;
  releaseDate?: string;
  /** The episode's artwork (rule 6: a show episode's thumbnail). */
  thumbnailUrl?: string;
}

/** The normalised options every episode of a batch shares; url and filename are each episode's, folder the batch's. */
export type SharedEpisodeOptions = Omit<MediaJobOptions, 'url' | 'filename' | 'folder'>;

/** Where a batch's episodes deliver, decided once for all of them. */
export type BatchTarget =
  /** Inline credentials already checked; every episode row holds them, sealed for it, until it ends. */
  | { kind: 'inline'; destination: Destination; storage: Sealable }
  /** Rule 9 over the key's and its organization's saved destinations, with the storage_destinations owner's SQL. */
  | { kind: 'saved'; organizationId: string | null; provider?: StorageProviderName; rule9: SavedDestinationSql }
  /** A MediaBatch applied with kubectl: its spec's destination as it is. */
  | { kind: 'given'; destination: Destination };

export interface NewBatch {
  /** The batch id, a UUID: the MediaBatch's name (for a kubectl manifest, its uid). */
  id: string;
  apiKeyId: string;
  kind: BatchKind;
  showUrl: string;
  /** The folder every episode is delivered under (its `folder` option). */
  folder: string | null;
  /** Paused (no episode MediaJob until POST /batch/{id}/start) or processing from the start. */
  paused: boolean;
  /** The batch's webhook, also given to each episode (its job events); sealed here for each row. */
  webhookUrl: Sealable | null;
  crNamespace: string | null;
  crName: string | null;
  options: SharedEpisodeOptions;
  target: BatchTarget;
  /** A MediaBatch applied with kubectl: recorded only for an existing, unrevoked key (as a MediaJob manifest is). */
  fromManifest?: boolean;
  /** The request's Idempotency-Key row, written in the batch's transaction (./idempotency.ts). */
  keyRow?: NewKeyRow;
}

/** One episode, in the batch's order. */
export interface NewEpisode {
  /** Its job id (a UUID), the name of its MediaJob to be. */
  id: string;
  url: string;
  filename?: string;
  info?: EpisodeInfo;
}

export type InsertBatchResult =
  | { outcome: 'inserted'; destination: Destination }
  /** A batch with this id is recorded already (a manifest seen again): nothing written. */
  | { outcome: 'exists' }
  /** The named storage_provider has no saved destination: nothing written. */
  | { outcome: 'storage_provider_not_configured' }
  /** fromManifest, and the key does not exist or is revoked: nothing written. */
  | { outcome: 'invalid_owner' };

/** A batch as GET /batch/{id} and the batch controller read it. Times are epoch milliseconds. */
export interface BatchRecord {
  id: string;
  /** For the owner check: another key's batch is the 401 `Batch does not belong to this API key`. */
  api_key_id: string;
  kind: BatchKind;
  show_url: string;
  status: BatchStatus;
  folder: string | null;
  total_episodes: number;
  completed_episodes: number;
  /** Failed and skipped episodes (spec: Batch, batch_completed). */
  failed_episodes: number;
  /** The skipped part of failed_episodes. */
  skipped_episodes: number;
  /** Episode job ids in episode order. */
  episode_jobs: string[];
  destination: Destination | null;
  cr_namespace: string | null;
  cr_name: string | null;
  created_at: number;
  updated_at: number;
  finished_at: number | null;
}

/** Why a paused-workflow call on a batch did nothing (404, 401, 400 in the spec). */
export type BatchRefusal = { outcome: 'not_found' } | { outcome: 'not_owner' } | { outcome: 'not_paused'; status: BatchStatus };

export interface EpisodeRename {
  jobId: string;
  filename: string;
}

/** One rename that was not applied; `index` is its position in the request. */
export interface RenameError {
  index: number;
  jobId: string;
  reason: 'invalid_filename' | 'not_in_batch';
  message: string;
}

export type RenameResult = { outcome: 'renamed'; updated: number; errors: RenameError[] } | BatchRefusal;
export type StartResult =
  | { outcome: 'started'; startedJobs: number }
  | BatchRefusal
  /** A start by the API of a paused batch recorded from a manifest: its spec.paused is the manifest's to change. */
  | { outcome: 'held_by_manifest'; crNamespace: string | null; crName: string | null };

/**
 * Who starts a paused batch. `api` (POST /batch/{id}/start) starts only a
 * batch the API made: one recorded from a manifest is started by that
 * manifest's spec.paused, a field its applier owns (docs/gitops.md). The
 * batch controller starts such a row once the spec says paused: false
 * (`spec`, the default).
 */
export type BatchStarter = 'api' | 'spec';

/** The kept counts, and what the rollup decides from them. */
export interface BatchCounts {
  status: BatchStatus;
  total_episodes: number;
  completed_episodes: number;
  failed_episodes: number;
  skipped_episodes: number;
}

// ---- Insert: the batch row and every episode row in one transaction ----

/**
 * Record a batch and its episodes, each episode a Pending job counted once in
 * the key's usage. Nothing is written unless everything is. Episodes get the
 * batch's folder, shared options and webhook, and no MediaJob name yet.
 */
export async function insertBatch(pool: pg.Pool, batch: NewBatch, episodes: readonly NewEpisode[]): Promise<InsertBatchResult> {
  if (!episodes.length) throw new RangeError('a batch has at least one episode');
  return withKeyRow(pool, batch.keyRow, () => withTransaction(pool, async (client) => {
    if (batch.keyRow) await lockKey(client, batch.keyRow);
    const where = await resolveTarget(client, batch);
    if (!where) return { outcome: 'storage_provider_not_configured' };
    if (batch.keyRow) await insertKeyRow(client, batch.keyRow);
    const row = await client.query(
      `INSERT INTO batches (id, api_key_id, kind, show_url, folder, status, total_episodes, webhook_url_enc, destination, cr_namespace, cr_name,
                            episode_jobs, cr_created_at, from_manifest, webhook_events)
       SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $13, CASE WHEN $12::boolean THEN now() END, $12::boolean, $14
        WHERE NOT $12::boolean OR EXISTS (SELECT 1 FROM api_keys k WHERE k.id = $2 AND k.revoked_at IS NULL)
       ON CONFLICT (id) DO NOTHING RETURNING id`,
      [batch.id, batch.apiKeyId, batch.kind, batch.showUrl, batch.folder, batch.paused ? 'paused' : 'processing', episodes.length,
        batch.webhookUrl?.(sealedAt.batchWebhook(batch.id)) ?? null, JSON.stringify(where.destination), batch.crNamespace, batch.crName, batch.fromManifest ?? false,
        episodes.map((e) => e.id), batch.options.webhookEvents ?? null]);
    if (!row.rowCount) {
      const known = await client.query('SELECT 1 FROM batches WHERE id = $1', [batch.id]);
      return known.rowCount ? { outcome: 'exists' } : { outcome: 'invalid_owner' };
    }
    const common: EpisodeRowsCommon = { batchId: batch.id, apiKeyId: batch.apiKeyId, webhookUrl: batch.webhookUrl, paused: batch.paused, ...where };
    await insertEpisodes(client, common, episodes.map((e) => ({
      id: e.id,
      options: {
        ...batch.options, url: e.url,
        ...(e.filename !== undefined && { filename: e.filename }),
        ...(batch.folder !== null && { folder: batch.folder }),
      } as MediaJobOptions,
      ...(e.info && { info: e.info }),
    })));
    return { outcome: 'inserted', destination: where.destination };
  }));
}

type Resolved = Pick<EpisodeRowsCommon, 'destination' | 'destinationId' | 'storage'>;

/** The destination of every episode; undefined when a named storage_provider has no saved destination. */
async function resolveTarget(client: pg.ClientBase, batch: NewBatch): Promise<Resolved | undefined> {
  const t = batch.target;
  if (t.kind === 'inline') return { destination: t.destination, destinationId: null, storage: t.storage };
  if (t.kind === 'given') return { destination: t.destination, destinationId: null, storage: null };
  const pick = t.provider === undefined ? t.rule9.byDefault('$1', '$2') : t.rule9.byProvider('$1', '$2', '$3');
  const r = await client.query<{ destination: Destination; id: string | null }>(
    `SELECT ${savedDestinationJson('dest')} AS destination, dest.id FROM (VALUES (1)) one LEFT JOIN (${pick}) dest ON true`,
    t.provider === undefined ? [batch.apiKeyId, t.organizationId] : [batch.apiKeyId, t.organizationId, t.provider]);
  const found = r.rows[0]!;
  if (t.provider !== undefined && found.id === null) return undefined;
  return { destination: found.destination, destinationId: found.id, storage: null };
}

// ---- Reads ----

/** GET /batch/{id}'s statement (exported for the plan check of the gateway's hot paths). */
export const getBatchSql = () => `SELECT b.id, b.api_key_id, b.kind, b.show_url, b.status, b.folder,
  b.total_episodes, b.completed_episodes, b.failed_episodes, b.skipped_episodes,
  to_json(b.episode_jobs) AS episode_jobs, b.destination, b.cr_namespace, b.cr_name,
  floor(extract(epoch FROM b.created_at) * 1000)::float8 AS created_at,
  floor(extract(epoch FROM b.updated_at) * 1000)::float8 AS updated_at,
  floor(extract(epoch FROM b.finished_at) * 1000)::float8 AS finished_at
  FROM batches b WHERE b.id = $1`;

/**
 * The batch with its kept counts and its episode job ids in order (one
 * primary-key read, never a look at the jobs rows); undefined when unknown.
 * The ids come as JSON, which node-pg parses natively: a uuid[] literal
 * would go through its JavaScript array parser, a tenth of the gateway's
 * time per GET for a 500-episode batch.
 * `id` must be a UUID (the gateway checks it first: a malformed id is a 404).
 * Whose it is, is the caller's check (api_key_id).
 */
export async function getBatch(pool: pg.Pool, id: string): Promise<BatchRecord | undefined> {
  const r = await pool.query<BatchRecord>({ name: 'mj-get-batch', text: getBatchSql(), values: [id] });
  return r.rows[0];
}

// ---- The paused workflow ----

/**
 * Rename episode files of a paused batch (PATCH /batch/{id}/jobs). The batch
 * row is locked for the whole transaction, so a concurrent start waits and
 * no episode MediaJob is made from a name about to change. Each filename is
 * held to POST /jobs' `filename` rules; a rename naming a job outside the
 * batch or breaking them is reported in `errors` while the others apply. A
 * job named twice takes its last name; `updated` counts the jobs renamed.
 */
export async function renameEpisodes(pool: pg.Pool, batchId: string, apiKeyId: string, renames: readonly EpisodeRename[]): Promise<RenameResult> {
  return withTransaction(pool, async (client) => {
    const r = await client.query<{ api_key_id: string; status: BatchStatus }>(
      'SELECT api_key_id, status FROM batches WHERE id = $1 FOR UPDATE', [batchId]);
    const refusal = refusalOf(r.rows[0], apiKeyId);
    if (refusal) return refusal;
    const errors: RenameError[] = [];
    const last = new Map<string, { index: number; rename: EpisodeRename }>();
    renames.forEach((rename, index) => {
      const problem = filenameProblem(rename.filename);
      if (problem) errors.push({ index, jobId: rename.jobId, reason: 'invalid_filename', message: `Job ${rename.jobId}: ${problem}` });
      else last.set(rename.jobId.toLowerCase(), { index, rename });
    });
    const applied = await setEpisodeFilenames(client, batchId, [...last.values()].map((x) => x.rename));
    for (const [jobId, { index, rename }] of last) {
      if (!applied.has(jobId)) {
        errors.push({ index, jobId: rename.jobId, reason: 'not_in_batch', message: `Job ${rename.jobId} does not belong to this batch` });
      }
    }
    return { outcome: 'renamed', updated: applied.size, errors: errors.sort((a, b) => a.index - b.index) };
  });
}

/**
 * Start a paused batch: paused → processing in one conditional UPDATE, so
 * of two concurrent starts exactly one succeeds. `startedJobs` is the
 * episodes not yet ended, which the batch controller now creates MediaJobs
 * for. The API (`by` 'api', POST /batch/{id}/start) is refused a batch
 * recorded from a manifest (`held_by_manifest`, naming its MediaBatch), which
 * only its spec starts (BatchStarter).
 */
export async function startBatch(pool: pg.Pool, batchId: string, apiKeyId: string, by: BatchStarter = 'spec'): Promise<StartResult> {
  // The episodes waiting take the reservation a job in progress holds (the
  // column's default) in the same statement, counted on the key's totals:
  // a paused batch's reserved nothing (insertBatch).
  const r = await pool.query<{ started: number }>(
    `WITH started AS (
       UPDATE batches SET status = 'processing', updated_at = now()
        WHERE id = $1 AND api_key_id = $2 AND status = 'paused' AND NOT ($3::boolean AND from_manifest)
       RETURNING id, total_episodes - completed_episodes - failed_episodes AS started
     ), reserved AS (
       UPDATE jobs j SET reserved_bytes = DEFAULT FROM started s
        WHERE j.batch_id = s.id AND j.status = 'Pending' AND j.reserved_bytes = 0
       RETURNING j.api_key_id, j.reserved_bytes
     ), counted AS (
       INSERT INTO job_counters (api_key_id, shard, reserved_bytes)
       SELECT api_key_id, $4, sum(reserved_bytes) FROM reserved GROUP BY api_key_id
       ON CONFLICT (api_key_id, shard) DO UPDATE SET reserved_bytes = job_counters.reserved_bytes + EXCLUDED.reserved_bytes
     )
     SELECT started FROM started`, [batchId, apiKeyId, by === 'api', randomInt(COUNTER_SHARDS)]);
  if (r.rows[0]) return { outcome: 'started', startedJobs: r.rows[0].started };
  const cur = await pool.query<{ api_key_id: string; status: BatchStatus; from_manifest: boolean; cr_namespace: string | null; cr_name: string | null }>(
    'SELECT api_key_id, status, from_manifest, cr_namespace, cr_name FROM batches WHERE id = $1', [batchId]);
  const row = cur.rows[0];
  const refusal = refusalOf(row, apiKeyId);
  if (refusal) return refusal;
  if (row?.from_manifest && by === 'api') return { outcome: 'held_by_manifest', crNamespace: row.cr_namespace, crName: row.cr_name };
  return { outcome: 'not_paused', status: 'processing' };
}

function refusalOf(row: { api_key_id: string; status: BatchStatus } | undefined, apiKeyId: string): BatchRefusal | undefined {
  if (!row) return { outcome: 'not_found' };
  if (row.api_key_id !== apiKeyId) return { outcome: 'not_owner' };
  if (row.status !== 'paused') return { outcome: 'not_paused', status: row.status };
  return undefined;
}

// ---- For the batch controller ----

/**
 * The next `limit` Pending episodes of a processing batch that have no
 * MediaJob yet, in episode order; none while the batch is paused. Once an
 * episode's MediaJob exists, markEpisodesCreated in ./jobs.ts records it.
 */
export async function episodesToCreate(pool: pg.Pool, batchId: string, limit: number): Promise<EpisodeToCreate[]> {
  const r = await pool.query<{ status: BatchStatus }>({ name: 'mj-batch-status', text: 'SELECT status FROM batches WHERE id = $1', values: [batchId] });
  if (r.rows[0]?.status !== 'processing') return [];
  return uncreatedEpisodes(pool, batchId, limit);
}

// ---- The rollup (inside ./jobs.ts syncStatus's transaction) ----

/**
 * Count one episode's terminal status: Completed as completed, Skipped as
 * failed and skipped, any other end (Failed, Warning, Cancelled…) as failed.
 * The batch is done when completed + failed reaches the total: `completed`
 * with no failure, else `finished`. A batch already done changes no more.
 */
export function rollUp(b: BatchCounts, episode: JobStatus): BatchCounts & { finished: boolean } {
  const done = b.status === 'completed' || b.status === 'finished';
  if (done || !TERMINAL_STATUSES.includes(episode)) return { ...b, finished: false };
  const counts = {
    total_episodes: b.total_episodes,
    completed_episodes: b.completed_episodes + (episode === 'Completed' ? 1 : 0),
    failed_episodes: b.failed_episodes + (episode === 'Completed' ? 0 : 1),
    skipped_episodes: b.skipped_episodes + (episode === 'Skipped' ? 1 : 0),
  };
  const finished = counts.completed_episodes + counts.failed_episodes >= counts.total_episodes;
  const status: BatchStatus = !finished ? b.status : counts.failed_episodes === 0 ? 'completed' : 'finished';
  return { ...counts, status, finished };
}

/** The spec's batch_completed event. */
export function batchCompletedEvent(b: BatchCounts & { id: string; show_url: string; folder: string | null }): OutboxEvent {
  return {
    type: 'batch_completed',
    payload: {
      type: 'batch_completed', batch_id: b.id, status: b.status, show_url: b.show_url, folder: b.folder,
      total_episodes: b.total_episodes, completed_episodes: b.completed_episodes, failed_episodes: b.failed_episodes,
    },
  };
}

/**
 * An episode of `batchId` ended with `status` for the first time (the caller
 * holds its job row's lock): count it. The batch row's lock serialises
 * episodes ending at once, so exactly one sees the batch become done, and
 * that one queues batch_completed (its id from the batch id) when the batch
 * has a webhook.
 */
export async function rollUpEpisode(client: pg.ClientBase, batchId: string, status: JobStatus): Promise<void> {
  await rollUpEpisodes(client, batchId, [status]);
}

/** rollUpEpisode for several episodes that ended in one transaction (a cancelled batch): one read, one write. */
export async function rollUpEpisodes(client: pg.ClientBase, batchId: string, statuses: readonly JobStatus[]): Promise<void> {
  if (!statuses.length) return;
  const r = await client.query<BatchCounts & { id: string; show_url: string; folder: string | null; webhook_url_enc: string | null }>(
    `SELECT id, status, show_url, folder, total_episodes, completed_episodes, failed_episodes, skipped_episodes, webhook_url_enc
       FROM batches WHERE id = $1 FOR UPDATE`, [batchId]);
  const b = r.rows[0];
  if (!b) return;
  let next: BatchCounts & { finished: boolean } = { ...b, finished: false };
  let finished = false;
  for (const status of statuses) {
    next = rollUp(next, status);
    finished ||= next.finished;
  }
  await client.query(
    `UPDATE batches SET completed_episodes = $2, failed_episodes = $3, skipped_episodes = $4, status = $5,
            finished_at = CASE WHEN $6::boolean THEN now() ELSE finished_at END, updated_at = now()
      WHERE id = $1`,
    [batchId, next.completed_episodes, next.failed_episodes, next.skipped_episodes, next.status, finished]);
  if (finished && b.webhook_url_enc) await queueBatchEvents(client, batchId, b.webhook_url_enc, [batchCompletedEvent({ ...b, ...next })]);
}

// ---- Cancellation (docs/adr/0013) ----

export type CancelBatchResult =
  | { outcome: 'cancelled'; cancelledJobs: string[] }
  /** The batch is completed or finished already: nothing changed. */
  | { outcome: 'finished'; status: BatchStatus }
  | { outcome: 'not_found' }
  | { outcome: 'not_owner' };

/**
 * POST /batch/{id}/cancel: every episode not yet ended becomes Cancelled
 * (with or without a MediaJob; paused batches too), each with its
 * job_cancelled, and the batch ends as any batch does when its last
 * episode is done: cancelled episodes count under failed_episodes, so the
 * batch is `finished` and batch_completed is queued once, after the
 * episodes' events.
 */
export async function cancelBatch(pool: pg.Pool, batchId: string, apiKeyId: string): Promise<CancelBatchResult> {
  return withTransaction(pool, async (client) => {
    // Not locked here: episode rows are locked before the batch row everywhere (syncStatus), and the rollup locks it.
    const r = await client.query<{ api_key_id: string; status: BatchStatus }>('SELECT api_key_id, status FROM batches WHERE id = $1', [batchId]);
    const b = r.rows[0];
    if (!b) return { outcome: 'not_found' };
    if (b.api_key_id !== apiKeyId) return { outcome: 'not_owner' };
    if (b.status === 'completed' || b.status === 'finished') return { outcome: 'finished', status: b.status };
    const cancelled = await cancelEpisodes(client, batchId, 'Cancelled');
    await rollUpEpisodes(client, batchId, cancelled.map(() => 'Cancelled' as const));
    return { outcome: 'cancelled', cancelledJobs: cancelled };
  });
}
