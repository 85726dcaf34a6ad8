// The stable `code` of every error answer (issue 38 item 6), and how the one
// error path (http-errors.ts) finds it. The contract fixes each answer's
// status and `error` text, and the gateway's texts name a field in fixed
// shapes ("Invalid field 'x': ...", "Missing required field 'x'",
// "Invalid query parameter 'x': ...", "urls[3]: ..."), so the code and the
// field at fault are read from the answer as decided: a throw site names a
// code only where its words do not say it (HttpError's `code` option). This
// list is what docs/errors.md and the OpenAPI document's ErrorCode publish;
// a code, once published, keeps its meaning.
import { BATCH_SOURCE_FAILURES, type BatchSourceFailure } from '@mediajobs/lib/batches/errors';
import { FAILURES, type FailureCategory } from '@mediajobs/lib/media-info/failures';

/** Each code and what it means; docs/errors.md lists them with their statuses. */
export const ERROR_CODES = {
  // The request as a whole.
  invalid_json: 'The body is not JSON that can be read (malformed, or text holding half a surrogate pair).',
  body_not_object: 'The body is JSON but not an object.',
  body_too_large: 'The body is over the endpoint\'s size limit.',
  unsupported_content_type: 'A body was sent without Content-Type: application/json.',
  unsupported_charset: 'The body\'s charset is not UTF-8.',
  unsupported_encoding: 'The body\'s Content-Encoding is not one the gateway reads.',
  request_aborted: 'The client stopped sending the body, or sent fewer or more bytes than its Content-Length.',
  bad_request: 'The request could not be read (an undecodable path, a malformed request line).',
  invalid_request: 'The request breaks a rule its message states.',
  // Fields and parameters: `param` names the one at fault.
  missing_field: 'A required field is absent (null counts as absent).',
  invalid_field: 'A field breaks its rule; the message says which rule.',
  conflicting_fields: 'Two fields that exclude each other were both given (storage and storage_provider).',
  invalid_query_parameter: 'A query parameter breaks its rule, or was given more than once.',
  missing_header: 'A required request header is absent (x-marketplace-user for a marketplace key).',
  invalid_header: 'A request header is malformed (Idempotency-Key, x-marketplace-user).',
  over_key_limit: 'The request asks for more than the API key\'s limits allow (max_duration_limit_seconds).',
  unsupported_url: '/is-short: the URL is not a single video of the supported platform.',
  storage_provider_not_configured: 'storage_provider names a provider with no saved destination.',
  invalid_storage_configuration: 'Storage settings fail their shape or construction check.',
  credential_validation_failed: 'Storage credentials failed their live check (the message says why).',
  no_organization: 'An organization\'s resource was asked for with a key that belongs to none.',
  // Who is asking.
  missing_api_key: 'No x-api-key header (or an empty one).',
  invalid_api_key: 'The API key is unknown or revoked.',
  not_owner: 'The batch belongs to another API key.',
  forbidden: 'This key may not do this (not an organization admin; bulk needs a direct key).',
  marketplace_user_revoked: 'The marketplace end user named by the request was revoked.',
  // What the request is about.
  not_found: 'No route at this path and method.',
  job_not_found: 'No job of this key has this id (another key\'s job and a malformed id alike).',
  batch_not_found: 'No batch has this id.',
  file_not_found: 'The file of a download URL is gone.',
  webhook_event_not_found: 'The job has no webhook event with this id.',
  already_finished: 'The job or batch has already ended; there is nothing to cancel.',
  batch_not_paused: 'Only a paused batch can be renamed or started.',
  batch_held_by_manifest: 'The batch is paused by its MediaBatch manifest; only its applier may start it.',
  conflict: 'The request conflicts with the state of what it names.',
  delivery_in_progress: 'The webhook event is still being delivered; redeliver it once it ends.',
  platform_disabled: 'Downloads from this URL\'s platform are disabled (its MediaPlatform).',
  storage_quota_exceeded: 'The account\'s storage quota is reached; new jobs are refused.',
  idempotency_key_in_flight: 'The first request with this Idempotency-Key has not finished; retry later.',
  idempotency_key_reused: 'The Idempotency-Key was used with a different request.',
  // Signed download URLs.
  missing_signature: 'A download URL without its expires and sig parameters.',
  invalid_signature: 'A download URL whose signature does not match.',
  url_expired: 'A download URL past its expiry.',
  range_not_satisfiable: 'The Range asked for lies outside the file.',
  precondition_failed: 'A conditional request\'s precondition (If-Match, If-Unmodified-Since) failed.',
  // Shows and playlists (POST /jobs with a show or playlist URL).
  ...batchSourceCodes(),
  // POST /metadata and POST /is-short: why the media could not be looked up.
  metadata_extraction_failed: '/metadata: the media could not be looked up; `details` and a lookup_* code say why when known.',
  ...lookupCodes(),
  // Limits and the service.
  rate_limit_exceeded: 'The budget of requests per second is spent (RateLimit says r=0); retry after Retry-After.',
  rate_limit_unavailable: 'The shared rate counter cannot be reached; retry after Retry-After.',
  request_timeout: 'The request took longer to arrive than the gateway waits.',
  unprocessable: 'The request is well formed but cannot be done.',
  method_not_allowed: 'The path does not take this method.',
  payload_too_large: 'What the request asks for is over a size limit.',
  unsupported_media_type: 'The body\'s media type is not one the endpoint takes.',
  internal_error: 'The service failed; the failure is logged. Retrying may help.',
  upstream_error: 'A service the gateway depends on (a storage provider, a platform) failed; retry later.',
  service_unavailable: 'A dependency (Postgres, a secret store) cannot be reached, or the gateway is shutting down; retry after Retry-After.',
  client_error: 'Another client error status.',
  server_error: 'Another server error status.',
} as const satisfies Record<string, string>;

