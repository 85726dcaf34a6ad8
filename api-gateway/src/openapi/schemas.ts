// The zod schemas of the OpenAPI document (./document.ts): request bodies
// and answers, each registered under the component name the document gives
// it. POST /jobs and POST /jobs/bulk take the very schema that validates
// POST /jobs (lib/src/job-options.ts), the other bodies the schemas their
// routes validate with (lib/src/request-body.ts); the storage bodies are
// built from the field table the storage endpoints read (destinations/fields.ts); the
// answers, which handlers write as plain objects, are described here and
// held to the real answers by test/openapi.test.ts.
import { z } from 'zod';
import { NOTIFY_LEVELS } from '@mediajobs/lib/chat/notification';
import { jobRequestBodySchema } from '@mediajobs/lib/job-options';
import {
  BATCH_KINDS, BATCH_STATUSES, ERROR_TYPES, JOB_STATUSES, JOB_STEPS, MAX_RESOLUTIONS, STORAGE_PROVIDERS, type StorageProviderName,
} from '@mediajobs/lib/mediajob/types';
import { PROGRESS_STAGES } from '@mediajobs/lib/mediajob/progress-stages';
import { urlRequestSchema } from '@mediajobs/lib/media-info/platform-url';
import { PROVIDER_FIELDS } from '../destinations/fields.js';
import { ERROR_CODES, type ErrorCode } from '../error-codes.js';
import { renameEpisodesRequest as renameSchema } from '../routes/batches.js';
import { chatRequest as chatSchema } from '../routes/chat.js';
import { MAX_BULK_URLS } from '../routes/bulk.js';
import { BUCKET_FIELDS } from '../routes/user-storage-checks.js';

/** Request bodies: converted with io 'input' (what a client may send). */
export const requests = z.registry<{ id: string; description?: string }>();
/** Answers and webhook payloads: converted with io 'output' (what the service sends). */
export const responses = z.registry<{ id: string; description?: string }>();

const uuid = () => z.string().describe('UUID');
const ms = () => z.number().int().describe('Milliseconds since the epoch');
const nullable = <T extends z.ZodType>(s: T) => s.nullable();

// ---- requests ----

/** Providers accepted as inline `storage` of POST /jobs (Drive is saved-only, spec rule 4 of POST /user/drive). */
const INLINE_PROVIDERS = STORAGE_PROVIDERS.filter((p) => p !== 'drive');

/** A provider's fields as destinations/fields.ts reads them: required and optional strings, optional boolean flags. */
function providerFields(provider: StorageProviderName): Record<string, z.ZodType> {
  const f = PROVIDER_FIELDS[provider];
  return {
    ...Object.fromEntries(f.required.map((name) => [name, z.string().min(1)])),
    ...Object.fromEntries(f.optional.map((name) => [name, z.string().optional()])),
    ...Object.fromEntries((f.flags ?? []).map((name) => [name, z.boolean().optional()])),
  };
}

export const inlineStorage = z.discriminatedUnion('provider', INLINE_PROVIDERS.map((p) =>
  z.object({ provider: z.literal(p), ...providerFields(p) }).meta({ title: `${PROVIDER_FIELDS[p].label} inline storage` }),
) as unknown as [z.ZodObject, ...z.ZodObject[]]).register(requests, {
  id: 'InlineStorage', description: 'Inline storage credentials; `provider` selects the variant. Checked (shape, client, live probe) before the job is accepted.',
});

/** POST /jobs: the validator's own schema, with `storage` described by provider (the validator takes any object and checks it later). */
export const createJobRequest = jobRequestBodySchema.extend({
  storage: inlineStorage.optional(),
}).register(requests, { id: 'CreateJobRequest', description: 'POST /jobs. Unknown fields are ignored; `null` counts as absent.' });

/** POST /jobs/bulk: POST /jobs' shared options, `urls` instead of `url`, no inline storage and no `paused`. */
export const bulkJobsRequest = jobRequestBodySchema.omit({ url: true, storage: true, paused: true }).extend({
  urls: z.array(z.string()).min(1).max(MAX_BULK_URLS),
}).register(requests, { id: 'BulkJobsRequest', description: `POST /jobs/bulk: 1 to ${MAX_BULK_URLS} URLs with POST /jobs' options shared.` });

