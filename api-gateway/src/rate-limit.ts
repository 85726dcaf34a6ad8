// The request rate limit (the spec's Limits; issue 14 item 5). Owns who
// shares an allowance (budgetKey), the counter (Redis, shared by every
// replica, or in process for a single gateway), and the 429 and 503 answers.
// app.ts mounts rateLimit() right after requireApiKey on every authenticated
// prefix, so each API request is counted once, before routing and body
// parsing; the open routes (/healthz, /readyz, signed downloads, upload
// grants) are not counted.
//
// Windows are fixed: a budget's window opens with its first request and lasts
// one second. rate-limiter-flexible's Redis counter is one Lua script (SET NX
// EX, then INCRBY): a rejected request increments the count but never touches
// the expiry, and its memory counter likewise keeps the first request's
// expiry, so a client that keeps sending while refused is served again as
// soon as the window ends. No blockDuration: that would extend it.
//
// Every counted answer (served or 429) says where its budget stands, in the
// RateLimit-Policy and RateLimit fields of the IETF httpapi draft
// (draft-ietf-httpapi-ratelimit-headers-10, section 2 and 3; structured
// fields, RFC 9651): `RateLimit-Policy: "default";q=<limit>;w=1` and
// `RateLimit: "default";r=<remaining>;t=<seconds until the window ends>`.
// A 503 of an unreachable counter says nothing: nothing was counted.
import { Redis } from 'ioredis';
import type { RequestHandler } from 'express';
import { RateLimiterMemory, RateLimiterRedis, RateLimiterRes, type RateLimiterAbstract } from 'rate-limiter-flexible';
import { errFields, type Logger } from '@mediajobs/lib/logger';
import type { Principal } from './auth.js';
import { HttpError } from './http-errors.js';

export const DEFAULT_RATE_LIMIT_PER_SECOND = 1000;
/** The spec's 429 body, `{"error":"rate_limit_exceeded"}`. */
export const RATE_LIMITED = 'rate_limit_exceeded';
/** The 503 body when the shared counter cannot be reached: never unlimited, never a 500. */
export const RATE_COUNTER_UNAVAILABLE = 'rate_limit_unavailable';
/** Seconds a refused client waits: the rest of a window is at most one second. */
const RETRY_AFTER = '1';
/** The one window, in seconds (the draft's `w`). */
const WINDOW_SECONDS = 1;
/** The draft's policy identifier (an sf-string): the gateway has one policy. */
const POLICY_NAME = 'default';

/** How long a request waits for Redis at most; Redis answers in well under a millisecond when it is there. */
export const REDIS_COMMAND_TIMEOUT_MS = 500;
const REDIS_CONNECT_TIMEOUT_MS = 2000;
/** Reconnect attempts back off to this and keep going: requests are served again within about a second of Redis. */
const REDIS_RECONNECT_MAX_MS = 1000;
const KEY_PREFIX = 'mj-rate';

/**
 * The allowance a request is counted against: every key of one organization
 * shares one, a legacy key without an organization has its own. Changing
 * keys, connections or addresses gives no new allowance.
 *
 * Marketplace requests (issue 14 item 6, ADR 0015) are the provider
 * account's: counted by its key's organization, else by that key (`key.id`,
 * which for an end user is its marketplace key's, while `apiKeyId` is the
 * end user's). The end user a request names never picks a budget, so new
 * end users give no new allowance either.
 */
export function budgetKey(principal: Pick<Principal, 'organizationId'> & { key: Pick<Principal['key'], 'id'> }): string {
  return principal.organizationId !== null ? `org:${principal.organizationId}` : `key:${principal.key.id}`;
}

/** What counting one request decided. */
export type Verdict = 'allowed' | 'limited' | 'unavailable';

/** One counted request: its verdict and, when the counter answered, where its budget stands after it. */
export interface Taken {
  verdict: Verdict;
  /** Requests the budget has left in this window (the draft's `r`); absent when unavailable. */
  remaining?: number;
  /** Milliseconds until the window ends and the budget is whole again; absent when unavailable. */
  resetMs?: number;
}

/** `RateLimit-Policy`'s value for a limit of `perSecond` (the draft's Quota Policy Item; the unit is requests, its default). */
export function rateLimitPolicy(perSecond: number): string {
  return `"${POLICY_NAME}";q=${perSecond};w=${WINDOW_SECONDS}`;
}

