// Entry points of the storage layer: managed storage from the service's
// configuration, and a provider from a job's destination.json (the per-job
// Secret the runner reads, spine.md "Runner contract").
//
// A provider's module, and with it its SDK, is loaded by the factories below
// when a destination needs it, never by importing this module: the five
// SDKs together take ~60 MiB of resident memory, a process talks to one or
// two backends, and the uploader's budget is 150 MB (issue 5; the four SDKs
// a Blob upload does not use cost it 16 MB of peak RSS, see lib/bench). So
// nothing here imports a provider module except as a type; code that needs
// a provider class as a value imports `./s3.js` and the like directly, and
// accepts that SDK. lib/test/storage-lazy-sdk.test.ts checks this.
import { z } from 'zod';
import type { BoundedAgents } from '../outbound-agents.js';
import { ConfigError, loadConfig, managedStorageSchema } from '../config.js';
import type { DriveDownloadUrlOptions } from './drive-links.js';
import { LocalStorageProvider } from './managed-local.js';
import { MANAGED_KEY_PREFIX, StorageError, type StorageProvider } from './types.js';
import { UploadGrantBroker, UploadGrantKeys, type GrantJobLookup, type GrantLedger } from './upload-grants.js';
import type { S3StorageProvider } from './s3.js';

export * from './types.js';
export { LocalStorageProvider, decodeKeyPath, encodeKeyPath, openFile, signFileUrl, verifySignedFileUrl } from './managed-local.js';
export type { LocalStorageOptions, OpenedFile } from './managed-local.js';
export {
  DRIVE_DOWNLOAD_PATH,
  DRIVE_REASON_TEXT,
  SAVED_ONLY_PROVIDERS,
  isDriveProvider,
  signDriveDownload,
  verifyDriveDownload,
} from './drive-links.js';
export type { DriveDownloadUrlOptions } from './drive-links.js';
export { ServiceAccountKey, parseServiceAccountJson } from './service-account.js';
// Types only (erased when compiled): naming them loads no SDK.
export type { S3StorageOptions, S3StorageProvider } from './s3.js';
export type { OssStorageOptions, OssStorageProvider } from './oss.js';
export type { DriveDownload, DriveStorageOptions, DriveStorageProvider } from './drive.js';
export type { BlobStorageOptions, BlobStorageProvider } from './blob.js';
export type { GcsStorageOptions, GcsStorageProvider } from './gcs.js';

export type ManagedStorageConfig = z.infer<typeof managedStorageSchema>;

/**
 * Managed storage as configured (local disk in local mode, an S3-compatible
 * bucket in production), for the services that hand out its download URLs
 * (gateway, operator): local storage requires FILE_URL_SECRET.
 */
export async function createManagedStorage(config: ManagedStorageConfig): Promise<StorageProvider> {
  return managedStorage(config, true);
}

/**
 * `signs`: the process presigns download URLs. A runner does not (it only
 * uploads, stages and deletes), and its document carries no FILE_URL_SECRET
 * (docs/adr/0012), so for it local storage is built without one.
 */
async function managedStorage(config: ManagedStorageConfig, signs: boolean): Promise<StorageProvider> {
  const fail = (reason: string, msg: string): never => {
    throw new StorageError('invalid_config', reason, `managed: ${msg}`, { provider: 'managed' });
  };
  if (config.MANAGED_STORAGE === 'local') {
    if (signs && !config.FILE_URL_SECRET) fail('missing_secret', 'FILE_URL_SECRET is required for local managed storage');
    return new LocalStorageProvider({
      name: 'managed',
      dir: config.MANAGED_STORAGE_DIR,
      publicBaseUrl: config.PUBLIC_BASE_URL,
      ...(config.FILE_URL_SECRET ? { secret: config.FILE_URL_SECRET } : {}),
    });
  }
  return managedS3(config);
}

/**
 * The gateway's side of runners' upload grants (docs/adr/0012): a broker
 * over managed storage on S3, with its credentials, and grant keys from
 * SECRET_KEYS, and its ledger (grant-ledger.ts on the gateway's Postgres).
 * Undefined for local managed storage, which runners write themselves.
 */
export async function createUploadGrantBroker(
  config: ManagedStorageConfig & { SECRET_KEYS: string },
  jobs: GrantJobLookup,
  ledger: GrantLedger,
): Promise<UploadGrantBroker | undefined> {
  if (config.MANAGED_STORAGE !== 's3') return undefined;
  return new UploadGrantBroker({ store: await managedS3(config), keys: new UploadGrantKeys(config.SECRET_KEYS), jobs, ledger });
}

