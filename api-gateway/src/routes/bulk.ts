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
import { JOB_REQUEST_FIELDS, parseJobRequest, type JobRequest } from '@mediajobs/lib/job-options';
import type { Logger } from '@mediajobs/lib/logger';
import type { OutboundPolicy } from '@mediajobs/lib/outbound';
import type { PlatformLookup } from '@mediajobs/lib/platforms/directory';
import { PLATFORM_DISABLED_MESSAGE } from '@mediajobs/lib/platforms/types';
import type { SecretBox } from '@mediajobs/lib/secret-box';
import { unknownFieldWarnings } from '@mediajobs/lib/unknown-fields';
import type pg from 'pg';
import { isMarketplaceUser, type Principal } from '../auth.js';
import { resolveByProviderSql, resolveDefaultSql } from '../destinations/store.js';
import { HttpError, failsWith, type Problem } from '../http-errors.js';
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

/** The fields a bulk body may name: `urls` and POST /jobs' (those bulk refuses are known, and refused, not unknown). */
const BULK_FIELDS = ['urls', ...JOB_REQUEST_FIELDS];

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

/** A refusal found while checking a bulk body: its status, the words of an answer, and its problems. */
interface Refusal {
  status: number;
  message: string;
  problems: Problem[];
}

/** One problem, as its own answer would describe it (a URL's under `urls[<index>]`). */
const refusal = (status: number, message: string, code: Problem['code'], param: string): Refusal => ({ status, message, problems: [{ code, param, message }] });

/** The `urls` list's problems: absent, not 1 to 100 entries, or entries that are not strings. */
function urlListRefusals(urls: unknown): Refusal[] {
  if (urls === undefined || urls === null) return [refusal(400, "Missing required field 'urls'", 'missing_field', 'urls')];
  if (!Array.isArray(urls) || urls.length < 1 || urls.length > MAX_BULK_URLS) {
    return [refusal(400, `Invalid field 'urls': must be an array of 1 to ${MAX_BULK_URLS} URLs`, 'invalid_field', 'urls')];
  }
  return urls.flatMap((u, i) => (typeof u === 'string' ? [] : [refusal(400, `urls[${i}]: must be a string`, 'invalid_field', `urls[${i}]`)]));
}

/**
 * Each URL as POST /jobs would take it alone, with the shared options. A
 * problem with a shared option is the same for every URL and is answered as
 * POST /jobs words it (once); a problem with one URL names its index.
 * Returns the requests, or every refusal found, each URL's in the order
 * POST /jobs checks them.
 */
function parseEach(
  shared: Record<string, unknown>, urls: readonly string[], outbound: OutboundPolicy, platforms: PlatformLookup | undefined,
): { requests: JobRequest[]; refusals: Refusal[] } {
  const requests: JobRequest[] = [];
  const refusals: Refusal[] = [];
  urls.forEach((url, i) => {
    const item = `urls[${i}]`;
    const parsed = parseJobRequest({ ...shared, url });
    if (!parsed.ok) {
      const ofUrl = (p: { param: string }) => p.param === 'url';
      const aboutUrl = parsed.problems.length > 0 && ofUrl(parsed.problems[0]!);
      refusals.push({
        status: 400,
        message: aboutUrl ? `${item}: ${parsed.error}` : parsed.error,
        problems: parsed.problems.map((p) => (ofUrl(p) ? { ...p, param: item, message: `${item}: ${p.message}` } : p)),
      });
      return;
    }
    const refused = refusedAddress(outbound, parsed.request);
    // The webhook is shared by every URL: its problem is the request's, not an index's.
    if (refused) {
      refusals.push(refused.field === 'url'
        ? refusal(400, `${item}: ${refused.error}`, 'invalid_field', item) : refusal(400, refused.error, 'invalid_field', 'webhook_url'));
    } else if (detectBatchSource(parsed.request.options.url).kind !== 'single') {
      refusals.push(refusal(400, `${item}: a show or playlist URL cannot be part of a bulk request`, 'invalid_field', item));
    } else if (platforms?.disabledFor(parsed.request.options.url)) {
      refusals.push(refusal(422, `${item}: ${PLATFORM_DISABLED_MESSAGE}`, 'platform_disabled', item));
    } else {
      requests.push(parsed.request);
    }
  });
  return { requests, refusals };
}

/**
 * The bulk body's requests; else the first refusal's answer (as the checks
 * come: the URL list, the fields bulk does not take, then each URL), with
 * every problem found, a shared option's once.
 */
function checkedRequests(body: Record<string, unknown>, outbound: OutboundPolicy, platforms: PlatformLookup | undefined): JobRequest[] {
  const { urls, ...shared } = body;
  const refusals = urlListRefusals(urls);
  for (const [field, message] of Object.entries(NOT_IN_BULK)) {
    if (body[field] !== undefined && body[field] !== null) refusals.push(refusal(400, message, 'invalid_field', field));
  }
  const listed = Array.isArray(urls) && urls.length <= MAX_BULK_URLS ? urls.filter((u): u is string => typeof u === 'string') : [];
  const each = parseEach(shared, listed, outbound, platforms);
  refusals.push(...each.refusals);
  const first = refusals[0];
  if (!first) return each.requests;
  const seen = new Set<string>();
  const errors = refusals.flatMap((r) => r.problems).filter((p) => {
    const k = `${p.param ?? ''}\n${p.message}`;
    return !seen.has(k) && seen.add(k);
  });
  throw new HttpError(first.status, first.message, {}, errors.length ? { errors } : undefined);
}

function createJobs(deps: BulkRouteDeps): RequestHandler {
  return async (req, res) => {
    const who: Principal = res.locals.principal!;
    if (!isDirectKey(who)) throw new HttpError(403, NOT_DIRECT_KEY);
    const body = bodyObject(req);
    const requests = checkedRequests(body, deps.outbound, deps.platforms).map((r) => ({ ...r, options: applyKeyLimits(r.options, who.key) }));
    const first = requests[0]!;
    await refuseOverQuota(deps.pool, who);

    const jobs = requests.map((r) => ({ id: uuidv7(), options: r.options }));
    const ids = jobs.map((j) => j.id);
    // Accepted, as POST /jobs accepts them, and named.
    const warnings = unknownFieldWarnings(body, BULK_FIELDS);
    const answer = { job_ids: ids, count: ids.length, ...(warnings.length && { warnings }) };
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
