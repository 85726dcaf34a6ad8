// Marketplace end users (issue 14 item 6, ADR 0015). A marketplace key is a
// provider account's key, used by an API marketplace on behalf of its end
// users; each request names its end user in a header (MARKETPLACE_USER_HEADER,
// default x-marketplace-user). Owns that header (what a value may be),
// turning the key's principal into the end user's, and the end user's
// storage rule on POST /jobs (inline `storage` until one is saved, each one
// saved for them). Everything keyed by the principal's apiKeyId (jobs,
// usage, batches, saved destinations, settings) is then per end user by
// itself; the rate budget stays the account's (rate-limit.ts budgetKey),
// and POST /jobs/bulk refuses them (routes/bulk.ts).
//
// The header's value may be personal data (a marketplace username): it is
// stored once (api_keys.marketplace_user) to find the end user again, and
// never logged, answered or put on a MediaJob; logs name the end user by
// its id.
import type { Request, RequestHandler } from 'express';
import type { StorageProviderName } from '@mediajobs/lib/mediajob/types';
import type { NewJob } from '@mediajobs/lib/db/jobs';
import type pg from 'pg';
import { LookupCache, isMarketplaceUser, type Principal } from './auth.js';
import { endUserOf, type EndUserRecord } from './db/api-keys.js';
import { storeDestination, type SaveDeps } from './destinations/save.js';
import { ownDefaultProvider } from './destinations/store.js';
import { HttpError } from './http-errors.js';

export const DEFAULT_MARKETPLACE_USER_HEADER = 'x-marketplace-user';
/** 1 to 256 printable ASCII characters, spaces included (HTTP has already trimmed the ends). */
const END_USER_ID = /^[\x20-\x7e]{1,256}$/;

export const MARKETPLACE_USER_REVOKED = 'This marketplace user has been revoked';
export const MARKETPLACE_STORAGE_REQUIRED = "Missing required field 'storage': a marketplace user's first job must carry inline storage, "
  + 'which is then saved for later jobs (none is saved for this user yet)';

/** The end user a request names; a 400 saying what is wrong with the header otherwise (never echoing it). */
export function endUserId(req: Request, header: string): string {
  const values = req.headersDistinct[header];
  if (!values || values.length === 0 || values[0] === '') {
    throw new HttpError(400, `Missing ${header} header: requests with a marketplace API key must name their end user`);
  }
  if (values.length > 1) throw new HttpError(400, `Invalid ${header} header: send it once`);
  if (!END_USER_ID.test(values[0]!)) throw new HttpError(400, `Invalid ${header} header: must be 1 to 256 printable ASCII characters`);
  return values[0]!;
}

/** End users by marketplace key and header value, looked up (or created) once per TTL, like keys (auth.ts). */
export class MarketplaceUsers {
  private readonly cache: LookupCache<EndUserRecord>;

  constructor(pool: pg.Pool, readonly header = DEFAULT_MARKETPLACE_USER_HEADER, ttlMs?: number, maxEntries?: number) {
    // A header value is printable ASCII: a newline cannot be part of it.
    this.cache = new LookupCache((k) => {
      const cut = k.indexOf('\n');
      return endUserOf(pool, k.slice(0, cut), k.slice(cut + 1));
    }, ttlMs, maxEntries);
  }

  /**
   * Express middleware, after requireApiKey and the rate limit: a
   * marketplace key's request becomes its end user's (400 without the
   * header, 403 for a revoked end user). A direct key's request is left as
   * it is, whatever headers it sends.
   */
  middleware(): RequestHandler {
    return async (req, res, next) => {
      const who = res.locals.principal!;
      if (!isMarketplaceUser(who)) {
        next();
        return;
      }
      const endUser = await this.cache.get(`${who.key.id}\n${endUserId(req, this.header)}`);
      if (endUser.revoked) throw new HttpError(403, MARKETPLACE_USER_REVOKED);
      res.locals.principal = { ...who, apiKeyId: endUser.id };
      next();
    };
  }
}

/**
 * A marketplace end user's job without inline storage: its own saved
 * destination (`storage_provider`'s, else its default), never its account
 * organization's, never managed storage. 400 when it has none. Naming the
 * provider makes the insert write nothing should that destination be
 * deleted meanwhile (then `storage_provider_not_configured`).
 */
export async function endUserSavedTarget(pool: pg.Pool, who: Principal, provider: StorageProviderName | undefined): Promise<NewJob['target']> {
  const named = provider ?? await ownDefaultProvider(pool, who.apiKeyId);
  if (named === undefined) throw new HttpError(400, MARKETPLACE_STORAGE_REQUIRED);
  return { kind: 'saved', organizationId: null, provider: named };
}

/**
 * A marketplace end user's inline storage, once checked (shape, backend,
 * live probe): saved as their default destination, sealed or in the vault
 * as POST /user/<provider> saves, so later jobs may leave `storage` out.
 * Every job that carries storage saves it again: the latest one wins.
 */
export async function saveEndUserStorage(deps: SaveDeps, who: Principal, document: Record<string, unknown>): Promise<void> {
  const provider = document.provider as StorageProviderName;
  await storeDestination(deps, { owner: { kind: 'api_key', id: who.apiKeyId }, provider, document, isDefault: true, savedVia: 'marketplace_job' });
  deps.logger.info({ provider, endUser: who.apiKeyId }, 'marketplace user storage saved');
}