async function managedS3(config: ManagedStorageConfig): Promise<S3StorageProvider> {
  if (!config.MANAGED_S3_BUCKET) {
    throw new StorageError('invalid_config', 'missing_bucket', 'managed: MANAGED_S3_BUCKET is required when MANAGED_STORAGE=s3', { provider: 'managed' });
  }
  const { S3StorageProvider } = await import('./s3.js');
  return new S3StorageProvider({
    name: 'managed',
    bucket: config.MANAGED_S3_BUCKET,
    region: config.MANAGED_S3_REGION,
    forcePathStyle: config.MANAGED_S3_FORCE_PATH_STYLE,
    ...(config.MANAGED_S3_ENDPOINT ? { endpoint: config.MANAGED_S3_ENDPOINT } : {}),
    ...(config.MANAGED_S3_ACCESS_KEY ? { accessKeyId: config.MANAGED_S3_ACCESS_KEY } : {}),
    ...(config.MANAGED_S3_SECRET_KEY ? { secretAccessKey: config.MANAGED_S3_SECRET_KEY } : {}),
  });
}

/* ------------------------------------------------------------------ */
/* Destinations                                                         */
/* ------------------------------------------------------------------ */

const optionalText = z.string().nullish();

/**
 * `{ "provider": "managed" }`: the service's own storage, configured by the
 * environment (for a runner: the document's `managed` settings, which
 * runner-image/src/destination.ts lays over its env). With `grant`, a
 * runner's upload grant for managed storage on S3: uploads go through the
 * gateway at `url` with the job-scoped `token`, and the runner holds no
 * bucket credentials (granted.ts, docs/adr/0012). `folder_prefix` is the
 * job's API key's segment (managedKeyPrefix), put there by the operator,
 * never by a user: managed storage is no inline provider.
 */
export const managedDestinationSchema = z.object({
  provider: z.literal('managed'),
  folder_prefix: z.string().regex(MANAGED_KEY_PREFIX).optional(),
  grant: z.object({
    url: z.string().refine((v) => {
      if (!URL.canParse(v)) return false;
      const u = new URL(v);
      return (u.protocol === 'https:' || u.protocol === 'http:') && !u.username && !u.password;
    }),
    token: z.string().min(1).max(512),
  }).optional(),
});

/**
 * `s3`: the fields of the spec's inline `storage` object and of POST /user/s3
 * (snake_case, as the user sent them). `force_path_style` is ours, not the
 * spec's: when absent it is derived from the endpoint (see s3PathStyle).
 */
export const s3DestinationSchema = z.object({
  provider: z.literal('s3'),
  endpoint: z.string().trim().min(1),
  bucket: z.string().trim().min(1),
  region: z.string().trim().min(1),
  access_key: z.string().min(1),
  secret_key: z.string().min(1),
  folder_prefix: optionalText,
  base_folder: optionalText,
  force_path_style: z.boolean().optional(),
});

/**
 * `oss`: the fields of POST /user/oss. `region` is ours, not the spec's: V4
 * signatures need it, and it is read from a standard endpoint when absent.
 */
export const ossDestinationSchema = z.object({
  provider: z.literal('oss'),
  endpoint: z.string().trim().min(1),
  bucket: z.string().trim().min(1),
  access_key_id: z.string().min(1),
  access_key_secret: z.string().min(1),
  region: z.string().trim().min(1).nullish(),
  folder_prefix: optionalText,
  base_folder: optionalText,
});

/** `drive`: the fields of POST /user/drive; `service_account_json` is escaped JSON or Base64 of it. */
export const driveDestinationSchema = z.object({
  provider: z.literal('drive'),
  service_account_json: z.string().min(1),
  folder_id: optionalText,
  folder_prefix: optionalText,
  base_folder: optionalText,
});

/**
 * `blob` (Azure Blob Storage): the spec's fields. `endpoint` is optional:
 * the blob service URL for sovereign clouds and emulators (default
 * https://<account_name>.blob.core.windows.net). `base_folder` is accepted
 * as for every provider, so the key layout is the same everywhere.
 */
export const blobDestinationSchema = z.object({
  provider: z.literal('blob'),
  account_name: z.string().trim().regex(/^[a-z0-9]{3,24}$/),
  container: z.string().trim().regex(/^(?=.{3,63}$)[a-z0-9]+(?:-[a-z0-9]+)*$/),
  account_key: z.string().trim().regex(/^[A-Za-z0-9+/]+={0,2}$/),
  endpoint: optionalText,
  folder_prefix: optionalText,
  base_folder: optionalText,
});