// The schemas their routes validate with (lib/src/request-body.ts), registered here as they are.
export const renameEpisodesRequest = renameSchema.register(requests, { id: 'RenameEpisodesRequest' });
export const urlRequest = urlRequestSchema.register(requests, { id: 'UrlRequest' });
export const chatRequest = chatSchema.register(requests, { id: 'ChatSettingsRequest' });

export const storageRequests = Object.fromEntries(STORAGE_PROVIDERS.map((p) => [p, z.object({
  ...providerFields(p),
  default: z.boolean().optional().describe('Mark this destination the default one (rule 9 of POST /jobs)'),
}).register(requests, { id: `${PROVIDER_FIELDS[p].label}StorageRequest` })])) as unknown as Record<StorageProviderName, z.ZodObject>;

export const bucketRequest = z.object(Object.fromEntries(BUCKET_FIELDS.map((f) => [f, z.string().min(1)])))
  .register(requests, { id: 'BucketRequest', description: 'Deprecated: use POST /user/s3.' });

// ---- answers ----

export const errorCode = z.enum(Object.keys(ERROR_CODES) as [ErrorCode, ...ErrorCode[]])
  .register(responses, { id: 'ErrorCode', description: 'The stable code of an error answer (docs/errors.md lists each with its meaning).' });

const problem = z.strictObject({
  code: errorCode,
  param: z.string().optional().describe('The body field (`url`, `renames[1].filename`, `urls[3]`), query parameter or header at fault'),
  message: z.string(),
}).register(responses, { id: 'Problem', description: 'One problem of a request.' });

/** What problem details add to the contract's body (docs/errors.md, ADR 0030). */
const described = {
  code: errorCode,
  param: z.string().optional().describe('The field, query parameter or header at fault, when one is'),
  errors: z.array(problem).optional().describe('For a 400 about a request body: every problem found, the first being `error`\'s'),
};

export const errorBody = z.looseObject({ error: z.string(), ...described, code: errorCode.optional() })
  .register(responses, {
    id: 'Error',
    description: 'Every error answer: `error` (the contract\'s message) and, on some statuses, more fields (see each status). '
      + '`code`, `param` and `errors` are sent to a client that accepts application/problem+json (ProblemDetails).',
  });

export const problemDetails = z.looseObject({
  title: z.string().describe('The status\'s reason phrase (RFC 9457; `type` is absent: about:blank)'),
  status: z.number().int(),
  detail: z.string().describe('The same as `error`'),
  error: z.string().describe('The contract\'s message'),
  ...described,
}).register(responses, {
  id: 'ProblemDetails',
  description: 'An error answer as RFC 9457 problem details, to a client whose Accept lists application/problem+json; '
    + 'it keeps `error` and the status\'s other fields (limit_gb, details, ...).',
});

const fieldWarning = z.strictObject({
  code: z.literal('unknown_field'),
  param: z.string().describe('The field as sent, cut at 100 characters'),
  message: z.string(),
  did_you_mean: z.string().optional().describe('The known field the name most likely meant'),
}).register(responses, { id: 'FieldWarning', description: 'A body field the API does not know: accepted, ignored, and named.' });

/** The 201s' `warnings`, present only when the body had fields the API does not know. */
const warned = { warnings: z.array(fieldWarning).max(20).optional().describe('Fields of the body that were ignored (at most 20), each with a guess') };

export const quotaError = z.object({ error: z.literal('Storage quota exceeded'), limit_gb: z.string(), used_gb: z.string(), message: z.string() })
  .register(responses, { id: 'QuotaExceeded' });

export const metadataError = z.object({ error: z.literal('Failed to extract metadata'), details: z.string().optional() })
  .register(responses, { id: 'MetadataError' });

const jobFields = {
  id: uuid(),
  url: z.string(),
  status: z.enum(JOB_STATUSES),
  s3_key: nullable(z.string()),
  error: nullable(z.string()),
  error_type: nullable(z.enum(ERROR_TYPES)),
  step: z.enum(JOB_STEPS),
  created_at: ms(),
  finished_at: nullable(ms()),
  file_size: nullable(z.number().int()),
};

