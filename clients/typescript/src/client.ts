// MediaJobsClient: one method per operation of the API, on the generated
// types (./types.ts), over plain fetch. Owns the attempts of a request
// (retries as ./retry.ts decides, one Idempotency-Key per creation reused by
// every attempt), the error answers as ApiError, waiting for a job and
// paging through GET /jobs. Webhook verification is ./webhooks.ts's.
import { randomUUID } from 'node:crypto';
import { ApiError, ConfigurationError, ConnectionError } from './errors.js';
import { RETRY_DEFAULTS, retryDelay, retryable, type Outcome, type RetryOptions } from './retry.js';
import { progressOf, sameProgress, type JobProgress } from './progress.js';
import {
  isTerminal,
  type Batch, type BatchCancelled, type BatchStarted, type BulkJobsCreated, type BulkJobsRequest, type ChatSettings, type ChatSettingsRemoved,
  type ChatSettingsRequest, type ChatSettingsSaved, type CreateJobRequest, type Created, type EpisodesRenamed, type ErrorBody, type Job,
  type JobList, type JobSummary, type ListJobsQuery, type Metadata, type RenameEpisodesRequest, type ShortClassification, type Usage,
  type WebhookDeliveries, type WebhookDelivery, type WebhookSecret, type WebhookSecretCreated,
} from './types.js';

export interface ClientOptions {
  /** The gateway's base URL; default MEDIAJOBS_URL. */
  baseUrl?: string;
  /** The API key (x-api-key); default MEDIAJOBS_API_KEY. */
  apiKey?: string;
  /** Marketplace keys only: the end user every request acts for (x-marketplace-user). */
  marketplaceUser?: string;
  retry?: RetryOptions;
  /** How long one attempt may take before it is abandoned (and, when safe, retried). Default 30 s. */
  timeoutMs?: number;
  /** Called before each retry, with why and after how long. */
  onRetry?: (info: RetryInfo) => void;
  /** A fetch of your own (a proxy agent, instrumentation); default the global fetch. */
  fetch?: typeof fetch;
}

export interface RetryInfo {
  method: string;
  path: string;
  /** 1 for the first retry. */
  retry: number;
  delayMs: number;
  /** The status that made it retry; undefined when no answer came. */
  status: number | undefined;
  /** The error of the attempt: an ApiError, or what fetch threw. */
  error: unknown;
  /** The Idempotency-Key every attempt of this request carries, if any. */
  idempotencyKey: string | undefined;
}

export interface RequestOptions {
  signal?: AbortSignal;
}

export interface CreateOptions extends RequestOptions {
  /** The request's Idempotency-Key; default a new UUID per call. Pass your own to make a creation safe across restarts of your process. */
  idempotencyKey?: string;
}

export interface WaitOptions extends RequestOptions {
  /** Called with the job's progress at the first poll and whenever it changes. */
  onProgress?: (progress: JobProgress) => void;
  /** Time between polls; default 2 s (the contract advises 2 to 5). */
  pollIntervalMs?: number;
}

export interface JobPagesOptions extends RequestOptions {
  status?: ListJobsQuery['status'];
  /** Jobs per request, 1 to 100; default 100. */
  pageSize?: number;
}

const DEFAULT_TIMEOUT_MS = 30_000;
const DEFAULT_POLL_MS = 2000;
const MAX_PAGE = 100;
const MAX_KEY_LENGTH = 255;

type Query = Record<string, string | number | undefined>;
interface Call extends RequestOptions {
  query?: Query;
  body?: unknown;
  idempotencyKey?: string;
}

export class MediaJobsClient {
  readonly baseUrl: string;
  private readonly apiKey: string;
  private readonly marketplaceUser: string | undefined;
  private readonly retry: Required<RetryOptions>;
  private readonly timeoutMs: number;
  private readonly onRetry: ClientOptions['onRetry'];
  private readonly fetchImpl: typeof fetch;

  constructor(options: ClientOptions = {}) {
    const baseUrl = options.baseUrl ?? process.env.MEDIAJOBS_URL;
    const apiKey = options.apiKey ?? process.env.MEDIAJOBS_API_KEY;
    if (!baseUrl) throw new ConfigurationError('No API base URL: pass baseUrl or set MEDIAJOBS_URL (e.g. http://127.0.0.1:8080)');
    if (!apiKey) throw new ConfigurationError('No API key: pass apiKey or set MEDIAJOBS_API_KEY');
    let parsed: URL;
    try {
      parsed = new URL(baseUrl);
    } catch {
      throw new ConfigurationError(`The API base URL is not a URL: ${baseUrl}`);
    }
    if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') throw new ConfigurationError(`The API base URL must be http or https: ${baseUrl}`);
    this.baseUrl = parsed.href.endsWith('/') ? parsed.href : `${parsed.href}/`;
    this.apiKey = apiKey;
    this.marketplaceUser = options.marketplaceUser;
    this.retry = { ...RETRY_DEFAULTS, ...options.retry };
    this.timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.onRetry = options.onRetry;
    this.fetchImpl = options.fetch ?? fetch;
  }

