// POST /jobs/bulk (issue 13): up to 100 single jobs with shared options, all
// or nothing. Each URL is validated exactly as POST /jobs validates its `url`
// (parseJobRequest over the shared options and that URL, the outbound policy,
// rule 8: no show or playlist, a disabled MediaPlatform's 422); every row is
// written by one statement, whose commit is the acceptance: the operator's
// materializer creates the MediaJobs from the rows, as for a single job
// (docs/adr/0017).
import { Router, type RequestHandler } from 'express';
import { detectBatchSource } from '@mediajobs/lib/batches/index';
import { bulkJobInserter } from '@mediajobs/lib/db/jobs';
import { parseJobRequest, type JobRequest } from '@mediajobs/lib/job-options';
import type { Logger } from '@mediajobs/lib/logger';
import type { OutboundPolicy } from '@mediajobs/lib/outbound';
import type { PlatformLookup } from '@mediajobs/lib/platforms/directory';
import { PLATFORM_DISABLED_MESSAGE } from '@mediajobs/lib/platforms/types';
import type { SecretBox } from '@mediajobs/lib/secret-box';
import type pg from 'pg';
import { isMarketplaceUser, type Principal } from '../auth.js';
import { resolveByProviderSql, resolveDefaultSql } from '../destinations/store.js';
import { HttpError, failsWith } from '../http-errors.js';
import { keyRowFor, type IdempotencyKeys } from '../idempotency.js';
import { applyKeyLimits } from '../key-limits.js';
import { refuseOverQuota } from './usage.js';
import { refusedAddress } from './jobs.js';
import { uuidv7 } from '../ids.js';
import { acceptJson, bodyObject } from '../json-body.js';
import type { GatewayMetrics } from '../metrics.js';

export const MAX_BULK_URLS = 100;
/** 100 URLs of up to 4 KiB each, and the shared options. */
const MAX_BULK_BODY_BYTES = 1024 * 1024;

const insertJobs = bulkJobInserter({ byDefault: resolveDefaultSql, byProvider: resolveByProviderSql });

/** POST /jobs fields a bulk request may not carry: one URL list, saved or managed storage, and no batches. */
const NOT_IN_BULK: Readonly<Record<string, string>> = {
  url: "Invalid field 'url': a bulk request lists its URLs in 'urls'",
  storage: "Invalid field 'storage': not accepted by POST /jobs/bulk; use a saved destination (storage_provider) or managed storage",
  paused: "Invalid field 'paused': not accepted by POST /jobs/bulk (it applies to show batches only)",
};

export const NOT_DIRECT_KEY = 'POST /jobs/bulk needs a direct API key';

export interface BulkRouteDeps {
  pool: pg.Pool;
  logger: Logger;
  secretBox: SecretBox;
  namespace: string;
  outbound: OutboundPolicy;
  idempotency: IdempotencyKeys;
  /** Wakes the operator's materializer once accepted rows have committed (lib/src/db/materialize.ts). */
  pokeMaterializer: () => void;
  /** Counts the jobs accepted (metrics.ts). */
  metrics?: GatewayMetrics;
  /** The MediaPlatforms: a URL of a disabled one refuses the request, as POST /jobs refuses it alone (422). */
  platforms?: PlatformLookup;
}

export function bulkRouter(deps: BulkRouteDeps): Router {
  const router = Router();
  router.post('/jobs/bulk', ...acceptJson(MAX_BULK_BODY_BYTES), failsWith('Failed to create jobs'),
    deps.idempotency.middleware, createJobs(deps), deps.idempotency.settle);
  return router;
}

/** Whether a key may create jobs in bulk (spec: direct API keys only): a marketplace key's end users get 403 NOT_DIRECT_KEY. */
function isDirectKey(who: Principal): boolean {
  return !isMarketplaceUser(who);
}

/** The `urls` list: 1 to 100 strings; 400 otherwise. */
function urlList(body: Record<string, unknown>): string[] {
  const urls = body.urls;
  if (urls === undefined || urls === null) throw new HttpError(400, "Missing required field 'urls'");
  if (!Array.isArray(urls) || urls.length < 1 || urls.length > MAX_BULK_URLS) {
    throw new HttpError(400, `Invalid field 'urls': must be an array of 1 to ${MAX_BULK_URLS} URLs`);
  }
  urls.forEach((u, i) => {
    if (typeof u !== 'string') throw new HttpError(400, `urls[${i}]: must be a string`);
  });
  return urls as string[];
}

/**
 * Each URL as POST /jobs would take it alone, with the shared options. A
 * problem with a shared option is the same for every URL and is answered as
 * POST /jobs words it; a problem with one URL names its index.
 */
function parseEach(shared: Record<string, unknown>, urls: readonly string[], outbound: OutboundPolicy, platforms: PlatformLookup | undefined): JobRequest[] {
  return urls.map((url, i) => {
    const parsed = parseJobRequest({ ...shared, url });
    if (!parsed.ok) {
      const aboutUrl = parsed.error.startsWith("Invalid field 'url'") || parsed.error.startsWith("Missing required field 'url'");
      throw new HttpError(400, aboutUrl ? `urls[${i}]: ${parsed.error}` : parsed.error);
    }
    const refused = refusedAddress(outbound, parsed.request);
    // The webhook is shared by every URL: its problem is the request's, not an index's.
    if (refused) throw new HttpError(400, refused.field === 'url' ? `urls[${i}]: ${refused.error}` : refused.error);
    if (detectBatchSource(parsed.request.options.url).kind !== 'single') {
      throw new HttpError(400, `urls[${i}]: a show or playlist URL cannot be part of a bulk request`);
    }
    if (platforms?.disabledFor(parsed.request.options.url)) throw new HttpError(422, `urls[${i}]: ${PLATFORM_DISABLED_MESSAGE}`);
    return parsed.request;
  });
}

function createJobs(deps: BulkRouteDeps): RequestHandler {
  return async (req, res) => {
    const who: Principal = res.locals.principal!;
    if (!isDirectKey(who)) throw new HttpError(403, NOT_DIRECT_KEY);
    const body = bodyObject(req);
    const urls = urlList(body);
    for (const [field, message] of Object.entries(NOT_IN_BULK)) {
      if (body[field] !== undefined && body[field] !== null) throw new HttpError(400, message);
    }
    const { urls: _urls, ...shared } = body;
    const requests = parseEach(shared, urls, deps.outbound, deps.platforms).map((r) => ({ ...r, options: applyKeyLimits(r.options, who.key) }));
    const first = requests[0]!;
    await refuseOverQuota(deps.pool, who);

    const jobs = requests.map((r) => ({ id: uuidv7(), options: r.options }));
    const ids = jobs.map((j) => j.id);
    const answer = { job_ids: ids, count: ids.length };
    const destination = await insertJobs(deps.pool, {
      apiKeyId: who.apiKeyId,
      jobs,
      webhookUrl: first.webhookUrl === undefined ? null : deps.secretBox.sealable(first.webhookUrl),
      crNamespace: deps.namespace,
      organizationId: who.organizationId,
      ...(first.storageProvider !== undefined && { provider: first.storageProvider }),
      keyRow: keyRowFor(res, { status: 201, body: answer, location: null }),
    });
    if (!destination) throw new HttpError(400, 'storage_provider_not_configured');
    deps.pokeMaterializer();
    deps.metrics?.jobsAccepted('bulk', jobs.length);

    res.status(201).json(answer);
  };
}
