// The OpenAPI 3.1 description of the gateway's REST API, built from the zod
// schemas (./schemas.ts) and the routes' own message constants; served at
// /openapi.json and rendered at /docs (./serve.ts). test/openapi.test.ts
// lints it, compares its paths and methods with the app's routes both ways,
// and checks real answers against its response schemas.
import { BATCH_SOURCE_FAILURES, DEFAULT_MAX_PLAYLIST_SIZE, emptyBatch, tooLarge } from '@mediajobs/lib/batches/index';
import { FAILURES, failureStatus, type FailureCategory } from '@mediajobs/lib/media-info/index';
import { listJobsQuery } from '../routes/jobs.js';
import { ownerQuery } from '../routes/user-storage-checks.js';
import { signedUrlQuery } from '../query.js';
import { NOT_DIRECT_KEY } from '../routes/bulk.js';
import { NOT_FOUND as BATCH_NOT_FOUND, NOT_OWNER, NOT_PAUSED_RENAME, notPausedToStart, pausedByManifest } from '../routes/batches.js';
import { JOB_NOT_FOUND, alreadyFinished } from '../routes/cancel.js';
import { BAD_LEVEL, UNAVAILABLE as CHAT_UNAVAILABLE } from '../routes/chat.js';
import { QUOTA_EXCEEDED } from '../routes/usage.js';
import { PROVIDER_FIELDS } from '../destinations/fields.js';
import { IDEMPOTENCY_HEADER, KEY_IN_FLIGHT, KEY_REUSED, MALFORMED_KEY, REPLAYED_HEADER } from '../idempotency.js';
import { DEFAULT_MARKETPLACE_USER_HEADER, MARKETPLACE_STORAGE_REQUIRED } from '../marketplace.js';
import { STORAGE_PROVIDERS } from '@mediajobs/lib/mediajob/types';
import { PLATFORM_DISABLED_MESSAGE } from '@mediajobs/lib/platforms/types';
import { KEY, componentSchemas, operationObject, rateLimitHeaderComponents, schemaRef, type Operation } from './build.js';
import { webhookPayloads } from './schemas.js';

type Json = Record<string, unknown>;

/** Routes of the app that are not the client API, and why; the drift test skips exactly these. */
export const UNDOCUMENTED_ROUTES: readonly { method: string; path: string; why: string }[] = [
  { method: 'post', path: '/internal/upload-grants/{op}', why: "runners' upload grants on managed S3 (docs/adr/0012): a job-scoped token, not a client API" },
];

const CREDENTIAL_FAILED = 'Credential validation failed: <reason>';
const JOB_FAILED_TO_CREATE = 'Failed to create job';
const DB_FAILED = 'Database query failed';

/** POST /jobs' 400s beyond the field checks (whose message is `Invalid field '<field>': <why>`). */
const JOB_REQUEST_ERRORS = [
  "Missing required field 'url'", "Invalid field '<field>': <why>", 'storage_and_storage_provider_are_exclusive', 'storage_provider_not_configured',
  'Invalid storage configuration: <reason>', 'Storage credentials validation failed: <reason>', MARKETPLACE_STORAGE_REQUIRED,
];

const QUOTA_403 = {
  schema: 'QuotaExceeded', messages: [QUOTA_EXCEEDED],
  extra: { limit_gb: '1024', used_gb: '1024', message: "This key's storage quota of 1024 GB is used up (...); no new jobs are accepted. ..." },
};

const idempotencyKey = {
  name: IDEMPOTENCY_HEADER, in: 'header', required: false, schema: { type: 'string', maxLength: 255 },
  description: `Retry-safe creation: the same key with the same body answers the first answer again (header ${REPLAYED_HEADER}: true).`,
};
const IDEMPOTENCY_ERRORS = { 400: [MALFORMED_KEY], 409: [KEY_IN_FLIGHT], 422: [KEY_REUSED] };

const OWNER_ERRORS = {
  400: ['This API key belongs to no organization'],
  403: ["Only an organization admin key can manage the organization's storage destinations"],
};

