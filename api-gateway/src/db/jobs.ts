// The jobs table as the gateway uses it: one insert per POST /jobs, one
// primary-key read per GET /jobs/{id}, one index range per GET /jobs page.
// Statements are named so pg prepares them once per connection.
import { randomInt } from 'node:crypto';
import type pg from 'pg';
import type { Destination, JobStatus, MediaJobOptions, StorageProviderName } from '@mediajobs/lib/mediajob/types';
import { resolveByProviderSql, resolveDefaultSql } from '../destinations/store.js';

export const COUNTER_SHARDS = 16;

export interface NewJob {
  id: string;
  apiKeyId: string;
  url: string;
  options: MediaJobOptions;
  webhookUrlEnc: string | null;
  crNamespace: string;
  crName: string;
  /**
   * Where it delivers: inline credentials already checked (sealed with the
   * SecretBox), or rule 9 over the saved destinations of the key and its
   * organization, decided by the insert itself.
   */
  target:
    | { kind: 'inline'; destination: Destination; storageEnc: string }
    | { kind: 'saved'; organizationId: string | null; provider?: StorageProviderName };
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
}

// The job row and its counter increment in one statement, hence one
// implicit transaction and one round trip: the total can never disagree
// with the rows, and the insert costs a single commit. For a saved
// destination, rule 9 runs inside the same statement: the row written
// carries the destination (never a credential) and its id, or, when a
// named `storage_provider` has no destination, nothing is written at all.
const INSERT_COLUMNS = `id, api_key_id, url, status, step, progress, options, webhook_url_enc, cr_namespace, cr_name,
                    destination, destination_id, storage_enc`;
const COUNT_JOB = `counted AS (
  INSERT INTO job_counters (api_key_id, shard, count)
  SELECT api_key_id, $8, 1 FROM job
  ON CONFLICT (api_key_id, shard) DO UPDATE SET count = job_counters.count + 1
)`;

export const INSERT_JOB_INLINE = `
WITH job AS (
  INSERT INTO jobs (${INSERT_COLUMNS})
  VALUES ($1, $2, $3, 'Pending', 'Queued', 0, $4, $5, $6, $7, $9, NULL, $10)
  RETURNING api_key_id, destination
), ${COUNT_JOB}
SELECT destination FROM job`;

const insertJobSaved = (resolve: string) => `
WITH dest AS (${resolve}),
job AS (
  INSERT INTO jobs (${INSERT_COLUMNS})
  SELECT $1, $2, $3, 'Pending', 'Queued', 0, $4, $5, $6, $7,
         CASE WHEN dest.id IS NULL THEN '{"type":"managed"}'::jsonb
              ELSE jsonb_strip_nulls(jsonb_build_object('type', 'saved', 'provider', dest.provider, 'secretName', dest.secret_name)) END,
         dest.id, NULL
    FROM (VALUES (1)) one LEFT JOIN dest ON true
   WHERE $10::text IS NULL OR dest.id IS NOT NULL
  RETURNING api_key_id, destination
), ${COUNT_JOB}
SELECT destination FROM job`;

export const INSERT_JOB_SAVED_DEFAULT = insertJobSaved(resolveDefaultSql('$2', '$9'));
export const INSERT_JOB_SAVED_BY_PROVIDER = insertJobSaved(resolveByProviderSql('$2', '$9', '$10'));

/**
 * Write a new Pending job; returns the destination it was given, or
 * undefined when the `storage_provider` it named is not configured for the
 * key or its organization (then nothing was written).
 */
export async function insertJob(pool: pg.Pool, job: NewJob): Promise<Destination | undefined> {
  const common = [job.id, job.apiKeyId, job.url, JSON.stringify(job.options), job.webhookUrlEnc, job.crNamespace, job.crName,
    randomInt(COUNTER_SHARDS)];
  const t = job.target;
  const r = t.kind === 'inline'
    ? await pool.query<{ destination: Destination }>({
      name: 'mj-insert-job-inline', text: INSERT_JOB_INLINE, values: [...common, JSON.stringify(t.destination), t.storageEnc],
    })
    : t.provider === undefined
      ? await pool.query<{ destination: Destination }>({
        name: 'mj-insert-job', text: INSERT_JOB_SAVED_DEFAULT, values: [...common, t.organizationId, null],
      })
      : await pool.query<{ destination: Destination }>({
        name: 'mj-insert-job-provider', text: INSERT_JOB_SAVED_BY_PROVIDER, values: [...common, t.organizationId, t.provider],
      });
  return r.rows[0]?.destination;
}

// Epoch milliseconds are computed by Postgres so the driver never parses
// timestamps on the list path; float8 carries them exactly (< 2^53).
const SUMMARY_COLUMNS = `id, url, status, s3_key, error, error_type, step,
  floor(extract(epoch FROM created_at) * 1000)::float8 AS created_at,
  floor(extract(epoch FROM finished_at) * 1000)::float8 AS finished_at,
  file_size::float8 AS file_size`;

export const GET_JOB = `SELECT ${SUMMARY_COLUMNS}, progress, reason, actual_quality, title, description, release_date,
  subtitle_key, thumbnail_key, destination, result_urls_enc
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
