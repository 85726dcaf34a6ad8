// The jobs and job_counters tables: every statement on them. The gateway
// inserts a row per POST /jobs (the requests of one event-loop turn in one
// statement, docs/adr/0025) and reads rows for GET /jobs (named
// statements, so pg prepares them once per connection); the operator records
// kubectl-applied jobs, mirrors MediaJob status into the row (its webhook
// events go to the outbox in the same transaction, ./outbox.ts), and keeps the sealed columns (storage_enc,
// result_urls_enc), and cancels jobs (cancelJob, cancelEpisodes: the first
// terminal write wins, docs/adr/0013). A batch's episodes are ordinary rows with a batch_id:
// their statements are here, run inside the transactions of ./batches.ts,
// and an episode's first terminal status is rolled up into its batch by
// syncStatus (./batches.ts rollUpEpisode). The two modules import each other
// and neither uses the other's exports while it loads. Left to others: the
// schema (api-gateway migrations), rule 9's choice of a saved destination
// (the storage_destinations owner's SQL, embedded in the insert through
// SavedDestinationSql), the batches table and the outbox.
import { randomInt } from 'node:crypto';
import type pg from 'pg';
import type { Destination, JobStatus, MediaJob, MediaJobOptions, MediaJobStatus, Owned, StorageProviderName } from '../mediajob/types.js';
import { TERMINAL_STATUSES } from '../mediajob/types.js';
import { withTransaction } from '../pg-client.js';
import { cleanCause } from '../cause-line.js';
import { downloadFigures } from '../mediajob/download-figures.js';
import { rollUpEpisode, type EpisodeInfo } from './batches.js';
import { queueJobChatNotification } from './chat-settings.js';
import { queueEvents, queueUsageReport, type OutboxEvent } from './outbox.js';
import { CANCEL_CHANNEL, jobCancelledEvent, type CancelStatus } from '../job-cancellation.js';
import {
  IdempotencyKeyBusy, keyHeld, keyLockCte, keyLockOfDoc, keyRowCte, keyRowDoc, keyRowsCte, keyRowValues, withKeyRow, type NewKeyRow,
} from './idempotency.js';
import { sealedAt } from './sealed-columns.js';
import type { Sealable } from '../secret-box.js';

/** Shards of a key's job total: concurrent inserts of one key do not queue on one row lock (ADR 0002). */
export const COUNTER_SHARDS = 16;

export interface NewJob {
  id: string;
  apiKeyId: string;
  url: string;
  options: MediaJobOptions;
  /** Sealed here, bound to the row (lib/src/db/sealed-columns.ts). */
  webhookUrl: Sealable | null;
  crNamespace: string;
  crName: string;
  /**
   * Where it delivers: inline credentials already checked (sealed here,
   * bound to the row), or rule 9 over the saved destinations of the key and
   * its organization, decided by the insert itself.
   */
  target:
    | { kind: 'inline'; destination: Destination; storage: Sealable }
    | { kind: 'saved'; organizationId: string | null; provider?: StorageProviderName };
  /** The request's Idempotency-Key row, written with the job (./idempotency.ts). */
  keyRow?: NewKeyRow;
}

/** A row as GET /jobs lists it (the spec's Job table). */
export interface JobSummary {
  id: string;
  url: string;
  status: JobStatus;
  s3_key: string | null;
  error: string | null;
  error_type: string | null;
  step: string;
  created_at: number;
  finished_at: number | null;
  file_size: number | null;
}

/** A row as GET /jobs/{id} needs it. */
export interface JobDetail extends JobSummary {
  progress: number;
  reason: string | null;
  actual_quality: string | null;
  title: string | null;
  description: string | null;
  release_date: string | null;
  subtitle_key: string | null;
  thumbnail_key: string | null;
  /** Null for rows written before destinations were recorded (managed storage). */
  destination: Destination | null;
  /** Sealed download URLs of a job delivered to the user's own storage. */
  result_urls_enc: string | null;
  /** The cleaned cause of a failed or warned job (status.errorDetail). */
  error_detail: string | null;
  /** The runner's figures of its read of the source (status.download), null while unknown. */
  downloaded_bytes: number | null;
  total_bytes: number | null;
  speed_bps: number | null;
  eta_seconds: number | null;
}

/** A row as the operator works with it (recording, status mirror, webhook events). */
export interface JobRow {
  id: string;
  api_key_id: string;
  url: string;
  status: string;
  webhook_url_enc: string | null;
  options: Record<string, unknown>;
  /** The MediaJob the row is for; null on rows from before it was recorded. */
  cr_namespace: string | null;
  cr_name: string | null;
}

/** The legacy saved destination a job was resolved to: its owner and its sealed credentials. */
export interface LegacyDestination {
  owner_kind: 'api_key' | 'organization';
  owner_id: string;
  provider: StorageProviderName;
  credentials_enc: string;
}

/** A job's recorded destination and, when it still exists, the saved destination row of one provider it was resolved to. */
export interface ResolvedDestination {
  destination: Destination | null;
  /** Null when the job has no such row (another provider, never saved, or deleted since). */
  source: 'keyvault' | 'legacy' | null;
  secret_name: string | null;
  /** The row's natural key: the place its credentials are bound to. */
  owner_kind: 'api_key' | 'organization' | null;
  owner_id: string | null;
  credentials_enc: string | null;
}

/**
 * Rule 9 of POST /jobs as SQL, from the owner of storage_destinations
 * (api-gateway/src/destinations/store.ts): given the placeholders of the key
 * id, its organization id and the provider, a SELECT of at most one
 * destination with at least the columns id, provider and secret_name.
 */
export interface SavedDestinationSql {
  byDefault(key: string, org: string): string;
  byProvider(key: string, org: string, provider: string): string;
}

// ---- Inserts: the row and its counter shard in one statement ----

// One builder for every insert (gateway, manifest, a batch's episodes): the
// increment reads the CTE `job`, so it adds exactly the rows written, and
// their storage reservations (jobs.reserved_bytes, a column default). A
// data-modifying CTE runs whether or not the outer query reads it. Counted
// per key in one row: ON CONFLICT may touch a shard only once per statement.
const countJobs = (shard: string) => `counted AS (
  INSERT INTO job_counters (api_key_id, shard, count, reserved_bytes)
  SELECT api_key_id, ${shard}, count(*), sum(reserved_bytes) FROM job GROUP BY api_key_id
  ON CONFLICT (api_key_id, shard) DO UPDATE
     SET count = job_counters.count + EXCLUDED.count, reserved_bytes = job_counters.reserved_bytes + EXCLUDED.reserved_bytes
)`;

/**
 * The `destination` a job gets from rule 9's row aliased `dest` (null when
 * none matched: managed storage). Shared by the job insert and a batch's.
 */
