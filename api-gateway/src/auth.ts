// x-api-key authentication. Every API request needs its key looked up, so
// lookups are cached in process for a short TTL: the hot path costs a
// sha256 and a Map read. The price is a revocation delay: a revoked key
// keeps working on each replica for at most AUTH_CACHE_TTL_MS (10 s by
// default). Unknown keys are cached too (as "invalid"), but for at most
// UNKNOWN_KEY_TTL_MS (1 s): a client hammering with a bad key reaches
// Postgres once a second per replica, and a key created meanwhile (admin
// CLI, local mode's dev key) works on every replica at most 1 s after the
// lookup that did not find it, with no message between replicas to lose.
// A client sending ever new keys gets a budget of lookups per client
// address (KeyLookupBudget; the address is the client's, behind trusted
// proxies too: app.ts). Past it, its keys are looked up together with every
// other key past a budget, one query at a time (SharedKeyLookup), and only
// those that turn out unknown get 429: a flood costs one connection however
// many keys it sends, and never makes a valid key at its address fail. A key
// this replica has seen valid is looked up whatever the budget. A
// marketplace key's end user is resolved after this, by marketplace.ts,
// through the same kind of cache.
import type { NextFunction, Request, Response } from 'express';
import { findApiKeyByHash, findApiKeysByHashes, hashApiKey, type ApiKeyRecord } from './db/api-keys.js';
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

/**
 * The most key hashes ApiKeyCache remembers as valid. Only a lookup that
 * found a working key adds one, so no client can fill it with made-up keys.
 */
export const KNOWN_VALID_KEYS_MAX = 100_000;

/**
 * API key records by key hash; `undefined` for an unknown key, remembered
 * UNKNOWN_KEY_TTL_MS at most. Besides, the hashes of keys found valid here,
 * for as long as they stay so (knownValid): what the cache has let go of
 * (its TTL, or entries pushed out by a flood of made-up keys) is still known
 * to be a working key's, and is looked up without a budget.
 */
export class ApiKeyCache extends LookupCache<ApiKeyRecord | undefined> {
  private readonly valid: Set<string>;

  constructor(lookup: KeyLookup, ttlMs = 10_000, maxEntries = 10_000, now: () => number = Date.now) {
    const valid = new Set<string>();
    super(async (hash) => {
      const record = await lookup(hash);
      noteValidity(valid, hash, record);
      return record;
    }, ttlMs, maxEntries, now, Math.min(ttlMs, UNKNOWN_KEY_TTL_MS));
    this.valid = valid;
  }

  /** Whether the last lookup of `hash` here found a working (not revoked) key. */
  knownValid(hash: string): boolean {
    return this.valid.has(hash);
  }

  /** A lookup made around the cache (SharedKeyLookup): remember what it found. */
  noteLookup(hash: string, record: ApiKeyRecord | undefined): void {
    noteValidity(this.valid, hash, record);
  }
}

function noteValidity(valid: Set<string>, hash: string, record: ApiKeyRecord | undefined): void {
  valid.delete(hash);
  if (!record || record.revoked) return;
  // Insertion order is age: the key found valid longest ago goes first.
  if (valid.size >= KNOWN_VALID_KEYS_MAX) valid.delete(valid.values().next().value!);
  valid.add(hash);
}

export function cachedKeyLookup(pool: Parameters<typeof findApiKeyByHash>[0]): KeyLookup {
  return (keyHash) => findApiKeyByHash(pool, keyHash);
}

export const DEFAULT_KEY_LOOKUPS_PER_ADDRESS = 50;

/**
 * How many key lookups of their own (cache misses: keys this replica has not
 * seen within the cache TTL, nor ever seen valid) each client address may
 * cause per one-second window, in process. A key already cached, valid or
 * not, or known valid, costs nothing and is never counted here. The address
 * is the client's as app.ts's trusted proxies say (req.ip): the connection's
 * peer, or behind a proxy in TRUSTED_PROXY_CIDRS the client its
 * X-Forwarded-For names. Past the budget a key is not refused outright: it
 * goes to the SharedKeyLookup. At most `maxAddresses` are tracked (the
 * oldest go first).
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

/** The most keys waiting for the shared lookup, and the most one of its statements asks for. */
export const SHARED_LOOKUP_MAX_PENDING = 10_000;
export const SHARED_LOOKUP_MAX_BATCH = 1_000;

type Waiter = { resolve: (record: ApiKeyRecord | undefined) => void; reject: (err: unknown) => void };

/**
 * Lookups of keys past their client's budget (KeyLookupBudget), for every
 * client at once: queued, and looked up together (`key_hash = ANY(...)`,
 * up to SHARED_LOOKUP_MAX_BATCH a statement), one statement at a time. So a
 * flood of made-up keys costs one pool connection however many it sends,
 * and a working key that arrives among them (the same address: one NAT,
 * one proxy) is found and served; the made-up ones get 429. A key already
 * waiting shares its place in the queue. With SHARED_LOOKUP_MAX_PENDING
 * distinct keys waiting, another is refused without a lookup (lookup
 * answers undefined): only a key this replica has never seen valid can
 * meet that, in a flood the size of that queue.
 */
