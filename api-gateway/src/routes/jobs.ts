// POST /jobs, GET /jobs, GET /jobs/{id}. A show or genuine playlist URL on
// POST /jobs becomes a batch (spec rule 8), created by ./batches.ts.
import { Router, type RequestHandler, type Response } from 'express';
import { z } from 'zod';
import { detectBatchSource } from '@mediajobs/lib/batches/index';
import { JOB_REQUEST_FIELDS, parseJobRequest, type JobRequest } from '@mediajobs/lib/job-options';
import { errFields, type Logger } from '@mediajobs/lib/logger';
import { unknownFieldWarnings } from '@mediajobs/lib/unknown-fields';
import { urlFieldError, type OutboundPolicy } from '@mediajobs/lib/outbound';
import { PLATFORM_DISABLED_MESSAGE } from '@mediajobs/lib/platforms/types';
import type { PlatformLookup } from '@mediajobs/lib/platforms/directory';
import type { JobStatus } from '@mediajobs/lib/mediajob/types';
import type { SecretBox } from '@mediajobs/lib/secret-box';
import type pg from 'pg';
import { isMarketplaceUser, type Principal } from '../auth.js';
import { getJob, jobInserter, listJobs, type InsertJob, type JobDetail, type NewJob } from '@mediajobs/lib/db/jobs';
import { sealedAt } from '@mediajobs/lib/db/sealed-columns';
import { resolveByProviderSql, resolveDefaultSql } from '../destinations/store.js';
import { inlineDestination } from '../destinations/job-destination.js';
import type { ProbeCache, ProviderSettings } from '../destinations/probe.js';
import type { DestinationVault } from '../destinations/vault.js';
import { HttpError, failsWith, invalidBody } from '../http-errors.js';
import { keyRowFor, type IdempotencyKeys } from '../idempotency.js';
import { applyKeyLimits } from '../key-limits.js';
import { endUserSavedTarget, saveEndUserStorage } from '../marketplace.js';
import { refuseOverQuota } from './usage.js';
import { isUuid, uuidv7 } from '../ids.js';
import { integerParam, oneOfParam, parseQuery } from '../query.js';
import { acceptJson } from '../json-body.js';
import { clientGone, createBatch, type BatchCreateDeps } from './batches.js';

export const MAX_BODY_BYTES = 1024 * 1024;
export const DEFAULT_LIMIT = 20;
export const MAX_LIMIT = 100;

/** The filter's lower-case forms (spec: GET /jobs) and the statuses they select. */
const FILTERS = ['pending', 'processing', 'completed', 'failed', 'warning'] as const;
const STATUS_FILTER: Record<(typeof FILTERS)[number], JobStatus> = {
  pending: 'Pending', processing: 'Processing', completed: 'Completed', failed: 'Failed', warning: 'Warning',
};

/** GET /jobs' query (also its parameters in the OpenAPI document). */
export const listJobsQuery = z.object({
  limit: integerParam(1, MAX_LIMIT, DEFAULT_LIMIT),
  offset: integerParam(0, Number.MAX_SAFE_INTEGER, 0),
  status: oneOfParam(FILTERS),
});

export interface JobsRouteDeps extends BatchCreateDeps {
  pool: pg.Pool;
  logger: Logger;
  secretBox: SecretBox;
  namespace: string;
  /** A 24 h download URL for a managed-storage key. */
  presign: (key: string) => Promise<string>;
  /** Successful probes of inline storage, 5 minutes per credential set. */
  probes: ProbeCache;
  providerSettings?: ProviderSettings;
  /** Which source URLs and storage endpoints may be contacted. */
  outbound: OutboundPolicy;
  /** The MediaPlatforms: a disabled one's new jobs are refused (docs/adr/0027). */
  platforms?: PlatformLookup;
  idempotency: IdempotencyKeys;
  /** Where a marketplace end user's storage is saved (keyvault); absent: sealed into Postgres. */
  vault?: DestinationVault;
}

function principal(res: Response): Principal {
  return res.locals.principal!;
}

// Authentication is app.ts's (every /jobs path needs a key); an unexpected
// failure answers the route's failsWith message and is logged by the error
// middleware (http-errors.ts).
export function jobsRouter(deps: JobsRouteDeps): Router {
  const router = Router();
  router.post('/jobs', ...acceptJson(MAX_BODY_BYTES), failsWith('Failed to create job'),
    deps.idempotency.middleware, createJob(deps, newJobInserter(deps)), deps.idempotency.settle);
  router.get('/jobs', failsWith('Database query failed'), listJobsOfKey(deps));
  router.get('/jobs/:id', failsWith('Database query failed'), showJob(deps));
  return router;
}