/** Error tables joined: the messages of one status from every table, in order. */
function mergeErrors(...tables: Record<number, readonly string[]>[]): Record<number, string[]> {
  const out: Record<number, string[]> = {};
  for (const t of tables) for (const [status, messages] of Object.entries(t)) (out[Number(status)] ??= []).push(...messages);
  return out;
}

/** Why a show or playlist URL of POST /jobs could not become a batch, by status (lib/src/batches/errors.ts). */
function batchSourceErrors(): Record<number, string[]> {
  const out: Record<number, string[]> = {
    400: [emptyBatch('show').message, emptyBatch('playlist').message],
    413: [tooLarge('show', DEFAULT_MAX_PLAYLIST_SIZE).message, tooLarge('playlist', DEFAULT_MAX_PLAYLIST_SIZE).message],
  };
  for (const [code, f] of Object.entries(BATCH_SOURCE_FAILURES)) {
    if (code === 'aborted' || code === 'too_large' || code === 'empty') continue; // aborted: the client is gone, nobody is answered
    (out[f.status] ??= []).push(f.message);
  }
  return out;
}

/** The lookup failures of POST /metadata and POST /is-short, by status. */
function lookupFailures(wrap: (message: string) => string): Record<number, string[]> {
  const out: Record<number, string[]> = {};
  for (const category of Object.keys(FAILURES) as FailureCategory[]) {
    (out[failureStatus(category)] ??= []).push(wrap(FAILURES[category].message));
  }
  return out;
}

const binary = (description: string): Json => ({ description, content: { 'application/octet-stream': { schema: { type: 'string', contentMediaType: 'application/octet-stream' } } } });
const DOWNLOAD_403 = ['Missing download URL signature', 'Download URL has expired', 'Invalid download URL signature'];

function storageOperations(): Operation[] {
  return STORAGE_PROVIDERS.flatMap((p): Operation[] => {
    const { label } = PROVIDER_FIELDS[p];
    const unavailable = `${label} storage configuration is temporarily unavailable`;
    const failed = p === 'drive'
      ? ['Invalid configuration: invalid service account JSON', 'Invalid configuration: <reason>', 'Credential validation failed: insufficient permissions on folder']
      : p === 'gcs' ? ["Invalid service account JSON: missing 'private_key' field", CREDENTIAL_FAILED] : [CREDENTIAL_FAILED];
    const path = `/user/${p}`;
    return [
      {
        method: 'post', path, operationId: `save${label}Storage`, tag: 'Storage', access: KEY, summary: `Save a ${label} destination`,
        description: 'Verified before saving: fields, client, upload and delete of `verify_credentials.txt`. Credentials are write-only.',
        body: { schema: `${label}StorageRequest`, required: true }, query: ownerQuery,
        ok: { 200: p === 'drive' ? 'DriveStorageSaved' : 'StorageSaved' },
        errors: mergeErrors(OWNER_ERRORS, { 400: ["Invalid field 'default': must be a boolean (true or false)", ...failed], 503: [unavailable] }),
      },
      {
        method: 'get', path, operationId: `get${label}Storage`, tag: 'Storage', access: KEY, summary: `The saved ${label} destination`,
        query: ownerQuery, ok: { 200: 'StorageConfiguration' }, errors: { ...OWNER_ERRORS, 503: [unavailable] },
      },
      {
        method: 'delete', path, operationId: `delete${label}Storage`, tag: 'Storage', access: KEY, summary: `Remove the ${label} destination`,
        description: 'Jobs then use the next saved destination or managed storage. Removing nothing is not an error.',
        query: ownerQuery, ok: { 200: 'StorageRemoved' }, errors: { ...OWNER_ERRORS, 503: [unavailable] },
      },
    ];
  });
}

