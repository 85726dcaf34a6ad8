// GET /usage (spec: GET /usage) and the storage quota every job-creating
// route applies (POST /jobs, its shows and playlists, POST /jobs/bulk).
// Both read the key's kept totals (lib/src/db/jobs.ts keyUsage: at most 16
// counter rows, whatever the key's history) and its limits from the
// authenticated key. Gigabytes are GiB (2^30 bytes): a byte count divided
// by a power of two is exact in a JSON number, so storage_usage_gb * 2^30
// gives back the bytes. The quota counts every destination, not only
// managed storage: docs in api-gateway/README.md, "Usage and storage quota".
// A key billed through Stripe also shows its billing period and this
// period's metered usage, read from Stripe (lib/src/billing.ts); when that
// read fails, billing_error says why and the rest is answered as ever.
import { Router, type RequestHandler } from 'express';
import { BillingError, type BillingReader } from '@mediajobs/lib/billing';
import { keyUsage, type KeyUsage } from '@mediajobs/lib/db/jobs';
import { errFields, type Logger } from '@mediajobs/lib/logger';
import type pg from 'pg';
import { isMarketplaceUser, type Principal } from '../auth.js';
import type { ApiKeyRecord } from '../db/api-keys.js';
import { HttpError, failsWith } from '../http-errors.js';

export interface UsageRouteDeps {
  pool: pg.Pool;
  logger: Logger;
  /** Stripe, when STRIPE_SECRET_KEY is set. */
  billing?: BillingReader;
}

const GIB = 2 ** 30;
const MIB = 2 ** 20;
const gib = (bytes: number) => bytes / GIB;
/** A quota figure as the 403 words it: GiB with at most two decimals, as a string (spec). */
const gibText = (bytes: number) => String(Math.round(gib(bytes) * 100) / 100);

export const QUOTA_EXCEEDED = 'Storage quota exceeded';

export function usageRouter(deps: UsageRouteDeps): Router {
  const router = Router();
  router.get('/usage', failsWith('Database query failed'), showUsage(deps));
  return router;
}

function showUsage(deps: UsageRouteDeps): RequestHandler {
  return async (_req, res) => {
    const who: Principal = res.locals.principal!;
    const [usage, billing] = await Promise.all([keyUsage(deps.pool, who.apiKeyId), billingFields(deps, who)]);
    res.json({ ...usageAnswer(who.key, usage), ...billing });
  };
}

/**
 * The billing fields of a key billed through Stripe; none for other keys
 * and for a marketplace's end users (their usage is billed to the provider's
 * account, whose period and total are not theirs to see).
 */
async function billingFields(deps: UsageRouteDeps, who: Principal): Promise<Record<string, unknown>> {
  const customer = who.key.billingCustomer;
  if (!customer || isMarketplaceUser(who)) return {};
  if (!deps.billing) return { billing_error: 'Billing is not configured on this server' };
  try {
    const p = await deps.billing.period(customer);
    return { billing_period_start: p.start, billing_period_end: p.end, current_period_usage_gb: gib(p.usageBytes) };
  } catch (err) {
    deps.logger.warn({ err: errFields(err) }, 'billing read failed');
    return { billing_error: err instanceof BillingError ? err.message : 'Billing information is unavailable right now; try again later' };
  }
}

/** The spec's fields: the totals always, the limit fields only for a limited key, each per-key limit only when set. */
export function usageAnswer(key: ApiKeyRecord, u: KeyUsage): Record<string, unknown> {
  const effective = u.uploadedBytes + u.reservedBytes;
  const limit = key.storageLimitBytes;
  return {
    client_name: key.name,
    usage_count: u.jobs,
    storage_usage_gb: gib(u.uploadedBytes),
    storage_reserved_gb: gib(u.reservedBytes),
    storage_effective_usage_gb: gib(effective),
    ...(limit !== null && {
      storage_limit_gb: gib(limit),
      storage_limit_bytes: limit,
      storage_remaining_gb: gib(Math.max(0, limit - effective)),
    }),
    ...(key.maxResolution !== null && { max_resolution_limit: key.maxResolution }),
    ...(key.maxDurationSeconds !== null && { max_duration_limit_seconds: key.maxDurationSeconds }),
    ...(key.maxFilesizeBytes !== null && {
      max_filesize_limit_bytes: key.maxFilesizeBytes,
      max_filesize_limit_mb: key.maxFilesizeBytes / MIB,
    }),
  };
}

/**
 * The storage quota, before anything is created: a limited key whose
 * stored plus reserved bytes reached its limit gets the spec's 403. An
 * unlimited key costs nothing here (its limit comes with authentication).
 */
export async function refuseOverQuota(pool: pg.Pool, who: Principal): Promise<void> {
  const limit = who.key.storageLimitBytes;
  if (limit === null) return;
  const u = await keyUsage(pool, who.apiKeyId);
  const used = u.uploadedBytes + u.reservedBytes;
  if (used < limit) return;
  throw new HttpError(403, QUOTA_EXCEEDED, {
    limit_gb: gibText(limit),
    used_gb: gibText(used),
    message: `This key's storage quota of ${gibText(limit)} GB is used up (${gibText(used)} GB stored or reserved by jobs in progress); `
      + 'no new jobs are accepted. Usage is cumulative: deleting files does not reduce it.',
  });
}