/** `RateLimit`'s value (the draft's Service Limit Item): `t` in whole seconds, rounded up so a client waiting `t` finds the window over. */
export function rateLimitField(remaining: number, resetMs: number): string {
  return `"${POLICY_NAME}";r=${remaining};t=${Math.ceil(Math.max(0, resetMs) / 1000)}`;
}

/** The refusal for a verdict: nothing (go on), or the error the gateway's one error path sends. */
export function refusalFor(verdict: Verdict): HttpError | undefined {
  if (verdict === 'limited') return new HttpError(429, RATE_LIMITED);
  if (verdict === 'unavailable') return new HttpError(503, RATE_COUNTER_UNAVAILABLE);
  return undefined;
}

/** Told how long each check took (what the limit adds to a request's latency) and what it decided (metrics.ts). */
export type CheckObserver = (counter: RateBudget['kind'], seconds: number, verdict: Verdict) => void;

/**
 * Express middleware: counts the request against its principal's budget;
 * 429 or 503 with Retry-After when refused. The RateLimit fields are set
 * here, so the route's answer and an error's carry them alike.
 */
export function rateLimit(budget: RateBudget, observe?: CheckObserver): RequestHandler {
  const policy = rateLimitPolicy(budget.perSecond);
  return async (_req, res, next) => {
    const start = observe ? process.hrtime.bigint() : undefined;
    const { verdict, remaining, resetMs } = await budget.take(budgetKey(res.locals.principal!));
    if (start !== undefined) observe!(budget.kind, Number(process.hrtime.bigint() - start) / 1e9, verdict);
    if (remaining !== undefined && resetMs !== undefined) {
      res.setHeader('RateLimit-Policy', policy);
      res.setHeader('RateLimit', rateLimitField(remaining, resetMs));
    }
    const refusal = refusalFor(verdict);
    if (refusal) {
      res.setHeader('Retry-After', RETRY_AFTER);
      throw refusal;
    }
    next();
  };
}

/** What one count of `n` requests saw: the window's count before them, and when the window ends. */
type Counted = { before: number; resetMs: number } | 'unavailable';

/**
 * One rate limit: requests per second per budget, over a rate-limiter-flexible
 * counter. Logs when the counter becomes unreachable and when it is back (not
 * every refused request). How long checks take, and the refusals, are
 * metrics (rateLimit's observer, metrics.ts).
 *
 * With `batched` (the Redis counter), the requests of one budget that arrive
 * within one turn of the event loop are counted together, with one command
 * sent at the end of that turn (setImmediate): under load that saves the
 * gateway and Redis a round trip per request, and a reply could not have been
 * read before the next turn anyway. Counting n at once is exact: the batch
 * takes n consecutive places of the window's count, and the requests that fit
 * under the limit are served in arrival order.
 */
export class RateBudget {
  private reachable = true;
  /** Requests waiting for this turn's count, by budget. */
  private waiting = new Map<string, ((taken: Taken) => void)[]>();

  constructor(
    private readonly counter: RateLimiterAbstract,
    readonly kind: 'redis' | 'in-process',
    private readonly opts: { logger?: Logger | undefined; batched?: boolean; onClose?: () => void } = {},
  ) {}

  get perSecond(): number {
    return this.counter.points;
  }

  async take(budget: string): Promise<Taken> {
    return this.opts.batched ? this.inBatch(budget) : this.takenAt(await this.count(budget, 1), 0);
  }

  /** The request at place `i` (arrival order) of a count: served while the window has room, and what is left after it. */
  private takenAt(counted: Counted, i: number): Taken {
    if (counted === 'unavailable') return { verdict: 'unavailable' };
    const place = counted.before + i + 1;
    return { verdict: place <= this.perSecond ? 'allowed' : 'limited', remaining: Math.max(0, this.perSecond - place), resetMs: counted.resetMs };
  }

  private inBatch(budget: string): Promise<Taken> {
    return new Promise((resolve) => {
      const queue = this.waiting.get(budget);
      if (queue) {
        queue.push(resolve);
        return;
      }
      if (this.waiting.size === 0) setImmediate(() => this.countBatches());
      this.waiting.set(budget, [resolve]);
    });
  }