/** The download in bytes (issue 38), each field absent while unknown; speed and time left only while the source is read. */
const byteProgress = {
  downloaded_bytes: z.number().int().min(0).optional().describe('Bytes of the source read so far'),
  total_bytes: z.number().int().min(0).optional().describe('Bytes of the source in all, when the source or yt-dlp says'),
  speed_bps: z.number().int().min(0).optional().describe('Bytes per second of the source\'s read, over the last seconds; while downloading only'),
  eta_seconds: z.number().int().min(0).optional().describe('Seconds left of the source\'s read at that speed; while downloading, when total_bytes is known'),
};

export const jobSummary = z.strictObject(jobFields).register(responses, { id: 'JobSummary', description: 'A job as GET /jobs lists it.' });

export const job = z.strictObject({
  ...jobFields,
  s3_url: nullable(z.string()).describe('Presigned download URL, valid 24 hours; null until completed or when signing failed'),
  actual_quality: nullable(z.string()),
  progress: z.number().int().min(0).max(100),
  reason: nullable(z.string()).describe('Failure reason, e.g. storage_unreachable'),
  title: nullable(z.string()),
  description: nullable(z.string()),
  release_date: nullable(z.string()),
  subtitle_key: z.string().optional(),
  subtitle_url: nullable(z.string()).optional(),
  thumbnail_key: z.string().optional(),
  thumbnail_url: nullable(z.string()).optional(),
  ...byteProgress,
  error_detail: z.string().optional()
    .describe('A failed or warned job: the tool\'s first relevant line (e.g. ffmpeg\'s "moov atom not found"), without URL credentials or queries, paths or secrets; at most 200 characters. Absent when unknown'),
}).register(responses, { id: 'Job', description: 'One job (GET /jobs/{id}).' });

export const jobList = z.strictObject({
  jobs: z.array(jobSummary), total: z.number().int(), limit: z.number().int(), offset: z.number().int(),
}).register(responses, { id: 'JobList' });

export const jobCreated = z.strictObject({ job_id: uuid(), ...warned }).register(responses, { id: 'JobCreated' });

export const showBatchCreated = z.strictObject({
  batch_id: uuid(),
  total_episodes: z.number().int(),
  paused: z.boolean(),
  episodes: z.array(z.strictObject({
    job_id: uuid(), url: z.string(), title: z.string(),
    description: nullable(z.string()).optional().describe('Default (not paused) mode only'),
    release_date: nullable(z.string()).optional().describe('Default (not paused) mode only'),
  })),
  episode_jobs: z.array(uuid()).describe('Legacy field: the episodes\' job ids'),
  ...warned,
}).register(responses, { id: 'ShowBatchCreated' });

export const playlistBatchCreated = z.strictObject({ batch_id: uuid(), total_videos: z.number().int(), job_ids: z.array(uuid()), ...warned })
  .register(responses, { id: 'PlaylistBatchCreated' });

export const bulkCreated = z.strictObject({ job_ids: z.array(uuid()), count: z.number().int(), ...warned })
  .register(responses, { id: 'BulkJobsCreated' });

const batchFields = {
  id: uuid(),
  kind: z.enum(BATCH_KINDS),
  show_url: z.string(),
  status: z.enum(BATCH_STATUSES),
  folder: nullable(z.string()),
  total_episodes: z.number().int(),
  completed_episodes: z.number().int(),
  failed_episodes: z.number().int().describe('Failed and skipped episodes'),
  skipped_episodes: z.number().int(),
  progress: z.number().int().min(0).max(100),
  episode_jobs: z.array(uuid()),
  created_at: ms(),
  finished_at: nullable(ms()),
};

export const batch = z.strictObject(batchFields).register(responses, { id: 'Batch' });

export const batchCancelled = z.strictObject({ ...batchFields, cancelled_jobs: z.array(uuid()) }).register(responses, { id: 'BatchCancelled' });

export const renamed = z.strictObject({ updated: z.number().int(), errors: z.array(z.string()) }).register(responses, { id: 'EpisodesRenamed' });

