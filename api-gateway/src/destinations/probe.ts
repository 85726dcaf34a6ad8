// Checking a destination before it is saved or used: build the provider from
// its document (lib's createProvider, no network), then the live probe
// (upload and delete verify_credentials.txt). Inline credentials of POST
// /jobs are probed at most once per 5 minutes per credential set.
import { createHash } from 'node:crypto';
import type { OutboundPolicy } from '@mediajobs/lib/outbound';
import { ReadBudget } from '@mediajobs/lib/read-budget';
import { createProvider, type CreateProviderOptions } from '@mediajobs/lib/storage/index';
import { StorageError, type StorageProvider } from '@mediajobs/lib/storage/types';

/**
 * Where a check failed: building the provider (shape, construction) or
 * talking to the backend. `reason` goes into the answer: a backend's own
 * code (`NoSuchBucket`) or, for any failure to reach it (refused, reset,
 * unresolvable, timed out, a TLS failure), just `unreachable`, so the
 * answers cannot be used to map which hosts and ports exist.
 */
export class DestinationCheckError extends Error {
  readonly reason: string;
  constructor(readonly stage: 'construct' | 'probe', reason: string, readonly code: StorageError['code'] | 'timeout') {
    const answered = code === 'unreachable' || code === 'timeout' ? 'unreachable' : reason;
    super(`${stage} failed: ${answered}`);
    this.name = 'DestinationCheckError';
    this.reason = answered;
  }
}

/**
 * Deployment settings of the providers, never from a destination: the GCS
 * JSON API root and token endpoint, the Drive API root and token endpoint
 * (private endpoints; the fakes in tests).
 */
export type ProviderSettings = Pick<CreateProviderOptions, 'gcs' | 'drive'>;

/**
 * Bytes one probe may read from the backend, every request and retry
 * together, headers included (STORAGE_PROBE_MAX_BYTES): a probe's answers
 * are a few hundred bytes, an error body a few KB.
 */
export const DEFAULT_PROBE_MAX_BYTES = 64 * 1024;

/**
 * What one live check may do: take `timeoutMs` (STORAGE_PROBE_TIMEOUT_MS),
 * read `maxBytes` (STORAGE_PROBE_MAX_BYTES), and connect where `outbound`
 * allows, every address a name resolves to checked as the socket opens.
 */
export interface ProbeBounds {
  timeoutMs: number;
  maxBytes: number;
  outbound: OutboundPolicy;
}

const budgetFor = (bounds: ProbeBounds) => new ReadBudget({ maxBytes: bounds.maxBytes, deadlineMs: bounds.timeoutMs, policy: bounds.outbound });

/** lib's shape check and constructor; throws DestinationCheckError('construct'). */
export async function buildProvider(
  document: Record<string, unknown>, settings: ProviderSettings & Pick<CreateProviderOptions, 'agents'> = {},
): Promise<StorageProvider> {
  try {
    return await createProvider(document, settings);
  } catch (err) {
    if (err instanceof StorageError) throw new DestinationCheckError('construct', err.reason, err.code);
    throw err;
  }
}

function withTimeout<T>(work: Promise<T>, timeoutMs: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new DestinationCheckError('probe', 'timeout', 'timeout')), timeoutMs);
  });
  return Promise.race([work, timeout]).finally(() => clearTimeout(timer));
}

/** Provider-specific teardown (S3's socket pool), when the provider has one. */
function dispose(provider: StorageProvider): void {
  (provider as { destroy?: () => void }).destroy?.();
}

/**
 * A failed live check as the answer gives it. An endpoint whose name
 * resolved to an address the policy refuses is the invalid endpoint a
 * literal one is; a backend that outran the budget (an endless or huge
 * body, a trickle past the deadline) is unreachable, whatever error the SDK
 * made of its cut socket.
 */
function checkError(err: unknown, budget: ReadBudget): DestinationCheckError {
  if (budget.refused) return new DestinationCheckError('probe', 'invalid_endpoint', 'invalid_config');
  if (budget.exceeded === 'bytes') return new DestinationCheckError('probe', 'response_too_large', 'unreachable');
  if (budget.exceeded === 'deadline') return new DestinationCheckError('probe', 'timeout', 'timeout');
  if (err instanceof DestinationCheckError) return err;
  if (err instanceof StorageError) return new DestinationCheckError('probe', err.reason, err.code);
  return new DestinationCheckError('probe', 'unknown', 'failed');
}