/** Every documented operation. */
export function operations(): Operation[] {
  const jobNotFound = { 404: [JOB_NOT_FOUND] };
  return [
    // ---- jobs ----
    {
      method: 'post', path: '/jobs', operationId: 'createJob', tag: 'Jobs', access: KEY, summary: 'Create a job, or a batch for a show or playlist URL',
      description: 'A show URL or a genuine playlist URL (list parameter PL, UU or OL) creates a batch of every episode or video.',
      body: { schema: 'CreateJobRequest', required: true }, parameters: [idempotencyKey],
      ok: { 201: ['JobCreated', 'ShowBatchCreated', 'PlaylistBatchCreated'] },
      errors: mergeErrors(IDEMPOTENCY_ERRORS, batchSourceErrors(), {
        400: [...JOB_REQUEST_ERRORS, 'Batch has an episode at a local or link-local address, which is not allowed'],
        422: [PLATFORM_DISABLED_MESSAGE],
        500: [JOB_FAILED_TO_CREATE],
      }),
      moreErrors: { 403: QUOTA_403 },
    },
    {
      method: 'get', path: '/jobs', operationId: 'listJobs', tag: 'Jobs', access: KEY, summary: "The key's jobs, newest first",
      query: listJobsQuery, ok: { 200: 'JobList' }, errors: { 500: [DB_FAILED] },
    },
    {
      method: 'post', path: '/jobs/bulk', operationId: 'createJobs', tag: 'Jobs', access: KEY, summary: 'Create up to 100 jobs with shared options',
      description: 'All or nothing. Direct API keys only; saved or managed storage only.',
      body: { schema: 'BulkJobsRequest', required: true }, parameters: [idempotencyKey], ok: { 201: 'BulkJobsCreated' },
      errors: mergeErrors(IDEMPOTENCY_ERRORS, {
        400: [
          "Missing required field 'urls'", "Invalid field 'urls': must be an array of 1 to 100 URLs", 'urls[<i>]: <why>',
          "Invalid field 'url': a bulk request lists its URLs in 'urls'", "Invalid field '<field>': <why>", 'storage_provider_not_configured',
        ],
        403: [NOT_DIRECT_KEY],
        422: [`urls[<i>]: ${PLATFORM_DISABLED_MESSAGE}`],
        500: ['Failed to create jobs'],
      }),
      moreErrors: { 403: QUOTA_403 },
    },
    {
      method: 'get', path: '/jobs/{id}', operationId: 'getJob', tag: 'Jobs', access: KEY, summary: 'One job', ok: { 200: 'Job' },
      errors: { ...jobNotFound, 500: [DB_FAILED] },
    },
    {
      method: 'post', path: '/jobs/{id}/cancel', operationId: 'cancelJob', tag: 'Jobs', access: KEY, summary: 'Cancel a job',
      description: 'The answer is the job as GET /jobs/{id} shows it, now Cancelled; a job_cancelled webhook follows.',
      body: 'none-or-json', ok: { 200: 'Job' },
      errors: { ...jobNotFound, 409: [alreadyFinished('Job', '<status>')], 500: ['Failed to cancel job'] },
    },
    // ---- webhooks ----
    {
      method: 'get', path: '/jobs/{id}/webhooks', operationId: 'listJobWebhooks', tag: 'Webhooks', access: KEY,
      summary: "A job's webhook events and delivery attempts", ok: { 200: 'WebhookDeliveries' }, errors: { ...jobNotFound, 500: [DB_FAILED] },
    },
    {
      method: 'post', path: '/jobs/{id}/webhooks/{eventId}/redeliver', operationId: 'redeliverWebhook', tag: 'Webhooks', access: KEY,
      summary: 'Send a webhook event again (same webhook-id)', body: 'none-or-json', ok: { 202: 'WebhookDelivery' },
      errors: {
        404: [JOB_NOT_FOUND, 'Webhook event not found for this job'], 409: ['Webhook event is still being delivered'], 500: ['Failed to redeliver webhook'],
      },
    },
    {
      method: 'post', path: '/user/webhook-secret', operationId: 'rotateWebhookSecret', tag: 'Webhooks', access: KEY,
      summary: 'Create or rotate the webhook signing secret', description: 'The secret is shown once. 201 for the first, 200 for a rotation.',
      body: 'none-or-json', ok: { 201: 'WebhookSecretCreated', 200: 'WebhookSecretCreated' }, errors: { 500: ['Failed to create webhook secret'] },
    },
    {
      method: 'get', path: '/user/webhook-secret', operationId: 'getWebhookSecret', tag: 'Webhooks', access: KEY,
      summary: 'Whether a signing secret is set, never the secret', ok: { 200: 'WebhookSecret' }, errors: { 500: [DB_FAILED] },
    },
    // ---- batches ----
    {
      method: 'get', path: '/batch/{id}', operationId: 'getBatch', tag: 'Batches', access: KEY, summary: 'One batch', ok: { 200: 'Batch' },
      errors: { 401: [NOT_OWNER], 404: [BATCH_NOT_FOUND], 500: [DB_FAILED] },
    },
    {
      method: 'patch', path: '/batch/{id}/jobs', operationId: 'renameBatchEpisodes', tag: 'Batches', access: KEY,
      summary: 'Rename episode files of a paused batch', body: { schema: 'RenameEpisodesRequest', required: true }, ok: { 200: 'EpisodesRenamed' },
      errors: {
        400: [NOT_PAUSED_RENAME, "Missing required field 'renames'", "Invalid field 'renames': must be an array", "Invalid field 'renames[<i>]': <why>"],
        401: [NOT_OWNER], 404: [BATCH_NOT_FOUND], 500: ['Failed to rename episodes'],
      },
    },
    {
      method: 'post', path: '/batch/{id}/start', operationId: 'startBatch', tag: 'Batches', access: KEY, summary: 'Start a paused batch',
      body: 'none-or-json', ok: { 200: 'BatchStarted' },
      errors: {
        400: [notPausedToStart('<status>')], 401: [NOT_OWNER], 404: [BATCH_NOT_FOUND], 409: [pausedByManifest('<namespace>/<name>')],
        500: ['Failed to start batch'],
      },
    },
    {
      method: 'post', path: '/batch/{id}/cancel', operationId: 'cancelBatch', tag: 'Batches', access: KEY, summary: "Cancel a batch's unfinished episodes",
      body: 'none-or-json', ok: { 200: 'BatchCancelled' },
      errors: { 401: [NOT_OWNER], 404: [BATCH_NOT_FOUND], 409: [alreadyFinished('Batch', '<status>')], 500: ['Failed to cancel batch'] },
    },
    // ---- usage ----
    { method: 'get', path: '/usage', operationId: 'getUsage', tag: 'Usage', access: KEY, summary: 'Usage, quota and per-key limits', ok: { 200: 'Usage' }, errors: { 500: [DB_FAILED] } },
    // ---- media info ----
    {
      method: 'post', path: '/metadata', operationId: 'getMetadata', tag: 'Media info', access: KEY, summary: 'What is known about a URL, without downloading',
      body: { schema: 'UrlRequest', required: true }, ok: { 200: 'Metadata' },
      errors: {
        400: ["Missing required field 'url'", "Invalid field 'url': must be a string", "Invalid field 'url': must be an http or https URL"],
        ...Object.fromEntries(Object.entries(lookupFailures(() => 'Failed to extract metadata')).map(([status]) => [status, {
          schema: 'MetadataError', messages: ['Failed to extract metadata'],
          extra: { details: lookupFailures((m) => m)[Number(status)]!.join(' | ') },
        }])),
      },
      // A disabled MediaPlatform's URL: POST /jobs's 422, beside the lookup's own (a content warning).
      moreErrors: { 422: [PLATFORM_DISABLED_MESSAGE] },
    },
    {
      method: 'post', path: '/is-short', operationId: 'isShort', tag: 'Media info', access: { key: 'Missing API key' },
      summary: 'Classify a video URL as short, video or live', body: { schema: 'UrlRequest', required: true }, ok: { 200: 'ShortClassification' },
      errors: {
        400: ["Missing required field 'url'", "Invalid field 'url': must be an http or https URL", 'Unsupported URL: only <platform> video URLs are accepted (<forms>)'],
        ...lookupFailures((m) => m),
      },
      moreErrors: { 422: [PLATFORM_DISABLED_MESSAGE] },
    },
    // ---- notifications ----
    {
      method: 'post', path: '/user/chat', operationId: 'saveChatSettings', tag: 'Notifications', access: KEY, summary: 'Chat notifications of failed jobs',
      body: { schema: 'ChatSettingsRequest', required: true }, ok: { 200: 'ChatSettingsSaved' },
      errors: { 400: ["Missing required field 'webhook_url'", "Invalid webhook_url. Must start with '<CHAT_WEBHOOK_PREFIX>'", BAD_LEVEL], 503: [CHAT_UNAVAILABLE] },
    },
    { method: 'get', path: '/user/chat', operationId: 'getChatSettings', tag: 'Notifications', access: KEY, summary: 'The chat notification setting', ok: { 200: 'ChatSettings' }, errors: { 503: [CHAT_UNAVAILABLE] } },
    { method: 'delete', path: '/user/chat', operationId: 'deleteChatSettings', tag: 'Notifications', access: KEY, summary: 'Stop chat notifications', ok: { 200: 'ChatSettingsRemoved' }, errors: { 503: [CHAT_UNAVAILABLE] } },
    // ---- storage ----
    ...storageOperations(),
    {
      method: 'post', path: '/user/bucket', operationId: 'saveBucket', tag: 'Storage', access: KEY, deprecated: true,
      summary: 'Save a custom S3 bucket (deprecated: POST /user/s3)', body: { schema: 'BucketRequest', required: true }, query: ownerQuery,
      ok: { 200: 'Message' }, errors: mergeErrors(OWNER_ERRORS, { 400: ['Verification failed: <reason>'], 503: ['S3 storage configuration is temporarily unavailable'] }),
    },
    {
      method: 'delete', path: '/user/bucket', operationId: 'deleteBucket', tag: 'Storage', access: KEY, deprecated: true,
      summary: 'Remove the custom bucket (deprecated: DELETE /user/s3)', query: ownerQuery,
      ok: { 200: 'Message' }, errors: { ...OWNER_ERRORS, 503: ['S3 storage configuration is temporarily unavailable'] },
    },
    // ---- downloads (the signed URL is the credential) ----
    {
      method: 'get', path: '/files/{key}', operationId: 'downloadManagedFile', tag: 'Downloads', access: 'open',
      summary: 'Download a file of local managed storage (a signed s3_url)', description: 'Only with local managed storage. Honours Range.',
      query: signedUrlQuery,
      ok: { 200: binary('The file'), 206: binary('Part of the file') },
      errors: { 403: DOWNLOAD_403, 404: ['File not found'], 416: ['Range not satisfiable'] },
    },
    {
      method: 'get', path: '/drive-files/{path}', operationId: 'downloadDriveFile', tag: 'Downloads', access: 'open',
      summary: 'Download a file delivered to a saved Drive destination (a signed s3_url)',
      query: signedUrlQuery,
      ok: { 200: binary('The file') },
      errors: { 403: DOWNLOAD_403, 404: ['File not found'], 502: ['Storage destination unavailable'] },
    },
    // ---- service ----
    {
      method: 'get', path: '/healthz', operationId: 'healthz', tag: 'Service', access: 'open', summary: 'Liveness', ok: { 200: 'Health' },
      description: 'The process answers. Postgres and the rest are not asked: restarting the gateway mends none of them.',
    },
    {
      method: 'get', path: '/readyz', operationId: 'readyz', tag: 'Service', access: 'open', summary: 'Readiness', ok: { 200: 'Ready' },
      description: 'Ready to serve an authenticated request now: Postgres answers and every migration this build knows is applied; '
        + 'in local mode (make run) its operator also leads with its caches following the API server. Otherwise 503, the error saying what is missing.',
      errors: { 503: ['Shutting down', 'Database unreachable', 'Database migrations not applied', 'Operator not started', 'Operator not leading'] },
    },
    {
      method: 'get', path: '/openapi.json', operationId: 'openapi', tag: 'Service', access: 'open', summary: 'This document',
      ok: { 200: { description: 'OpenAPI 3.1 document', content: { 'application/json': { schema: { type: 'object' } } } } },
    },
    {
      method: 'get', path: '/docs', operationId: 'docs', tag: 'Service', access: 'open', summary: 'Reference page of this document (Swagger UI)',
      ok: { 200: { description: 'HTML page', content: { 'text/html': { schema: { type: 'string' } } } } },
    },
    {
      method: 'get', path: '/', operationId: 'console', tag: 'Service', access: 'open', summary: 'The web console (docs/console.md)',
      description: 'A page for people: sign in with an API key (kept in the tab\'s sessionStorage) to watch and submit jobs; its modules are under /console/.',
      ok: { 200: { description: 'HTML page', content: { 'text/html': { schema: { type: 'string' } } } } },
    },
  ];
}