  // ---- jobs ----

  /** POST /jobs: a job, or a batch for a show or playlist URL. Retried safely: every attempt carries the same Idempotency-Key. */
  createJob(body: CreateJobRequest, options: CreateOptions = {}): Promise<Created> {
    return this.send('POST', '/jobs', { ...options, body, idempotencyKey: options.idempotencyKey ?? randomUUID() });
  }

  /** POST /jobs/bulk: up to 100 URLs with shared options, all or nothing. Retried with one Idempotency-Key as createJob. */
  createJobs(body: BulkJobsRequest, options: CreateOptions = {}): Promise<BulkJobsCreated> {
    return this.send('POST', '/jobs/bulk', { ...options, body, idempotencyKey: options.idempotencyKey ?? randomUUID() });
  }

  getJob(id: string, options: RequestOptions = {}): Promise<Job> {
    return this.send('GET', `/jobs/${enc(id)}`, options);
  }

  /** GET /jobs: one page, newest first. `total` counts every job of the key, whatever the filter. */
  listJobs(query: ListJobsQuery = {}, options: RequestOptions = {}): Promise<JobList> {
    return this.send('GET', '/jobs', { ...options, query });
  }

  /**
   * Every page of GET /jobs from the newest, until a page comes back short.
   * Paging is by offset, so a job created meanwhile shifts the list by one:
   * jobs() below skips the repeat this causes.
   */
  async *jobPages(options: JobPagesOptions = {}): AsyncGenerator<JobList, void, undefined> {
    const limit = options.pageSize ?? MAX_PAGE;
    if (!Number.isInteger(limit) || limit < 1 || limit > MAX_PAGE) throw new RangeError(`pageSize must be an integer from 1 to ${MAX_PAGE}`);
    for (let offset = 0; ;) {
      const page = await this.listJobs({ limit, offset, ...(options.status && { status: options.status }) }, options);
      yield page;
      if (page.jobs.length < limit) return;
      offset += page.jobs.length;
    }
  }

  /** Every job of the key (with `status`, every such job), newest first, each once. */
  async *jobs(options: JobPagesOptions = {}): AsyncGenerator<JobSummary, void, undefined> {
    const seen = new Set<string>();
    for await (const page of this.jobPages(options)) {
      for (const job of page.jobs) {
        if (seen.has(job.id)) continue;
        seen.add(job.id);
        yield job;
      }
    }
  }

  /** POST /jobs/{id}/cancel: the job, now Cancelled. A finished job answers 409. */
  cancelJob(id: string, options: RequestOptions = {}): Promise<Job> {
    return this.send('POST', `/jobs/${enc(id)}/cancel`, options);
  }

  /**
   * Polls GET /jobs/{id} until the job reaches a terminal status
   * (Completed, Failed, Warning, Skipped, Cancelled, CancelledByAdmin) and
   * returns it; an outcome other than Completed is returned, not thrown.
   * Aborting `signal` stops waiting (the job goes on).
   */
  async waitForJob(id: string, options: WaitOptions = {}): Promise<Job> {
    const interval = options.pollIntervalMs ?? DEFAULT_POLL_MS;
    let last: JobProgress | undefined;
    for (;;) {
      const job = await this.getJob(id, options);
      const progress = progressOf(job);
      if (!last || !sameProgress(last, progress)) {
        last = progress;
        options.onProgress?.(progress);
      }
      if (isTerminal(job.status)) return job;
      await sleep(interval, options.signal);
    }
  }

  // ---- batches ----

  getBatch(id: string, options: RequestOptions = {}): Promise<Batch> {
    return this.send('GET', `/batch/${enc(id)}`, options);
  }

  /** Start a paused batch: every episode is queued. */
  startBatch(id: string, options: RequestOptions = {}): Promise<BatchStarted> {
    return this.send('POST', `/batch/${enc(id)}/start`, options);
  }

  cancelBatch(id: string, options: RequestOptions = {}): Promise<BatchCancelled> {
    return this.send('POST', `/batch/${enc(id)}/cancel`, options);
  }

  /** Rename episode files of a paused batch; partial success is reported in `errors`. */
  renameBatchEpisodes(id: string, renames: RenameEpisodesRequest['renames'], options: RequestOptions = {}): Promise<EpisodesRenamed> {
    return this.send('PATCH', `/batch/${enc(id)}/jobs`, { ...options, body: { renames } });
  }

  // ---- usage and lookups ----

  getUsage(options: RequestOptions = {}): Promise<Usage> {
    return this.send('GET', '/usage', options);
  }

  getMetadata(url: string, options: RequestOptions = {}): Promise<Metadata> {
    return this.send('POST', '/metadata', { ...options, body: { url } });
  }

  isShort(url: string, options: RequestOptions = {}): Promise<ShortClassification> {
    return this.send('POST', '/is-short', { ...options, body: { url } });
  }

  // ---- webhooks and notifications ----

  /** Whether a signing secret is set (never the secret). */
  getWebhookSecret(options: RequestOptions = {}): Promise<WebhookSecret> {
    return this.send('GET', '/user/webhook-secret', options);
  }