export type ErrorCode = keyof typeof ERROR_CODES;

/** A show's or playlist's expansion failure (lib/src/batches/errors.ts) as a code: batch_source_<failure>. */
type BatchSourceCode = `batch_source_${Exclude<BatchSourceFailure, 'aborted'>}`;
/** A lookup failure (lib/src/media-info/failures.ts) as a code: lookup_<category>. */
type LookupCode = `lookup_${Exclude<FailureCategory, 'extractor_missing'>}`;

function batchSourceCodes(): Record<BatchSourceCode, string> {
  const entries = Object.entries(BATCH_SOURCE_FAILURES).filter(([k]) => k !== 'aborted')
    .map(([k, v]) => [`batch_source_${k}`, `A show or playlist could not be expanded: ${v.message.replace(/, please retry$/, '')} (${v.status}).`]);
  return Object.fromEntries(entries) as Record<BatchSourceCode, string>;
}

function lookupCodes(): Record<LookupCode, string> {
  const entries = Object.entries(FAILURES).filter(([k]) => k !== 'extractor_missing').map(([k, v]) => [`lookup_${k}`, `${v.message}.`]);
  return Object.fromEntries(entries) as Record<LookupCode, string>;
}

/** An answer's code and the field it names. */
export interface ErrorDescription {
  code: ErrorCode;
  param?: string;
}

/** The texts that are one code whole (the contract's and the gateway's fixed phrases). */
const BY_TEXT = new Map<string, ErrorCode>([
  ['Invalid JSON body', 'invalid_json'],
  ['Request body must be a JSON object', 'body_not_object'],
  ['Request body too large', 'body_too_large'],
  ['Content-Type must be application/json', 'unsupported_content_type'],
  ['Unsupported charset; send UTF-8 JSON', 'unsupported_charset'],
  ['Unsupported Content-Encoding', 'unsupported_encoding'],
  ['Request aborted', 'request_aborted'],
  ['Request body size does not match Content-Length', 'request_aborted'],
  ['Bad request', 'bad_request'],
  ['storage_and_storage_provider_are_exclusive', 'conflicting_fields'],
  ['storage_provider_not_configured', 'storage_provider_not_configured'],
  ['This API key belongs to no organization', 'no_organization'],
  ['Missing x-api-key header', 'missing_api_key'],
  ['Missing API key', 'missing_api_key'],
  ['Invalid API Key', 'invalid_api_key'],
  ['Batch does not belong to this API key', 'not_owner'],
  ['This marketplace user has been revoked', 'marketplace_user_revoked'],
  ['Not found', 'not_found'],
  ['Job not found', 'job_not_found'],
  ['Batch not found', 'batch_not_found'],
  ['File not found', 'file_not_found'],
  ['Webhook event not found for this job', 'webhook_event_not_found'],
  ['Webhook event is still being delivered', 'delivery_in_progress'],
  ['Downloads from this platform are disabled', 'platform_disabled'],
  ['Storage quota exceeded', 'storage_quota_exceeded'],
  ['A request with this Idempotency-Key is still being processed; retry later', 'idempotency_key_in_flight'],
  ['Idempotency-Key was already used with a different request', 'idempotency_key_reused'],
  ['Missing download URL signature', 'missing_signature'],
  ['Invalid download URL signature', 'invalid_signature'],
  ['Download URL has expired', 'url_expired'],
  ['Range not satisfiable', 'range_not_satisfiable'],
  ['Precondition failed', 'precondition_failed'],
  ['Failed to extract metadata', 'metadata_extraction_failed'],
  ['rate_limit_exceeded', 'rate_limit_exceeded'],
  ['rate_limit_unavailable', 'rate_limit_unavailable'],
  ['Request timeout', 'request_timeout'],
  ...Object.entries(BATCH_SOURCE_FAILURES).filter(([k]) => k !== 'aborted')
    .map(([k, v]): [string, ErrorCode] => [v.message, `batch_source_${k}` as BatchSourceCode]),
  ...Object.entries(FAILURES).filter(([k]) => k !== 'extractor_missing')
    .map(([k, v]): [string, ErrorCode] => [v.message, `lookup_${k}` as LookupCode]),
]);