export const savedDestinationJson = (dest: string) => `CASE WHEN ${dest}.id IS NULL THEN '{"type":"managed"}'::jsonb
              ELSE jsonb_strip_nulls(jsonb_build_object('type', 'saved', 'provider', ${dest}.provider, 'secretName', ${dest}.secret_name)) END`;

// A keyed request's insert (./idempotency.ts): the key's advisory lock is
// tried first, nothing is written without it, and the key row is written
// with the jobs. The placeholders of the owning key and of the key row's
// values (the idempotency key first).
interface KeyParams {
  apiKeyId: string;
  first: number;
}

/** The head of a gateway insert: the key's lock when keyed. */
const insertHead = (k?: KeyParams) => (k ? `WITH ${keyLockCte(k.apiKeyId, `$${k.first}`)},\n` : 'WITH ');

/** A condition of the jobs' WHERE: the key's lock is held (true when unkeyed). */
const lockHeld = (k?: KeyParams) => (k ? '(SELECT held FROM key_lock)' : 'true');

/**
 * The end of a gateway insert: the counter and the destination written, and
 * when keyed the key row and whether its lock was held (false: nothing
 * written, another request holds the key).
 */
const insertTail = (shard: string, k?: KeyParams) => k === undefined
  ? `), ${countJobs(shard)}
SELECT destination FROM job LIMIT 1`
  : `), ${keyRowCte(k.first)}, ${countJobs(shard)}
SELECT (SELECT held FROM key_lock) AS key_held, (SELECT destination FROM job LIMIT 1) AS destination`;

// The job row and its counter increment in one statement, hence one
// implicit transaction and one round trip: the total can never disagree
// with the rows, and the insert costs a single commit. For a saved
// destination, rule 9 runs inside the same statement: the row written
// carries the destination (never a credential) and its id, or, when a
// named `storage_provider` has no destination, nothing is written at all.
const INSERT_COLUMNS = `id, api_key_id, url, status, step, progress, options, webhook_url_enc, cr_namespace, cr_name,
                    destination, destination_id, storage_enc`;

const insertJobInline = (k?: KeyParams) => `
${insertHead(k)}job AS (
  INSERT INTO jobs (${INSERT_COLUMNS})
  SELECT $1, $2, $3, 'Pending', 'Queued', 0, $4, $5, $6, $7, $9::jsonb, NULL, $10
   WHERE ${lockHeld(k)}
  RETURNING api_key_id, destination, reserved_bytes
${insertTail('$8', k)}`;

const insertJobSaved = (resolve: string, k?: KeyParams) => `
${insertHead(k)}dest AS (${resolve}),
job AS (
  INSERT INTO jobs (${INSERT_COLUMNS})
  SELECT $1, $2, $3, 'Pending', 'Queued', 0, $4, $5, $6, $7,
         ${savedDestinationJson('dest')},
         dest.id, NULL
    FROM (VALUES (1)) one LEFT JOIN dest ON true
   WHERE ${lockHeld(k)} AND ($10::text IS NULL OR dest.id IS NOT NULL)
  RETURNING api_key_id, destination, reserved_bytes
${insertTail('$8', k)}`;

// Concurrent POST /jobs share one statement (docs/adr/0025): the jobs that
// arrive in one turn of the event loop are written together, up to
// MAX_BATCH, each with its own destination, key lock and key row, so a burst
// costs Postgres one commit and one round trip instead of one per job.
// Every element maps to exactly one result row, in input order: written
// (with its destination), not written for want of its key's lock, or not
// written for want of its named provider.
const insertJobBatch = (rule9: SavedDestinationSql) => `
WITH req AS MATERIALIZED (
  SELECT e.ord, (e.doc->>'id')::uuid AS id, (e.doc->>'apiKeyId')::uuid AS api_key_id, e.doc->>'url' AS url, e.doc->'options' AS options,
         e.doc->>'webhook' AS webhook, e.doc->>'crNamespace' AS cr_namespace, e.doc->>'crName' AS cr_name,
         e.doc->'inline' AS inline_destination, e.doc->>'storage' AS storage, (e.doc->>'org')::uuid AS org, e.doc->>'provider' AS provider,
         e.doc->'keyRow' AS key_row, ${keyLockOfDoc("(e.doc->>'apiKeyId')", "(e.doc->'keyRow')")} AS held
    FROM jsonb_array_elements($1::jsonb) WITH ORDINALITY AS e(doc, ord)
),
job AS (
  INSERT INTO jobs (${INSERT_COLUMNS})
  SELECT r.id, r.api_key_id, r.url, 'Pending', 'Queued', 0, r.options, r.webhook, r.cr_namespace, r.cr_name,
         COALESCE(r.inline_destination, ${savedDestinationJson('dest')}), dest.id, r.storage
    FROM req r LEFT JOIN LATERAL (
      SELECT * FROM (${rule9.byProvider('r.api_key_id', 'r.org', 'r.provider')}) named WHERE r.provider IS NOT NULL
      UNION ALL
      SELECT * FROM (${rule9.byDefault('r.api_key_id', 'r.org')}) fallback WHERE r.provider IS NULL
    ) dest ON r.inline_destination IS NULL
   WHERE r.held AND (r.inline_destination IS NOT NULL OR r.provider IS NULL OR dest.id IS NOT NULL)
  RETURNING id, api_key_id, destination, reserved_bytes
), ${keyRowsCte('req JOIN job USING (id, api_key_id)')}, ${countJobs('$2')}
SELECT r.held, job.destination FROM req r LEFT JOIN job USING (id) ORDER BY r.ord`;

/** Jobs written by one batched statement at most: a bound on its size and on the work one failure sends to the single path. */
export const MAX_BATCH = 64;

/** The gateway's insert of a new Pending job. */
export type InsertJob = (pool: pg.Pool, job: NewJob) => Promise<Destination | undefined>;

/** A job waiting for its turn's statement. */
interface Queued {
  job: NewJob;
  settle: (outcome: Promise<Destination | undefined>) => void;
}

/**
 * Errors of a batched statement that one of its jobs may have caused (bad
 * data, a constraint: a key already answered, say); each job is then
 * written on its own so that only the one at fault fails. Any other error
 * (the connection, the server) would fail each of them too and is theirs.
 */
const isDataError = (err: unknown): boolean => /^2[23]/.test(String((err as { code?: unknown } | null)?.code ?? ''));

/**
 * The gateway's insert with rule 9 built in. Every inserter of a process
 * must be given the same rule 9: the statement names are fixed, and pg
 * refuses one name with two texts on a connection. The insert returns the destination the job was given, or
 * undefined when the `storage_provider` it named is not configured for the
 * key or its organization (then nothing was written). Inserts made in one
 * turn of the event loop share a statement (insertJobBatch); a job alone
 * in its turn, and each job of a batch that failed on bad data, is written
 * by its own statement. `observe` learns the size of each statement.
 */