  private countBatches(): void {
    const batches = this.waiting;
    this.waiting = new Map();
    for (const [budget, queue] of batches) {
      void this.count(budget, queue.length).then((counted) => queue.forEach((resolve, i) => resolve(this.takenAt(counted, i))));
    }
  }

  /** Counts `n` requests of `budget` at once: the window's count before them; 'unavailable' when the counter cannot say. */
  private async count(budget: string, n: number): Promise<Counted> {
    try {
      const res = await this.counter.consume(budget, n);
      this.noteCounter(true);
      return { before: res.consumedPoints - n, resetMs: res.msBeforeNext };
    } catch (err) {
      if (!(err instanceof RateLimiterRes)) {
        this.noteCounter(false, err);
        return 'unavailable';
      }
      // The batch took the last n places of the count. A refusal of the
      // in-memory block (a budget already over) carries no count: none fit.
      const before = err.consumedPoints - n;
      return { before: before < 0 ? this.perSecond : before, resetMs: err.msBeforeNext };
    }
  }

  /** Whether the counter answers, from a check's outcome or its connection's events; logged when it changes. */
  noteCounter(reachable: boolean, err?: unknown): void {
    if (reachable === this.reachable) return;
    this.reachable = reachable;
    if (reachable) this.opts.logger?.info({ counter: this.kind }, 'rate limit counter reachable again');
    else this.opts.logger?.warn({ counter: this.kind, err: errFields(err) }, 'rate limit counter unreachable: answering 503');
  }

  /** Lets go of the counter's connection. */
  close(): void {
    this.opts.onClose?.();
  }
}

const windowOf = (perSecond: number) => ({ points: perSecond, duration: 1, keyPrefix: KEY_PREFIX });

/** A counter in this process: right for one gateway (local mode, tests), N times the limit with N replicas. */
export function inProcessBudget(perSecond = DEFAULT_RATE_LIMIT_PER_SECOND, logger?: Logger): RateBudget {
  return new RateBudget(new RateLimiterMemory(windowOf(perSecond)), 'in-process', { logger });
}

/**
 * A counter in Redis, shared by every replica pointed at it. While Redis is
 * unreachable, requests are answered 503 at once (no offline queue, no
 * retries of a command, a short command timeout) and the client keeps
 * reconnecting in the background.
 */
export function redisBudget(url: string, perSecond: number, logger?: Logger): RateBudget {
  const client = new Redis(url, {
    commandTimeout: REDIS_COMMAND_TIMEOUT_MS,
    connectTimeout: REDIS_CONNECT_TIMEOUT_MS,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    // A count sent again after a reconnect would count one request twice.
    autoResendUnfulfilledCommands: false,
    retryStrategy: (attempt) => Math.min(attempt * 100, REDIS_RECONNECT_MAX_MS),
  });
  const counter = new RateLimiterRedis({
    ...windowOf(perSecond),
    storeClient: client,
    rejectIfRedisNotReady: true,
    // A budget already over its limit is refused on this replica without asking Redis until its window ends.
    inMemoryBlockOnConsumed: perSecond + 1,
  });
  const budget = new RateBudget(counter, 'redis', { logger, batched: true, onClose: () => client.disconnect() });
  // ioredis reports each failed reconnect attempt: only the change is logged.
  client.on('error', (err: unknown) => budget.noteCounter(false, err));
  client.on('ready', () => budget.noteCounter(true));
  return budget;
}

/** The budget the settings ask for, saying at start which counter counts. */
export function budgetFromConfig(config: { REDIS_URL?: string | undefined; RATE_LIMIT_PER_SECOND: number }, logger: Logger): RateBudget {
  const perSecond = config.RATE_LIMIT_PER_SECOND;
  if (config.REDIS_URL) {
    logger.info({ perSecond, counter: 'redis' }, 'rate limit counted in Redis, shared by every gateway replica');
    return redisBudget(config.REDIS_URL, perSecond, logger);
  }
  logger.info({ perSecond, counter: 'in-process' }, 'rate limit counted in this process (REDIS_URL unset): right for one gateway only');
  return inProcessBudget(perSecond, logger);
}