const WEBHOOK_HEADERS = [
  { name: 'webhook-id', in: 'header', required: true, schema: { type: 'string' }, description: 'Stable per event: deduplicate on it' },
  { name: 'webhook-timestamp', in: 'header', required: true, schema: { type: 'string' }, description: 'Unix seconds' },
  { name: 'webhook-signature', in: 'header', required: false, schema: { type: 'string' }, description: 'Present when the key has a signing secret (POST /user/webhook-secret)' },
];

const WEBHOOK_SUMMARIES: Record<keyof typeof webhookPayloads, string> = {
  job_processing: 'A worker started the job',
  job_completed: 'The job completed',
  job_failed: 'The job failed with a technical error (not sent for content warnings)',
  job_warning: 'The job ended with a content warning (private, unavailable, geo-blocked...): status Warning (ADR 0029)',
  job_skipped: 'A DRM-protected audio-only episode was skipped',
  job_cancelled: 'The job was cancelled',
  progress: 'A progress stage (enable_progress_webhook)',
  batch_completed: 'Every episode of a batch is done',
};

function webhooks(): Json {
  return Object.fromEntries(Object.keys(webhookPayloads).map((type) => {
    const id = `${type.split('_').map((w) => w[0]!.toUpperCase() + w.slice(1)).join('')}Event`;
    return [type, {
      post: {
        operationId: `webhook_${type}`,
        summary: WEBHOOK_SUMMARIES[type as keyof typeof webhookPayloads],
        description: 'POSTed to the job\'s (or batch\'s) webhook_url: 10 s timeout, 3 attempts with exponential backoff. '
          + 'Every event type unless the request\'s webhook_events names the ones wanted; every job that ends gets exactly one of '
          + 'job_completed, job_failed, job_warning, job_skipped and job_cancelled.',
        security: [],
        parameters: WEBHOOK_HEADERS,
        requestBody: { required: true, content: { 'application/json': { schema: schemaRef(id) } } },
        responses: { '2XX': { description: 'Received; answer quickly' } },
      },
    }];
  }));
}

