// x-api-key authentication. Every API request needs its key looked up, so
// lookups are cached in process for a short TTL: the hot path costs a
// sha256 and a Map read. The price is a revocation delay: a revoked key
// keeps working on each replica for at most AUTH_CACHE_TTL_MS (10 s by
// default). Unknown keys are cached too (as "invalid"), but for at most
// UNKNOWN_KEY_TTL_MS (1 s): a client hammering with a bad key reaches
// Postgres once a second per replica, and a key created meanwhile (admin
// CLI, local mode's dev key) works on every replica at most 1 s after the
// lookup that did not find it, with no message between replicas to lose.
// A client sending ever new keys gets a budget of lookups per address
// (KeyLookupBudget) before it costs a query: past it, 429 without one. A
// marketplace key's end user is resolved after this, by marketplace.ts,
// through the same kind of cache.
import type { NextFunction, Request, Response } from 'express';
import { findApiKeyByHash, hashApiKey, type ApiKeyRecord } from './db/api-keys.js';
import { HttpError } from './http-errors.js';

export type KeyLookup = (keyHash: string) => Promise<ApiKeyRecord | undefined>;

export interface Principal {
  /**
   * Whose jobs, usage, saved destinations and settings a request acts on:
   * the key's id, or for a marketplace key its end user's (marketplace.ts).
   */
  apiKeyId: string;
  /** The account's organization: the rate budget and the operator's admission group. */
  organizationId: string | null;
  /**
   * The key that authenticated, whose name and limits apply: a marketplace
   * end user's is the provider account's key.
   */
  key: ApiKeyRecord;
}

/** Whether a principal is an end user of a marketplace key (every request with such a key is, once authenticated). */
export const isMarketplaceUser = (who: Principal): boolean => who.key.kind === 'marketplace';

declare module 'express-serve-static-core' {
  interface Locals {
    principal?: Principal;
  }
}

interface Entry<V> {
  expires: number;
  value: Promise<V>;
}

/**
 * Lookups by a string key, remembered for a TTL, at most `maxEntries` (the
 * oldest go first). An answer of `undefined` (nothing found) is remembered
 * for `missTtlMs` at most, counted like the TTL from the lookup's start.
 */
export class LookupCache<V> {
  private readonly entries = new Map<string, Entry<V>>();

  constructor(
    private readonly lookup: (key: string) => Promise<V>,
    private readonly ttlMs = 10_000,
    private readonly maxEntries = 10_000,
    private readonly now: () => number = Date.now,
    private readonly missTtlMs = ttlMs,
  ) {}

  /**
   * The value for a key (an API key's record for its hash); concurrent
   * misses for one key share a single query. A failed lookup is not cached,
   * so the next request retries.
   */
  get(key: string): Promise<V> {
    const t = this.now();
    const hit = this.entries.get(key);
    if (hit && hit.expires > t) return hit.value;
    if (hit) this.entries.delete(key);
    const value = this.lookup(key);
    if (this.ttlMs > 0) {
      // Map iteration order is insertion order: the first entry is the oldest.
      while (this.entries.size >= this.maxEntries) this.entries.delete(this.entries.keys().next().value!);
      const entry: Entry<V> = { expires: t + this.ttlMs, value };
      this.entries.set(key, entry);
      value.then((v) => {
        if (v === undefined) entry.expires = Math.min(entry.expires, t + this.missTtlMs);
      }, () => {
        if (this.entries.get(key) === entry) this.entries.delete(key);
      });
    }
    return value;
  }

  /** Whether `key` has a live entry (a value, or a lookup under way): get() would not look it up. */
  has(key: string): boolean {
    const hit = this.entries.get(key);
    return hit !== undefined && hit.expires > this.now();
  }

  /** Forget everything (tests, and an admin action in the same process). */
  clear(): void {
    this.entries.clear();
  }

  get size(): number {
    return this.entries.size;
  }
}

/**
 * The longest an unknown key's "invalid" answer is reused: a key created
 * after a lookup missed it works on every replica within this.
 */
export const UNKNOWN_KEY_TTL_MS = 1_000;

/** API key records by key hash; `undefined` for an unknown key, remembered UNKNOWN_KEY_TTL_MS at most. */
export class ApiKeyCache extends LookupCache<ApiKeyRecord | undefined> {
  constructor(lookup: KeyLookup, ttlMs = 10_000, maxEntries = 10_000, now: () => number = Date.now) {
    super(lookup, ttlMs, maxEntries, now, Math.min(ttlMs, UNKNOWN_KEY_TTL_MS));
  }
}

export function cachedKeyLookup(pool: Parameters<typeof findApiKeyByHash>[0]): KeyLookup {
  return (keyHash) => findApiKeyByHash(pool, keyHash);
}

export const DEFAULT_KEY_LOOKUPS_PER_ADDRESS = 50;

/**
 * How many key lookups (cache misses: keys this replica has not seen within
 * the cache TTL) each client address may cause per one-second window, in
 * process. A key already cached, valid or not, costs nothing and is never
 * refused here; so a client with a working key keeps working while someone
 * at its address floods with random keys. The address is the connection's
 * (X-Forwarded-For is anyone's to write): behind a proxy that does not keep
 * it, every client shares the proxy's budget, which still bounds the queries
 * a flood can cost. At most `maxAddresses` are tracked (the oldest go first).
 */
export class KeyLookupBudget {
  private readonly windows = new Map<string, { start: number; used: number }>();

  constructor(
    readonly perSecond = DEFAULT_KEY_LOOKUPS_PER_ADDRESS,
    private readonly maxAddresses = 10_000,
    private readonly now: () => number = Date.now,
  ) {}

  /** Take one lookup for `address`; false when its window is spent. */
  take(address: string): boolean {
    const t = this.now();
    let w = this.windows.get(address);
    if (!w || t - w.start >= 1_000) {
      this.windows.delete(address);
      while (this.windows.size >= this.maxAddresses) this.windows.delete(this.windows.keys().next().value!);
      w = { start: t, used: 0 };
      this.windows.set(address, w);
    }
    if (w.used >= this.perSecond) return false;
    w.used++;
    return true;
  }
}

/** The spec's 401 answers: a request without a key, and one whose key is unknown or revoked. */
export const MISSING_KEY = 'Missing x-api-key header';
export const INVALID_KEY = 'Invalid API Key';

/**
 * Express middleware: a 401 HttpError with the spec's messages, else
 * res.locals.principal. `missingMessage`: the spec words it differently for
 * POST /is-short. `lookups`: a key not in the cache is looked up only
 * within its address's budget, else 429 `rate_limit_exceeded`. Mounted once
 * per authenticated path prefix in app.ts.
 */
export function requireApiKey(cache: ApiKeyCache, missingMessage = MISSING_KEY, lookups?: KeyLookupBudget) {
  return async (req: Request, res: Response, next: NextFunction): Promise<void> => {
    const header = req.headers['x-api-key'];
    const key = Array.isArray(header) ? header[0] : header;
    if (key === undefined || key === '') throw new HttpError(401, missingMessage);
    const hash = hashApiKey(key);
    if (lookups && !cache.has(hash) && !lookups.take(req.socket.remoteAddress ?? '')) {
      res.setHeader('Retry-After', '1');
      throw new HttpError(429, 'rate_limit_exceeded');
    }
    const record = await cache.get(hash);
    if (!record || record.revoked) throw new HttpError(401, INVALID_KEY);
    res.locals.principal = { apiKeyId: record.id, organizationId: record.organizationId, key: record };
    next();
  };
}