export function jobInserter(rule9: SavedDestinationSql, observe: (jobs: number) => void = () => undefined): InsertJob {
  const single = singleJobInserter(rule9);
  const batchText = insertJobBatch(rule9);
  const turns = new Map<pg.Pool, Queued[]>();

  const writeBatch = async (pool: pg.Pool, batch: Queued[]): Promise<void> => {
    observe(batch.length);
    try {
      const r = await pool.query<{ held: boolean; destination: Destination | null }>({
        name: 'mj-insert-job-batch', text: batchText, values: [JSON.stringify(batch.map((q) => batchDoc(q.job))), randomInt(COUNTER_SHARDS)],
      });
      batch.forEach((q, i) => {
        const row = r.rows[i]!;
        q.settle(row.held ? Promise.resolve(row.destination ?? undefined) : Promise.reject(new IdempotencyKeyBusy()));
      });
    } catch (err) {
      if (!isDataError(err)) throw err;
      for (const q of batch) q.settle(writeAlone(pool, q.job));
    }
  };
  const writeAlone = (pool: pg.Pool, job: NewJob): Promise<Destination | undefined> => {
    observe(1);
    return single(pool, job);
  };

  const flush = (pool: pg.Pool): void => {
    const queued = turns.get(pool)!;
    turns.delete(pool);
    // A key twice in one turn: the later request runs on its own, and finds
    // the first one's lock or row as any concurrent duplicate does.
    const seen = new Set<string>();
    const together: Queued[] = [];
    for (const q of queued) {
      const k = q.job.keyRow && `${q.job.apiKeyId}/${q.job.keyRow.key}`;
      if (k !== undefined && seen.has(k)) q.settle(writeAlone(pool, q.job));
      else {
        if (k !== undefined) seen.add(k);
        together.push(q);
      }
    }
    for (let i = 0; i < together.length; i += MAX_BATCH) {
      const batch = together.slice(i, i + MAX_BATCH);
      if (batch.length === 1) batch[0]!.settle(writeAlone(pool, batch[0]!.job));
      else writeBatch(pool, batch).catch((err: unknown) => batch.forEach((q) => q.settle(Promise.reject(err))));
    }
  };

  return (pool, job) => new Promise((resolve) => {
    let turn = turns.get(pool);
    if (!turn) {
      turn = [];
      turns.set(pool, turn);
      setImmediate(flush, pool);
    }
    turn.push({ job, settle: resolve });
  });
}

/** One job as an element of insertJobBatch's input, sealed values bound to its row. */
function batchDoc(job: NewJob): Record<string, unknown> {
  const t = job.target;
  return {
    id: job.id, apiKeyId: job.apiKeyId, url: job.url, options: job.options,
    webhook: job.webhookUrl?.(sealedAt.jobWebhook(job.id)) ?? null, crNamespace: job.crNamespace, crName: job.crName,
    ...(t.kind === 'inline'
      ? { inline: t.destination, storage: t.storage(sealedAt.jobStorage(job.id)) }
      : { org: t.organizationId, provider: t.provider ?? null }),
    ...(job.keyRow && { keyRow: keyRowDoc(job.keyRow) }),
  };
}

/** One job, one statement: the insert of a job alone in its turn, and of each job of a failed batch. */
function singleJobInserter(rule9: SavedDestinationSql): InsertJob {
  const texts = (k?: KeyParams) => ({
    inline: insertJobInline(k),
    default: insertJobSaved(rule9.byDefault('$2', '$9'), k),
    provider: insertJobSaved(rule9.byProvider('$2', '$9', '$10'), k),
  });
  const statements = { plain: texts(), keyed: texts({ apiKeyId: '$2', first: 11 }) };
  return (pool, job) => withKeyRow(pool, job.keyRow, async () => {
    const t = job.target;
    const [variant, target] = t.kind === 'inline'
      ? ['inline', [JSON.stringify(t.destination), t.storage(sealedAt.jobStorage(job.id))]] as const
      : t.provider === undefined ? ['default', [t.organizationId, null]] as const : ['provider', [t.organizationId, t.provider]] as const;
    const keyed = job.keyRow !== undefined;
    const r = await pool.query<{ destination: Destination | null; key_held?: boolean }>({
      name: `mj-insert-job-${variant}${keyed ? '-keyed' : ''}`,
      text: statements[keyed ? 'keyed' : 'plain'][variant],
      values: [job.id, job.apiKeyId, job.url, JSON.stringify(job.options), job.webhookUrl?.(sealedAt.jobWebhook(job.id)) ?? null, job.crNamespace, job.crName,
        randomInt(COUNTER_SHARDS), ...target, ...(job.keyRow ? keyRowValues(job.keyRow) : [])],
    });
    keyHeld(r.rows[0]?.key_held);
    return r.rows[0]?.destination ?? undefined;
  });
}

// POST /jobs/bulk: every job of the request in one statement (all or
// nothing, one round trip for 100 rows), from one JSON array parameter, with
// rule 9 resolved once for all of them; counted on one shard of the key.
const insertJobsSaved = (resolve: string, k?: KeyParams) => `
${insertHead(k)}dest AS (${resolve}),
job AS (
  INSERT INTO jobs (${INSERT_COLUMNS})
  SELECT (e.doc->>'id')::uuid, $1, e.doc->'options'->>'url', 'Pending', 'Queued', 0, e.doc->'options', e.doc->>'webhook', $2, e.doc->>'id',
         ${savedDestinationJson('dest')},
         dest.id, NULL
    FROM jsonb_array_elements($3::jsonb) AS e(doc) LEFT JOIN dest ON true
   WHERE ${lockHeld(k)} AND ($6::text IS NULL OR dest.id IS NOT NULL)
  RETURNING api_key_id, destination, reserved_bytes
${insertTail('$4', k)}`;

/** Jobs of one bulk request: the same key, webhook and destination, each its own id and options. */
export interface NewJobs {
  apiKeyId: string;
  jobs: readonly { id: string; options: MediaJobOptions }[];
  /** Sealed once per row, bound to it: the rows share the address, not a ciphertext. */
  webhookUrl: Sealable | null;
  /** Every job's MediaJob is named after its id, in this namespace. */
  crNamespace: string;
  organizationId: string | null;
  provider?: StorageProviderName;
  /** The request's Idempotency-Key row, written with the jobs (./idempotency.ts). */
  keyRow?: NewKeyRow;
}

export type InsertJobs = (pool: pg.Pool, jobs: NewJobs) => Promise<Destination | undefined>;

/**
 * POST /jobs/bulk's insert with rule 9 built in (saved or managed storage
 * only: a bulk request has no inline storage). Call once per process, as
 * jobInserter. Returns the destination every job was given, or undefined
 * when the named `storage_provider` is not configured (nothing written).
 */