export const batchStarted = z.strictObject({ batch_id: uuid(), started_jobs: z.number().int(), status: z.literal('processing') })
  .register(responses, { id: 'BatchStarted' });

export const usage = z.strictObject({
  client_name: z.string(),
  usage_count: z.number().int(),
  storage_usage_gb: z.number(),
  storage_reserved_gb: z.number(),
  storage_effective_usage_gb: z.number(),
  billing_period_start: z.string().optional(),
  billing_period_end: z.string().optional(),
  current_period_usage_gb: z.number().optional(),
  billing_error: z.string().optional(),
  storage_limit_gb: z.number().optional(),
  storage_limit_bytes: z.number().int().optional(),
  storage_remaining_gb: z.number().optional(),
  max_resolution_limit: z.enum(MAX_RESOLUTIONS).optional(),
  max_duration_limit_seconds: z.number().int().optional(),
  max_filesize_limit_bytes: z.number().int().optional(),
  max_filesize_limit_mb: z.number().optional(),
}).register(responses, { id: 'Usage', description: 'GiB (2^30 bytes).' });

export const metadata = z.strictObject({
  title: z.string().optional(),
  duration: z.number().optional().describe('seconds'),
  width: z.number().int().optional(),
  height: z.number().int().optional(),
  extractor: z.string().optional(),
  uploader: z.string().optional(),
  thumbnail: z.string().optional(),
  description: z.string().optional(),
  view_count: z.number().int().optional(),
  like_count: z.number().int().optional(),
  upload_date: z.string().optional().describe('YYYYMMDD'),
  filesize_approx: z.number().int().optional(),
}).register(responses, { id: 'Metadata', description: 'A field the source does not give is left out, never null.' });

export const classification = z.strictObject({
  is_short: z.boolean(),
  video_type: z.enum(['short', 'video', 'live']),
  width: nullable(z.number().int()),
  height: nullable(z.number().int()),
  aspect_ratio: nullable(z.number()),
  duration_seconds: z.number().int(),
}).register(responses, { id: 'ShortClassification' });

export const storageSaved = z.strictObject({
  message: z.string(), provider: z.enum(STORAGE_PROVIDERS), container_or_bucket: z.string(), folder_prefix: z.string().optional(),
}).register(responses, { id: 'StorageSaved' });

export const driveSaved = z.strictObject({
  message: z.string(), provider: z.literal('drive'), folder_id: z.string().describe('Empty: the service account\'s root'), folder_prefix: nullable(z.string()),
}).register(responses, { id: 'DriveStorageSaved' });

export const storageShown = z.strictObject({
  configured: z.boolean(),
  provider: z.enum(STORAGE_PROVIDERS).optional(),
  container_or_bucket: z.string().optional(),
  folder_prefix: z.string().optional(),
  base_folder: z.string().optional(),
  endpoint: z.string().optional(),
  region: z.string().optional(),
  access_key_masked: z.string().optional(),
  last_modified: z.number().int().optional().describe('Unix seconds; source keyvault only'),
  source: z.enum(['keyvault', 'legacy']).optional(),
}).register(responses, { id: 'StorageConfiguration', description: 'Only `configured` when nothing is saved. Never a credential.' });

export const storageRemoved = z.strictObject({ message: z.string(), provider: z.enum(STORAGE_PROVIDERS), removed: z.boolean() })
  .register(responses, { id: 'StorageRemoved' });

export const message = z.strictObject({ message: z.string() }).register(responses, { id: 'Message' });

export const chatSaved = z.strictObject({ message: z.string(), configured: z.literal(true), notify_level: z.enum(NOTIFY_LEVELS) })
  .register(responses, { id: 'ChatSettingsSaved' });

export const chatShown = z.strictObject({
  configured: z.boolean(),
  notify_level: z.enum(NOTIFY_LEVELS).optional(),
  webhook_url_prefix: z.string().optional(),
  created_at: ms().optional(),
  updated_at: ms().optional(),
}).register(responses, { id: 'ChatSettings', description: 'Never the webhook address itself.' });

export const chatRemoved = z.strictObject({ message: z.string(), configured: z.literal(false) }).register(responses, { id: 'ChatSettingsRemoved' });

