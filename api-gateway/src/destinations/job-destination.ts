// Inline `storage` on POST /jobs: the spec's three checks (shape, backend
// construction, live probe), then the MediaJob's `destination` (never a
// credential) and the sealed document that only the operator opens. Saved
// destinations (rule 9) are resolved by the job insert itself (lib/src/db/jobs.ts, jobInserter).
import { STORAGE_PROVIDERS, type Destination, type StorageProviderName } from '@mediajobs/lib/mediajob/types';
import type { OutboundPolicy } from '@mediajobs/lib/outbound';
import type { Sealable, SecretBox } from '@mediajobs/lib/secret-box';
import { SAVED_ONLY_PROVIDERS, parseDestination } from '@mediajobs/lib/storage/index';
import { StorageError } from '@mediajobs/lib/storage/types';
import { destinationDocument, FieldError } from './fields.js';
import { DestinationCheckError, buildProvider, type ProbeCache, type ProviderSettings } from './probe.js';

/** Providers accepted as inline `storage` (spec: drive is a saved destination only). */
export const INLINE_PROVIDERS: readonly StorageProviderName[] = STORAGE_PROVIDERS.filter((p) => !SAVED_ONLY_PROVIDERS.includes(p));

export interface JobDestination {
  destination: Destination;
  /** Inline credentials, sealed by the insert for each row that holds them (its storage_enc). */
  storage: Sealable;
}

/**
 * `document`: the checked destination document, credentials included, for a
 * caller that saves it (a marketplace end user's storage); never logged.
 */
export type JobDestinationResult = { ok: true; value: JobDestination; document: Record<string, unknown> } | { ok: false; error: string };

const invalid = (reason: string): JobDestinationResult => ({ ok: false, error: `Invalid storage configuration: ${reason}` });

/**
 * Whether a storage endpoint names a host the outbound-address policy
 * refuses: an endpoint is a request the gateway (probe) and the runner
 * (upload) make on the client's behalf. Literal hosts only; a name is
 * resolved by the storage SDK when it connects (see the README's note on
 * endpoints). Scheme-less endpoints (`oss-cn-hangzhou.aliyuncs.com`) are
 * read as https.
 */
export function isForbiddenEndpoint(endpoint: unknown, policy: OutboundPolicy): boolean {
  if (typeof endpoint !== 'string') return false;
  let url: URL;
  try {
    url = new URL(/^[a-z][a-z0-9+.-]*:\/\//i.test(endpoint) ? endpoint : `https://${endpoint}`);
  } catch {
    return false; // lib's constructor reports an unparsable endpoint
  }
  return !policy.checkUrl(url).ok;
}

export interface JobDestinationDeps {
  secretBox: SecretBox;
  /** The gateway's outbound-address policy (OUTBOUND_ALLOWED_CIDRS) for the endpoint. */
  outbound: OutboundPolicy;
  probes: ProbeCache;
  providerSettings?: ProviderSettings;
}

/** Inline `storage` of POST /jobs after the spec's three checks, sealed for the operator. */
export async function inlineDestination(deps: JobDestinationDeps, storage: Record<string, unknown>): Promise<JobDestinationResult> {
  // 1. Shape: names, keys, endpoint. No network call.
  const provider = storage.provider;
  if (provider === undefined || provider === null) return invalid('provider_required');
  if (typeof provider === 'string' && SAVED_ONLY_PROVIDERS.includes(provider)) {
    return invalid(`${provider} is available as a saved destination only (POST /user/${provider})`);
  }
  if (typeof provider !== 'string' || !(INLINE_PROVIDERS as readonly string[]).includes(provider)) {
    return invalid(`provider must be one of ${INLINE_PROVIDERS.map((p) => `'${p}'`).join(', ')}`);
  }
  let document: Record<string, unknown>;
  try {
    document = destinationDocument(provider as StorageProviderName, storage);
    if (isForbiddenEndpoint(document.endpoint, deps.outbound)) return invalid('invalid_endpoint');
    parseDestination(document);
  } catch (err) {
    if (err instanceof FieldError || err instanceof StorageError) return invalid(err.reason);
    throw err;
  }
  // 2. Backend construction: what the provider's own constructor requires.
  try {
    const built = await buildProvider(document, deps.providerSettings);
    (built as { destroy?: () => void }).destroy?.();
  } catch (err) {
    if (err instanceof DestinationCheckError) return invalid(err.reason);
    throw err;
  }
  // 3. Live probe, remembered 5 minutes per credential set.
  try {
    await deps.probes.check(document);
  } catch (err) {
    if (err instanceof DestinationCheckError) {
      return { ok: false, error: `${err.stage === 'construct' ? 'Invalid storage configuration' : 'Storage credentials validation failed'}: ${err.reason}` };
    }
    throw err;
  }
  return {
    ok: true,
    value: { destination: { type: 'inline', provider: provider as StorageProviderName }, storage: deps.secretBox.sealable(JSON.stringify(document)) },
    document,
  };
}