export function bulkJobInserter(rule9: SavedDestinationSql): InsertJobs {
  const texts = (k?: KeyParams) => ({
    default: insertJobsSaved(rule9.byDefault('$1', '$5'), k),
    provider: insertJobsSaved(rule9.byProvider('$1', '$5', '$6'), k),
  });
  const statements = { plain: texts(), keyed: texts({ apiKeyId: '$1', first: 7 }) };
  return (pool, n) => {
    if (!n.jobs.length) throw new RangeError('a bulk insert has at least one job');
    return withKeyRow(pool, n.keyRow, async () => {
      const variant = n.provider === undefined ? 'default' : 'provider';
      const keyed = n.keyRow !== undefined;
      const docs = n.jobs.map((j) => ({ id: j.id, options: j.options, ...(n.webhookUrl && { webhook: n.webhookUrl(sealedAt.jobWebhook(j.id)) }) }));
      const r = await pool.query<{ destination: Destination | null; key_held?: boolean }>({
        name: `mj-insert-jobs-${variant}${keyed ? '-keyed' : ''}`,
        text: statements[keyed ? 'keyed' : 'plain'][variant],
        values: [n.apiKeyId, n.crNamespace, JSON.stringify(docs),
          randomInt(COUNTER_SHARDS), n.organizationId, n.provider ?? null, ...(n.keyRow ? keyRowValues(n.keyRow) : [])],
      });
      keyHeld(r.rows[0]?.key_held);
      return r.rows[0]?.destination ?? undefined;
    });
  };
}

const INSERT_FROM_MANIFEST = `
WITH job AS (
  INSERT INTO jobs (id, api_key_id, url, status, step, progress, options, webhook_url_enc, cr_namespace, cr_name, created_at, updated_at,
                    destination, cr_created_at, manifest_sha256)
  SELECT $1, k.id, $3, 'Pending', 'Queued', 0, $4, $5, $6, $7, $8, now(), $10, now(), $11
  FROM api_keys k WHERE k.id = $2 AND k.revoked_at IS NULL
  ON CONFLICT (id) DO NOTHING
  RETURNING api_key_id, reserved_bytes
), ${countJobs('$9')}
SELECT count(*)::int AS inserted FROM job`;

/**
 * Record a MediaJob that came from kubectl or GitOps, owned by the key its
 * spec names (or its namespace is bound to), with the fingerprint of the spec as applied (findFinishedManifest);
 * counts toward that key's total once, however often it is recorded.
 * Returns false when the key does not exist or is revoked.
 */
export async function insertFromManifest(
  pool: pg.Pool, id: string, mj: Owned<MediaJob>, webhookUrl: Sealable | null, manifestSha256: Buffer,
): Promise<boolean> {
  const { webhookUrl: _w, owner: _o, destination: _d, jobId: _j, ...options } = mj.spec;
  const r = await pool.query<{ inserted: number }>(INSERT_FROM_MANIFEST,
    [id, mj.spec.owner.apiKeyId, mj.spec.url, JSON.stringify(options), webhookUrl?.(sealedAt.jobWebhook(id)) ?? null, mj.metadata.namespace, mj.metadata.name,
      mj.metadata.creationTimestamp ?? new Date().toISOString(), randomInt(COUNTER_SHARDS),
      // Where the file goes decides how GET /jobs/{id} signs its URL (managed storage, or the operator's sealed URLs).
      JSON.stringify(mj.spec.destination ?? { type: 'managed' }), manifestSha256]);
  if (r.rows[0]!.inserted === 1) return true;
  // Already recorded. Asked in a new statement: a concurrent insert of the
  // same id (a leader handing over) commits after this statement's snapshot
  // was taken, so only ON CONFLICT, not a read in the same statement, sees it.
  return (await findJob(pool, id)) !== undefined;
}

// ---- A batch's episode rows (statements run in ./batches.ts's transactions) ----

/** What every episode row of a batch shares: whose it is, where it delivers, its webhook (each row sealing its own copy). */
export interface EpisodeRowsCommon {
  batchId: string;
  apiKeyId: string;
  webhookUrl: Sealable | null;
  destination: Destination;
  /** The saved destination row rule 9 chose, as for a single job. */
  destinationId: string | null;
  /** Inline credentials; each episode row holds them, sealed for it, until it ends. */
  storage: Sealable | null;
  /**
   * The batch is paused: its episodes reserve no storage until it starts
   * (startBatch takes their reservation), since the contract reserves for
   * jobs in progress and a paused show may never run.
   */
  paused?: boolean;
}

/** One episode row: its job id, its options (url, filename and folder included), and what the feed said about it. */
export interface EpisodeRowInput {
  id: string;
  options: MediaJobOptions;
  info?: EpisodeInfo;
}

/** An episode whose MediaJob the batch controller is to create. */
export interface EpisodeToCreate {
  id: string;
  api_key_id: string;
  options: MediaJobOptions;
  info: EpisodeInfo | null;
  batch_index: number;
  destination: Destination | null;
}

// Every episode in one statement, from one JSON array parameter (500
// episodes are one round trip, not 500), counted on one shard of the key.
// batch_index is the position in that array. cr_name stays NULL until the
// batch controller has created the episode's MediaJob.
// A paused batch's episodes reserve nothing (EpisodeRowsCommon.paused);
// the others take the column's default, as a single job does.
const insertEpisodesSql = (paused: boolean) => `
WITH job AS (
  INSERT INTO jobs (id, api_key_id, url, status, step, progress, options, webhook_url_enc, cr_namespace, cr_name,
                    destination, destination_id, storage_enc, batch_id, batch_index, episode${paused ? ', reserved_bytes' : ''})
  SELECT (e.doc->>'id')::uuid, $1, e.doc->'options'->>'url', 'Pending', 'Queued', 0, e.doc->'options', e.doc->>'webhook', NULL, NULL,
         $2, $3, e.doc->>'storage', $4, (e.ord - 1)::int, e.doc->'info'${paused ? ', 0' : ''}
    FROM jsonb_array_elements($5::jsonb) WITH ORDINALITY AS e(doc, ord)
  RETURNING api_key_id, reserved_bytes
), ${countJobs('$6')}
SELECT count(*)::int AS inserted FROM job`;
const INSERT_EPISODES = { running: insertEpisodesSql(false), paused: insertEpisodesSql(true) };

/** Write a batch's episode rows, each counted as one job of the key; returns how many were written. */
export async function insertEpisodes(client: pg.ClientBase, common: EpisodeRowsCommon, episodes: readonly EpisodeRowInput[]): Promise<number> {
  const docs = episodes.map((e) => ({
    id: e.id, options: e.options, ...(e.info && { info: e.info }),
    ...(common.webhookUrl && { webhook: common.webhookUrl(sealedAt.jobWebhook(e.id)) }),
    ...(common.storage && { storage: common.storage(sealedAt.jobStorage(e.id)) }),
  }));
  const r = await client.query<{ inserted: number }>(INSERT_EPISODES[common.paused ? 'paused' : 'running'], [
    common.apiKeyId, JSON.stringify(common.destination), common.destinationId,
    common.batchId, JSON.stringify(docs), randomInt(COUNTER_SHARDS)]);
  return r.rows[0]!.inserted;
}