/** Texts with a field or a value in them: the first that matches gives the code, and the field where it names one. */
const BY_SHAPE: readonly (readonly [RegExp, ErrorCode])[] = [
  [/^Missing required field '(?<param>[^']+)'/, 'missing_field'],
  [/^Invalid field '(?<param>[^']+)'/, 'invalid_field'],
  [/^Invalid query parameter '(?<param>[^']+)'/, 'invalid_query_parameter'],
  [/^Missing (?<param>[\w-]+) header/, 'missing_header'],
  [/^Invalid (?<param>[\w-]+) header/, 'invalid_header'],
  [/^Invalid (?:storage )?configuration: /, 'invalid_storage_configuration'],
  [/^(?:Storage )?[Cc]redential(?:s)? validation failed: |^Verification failed: /, 'credential_validation_failed'],
  [/^Unsupported (?:\w+ )?URL/, 'unsupported_url'],
  // The chat settings' own wording (spec: POST /user/chat).
  [/^Invalid (?<param>[a-z_]+)\. /, 'invalid_field'],
  [/^(?:Job|Batch) is already finished/, 'already_finished'],
  [/^Batch is not paused/, 'batch_not_paused'],
  [/^Batch is paused by the spec of its MediaBatch/, 'batch_held_by_manifest'],
  [/^Only an organization admin key|needs a direct API key$/, 'forbidden'],
  [/^Podcast show has more than|^Playlist has more than/, 'batch_source_too_large'],
  [/^Podcast show has no episodes$|^Playlist has no videos$/, 'batch_source_empty'],
  [/^Batch has an episode at a local or link-local address/, 'invalid_field'],
];

/** The code of a status no text above names. */
function byStatus(status: number): ErrorCode {
  const codes: Readonly<Record<number, ErrorCode>> = {
    400: 'invalid_request', 403: 'forbidden', 404: 'not_found', 405: 'method_not_allowed', 408: 'request_timeout',
    409: 'conflict', 412: 'precondition_failed', 413: 'payload_too_large', 415: 'unsupported_media_type', 416: 'range_not_satisfiable',
    422: 'unprocessable', 429: 'rate_limit_exceeded', 500: 'internal_error', 502: 'upstream_error', 503: 'service_unavailable',
  };
  return codes[status] ?? (status >= 500 ? 'server_error' : 'client_error');
}

/**
 * The code and field of an answer with this status and text. A bulk
 * request's problem with one URL (`urls[3]: <what POST /jobs says>`) is the
 * code of what follows, about `urls[3]`. A /metadata failure's `details`
 * names the lookup's reason.
 */
export function describeError(status: number, message: string, extra: Readonly<Record<string, unknown>> = {}): ErrorDescription {
  const item = /^(?<param>urls\[\d+\]): (?<rest>.*)$/s.exec(message);
  if (item) {
    const inner = describeError(status, item.groups!.rest!);
    // The URL itself is the item; a problem of another field is still that field's.
    const param = inner.param === undefined || inner.param === 'url' ? item.groups!.param! : inner.param;
    return { code: inner.code === 'invalid_request' ? 'invalid_field' : inner.code, param };
  }
  if (typeof extra.details === 'string' && message === 'Failed to extract metadata') {
    const reason = BY_TEXT.get(extra.details);
    if (reason?.startsWith('lookup_')) return { code: reason };
  }
  const whole = BY_TEXT.get(message);
  if (whole) return { code: whole };
  for (const [shape, code] of BY_SHAPE) {
    const m = shape.exec(message);
    if (m) return { code, ...(m.groups?.param !== undefined && { param: m.groups.param }) };
  }
  // The wording of an unexpected failure is the route's (failsWith); its status says what it was.
  return { code: byStatus(status) };
}
