// The fields of each storage provider, as the configuration endpoints
// (POST /user/<provider>) and the inline `storage` object of POST /jobs take
// them, turned into the destination document lib's storage layer reads
// (createProvider / parseDestination) and the runner gets as destination.json.
// Only the fields listed here are copied: whatever else a client sends never
// reaches a Secret, a row or a runner.
import type { StorageProviderName } from '@mediajobs/lib/mediajob/types';
import { parseServiceAccountJson } from '@mediajobs/lib/storage/service-account';
import { StorageError, sanitizeKeyPrefix } from '@mediajobs/lib/storage/types';

export interface ProviderFields {
  provider: StorageProviderName;
  /** How messages name the provider: "S3 storage configuration is temporarily unavailable". */
  label: string;
  required: readonly string[];
  optional: readonly string[];
  /** Optional boolean fields. */
  flags?: readonly string[];
  /** The field GET and POST answer as `container_or_bucket`. */
  container: string;
  /** The access key field shown masked (`****` + last 4) for the legacy source. */
  accessKey?: string;
}

export const PROVIDER_FIELDS: Readonly<Record<StorageProviderName, ProviderFields>> = {
  s3: {
    provider: 's3', label: 'S3', container: 'bucket', accessKey: 'access_key',
    required: ['endpoint', 'bucket', 'region', 'access_key', 'secret_key'],
    optional: ['folder_prefix', 'base_folder'],
    flags: ['force_path_style'],
  },
  // `endpoint` is ours, not the spec's: sovereign clouds and emulators (Azurite).
  blob: {
    provider: 'blob', label: 'Blob', container: 'container',
    required: ['account_name', 'container', 'account_key'],
    optional: ['folder_prefix', 'base_folder', 'endpoint'],
  },
  gcs: {
    provider: 'gcs', label: 'GCS', container: 'bucket',
    required: ['project_id', 'bucket', 'service_account_json'],
    optional: ['folder_prefix', 'base_folder'],
  },
  oss: {
    provider: 'oss', label: 'OSS', container: 'bucket', accessKey: 'access_key_id',
    required: ['endpoint', 'bucket', 'access_key_id', 'access_key_secret'],
    // `region` is ours: OSS signs with it, and only standard endpoints name it.
    optional: ['folder_prefix', 'base_folder', 'region'],
  },
  drive: {
    provider: 'drive', label: 'Drive', container: 'folder_id',
    required: ['service_account_json'],
    optional: ['folder_id', 'folder_prefix', 'base_folder'],
  },
};

/** Fields that are credentials: kept only in the vault or sealed, never returned, never in a row's `config`. */
export const CREDENTIAL_FIELDS: ReadonlySet<string> = new Set([
  'access_key', 'secret_key', 'account_key', 'service_account_json', 'access_key_id', 'access_key_secret',
]);

/** Why a body cannot become a destination; `reason` is a short token (`bucket_required`). */
export class FieldError extends Error {
  /**
   * For a service account key, lib's message in the spec's wording
   * (`Invalid service account JSON: missing 'private_key' field`).
   */
  readonly serviceAccountMessage: string | undefined;

  constructor(readonly reason: string, serviceAccountMessage?: string) {
    super(reason);
    this.name = 'FieldError';
    this.serviceAccountMessage = serviceAccountMessage;
  }
}

/**
 * The destination document for `provider` from a request body: required
 * fields must be non-empty strings, optional ones strings when present,
 * folder_prefix/base_folder must be usable in an object key. Non-credential
 * strings are trimmed; credentials are kept byte for byte. Throws FieldError.
 */
export function destinationDocument(provider: StorageProviderName, body: Record<string, unknown>): Record<string, unknown> {
  const f = PROVIDER_FIELDS[provider];
  const doc: Record<string, unknown> = { provider };
  const text = (name: string, v: unknown, required: boolean): void => {
    if (v === undefined || v === null || v === '') {
      if (required) throw new FieldError(`${name}_required`);
      return;
    }
    if (typeof v !== 'string') throw new FieldError(`invalid_${name}`);
    const value = CREDENTIAL_FIELDS.has(name) ? v : v.trim();
    if (!value.trim()) {
      if (required) throw new FieldError(`${name}_required`);
      return;
    }
    doc[name] = value;
  };
  for (const name of f.required) text(name, body[name], true);
  for (const name of f.optional) text(name, body[name], false);
  for (const name of f.flags ?? []) {
    const v = body[name];
    if (v === undefined || v === null) continue;
    if (typeof v !== 'boolean') throw new FieldError(`invalid_${name}`);
    doc[name] = v;
  }
  for (const name of ['folder_prefix', 'base_folder']) {
    if (typeof doc[name] !== 'string') continue;
    try {
      // objectKey() sanitises these the same way at upload time; a `..` would only fail then.
      sanitizeKeyPrefix(doc[name]);
    } catch (err) {
      if (err instanceof StorageError) throw new FieldError(`invalid_${name}`);
      throw err;
    }
  }
  if (typeof doc.service_account_json === 'string') {
    // Checked here so a bad key is refused before any network call; the
    // provider parses the same text again (escaped JSON or Base64 alike).
    try {
      parseServiceAccountJson(doc.service_account_json, provider);
    } catch (err) {
      if (err instanceof StorageError) throw new FieldError(err.reason, err.message);
      throw err;
    }
  }
  return doc;
}

/** `****` plus the last 4 characters; 4 characters or fewer become `****` (spec: GET /user/s3). */
export function maskAccessKey(key: string): string {
  return key.length <= 4 ? '****' : `****${key.slice(-4)}`;
}

/**
 * What saved a destination: POST /user/<provider>, the deprecated POST
 * /user/bucket (its s3 destinations answer no `base_folder`, spec), or a
 * marketplace end user's inline storage on POST /jobs (ADR 0015).
 */
export type SavedVia = 'user_provider' | 'user_bucket' | 'marketplace_job';

/**
 * What the database row may keep about a destination: everything but the
 * credentials, plus the masked access key (the spec's access_key_masked).
 */
export function publicConfig(doc: Record<string, unknown>, savedVia: SavedVia): Record<string, unknown> {
  const f = PROVIDER_FIELDS[doc.provider as StorageProviderName];
  const out: Record<string, unknown> = { saved_via: savedVia };
  for (const [k, v] of Object.entries(doc)) {
    if (k !== 'provider' && !CREDENTIAL_FIELDS.has(k)) out[k] = v;
  }
  if (f.accessKey && typeof doc[f.accessKey] === 'string') out.access_key_masked = maskAccessKey(doc[f.accessKey] as string);
  return out;
}