/**
 * Set the filename of episodes of `batchId`; returns the ids renamed. Job ids
 * are compared as text, so one that is not a UUID is simply not found.
 */
export async function setEpisodeFilenames(
  client: pg.ClientBase, batchId: string, renames: readonly { jobId: string; filename: string }[],
): Promise<Set<string>> {
  const r = await client.query<{ id: string }>(
    `UPDATE jobs j SET options = jsonb_set(j.options, '{filename}', to_jsonb(r.filename)), updated_at = now()
       FROM jsonb_to_recordset($2::jsonb) AS r(job_id text, filename text)
      WHERE j.batch_id = $1 AND j.id::text = lower(r.job_id)
     RETURNING j.id`,
    [batchId, JSON.stringify(renames.map((x) => ({ job_id: x.jobId, filename: x.filename })))]);
  return new Set(r.rows.map((x) => x.id));
}

/** The next Pending episodes of a batch without a MediaJob, in episode order. */
export async function uncreatedEpisodes(pool: pg.Pool, batchId: string, limit: number): Promise<EpisodeToCreate[]> {
  const r = await pool.query<EpisodeToCreate>({
    name: 'mj-uncreated-episodes',
    text: `SELECT id, api_key_id, options, episode AS info, batch_index, destination FROM jobs
            WHERE batch_id = $1 AND cr_name IS NULL AND status = 'Pending' ORDER BY batch_index LIMIT $2`,
    values: [batchId, limit],
  });
  return r.rows;
}

/** The batch controller created these episodes' MediaJobs; returns how many rows it changed (0 for one already marked). */
export async function markEpisodesCreated(
  pool: pg.Pool, created: readonly { jobId: string; namespace: string; name: string }[],
): Promise<number> {
  if (!created.length) return 0;
  const r = await pool.query(
    `UPDATE jobs j SET cr_namespace = c.namespace, cr_name = c.name, updated_at = now()
       FROM jsonb_to_recordset($1::jsonb) AS c(job_id uuid, namespace text, name text)
      WHERE j.id = c.job_id AND j.batch_id IS NOT NULL AND j.cr_name IS NULL`,
    [JSON.stringify(created.map((c) => ({ job_id: c.jobId, namespace: c.namespace, name: c.name })))]);
  return r.rowCount ?? 0;
}

// ---- Reads ----

// Epoch milliseconds are computed by Postgres so the driver never parses
// timestamps on the list path; float8 carries them exactly (< 2^53).
const SUMMARY_COLUMNS = `id, url, status, s3_key, error, error_type, step,
  floor(extract(epoch FROM created_at) * 1000)::float8 AS created_at,
  floor(extract(epoch FROM finished_at) * 1000)::float8 AS finished_at,
  file_size::float8 AS file_size`;

export const GET_JOB = `SELECT ${SUMMARY_COLUMNS}, progress, reason, actual_quality, title, description, release_date,
  subtitle_key, thumbnail_key, destination, result_urls_enc, error_detail,
  downloaded_bytes::float8 AS downloaded_bytes, total_bytes::float8 AS total_bytes, speed_bps::float8 AS speed_bps, eta_seconds
  FROM jobs WHERE id = $1 AND api_key_id = $2`;

/** Undefined for an unknown id and for another key's job alike. */
export async function getJob(pool: pg.Pool, apiKeyId: string, id: string): Promise<JobDetail | undefined> {
  const r = await pool.query<JobDetail>({ name: 'mj-get-job', text: GET_JOB, values: [id, apiKeyId] });
  return r.rows[0];
}

// Two statements rather than one with "$2 IS NULL OR status = $2": a
// prepared statement's generic plan could then not use the status index.
// ORDER BY names the table's columns explicitly: a bare `created_at` would
// resolve to the epoch-ms output column and turn the index walk into a sort
// of every row of the key.
export const LIST_JOBS = `SELECT ${SUMMARY_COLUMNS} FROM jobs WHERE api_key_id = $1
  ORDER BY jobs.created_at DESC, jobs.id DESC LIMIT $2 OFFSET $3`;
export const LIST_JOBS_BY_STATUS = `SELECT ${SUMMARY_COLUMNS} FROM jobs WHERE api_key_id = $1 AND status = $4
  ORDER BY jobs.created_at DESC, jobs.id DESC LIMIT $2 OFFSET $3`;
/** A key's kept totals (GET /usage, the storage quota): jobs created, bytes stored, bytes reserved by jobs not ended. */
export interface KeyUsage {
  jobs: number;
  uploadedBytes: number;
  reservedBytes: number;
}

/** A key's totals from its at most 16 counter shards: the same cost with a million jobs as with one. */
export const KEY_USAGE = `SELECT COALESCE(sum(count), 0)::float8 AS jobs, COALESCE(sum(uploaded_bytes), 0)::float8 AS uploaded,
       COALESCE(sum(reserved_bytes), 0)::float8 AS reserved
  FROM job_counters WHERE api_key_id = $1`;

export async function keyUsage(pool: pg.Pool, apiKeyId: string): Promise<KeyUsage> {
  const { rows: [row] } = await pool.query<{ jobs: number; uploaded: number; reserved: number }>({
    name: 'mj-key-usage', text: KEY_USAGE, values: [apiKeyId],
  });
  return { jobs: row!.jobs, uploadedBytes: row!.uploaded, reservedBytes: row!.reserved };
}

export const TOTAL_JOBS = 'SELECT COALESCE(SUM(count), 0)::float8 AS total FROM job_counters WHERE api_key_id = $1';

export async function listJobs(
  pool: pg.Pool, apiKeyId: string, q: { limit: number; offset: number; status?: JobStatus },
): Promise<{ jobs: JobSummary[]; total: number }> {
  const list = q.status === undefined
    ? pool.query<JobSummary>({ name: 'mj-list-jobs', text: LIST_JOBS, values: [apiKeyId, q.limit, q.offset] })
    : pool.query<JobSummary>({ name: 'mj-list-jobs-status', text: LIST_JOBS_BY_STATUS, values: [apiKeyId, q.limit, q.offset, q.status] });
  // The page and the kept total are independent reads; running them on two
  // connections at once saves a round trip of latency.
  const [page, total] = await Promise.all([
    list,
    pool.query<{ total: number }>({ name: 'mj-total-jobs', text: TOTAL_JOBS, values: [apiKeyId] }),
  ]);
  return { jobs: page.rows, total: total.rows[0]?.total ?? 0 };
}

const JOB_ROW_COLUMNS = 'id, api_key_id, url, status, webhook_url_enc, options, cr_namespace, cr_name';