/**
 * Where a new job (or every episode of a new batch) delivers: inline storage
 * (checked and probed; 400 with the reason), else rule 9 over the saved
 * destinations, else managed storage; the insert resolves rule 9. Decided
 * once, at creation: a job never falls back to another destination later.
 * A marketplace end user's inline storage is also saved for them, and
 * without it only their own saved destination will do (marketplace.ts).
 */
async function deliveryTarget(deps: JobsRouteDeps, request: JobRequest, who: Principal): Promise<NewJob['target']> {
  const endUser = isMarketplaceUser(who);
  if (request.storage === undefined) {
    if (endUser) return endUserSavedTarget(deps.pool, who, request.storageProvider);
    return { kind: 'saved', organizationId: who.organizationId, ...(request.storageProvider !== undefined && { provider: request.storageProvider }) };
  }
  const checked = await inlineDestination(deps, request.storage);
  if (!checked.ok) throw new HttpError(400, checked.error);
  if (endUser) await saveEndUserStorage(deps, who, checked.document);
  return { kind: 'inline', ...checked.value };
}

/**
 * The outbound-address policy on a request's addresses as written: its
 * source URL and its webhook (each also checked where it is contacted, at
 * connect time). The first refused one, for the 400.
 */
export function refusedAddress(outbound: OutboundPolicy, request: JobRequest): { field: 'url' | 'webhook_url'; error: string } | undefined {
  const source = urlFieldError(outbound, 'url', request.options.url);
  if (source) return { field: 'url', error: source };
  const hook = request.webhookUrl === undefined ? undefined : urlFieldError(outbound, 'webhook_url', request.webhookUrl);
  return hook === undefined ? undefined : { field: 'webhook_url', error: hook };
}

/**
 * POST /jobs' insert, with rule 9 (the key's or organization's saved
 * destination, store.ts) inside the statement; the requests of one turn
 * share one (ADR 0025), whose sizes the metrics observe.
 */
function newJobInserter(deps: JobsRouteDeps): InsertJob {
  const metrics = deps.metrics;
  return jobInserter({ byDefault: resolveDefaultSql, byProvider: resolveByProviderSql }, metrics && ((n) => metrics.jobInsertStatement(n)));
}

/**
 * POST /jobs: validate, decide the destination once, insert the row (or the
 * batch, rule 8). The commit is the acceptance: the operator's materializer
 * creates the MediaJob from the row (docs/adr/0017).
 */
function createJob(deps: JobsRouteDeps, insertJob: InsertJob): RequestHandler {
  return async (req, res) => {
    const parsed = parseJobRequest(req.body);
    if (!parsed.ok) throw invalidBody(parsed);
    const refused = refusedAddress(deps.outbound, parsed.request);
    if (refused) throw new HttpError(400, refused.error);
    // Before anything is written: a show or playlist of a disabled platform is refused as a single item is.
    if (deps.platforms?.disabledFor(parsed.request.options.url)) throw new HttpError(422, PLATFORM_DISABLED_MESSAGE);
    const who = principal(res);
    // Before the batch decision: a show's or playlist's shared options become every episode's.
    const request = { ...parsed.request, options: applyKeyLimits(parsed.request.options, who.key) };
    await refuseOverQuota(deps.pool, who);
    const target = await deliveryTarget(deps, request, who);
    // Accepted, as the contract says, and named, so a misspelt option is not silently lost.
    const warnings = unknownFieldWarnings(req.body as Record<string, unknown>, JOB_REQUEST_FIELDS);
    const answered = <T extends object>(body: T) => (warnings.length ? { ...body, warnings } : body);
    const source = detectBatchSource(request.options.url);
    if (source.kind !== 'single') {
      const answer = answered(await createBatch(deps, { request, source, who, target, signal: clientGone(res) }, (a) => keyRowFor(res, {
        ...a, body: answered(a.body as object),
      })));
      res.status(201).location(`/batch/${answer.batch_id}`).json(answer);
      return;
    }
    const { apiKeyId } = who;
    const id = uuidv7();
    const destination = await insertJob(deps.pool, {
      id,
      apiKeyId,
      url: request.options.url,
      options: request.options,
      webhookUrl: request.webhookUrl === undefined ? null : deps.secretBox.sealable(request.webhookUrl),
      crNamespace: deps.namespace,
      crName: id,
      target,
      keyRow: keyRowFor(res, { status: 201, body: answered({ job_id: id }), location: `/jobs/${id}` }),
    });
    if (!destination) throw new HttpError(400, 'storage_provider_not_configured');
    deps.pokeMaterializer();
    deps.metrics?.jobsAccepted('api');
    res.status(201).location(`/jobs/${id}`).json(answered({ job_id: id }));
  };
}