export class SharedKeyLookup {
  private readonly pending = new Map<string, Waiter[]>();
  private running = false;

  constructor(
    private readonly lookupMany: (hashes: string[]) => Promise<Map<string, ApiKeyRecord>>,
    private readonly maxPending = SHARED_LOOKUP_MAX_PENDING,
    private readonly maxBatch = SHARED_LOOKUP_MAX_BATCH,
  ) {}

  /** The record of `hash` (undefined: no such key), once its statement ran; undefined instead of a promise when the queue is full. */
  lookup(hash: string): Promise<ApiKeyRecord | undefined> | undefined {
    let waiters = this.pending.get(hash);
    if (!waiters) {
      if (this.pending.size >= this.maxPending) return undefined;
      waiters = [];
      this.pending.set(hash, waiters);
    }
    const queued = waiters;
    const answer = new Promise<ApiKeyRecord | undefined>((resolve, reject) => queued.push({ resolve, reject }));
    this.next();
    return answer;
  }

  /** Keys waiting now (tests). */
  get waiting(): number {
    return this.pending.size;
  }

  /** Run the next statement unless one is running: the oldest waiting keys, up to maxBatch. */
  private next(): void {
    if (this.running || this.pending.size === 0) return;
    this.running = true;
    const batch: [string, Waiter[]][] = [];
    for (const entry of this.pending) {
      if (batch.length >= this.maxBatch) break;
      batch.push(entry);
    }
    for (const [hash] of batch) this.pending.delete(hash);
    this.lookupMany(batch.map(([hash]) => hash)).then((found) => {
      for (const [hash, waiters] of batch) for (const w of waiters) w.resolve(found.get(hash));
    }, (err: unknown) => {
      for (const [, waiters] of batch) for (const w of waiters) w.reject(err);
    }).finally(() => {
      this.running = false;
      this.next();
    });
  }
}

export function sharedKeyLookup(pool: Parameters<typeof findApiKeysByHashes>[0]): SharedKeyLookup {
  return new SharedKeyLookup((hashes) => findApiKeysByHashes(pool, hashes));
}

/** The spec's 401 answers: a request without a key, and one whose key is unknown or revoked. */
export const MISSING_KEY = 'Missing x-api-key header';
export const INVALID_KEY = 'Invalid API Key';

/** A key past its client's budget that did not turn out to be one (or could not wait): 429 with Retry-After. */
function overBudget(res: Response): HttpError {
  res.setHeader('Retry-After', '1');
  return new HttpError(429, 'rate_limit_exceeded');
}

/** Where a key's record comes from when its client may spend no more lookups of its own, and why. */
export interface KeyLookups {
  /** Each client address's own lookups. */
  budget: KeyLookupBudget;
  /** Past the budget: the lookup every client shares. */
  shared: SharedKeyLookup;
}

/**
 * The record of `hash`: from the cache; a key this replica has seen valid,
 * or one within its client's budget, through the cache (a miss costs its own
 * query); past the budget through the shared lookup, where a key that turns
 * out unknown is refused with 429 and a working one is served.
 */
async function keyRecord(cache: ApiKeyCache, hash: string, client: string, lookups: KeyLookups | undefined, res: Response): Promise<ApiKeyRecord | undefined> {
  if (!lookups || cache.has(hash) || cache.knownValid(hash) || lookups.budget.take(client)) return cache.get(hash);
  const pending = lookups.shared.lookup(hash);
  if (!pending) throw overBudget(res);
  const record = await pending;
  cache.noteLookup(hash, record);
  if (!record) throw overBudget(res);
  return record;
}

/**
 * Express middleware: a 401 HttpError with the spec's messages, else
 * res.locals.principal. `missingMessage`: the spec words it differently for
 * POST /is-short. `lookups`: a key not in the cache is looked up on its
 * own only within its client's budget (req.ip), past it through the shared
 * lookup, and refused with 429 `rate_limit_exceeded` only when it turns out
 * unknown there. Mounted once per authenticated path prefix in app.ts.
 */
export function requireApiKey(cache: ApiKeyCache, missingMessage = MISSING_KEY, lookups?: KeyLookups) {
  return async (req: Request, res: Response, next: NextFunction): Promise<void> => {
    const header = req.headers['x-api-key'];
    const key = Array.isArray(header) ? header[0] : header;
    if (key === undefined || key === '') throw new HttpError(401, missingMessage);
    const hash = hashApiKey(key);
    const record = await keyRecord(cache, hash, req.ip ?? '', lookups, res);
    if (!record || record.revoked) throw new HttpError(401, INVALID_KEY);
    res.locals.principal = { apiKeyId: record.id, organizationId: record.organizationId, key: record };
    next();
  };
}