/**
 * `gcs`: the fields of POST /user/gcs. `service_account_json` is the key file
 * as JSON, escaped JSON or Base64; `project_id` is only type-checked here
 * because the spec makes it a backend-construction requirement (step 2),
 * which createProvider enforces along with the key file's content.
 */
export const gcsDestinationSchema = z.object({
  provider: z.literal('gcs'),
  project_id: optionalText,
  bucket: z.string().trim().regex(/^[a-z0-9][a-z0-9._-]{1,220}[a-z0-9]$/),
  service_account_json: z.string().min(1),
  folder_prefix: optionalText,
  base_folder: optionalText,
});

export type ManagedDestination = z.infer<typeof managedDestinationSchema>;
export type S3Destination = z.infer<typeof s3DestinationSchema>;
export type OssDestination = z.infer<typeof ossDestinationSchema>;
export type DriveDestination = z.infer<typeof driveDestinationSchema>;
export type BlobDestination = z.infer<typeof blobDestinationSchema>;
export type GcsDestination = z.infer<typeof gcsDestinationSchema>;
export type Destination = ManagedDestination | S3Destination | OssDestination | DriveDestination | BlobDestination | GcsDestination;

const DESTINATION_SCHEMAS = {
  managed: managedDestinationSchema,
  s3: s3DestinationSchema,
  oss: ossDestinationSchema,
  drive: driveDestinationSchema,
  blob: blobDestinationSchema,
  gcs: gcsDestinationSchema,
} as const;

/**
 * Shape check of a destination (step 1 of the spec's inline validation: no
 * network call). Throws StorageError `invalid_config` whose reason names the
 * field (`bucket_required`, `invalid_region`) but never echoes a value.
 */
export function parseDestination(raw: unknown): Destination {
  const provider = (raw as { provider?: unknown } | null)?.provider;
  if (typeof provider !== 'string' || !Object.hasOwn(DESTINATION_SCHEMAS, provider)) {
    throw new StorageError('invalid_config', 'unknown_provider', 'storage: unknown provider', { provider: 'storage' });
  }
  const schema = DESTINATION_SCHEMAS[provider as keyof typeof DESTINATION_SCHEMAS];
  const result = schema.safeParse(raw);
  if (!result.success) {
    const issue = result.error.issues[0];
    const field = typeof issue?.path[0] === 'string' ? issue.path[0] : 'destination';
    const missing = issue?.code === 'invalid_type' && (raw as Record<string, unknown>)[field] === undefined;
    const reason = missing ? `${field}_required` : `invalid_${field}`;
    throw new StorageError('invalid_config', reason, `${provider}: invalid storage configuration (${reason})`, { provider });
  }
  return result.data;
}

/**
 * Path-style addressing unless the endpoint is AWS itself: self-hosted
 * services (MinIO, Ceph, s3rver) often have no wildcard DNS for
 * `<bucket>.<host>`, while the hosted S3-compatible services accept both.
 */