/** What a row shows of the job's progress: the columns mirrorStatus writes that a client reads. */
export interface MirroredColumns {
  step: string;
  progress: number;
  error: string | null;
  reason: string | null;
  s3_key: string | null;
}

export async function findJob(pool: pg.Pool, id: string): Promise<(JobRow & MirroredColumns) | undefined> {
  const r = await pool.query<JobRow & MirroredColumns>({
    name: 'mj-find-job', text: `SELECT ${JOB_ROW_COLUMNS}, step, progress, error, reason, s3_key FROM jobs WHERE id = $1`, values: [id],
  });
  return r.rows[0];
}

/** What a finished job's record says, for a MediaJob that takes its status from it. */
export interface FinishedJob {
  id: string;
  status: JobStatus;
  step: string;
  error: string | null;
  error_type: 'error' | 'warning' | null;
  reason: string | null;
  s3_key: string | null;
  file_size: string | null;
  actual_quality: string | null;
  title: string | null;
  description: string | null;
  release_date: string | null;
  subtitle_key: string | null;
  thumbnail_key: string | null;
  started_at: Date | null;
  finished_at: Date | null;
}

const FINISHED_JOB_COLUMNS = `id, status, step, error, error_type, reason, s3_key, file_size, actual_quality, title, description, release_date,
  subtitle_key, thumbnail_key, started_at, finished_at`;

/** The job's record once it has ended; undefined while it runs (or for an unknown job). */
export async function findFinishedJob(pool: pg.Pool, id: string): Promise<FinishedJob | undefined> {
  const r = await pool.query<FinishedJob>({
    name: 'mj-find-finished-job', text: `SELECT ${FINISHED_JOB_COLUMNS} FROM jobs WHERE id = $1 AND status = ANY($2)`, values: [id, TERMINAL_STATUSES],
  });
  return r.rows[0];
}

/**
 * The latest finished record of a manifest MediaJob of this namespace and
 * name whose spec had this fingerprint: the same manifest, applied again
 * after its resource went (migration 0015). Undefined when there is none.
 */
export async function findFinishedManifest(pool: pg.Pool, namespace: string, name: string, manifestSha256: Buffer): Promise<FinishedJob | undefined> {
  const r = await pool.query<FinishedJob>({
    name: 'mj-find-finished-manifest',
    text: `SELECT ${FINISHED_JOB_COLUMNS}
             FROM jobs
            WHERE cr_namespace = $1 AND cr_name = $2 AND manifest_sha256 = $3 AND status = ANY($4)
            ORDER BY finished_at DESC NULLS LAST LIMIT 1`,
    values: [namespace, name, manifestSha256, TERMINAL_STATUSES],
  });
  return r.rows[0];
}

/**
 * A job's status and end (ms since the epoch, null while it runs): what its
 * upload grant may still do (ADR 0012); its file-size limit and storage
 * reservation: the grant's byte cap (upload-grants.ts grantByteCap).
 */
export async function grantJobState(pool: pg.Pool, id: string): Promise<{
  status: JobStatus; finishedAt: number | null; maxFilesizeBytes: number | null; reservedBytes: number;
} | undefined> {
  const { rows: [row] } = await pool.query<{ status: JobStatus; finished_at: number | null; max_filesize: number | null; reserved_bytes: number }>({
    name: 'mj-grant-job',
    text: `SELECT status, floor(extract(epoch FROM finished_at) * 1000)::float8 AS finished_at,
                  CASE WHEN jsonb_typeof(options->'limits'->'maxFilesizeBytes') = 'number'
                       THEN (options->'limits'->>'maxFilesizeBytes')::float8 END AS max_filesize,
                  reserved_bytes::float8 AS reserved_bytes
             FROM jobs WHERE id = $1`,
    values: [id],
  });
  return row && { status: row.status, finishedAt: row.finished_at, maxFilesizeBytes: row.max_filesize, reservedBytes: row.reserved_bytes };
}

// ---- The status mirror ----

/** What the status mirror found and did: the row's status before, and after (a terminal row is left as it is). */
export interface MirrorOutcome {
  previous: string;
  current: string;
  updated: boolean;
}

/**
 * Bring the jobs row to `s`. Terminal rows never change again. Returns the
 * status the row had before, or undefined when nothing was updated; events
 * built by `eventsFor(oldStatus)` go to the outbox in the same transaction,
 * and only for a job with a webhook. An episode reaching a terminal status
 * is counted in its batch in the same transaction (job row locked first,
 * then the batch row). A running job's storage reservation becomes what
 * its runner expects to deliver (status.expectedBytes, reservationFor), the
 * difference added to its key's totals in the same transaction; its end
 * releases what the row holds then, and counts what it stored.
 */
export async function syncStatus(
  pool: pg.Pool, jobId: string, s: MediaJobStatus,
  eventsFor: (oldStatus: string, row: JobRow) => OutboxEvent[],
): Promise<string | undefined> {
  const m = await mirrorStatus(pool, jobId, s, eventsFor);
  return m?.updated ? m.previous : undefined;
}

/**
 * syncStatus, telling also what a terminal row already says (undefined for
 * an unknown job): the operator learns here that a cancellation won the
 * race against the status it mirrors (docs/adr/0013).
 */