  /** Create or rotate the signing secret; the answer shows it this once. The previous one keeps signing for 24 h. */
  rotateWebhookSecret(options: RequestOptions = {}): Promise<WebhookSecretCreated> {
    return this.send('POST', '/user/webhook-secret', options);
  }

  /** A job's webhook events with every delivery attempt. */
  listJobWebhooks(jobId: string, options: RequestOptions = {}): Promise<WebhookDeliveries> {
    return this.send('GET', `/jobs/${enc(jobId)}/webhooks`, options);
  }

  /** Send an event again, with the same webhook-id. */
  redeliverWebhook(jobId: string, eventId: string, options: RequestOptions = {}): Promise<WebhookDelivery> {
    return this.send('POST', `/jobs/${enc(jobId)}/webhooks/${enc(eventId)}/redeliver`, options);
  }

  getChatSettings(options: RequestOptions = {}): Promise<ChatSettings> {
    return this.send('GET', '/user/chat', options);
  }

  saveChatSettings(body: ChatSettingsRequest, options: RequestOptions = {}): Promise<ChatSettingsSaved> {
    return this.send('POST', '/user/chat', { ...options, body });
  }

  deleteChatSettings(options: RequestOptions = {}): Promise<ChatSettingsRemoved> {
    return this.send('DELETE', '/user/chat', options);
  }

  // ---- the attempts ----

  private async send<T>(method: string, path: string, call: Call): Promise<T> {
    const url = new URL(path.slice(1), this.baseUrl);
    for (const [k, v] of Object.entries(call.query ?? {})) if (v !== undefined) url.searchParams.set(k, String(v));
    // Problem details on errors: the contract's `error` with `code`, `param` and every problem of a body (docs/errors.md).
    const headers: Record<string, string> = { 'x-api-key': this.apiKey, accept: 'application/json, application/problem+json' };
    if (this.marketplaceUser !== undefined) headers['x-marketplace-user'] = this.marketplaceUser;
    if (call.idempotencyKey !== undefined) headers['idempotency-key'] = idempotencyHeader(call.idempotencyKey);
    const body = call.body === undefined ? undefined : JSON.stringify(call.body);
    if (body !== undefined) headers['content-type'] = 'application/json';
    const keyed = call.idempotencyKey !== undefined;
    for (let attempt = 1; ; attempt++) {
      call.signal?.throwIfAborted();
      let outcome: Outcome;
      let failure: unknown;
      try {
        const res = await this.fetchImpl(url, { method, headers, body, signal: attemptSignal(this.timeoutMs, call.signal) });
        const text = await res.text();
        if (res.ok) return (text ? JSON.parse(text) : undefined) as T;
        outcome = { status: res.status, retryAfter: res.headers.get('retry-after') };
        failure = new ApiError({ status: res.status, body: errorBody(res.status, text), method, path, retryAfterSeconds: seconds(outcome.retryAfter) });
      } catch (err) {
        if (call.signal?.aborted) throw call.signal.reason;
        outcome = { status: undefined };
        failure = err;
      }
      const delayMs = attempt <= this.retry.retries && retryable(method, keyed, outcome) ? retryDelay(attempt, outcome, this.retry) : undefined;
      if (delayMs === undefined) throw failure instanceof ApiError ? failure : new ConnectionError(method, path, attempt, { cause: failure });
      this.onRetry?.({ method, path, retry: attempt, delayMs, status: outcome.status, error: failure, idempotencyKey: call.idempotencyKey });
      await sleep(delayMs, call.signal);
    }
  }
}

const enc = encodeURIComponent;

/** The header's value: an RFC 8941 sf-string, as draft-ietf-httpapi-idempotency-key-header writes it. */
function idempotencyHeader(key: string): string {
  if (key.length < 1 || key.length > MAX_KEY_LENGTH || !/^[\x20-\x7e]+$/.test(key)) {
    throw new RangeError(`An Idempotency-Key is 1 to ${MAX_KEY_LENGTH} printable ASCII characters`);
  }
  return `"${key.replace(/["\\]/g, '\\$&')}"`;
}

/** The `{error}` body of an error answer; one that is not (a proxy's HTML page) becomes `{error: "HTTP <status>"}`. */
function errorBody(status: number, text: string): ErrorBody {
  try {
    const parsed: unknown = JSON.parse(text);
    if (typeof parsed === 'object' && parsed !== null && typeof (parsed as ErrorBody).error === 'string') return parsed as ErrorBody;
  } catch {
    // not JSON: below
  }
  return { error: `HTTP ${status}` };
}

function seconds(retryAfter: string | null): number | undefined {
  return retryAfter !== null && /^\s*\d+\s*$/.test(retryAfter) ? Number(retryAfter) : undefined;
}

function attemptSignal(timeoutMs: number, signal: AbortSignal | undefined): AbortSignal {
  const timeout = AbortSignal.timeout(timeoutMs);
  return signal ? AbortSignal.any([signal, timeout]) : timeout;
}

/** Resolves after `ms`, or rejects with the signal's reason once it aborts. */
function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal!.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