function s3PathStyle(dest: S3Destination): boolean {
  if (dest.force_path_style !== undefined) return dest.force_path_style;
  try {
    const host = new URL(/^[a-z][a-z0-9+.-]*:\/\//i.test(dest.endpoint) ? dest.endpoint : `https://${dest.endpoint}`).hostname;
    return !(host === 'amazonaws.com' || host.endsWith('.amazonaws.com'));
  } catch {
    return true; // the provider's constructor reports the bad endpoint
  }
}

export interface CreateProviderOptions {
  /** Managed storage to use for `{provider: 'managed'}`; otherwise built from `env`. */
  managed?: StorageProvider;
  /** Environment managed storage is configured from when `managed` is not given; default process.env. */
  env?: NodeJS.ProcessEnv;
  /**
   * Deployment settings for `drive`, never from a destination: `download`
   * makes presign() work (the gateway and operator pass it; the runner does
   * not need it), `rootUrl`/`tokenUri` point at an emulator in tests.
   */
  drive?: { download?: DriveDownloadUrlOptions; rootUrl?: string; tokenUri?: string };
  /**
   * Deployment settings for `gcs`, never from a destination: the JSON API
   * root and the OAuth token endpoint (private endpoints; the fake in tests).
   */
  gcs?: { apiEndpoint?: string; tokenUri?: string };
  /**
   * The http(s) agents every request of the provider goes through: a
   * ReadBudget's (read-budget.ts) for a one-shot check of an address a user
   * chose. Absent: the SDK's own.
   */
  agents?: BoundedAgents;
}

/**
 * A provider for a job's destination.json (already JSON-parsed). Shape and
 * construction errors reject with StorageError `invalid_config`; no network
 * call is made (call probe() for that). Async because the provider's module
 * (and SDK) is loaded here, on first use: see the top of this file.
 */
export async function createProvider(destination: unknown, opts: CreateProviderOptions = {}): Promise<StorageProvider> {
  const dest = parseDestination(destination);
  if (dest.provider === 'managed') {
    if (opts.managed) return opts.managed;
    if (dest.grant) {
      const { GrantedUploadProvider } = await import('./granted.js');
      return new GrantedUploadProvider({ name: 'managed', url: dest.grant.url, token: dest.grant.token });
    }
    let config: ManagedStorageConfig;
    try {
      config = loadConfig(managedStorageSchema, opts.env ?? process.env);
    } catch (err) {
      // ConfigError names the variables and the rule broken, never the values.
      const detail = err instanceof ConfigError ? err.message : 'invalid configuration';
      throw new StorageError('invalid_config', 'managed_config', `managed: ${detail}`, { provider: 'managed' });
    }
    return managedStorage(config, false);
  }
  if (dest.provider === 'oss') {
    const { OssStorageProvider } = await import('./oss.js');
    return new OssStorageProvider({
      name: 'oss',
      endpoint: dest.endpoint,
      bucket: dest.bucket,
      accessKeyId: dest.access_key_id,
      accessKeySecret: dest.access_key_secret,
      ...(dest.region ? { region: dest.region } : {}),
      ...(dest.folder_prefix ? { folderPrefix: dest.folder_prefix } : {}),
      ...(opts.agents && { agents: opts.agents }),
    });
  }
  if (dest.provider === 'drive') {
    const { DriveStorageProvider } = await import('./drive.js');
    return new DriveStorageProvider({
      name: 'drive',
      credentials: dest.service_account_json,
      ...(dest.folder_id ? { folderId: dest.folder_id } : {}),
      ...(dest.folder_prefix ? { folderPrefix: dest.folder_prefix } : {}),
      ...(opts.drive?.download ? { download: opts.drive.download } : {}),
      ...(opts.drive?.rootUrl ? { rootUrl: opts.drive.rootUrl } : {}),
      ...(opts.drive?.tokenUri ? { tokenUri: opts.drive.tokenUri } : {}),
    });
  }
  if (dest.provider === 'blob') {
    const { BlobStorageProvider } = await import('./blob.js');
    return new BlobStorageProvider({
      name: 'blob',
      accountName: dest.account_name,
      accountKey: dest.account_key,
      container: dest.container,
      ...(dest.endpoint ? { endpoint: dest.endpoint } : {}),
      ...(dest.folder_prefix ? { folderPrefix: dest.folder_prefix } : {}),
      ...(opts.agents && { agents: opts.agents }),
    });
  }
  if (dest.provider === 'gcs') {
    // Throws the spec's construction errors: project_id missing, or a key
    // file that cannot work (`Invalid service account JSON: missing 'private_key' field`).
    const { GcsStorageProvider } = await import('./gcs.js');
    return new GcsStorageProvider({
      name: 'gcs',
      projectId: dest.project_id ?? '',
      bucket: dest.bucket,
      credentials: dest.service_account_json,
      ...(dest.folder_prefix ? { folderPrefix: dest.folder_prefix } : {}),
      ...(opts.gcs?.apiEndpoint ? { apiEndpoint: opts.gcs.apiEndpoint } : {}),
      ...(opts.gcs?.tokenUri ? { tokenUri: opts.gcs.tokenUri } : {}),
    });
  }
  const { S3StorageProvider } = await import('./s3.js');
  return new S3StorageProvider({
    name: 's3',
    endpoint: dest.endpoint,
    bucket: dest.bucket,
    region: dest.region,
    accessKeyId: dest.access_key,
    secretAccessKey: dest.secret_key,
    forcePathStyle: s3PathStyle(dest),
    ...(dest.folder_prefix ? { folderPrefix: dest.folder_prefix } : {}),
    ...(opts.agents && { agents: opts.agents }),
  });
}

/** The destination's part of the object key layout, for objectKey(). */
export function destinationKeyLayout(dest: Destination): { folderPrefix?: string; baseFolder: string } {
  if (dest.provider === 'managed') return { ...(dest.folder_prefix ? { folderPrefix: dest.folder_prefix } : {}), baseFolder: 'videos' };
  return {
    ...(dest.folder_prefix ? { folderPrefix: dest.folder_prefix } : {}),
    baseFolder: dest.base_folder?.trim() ? dest.base_folder : 'videos',
  };
}