/**
 * The live probe. A backend that does not answer within `timeoutMs` fails
 * with reason `timeout` rather than holding the request for the SDK's own
 * retries and timeouts, and one that sends more than `maxBytes` fails as
 * unreachable: the provider's sockets are a ReadBudget's, cut at either
 * bound, so neither a slow nor a huge answer outlives the probe.
 */
export async function probeDestination(document: Record<string, unknown>, bounds: ProbeBounds, settings: ProviderSettings = {}): Promise<void> {
  const budget = budgetFor(bounds);
  try {
    const provider = await buildProvider(document, { ...settings, agents: budget });
    try {
      await withTimeout(provider.probe(), bounds.timeoutMs);
    } catch (err) {
      throw checkError(err, budget);
    } finally {
      dispose(provider);
    }
  } finally {
    budget.close();
  }
}

/**
 * The deprecated POST /user/bucket's check: list the bucket (one key) with
 * the credentials, as the spec says that endpoint verifies. The shape and
 * endpoint are checked by lib's constructor first.
 */
export async function verifyBucketListing(document: Record<string, unknown>, bounds: ProbeBounds): Promise<void> {
  dispose(await buildProvider(document));
  // Loaded here, as lib loads a provider's SDK: only a process that needs it carries it.
  const [{ ListObjectsV2Command, S3Client }, { mapS3Error }] = await Promise.all([
    import('@aws-sdk/client-s3'),
    import('@mediajobs/lib/storage/s3'),
  ]);
  const endpoint = String(document.endpoint);
  const withScheme = /^[a-z][a-z0-9+.-]*:\/\//i.test(endpoint) ? endpoint : `https://${endpoint}`;
  const host = new URL(withScheme).hostname;
  const budget = budgetFor(bounds);
  const client = new S3Client({
    endpoint: withScheme,
    region: String(document.region),
    credentials: { accessKeyId: String(document.access_key), secretAccessKey: String(document.secret_key) },
    // As lib's S3 provider: path style except on AWS itself.
    forcePathStyle: !(host === 'amazonaws.com' || host.endsWith('.amazonaws.com')),
    maxAttempts: 2,
    requestHandler: { httpAgent: budget.http, httpsAgent: budget.https },
    requestChecksumCalculation: 'WHEN_REQUIRED',
    responseChecksumValidation: 'WHEN_REQUIRED',
  });
  try {
    await withTimeout(client.send(new ListObjectsV2Command({ Bucket: String(document.bucket), MaxKeys: 1 })), bounds.timeoutMs);
  } catch (err) {
    throw checkError(err instanceof DestinationCheckError ? err : mapS3Error(err, 's3'), budget);
  } finally {
    client.destroy();
    budget.close();
  }
}

/** Stable JSON (sorted keys), so one credential set always hashes the same. */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (value && typeof value === 'object') {
    const o = value as Record<string, unknown>;
    return `{${Object.keys(o).sort().map((k) => `${JSON.stringify(k)}:${canonical(o[k])}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

/**
 * Successful probes of inline destinations, remembered for `ttlMs` (spec: 5
 * minutes per credential set) under the sha256 of the whole document, so a
 * changed secret, bucket or prefix is a new set. Only successes are kept: a
 * fixed bucket works on the next request. Concurrent checks of one set share
 * one probe. In memory, per replica, at most `maxEntries` (oldest dropped).
 */
export class ProbeCache {
  private readonly ok = new Map<string, number>();
  private readonly inFlight = new Map<string, Promise<void>>();

  constructor(
    private readonly probe: (document: Record<string, unknown>) => Promise<void>,
    private readonly ttlMs = 5 * 60_000,
    private readonly maxEntries = 10_000,
    private readonly now: () => number = Date.now,
  ) {}

  static key(document: Record<string, unknown>): string {
    return createHash('sha256').update(canonical(document)).digest('hex');
  }

  async check(document: Record<string, unknown>): Promise<void> {
    const key = ProbeCache.key(document);
    const until = this.ok.get(key);
    if (until !== undefined && until > this.now()) return;
    if (until !== undefined) this.ok.delete(key);
    let running = this.inFlight.get(key);
    if (!running) {
      running = this.probe(document).then(() => {
        while (this.ok.size >= this.maxEntries) this.ok.delete(this.ok.keys().next().value!);
        this.ok.set(key, this.now() + this.ttlMs);
      }).finally(() => this.inFlight.delete(key));
      this.inFlight.set(key, running);
    }
    return running;
  }

  get size(): number {
    return this.ok.size;
  }

  clear(): void {
    this.ok.clear();
  }
}