export async function mirrorStatus(
  pool: pg.Pool, jobId: string, s: MediaJobStatus,
  eventsFor: (oldStatus: string, row: JobRow) => OutboxEvent[],
): Promise<MirrorOutcome | undefined> {
  return withTransaction(pool, async (client) => {
    // FOR UPDATE: two writers of one job serialise here, so exactly one sees
    // the old status and queues the transition's events.
    const cur = await client.query<JobRow & { step: string; progress: number; batch_id: string | null; reserved_bytes: string }>(
      `SELECT ${JOB_ROW_COLUMNS}, step, progress, batch_id, reserved_bytes FROM jobs WHERE id = $1 FOR UPDATE`, [jobId]);
    const row = cur.rows[0];
    if (!row) return undefined;
    if (TERMINAL_STATUSES.includes(row.status as never)) return { previous: row.status, current: row.status, updated: false };
    const r = s.result;
    const ended = s.status !== undefined && TERMINAL_STATUSES.includes(s.status) ? s.status : undefined;
    // A job that ends releases what it holds (below); one still running holds what its runner expects to deliver.
    const reserve = ended ? undefined : reservationFor(s.expectedBytes, row.options);
    const reservedChange = reserve === undefined ? 0n : BigInt(reserve) - BigInt(row.reserved_bytes);
    await client.query(
      `UPDATE jobs SET status = $2, step = $3, progress = $4, error = $5, error_type = $6, reason = $7,
         s3_key = $8, file_size = $9, actual_quality = $10, title = $11, description = $12, release_date = $13,
         subtitle_key = $14, thumbnail_key = $15, started_at = $16, finished_at = $17, updated_at = now(),
         reserved_bytes = reserved_bytes + $18, error_detail = $19,
         downloaded_bytes = $20, total_bytes = $21, speed_bps = $22, eta_seconds = $23
       WHERE id = $1`,
      [jobId, s.status, s.step ?? row.step, s.progress ?? row.progress, s.error ?? null, s.errorType ?? null, s.reason ?? null,
        r?.storageKey ?? null, r?.fileSize ?? null, r?.actualQuality ?? null, r?.title ?? null, r?.description ?? null,
        r?.releaseDate ?? null, r?.subtitleKey ?? null, r?.thumbnailKey ?? null, s.startTime ?? null, s.finishTime ?? null,
        reservedChange.toString(), ended === 'Completed' ? null : cleanCause(s.errorDetail, row.url) ?? null,
        ...downloadColumns(s)],
    );
    // Under the row lock and against what the row holds: a replay of the same status changes nothing.
    if (reservedChange !== 0n) await countStorage(client, [{ api_key_id: row.api_key_id, reserved: reservedChange, uploaded: 0n }]);
    if (row.webhook_url_enc) await queueEvents(client, jobId, row.webhook_url_enc, eventsFor(row.status, row), row.batch_id);
    if (s.status) {
      await queueJobChatNotification(client, row.api_key_id, { id: jobId, status: s.status, errorType: s.errorType ?? null, error: s.error ?? null, url: row.url });
    }
    if (ended) {
      // The first terminal status, hence once: the reservation goes, what a completed job stored counts.
      const stored = ended === 'Completed' ? r?.uploadedBytes ?? r?.fileSize ?? 0 : 0;
      await settleStorage(client, [{ api_key_id: row.api_key_id, reserved_bytes: row.reserved_bytes, uploaded_bytes: stored }]);
      if (stored > 0) await queueUsageReport(client, jobId, row.api_key_id, stored, endedAt(s.finishTime));
      // An episode's first terminal status, counted once; its batch_completed follows its own events.
      if (row.batch_id) await rollUpEpisode(client, row.batch_id, ended);
    }
    return { previous: row.status, current: s.status ?? row.status, updated: true };
  });
}

/**
 * status.download as the row's columns, by the rule progress webhooks use
 * too (lib/src/mediajob/download-figures.ts): a figure not kept is null.
 */
function downloadColumns(s: MediaJobStatus): (number | null)[] {
  const d = downloadFigures(s);
  return [d.downloadedBytes ?? null, d.totalBytes ?? null, d.speedBps ?? null, d.etaSeconds ?? null];
}

/** When a job ended, from its status (a kubectl-written one may say anything): never later than now. */
function endedAt(finishTime: string | undefined): Date {
  const at = finishTime ? Date.parse(finishTime) : NaN;
  return new Date(Number.isFinite(at) ? Math.min(at, Date.now()) : Date.now());
}

/** A job that just ended, for its key's storage usage: what it reserved, what it stored. */
interface EndedJob {
  api_key_id: string;
  reserved_bytes: string | number;
  uploaded_bytes: number;
}

/**
 * Release the reservations of jobs that just ended and count what they
 * stored, in the transaction that ended them (which made each row terminal
 * once, so this runs once per job). What is released is what the row holds
 * then: the default taken at insert, or what the runner's expectedBytes
 * made of it (reservationFor).
 */
async function settleStorage(client: pg.ClientBase, ended: readonly EndedJob[]): Promise<void> {
  await countStorage(client, ended.map((e) => ({ api_key_id: e.api_key_id, reserved: -BigInt(e.reserved_bytes), uploaded: BigInt(e.uploaded_bytes) })));
}

/** A change to a key's storage totals: bytes reserved (negative: released) and bytes stored. */
interface StorageChange {
  api_key_id: string;
  reserved: bigint;
  uploaded: bigint;
}

/** Add changes to their keys' storage totals, per key on one counter shard (ON CONFLICT may touch a shard once per statement). */
async function countStorage(client: pg.ClientBase, changes: readonly StorageChange[]): Promise<void> {
  const byKey = new Map<string, { reserved: bigint; uploaded: bigint }>();
  for (const c of changes) {
    const t = byKey.get(c.api_key_id) ?? { reserved: 0n, uploaded: 0n };
    t.reserved += c.reserved;
    t.uploaded += c.uploaded;
    byKey.set(c.api_key_id, t);
  }
  const keys = [...byKey].filter(([, t]) => t.reserved !== 0n || t.uploaded !== 0n);
  if (!keys.length) return;
  await client.query({
    name: 'mj-count-storage',
    text: `INSERT INTO job_counters (api_key_id, shard, uploaded_bytes, reserved_bytes)
           SELECT k, $4, u, r FROM unnest($1::uuid[], $2::bigint[], $3::bigint[]) AS t(k, u, r)
           ON CONFLICT (api_key_id, shard) DO UPDATE
              SET uploaded_bytes = job_counters.uploaded_bytes + EXCLUDED.uploaded_bytes,
                  reserved_bytes = job_counters.reserved_bytes + EXCLUDED.reserved_bytes`,
    values: [keys.map(([k]) => k), keys.map(([, t]) => t.uploaded.toString()), keys.map(([, t]) => t.reserved.toString()), randomInt(COUNTER_SHARDS)],
  });
}

/** The least a running job reserves, whatever its runner expects: its sidecars and the estimate's error need room too. */
export const MIN_RESERVED_BYTES = 2 ** 20;

/**
 * What a running job reserves once its runner reported `expectedBytes`
 * (status.expectedBytes): that, at least MIN_RESERVED_BYTES, and at most
 * the job's file-size limit (options.limits.maxFilesizeBytes: the runner
 * never stores a larger file). Undefined when nothing was reported: the
 * reservation stays as it is (the default taken at insert, 512 MiB).
 */
export function reservationFor(expectedBytes: number | undefined, options: Record<string, unknown>): number | undefined {
  if (expectedBytes === undefined || !Number.isSafeInteger(expectedBytes) || expectedBytes < 0) return undefined;
  const cap = (options.limits as { maxFilesizeBytes?: unknown } | undefined)?.maxFilesizeBytes;
  const capped = typeof cap === 'number' && cap > 0 ? Math.min(expectedBytes, cap) : expectedBytes;
  return Math.max(MIN_RESERVED_BYTES, capped);
}

// ---- Cancellation (docs/adr/0013) ----

export type CancelOutcome =
  | { outcome: 'cancelled'; previous: JobStatus }
  /** The row was terminal already: Completed, Failed… or cancelled before. Nothing changed. */
  | { outcome: 'finished'; status: JobStatus }
  | { outcome: 'not_found' };

type CancelRow = JobRow & { batch_id: string | null; cr_namespace: string | null; cr_name: string | null; reserved_bytes: string };