const TAGS: Record<string, string> = {
  Jobs: 'Download jobs: create, list, read, cancel.',
  Batches: 'Shows and playlists: one job per episode or video; the paused workflow.',
  Webhooks: 'Signing secret of the webhooks, and the delivery log of a job\'s events.',
  Usage: 'Usage, storage quota and per-key limits.',
  'Media info': 'Lookups without a download: metadata, short or regular or live.',
  Storage: 'Saved storage destinations, per key or per organization. Credentials are write-only.',
  Notifications: 'Chat notifications of failed jobs.',
  Downloads: 'Signed download URLs served by the gateway itself (the URL is the credential).',
  Service: 'Health, readiness and this description.',
};

/** The document; built once per process (see ./serve.ts). */
export function openApiDocument(): Json {
  const paths: Record<string, Json> = {};
  for (const op of operations()) (paths[op.path] ??= {})[op.method] = operationObject(op);
  return {
    openapi: '3.1.0',
    info: {
      title: 'Media download jobs API',
      version: '1.0.0',
      description: 'Asynchronous download jobs for video, audio, live streams, podcast shows and playlists, delivered to managed or your own storage.',
      license: { name: 'Proprietary', identifier: 'LicenseRef-Proprietary' },
    },
    servers: [{ url: '/', description: 'This gateway' }],
    security: [{ apiKey: [] }],
    tags: Object.entries(TAGS).map(([name, description]) => ({ name, description })),
    paths,
    webhooks: webhooks(),
    components: {
      securitySchemes: { apiKey: { type: 'apiKey', in: 'header', name: 'x-api-key', description: 'The API key; server-side use only.' } },
      parameters: {
        MarketplaceUser: {
          name: DEFAULT_MARKETPLACE_USER_HEADER, in: 'header', required: false, schema: { type: 'string', minLength: 1, maxLength: 256 },
          description: 'Marketplace keys only (required with them): the end user the request acts for.',
        },
      },
      headers: rateLimitHeaderComponents,
      schemas: componentSchemas(),
    },
  };
}