export const webhookSecretCreated = z.strictObject({
  secret: z.string().describe('Shown this once'),
  created_at: ms(),
  rotated: z.boolean(),
  previous_secret_expires_at: nullable(ms()).describe('The previous secret still signs until then (24 h)'),
}).register(responses, { id: 'WebhookSecretCreated' });

export const webhookSecretShown = z.strictObject({
  configured: z.boolean(), created_at: nullable(ms()), previous_secret_expires_at: nullable(ms()),
}).register(responses, { id: 'WebhookSecret' });

export const webhookEvent = z.strictObject({
  event_id: uuid(),
  type: z.string(),
  stage: z.string().optional(),
  status: z.enum(['pending', 'delivered', 'failed']),
  created_at: ms(),
  delivered_at: nullable(ms()),
  failed_at: nullable(ms()),
  last_error: nullable(z.string()),
  redeliveries: z.number().int(),
  attempts: z.array(z.strictObject({
    round: z.number().int(),
    attempt: z.number().int(),
    attempted_at: ms(),
    duration_ms: nullable(z.number().int()),
    status_code: nullable(z.number().int()),
    error: nullable(z.string()),
    response_excerpt: nullable(z.string()),
  })),
}).register(responses, { id: 'WebhookDelivery' });

export const webhookDeliveries = z.strictObject({ job_id: uuid(), events: z.array(webhookEvent) }).register(responses, { id: 'WebhookDeliveries' });

export const health = z.strictObject({ status: z.literal('ok') }).register(responses, { id: 'Health' });
export const ready = z.strictObject({ status: z.literal('ready') }).register(responses, { id: 'Ready' });

// ---- webhook payloads (spec: Events) ----

const payloadBase = { job_id: uuid(), url: z.string() };

export const webhookPayloads = {
  job_processing: z.strictObject({ type: z.literal('job_processing'), ...payloadBase, status: z.literal('processing'), message: z.string() }),
  job_completed: z.strictObject({
    type: z.literal('job_completed'), ...payloadBase, status: z.literal('completed'),
    key: z.string(), s3_url: nullable(z.string()), folder: nullable(z.string()), title: nullable(z.string()),
    description: nullable(z.string()), release_date: nullable(z.string()),
    subtitle_key: nullable(z.string()), thumbnail_key: nullable(z.string()),
    subtitle_url: nullable(z.string()).optional().describe('Present only when subtitle_key is'),
    thumbnail_url: nullable(z.string()).optional().describe('Present only when thumbnail_key is'),
  }),
  job_failed: z.strictObject({
    type: z.literal('job_failed'), ...payloadBase, status: z.literal('failed'), error: z.string(), error_detail: z.string().optional(),
  }),
  job_warning: z.strictObject({
    type: z.literal('job_warning'), ...payloadBase, status: z.literal('warning'), error: z.string(), error_detail: z.string().optional(),
  }),
  job_skipped: z.strictObject({ type: z.literal('job_skipped'), ...payloadBase, status: z.literal('skipped'), reason: z.string() }),
  job_cancelled: z.strictObject({
    type: z.literal('job_cancelled'), ...payloadBase, status: z.literal('cancelled'), cancelled_by: z.enum(['user', 'admin']), message: z.string(),
  }),
  progress: z.strictObject({
    type: z.literal('progress'), ...payloadBase,
    stage: z.enum(PROGRESS_STAGES.map((s) => s.stage) as [string, ...string[]]),
    progress_percent: z.number().int(),
    ...byteProgress,
  }),
  batch_completed: z.strictObject({
    type: z.literal('batch_completed'), batch_id: uuid(), status: z.enum(['completed', 'finished']), show_url: z.string(),
    folder: nullable(z.string()), total_episodes: z.number().int(), completed_episodes: z.number().int(),
    failed_episodes: z.number().int().describe('Failed and skipped episodes'),
  }),
} as const;

for (const [type, schema] of Object.entries(webhookPayloads)) {
  schema.register(responses, { id: `${type.split('_').map((w) => w[0]!.toUpperCase() + w.slice(1)).join('')}Event` });
}