/** Tell the operator (CANCEL_CHANNEL) about cancelled rows whose MediaJob may exist; delivered on commit. */
async function notifyCancelled(client: pg.ClientBase, rows: readonly CancelRow[], status: CancelStatus): Promise<void> {
  const notices = rows.filter((r) => r.cr_namespace && r.cr_name)
    .map((r) => JSON.stringify({ jobId: r.id, namespace: r.cr_namespace, name: r.cr_name, status }));
  if (notices.length) await client.query('SELECT pg_notify($1, n) FROM unnest($2::text[]) AS n', [CANCEL_CHANNEL, notices]);
}

// One statement for one job or every open episode of a batch: the rows are
// locked by the UPDATE itself, which skips a row another writer made
// terminal meanwhile (it re-checks the WHERE after the lock), so a
// cancellation and a completion cannot both win. Inline credentials go with
// the job's end, as they do when the operator finishes a job.
const CANCEL_COLUMNS = `${JOB_ROW_COLUMNS}, batch_id, cr_namespace, cr_name, reserved_bytes`;
const cancelRows = (where: string) => `UPDATE jobs SET status = $2, finished_at = now(), updated_at = now(), storage_enc = NULL
  WHERE ${where} AND status NOT IN (${TERMINAL_STATUSES.map((t) => `'${t}'`).join(', ')})
  RETURNING ${CANCEL_COLUMNS}`;

/** Queue each cancelled row's job_cancelled (rows with a webhook only), release its reservation, and notify the operator. */
async function announceCancelled(client: pg.ClientBase, rows: readonly CancelRow[], status: CancelStatus): Promise<void> {
  await settleStorage(client, rows.map((r) => ({ api_key_id: r.api_key_id, reserved_bytes: r.reserved_bytes, uploaded_bytes: 0 })));
  for (const row of rows) {
    if (row.webhook_url_enc) await queueEvents(client, row.id, row.webhook_url_enc, [jobCancelledEvent(row, status)], row.batch_id);
  }
  await notifyCancelled(client, rows, status);
}

/**
 * Cancel one job: Cancelled for its own key (`apiKeyId`), CancelledByAdmin
 * without one. The first terminal write wins (docs/adr/0013); another key's
 * job is not_found. job_cancelled is queued and the operator notified in
 * the same transaction; an episode is counted in its batch.
 */
export async function cancelJob(pool: pg.Pool, jobId: string, status: CancelStatus, apiKeyId?: string): Promise<CancelOutcome> {
  return withTransaction(pool, async (client) => {
    // Under the row lock: a concurrent status write finishes first, and this sees what it wrote.
    const cur = await client.query<{ status: JobStatus; api_key_id: string }>('SELECT status, api_key_id FROM jobs WHERE id = $1 FOR UPDATE', [jobId]);
    const before = cur.rows[0];
    if (!before || (apiKeyId !== undefined && before.api_key_id !== apiKeyId)) return { outcome: 'not_found' };
    if (TERMINAL_STATUSES.includes(before.status)) return { outcome: 'finished', status: before.status };
    const row = (await client.query<CancelRow>(cancelRows('id = $1'), [jobId, status])).rows[0]!;
    await announceCancelled(client, [row], status);
    if (row.batch_id) await rollUpEpisode(client, row.batch_id, status);
    return { outcome: 'cancelled', previous: before.status };
  });
}

/**
 * Cancel every episode of a batch that has not ended, those without a
 * MediaJob yet included, in the caller's transaction; the caller counts
 * them in the batch (./batches.ts cancelBatch). Returns the ids cancelled.
 */
export async function cancelEpisodes(client: pg.ClientBase, batchId: string, status: CancelStatus): Promise<string[]> {
  // Job rows are locked before the batch row, as in syncStatus: the same lock order everywhere.
  const r = await client.query<CancelRow>(`${cancelRows('batch_id = $1')}`, [batchId, status]);
  await announceCancelled(client, r.rows, status);
  return r.rows.map((x) => x.id);
}

/** Of these job ids, those whose row says cancelled, with the status (an operator taking the lead catches up with them). */
export async function cancelledAmong(pool: pg.Pool, jobIds: readonly string[]): Promise<Map<string, CancelStatus>> {
  if (!jobIds.length) return new Map();
  const r = await pool.query<{ id: string; status: CancelStatus }>(
    `SELECT id, status FROM jobs WHERE id = ANY($1::uuid[]) AND status IN ('Cancelled', 'CancelledByAdmin')`,
    [jobIds.filter((id) => /^[0-9a-f-]{36}$/i.test(id))]);
  return new Map(r.rows.map((x) => [x.id, x.status]));
}

// ---- Sealed columns (SecretBox values; opening them is the caller's) ----

/** The job's sealed inline credentials; undefined once the job ended (or it never had any). */
export async function inlineCredentials(pool: pg.Pool, jobId: string): Promise<string | undefined> {
  const r = await pool.query<{ storage_enc: string | null }>('SELECT storage_enc FROM jobs WHERE id = $1', [jobId]);
  return r.rows[0]?.storage_enc ?? undefined;
}

/** The job ended: its inline credentials go. */
export async function forgetInlineCredentials(pool: pg.Pool, jobId: string): Promise<void> {
  await pool.query('UPDATE jobs SET storage_enc = NULL WHERE id = $1 AND storage_enc IS NOT NULL', [jobId]);
}

/** Download URLs signed at completion on the user's own storage, sealed for the row, for GET /jobs/{id}. */
export async function saveResultUrls(pool: pg.Pool, jobId: string, urls: Sealable): Promise<void> {
  await pool.query('UPDATE jobs SET result_urls_enc = $2 WHERE id = $1', [jobId, urls(sealedAt.jobResultUrls(jobId))]);
}

/** The legacy saved destination (credentials sealed in Postgres) the gateway resolved the job to, if it still exists. */
export async function legacyDestination(pool: pg.Pool, jobId: string): Promise<LegacyDestination | undefined> {
  const r = await pool.query<LegacyDestination>(
    `SELECT d.owner_kind, d.owner_id, d.provider, d.credentials_enc FROM jobs j
       JOIN storage_destinations d ON d.id = j.destination_id AND d.source = 'legacy'
      WHERE j.id = $1`, [jobId]);
  return r.rows[0];
}

/** For the gateway's Drive file URLs: the job's destination and its saved `provider` row; undefined for an unknown job. */
export async function resolvedDestination(pool: pg.Pool, jobId: string, provider: StorageProviderName): Promise<ResolvedDestination | undefined> {
  const r = await pool.query<ResolvedDestination>(
    `SELECT j.destination, d.source, d.secret_name, d.owner_kind, d.owner_id, d.credentials_enc FROM jobs j
       LEFT JOIN storage_destinations d ON d.id = j.destination_id AND d.provider = $2
      WHERE j.id = $1`, [jobId, provider]);
  return r.rows[0];
}