/** GET /jobs: the key's jobs, newest first, one page. */
function listJobsOfKey(deps: JobsRouteDeps): RequestHandler {
  return async (req, res) => {
    const { limit, offset, status: filter } = parseQuery(listJobsQuery, req.query);
    const status = filter && STATUS_FILTER[filter];
    const page = await listJobs(deps.pool, principal(res).apiKeyId, { limit, offset, ...(status && { status }) });
    res.json({ jobs: page.jobs, total: page.total, limit, offset });
  };
}

/** GET /jobs/{id}: one job of the key; another key's, an unknown and a malformed id are all 404. */
function showJob(deps: JobsRouteDeps): RequestHandler {
  return async (req, res) => {
    const id = String(req.params.id);
    const job = isUuid(id) ? await getJob(deps.pool, principal(res).apiKeyId, id.toLowerCase()) : undefined;
    if (!job) throw new HttpError(404, 'Job not found');
    res.json(await jobResponse(job, deps, deps.logger));
  };
}

/** A presigned URL, or null when signing failed (the spec's contract for s3_url). */
async function signed(presign: (key: string) => Promise<string>, key: string, log: Logger, jobId: string): Promise<string | null> {
  try {
    return await presign(key);
  } catch (err) {
    log.warn({ jobId, err: errFields(err) }, 'presigning a download URL failed');
    return null;
  }
}

/**
 * Download URLs of a job delivered to the user's own storage: signed by the
 * operator when the job completed (inline credentials are deleted once the
 * job ends, so they cannot be signed here) and kept sealed in the row.
 */
function ownStorageUrls(job: JobDetail, box: SecretBox, log: Logger): { s3Url: string | null; subtitleUrl: string | null; thumbnailUrl: string | null } {
  const none = { s3Url: null, subtitleUrl: null, thumbnailUrl: null };
  if (!job.result_urls_enc) return none;
  try {
    const u = JSON.parse(box.open(job.result_urls_enc, sealedAt.jobResultUrls(job.id))) as { s3Url?: string; subtitleUrl?: string; thumbnailUrl?: string };
    return { s3Url: u.s3Url ?? null, subtitleUrl: u.subtitleUrl ?? null, thumbnailUrl: u.thumbnailUrl ?? null };
  } catch (err) {
    log.warn({ jobId: job.id, err: errFields(err) }, 'sealed download URLs could not be opened');
    return none;
  }
}

/** GET /jobs/{id}'s body, also POST /jobs/{id}/cancel's (./cancel.ts). */
export async function jobResponse(job: JobDetail, deps: Pick<JobsRouteDeps, 'presign' | 'secretBox'>, log: Logger): Promise<Record<string, unknown>> {
  const managed = !job.destination || job.destination.type === 'managed';
  const own = managed ? undefined : ownStorageUrls(job, deps.secretBox, log);
  const [s3Url, subtitleUrl, thumbnailUrl] = own ? [own.s3Url, own.subtitleUrl, own.thumbnailUrl] : await Promise.all([
    job.s3_key ? signed(deps.presign, job.s3_key, log, job.id) : null,
    job.subtitle_key ? signed(deps.presign, job.subtitle_key, log, job.id) : null,
    job.thumbnail_key ? signed(deps.presign, job.thumbnail_key, log, job.id) : null,
  ]);
  return {
    id: job.id,
    url: job.url,
    status: job.status,
    s3_key: job.s3_key,
    error: job.error,
    error_type: job.error_type,
    step: job.step,
    created_at: job.created_at,
    finished_at: job.finished_at,
    file_size: job.file_size,
    s3_url: s3Url,
    actual_quality: job.actual_quality,
    progress: job.progress,
    reason: job.reason,
    title: job.title,
    description: job.description,
    release_date: job.release_date,
    // Present only when the file exists (spec: subtitle and thumbnail URLs).
    ...(job.subtitle_key && { subtitle_key: job.subtitle_key, subtitle_url: subtitleUrl }),
    ...(job.thumbnail_key && { thumbnail_key: job.thumbnail_key, thumbnail_url: thumbnailUrl }),
    // Each only when known (issue 38): the download's figures, and a failed or warned job's cleaned cause.
    ...(job.downloaded_bytes !== null && { downloaded_bytes: job.downloaded_bytes }),
    ...(job.total_bytes !== null && { total_bytes: job.total_bytes }),
    ...(job.speed_bps !== null && { speed_bps: job.speed_bps }),
    ...(job.eta_seconds !== null && { eta_seconds: job.eta_seconds }),
    ...(job.error_detail !== null && { error_detail: job.error_detail }),
  };
}
