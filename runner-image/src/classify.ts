// Failure classification: what yt-dlp, ffmpeg and the storage upload said,
// turned into the spec's technical errors (Failed, errorType "error") and
// content warnings (Warning, errorType "warning").
//
// The message that leaves the runner is a fixed phrase per category, never
// the tool's text: stderr carries hostnames, IPs, paths and signed URLs, and
// the message reaches users through the API, webhooks and chat.
//
// yt-dlp's messages are read with the table POST /metadata and /is-short
// use too (lib/src/media-info/ytdlp-messages.ts); this module maps its
// reasons to job outcomes. The category names are lib's
// (lib/src/mediajob/error-categories.ts): the runner reports the category
// beside the phrase, and the operator's retry policy reads it.
import { boundedLines, ytDlpReason, type YtDlpReason } from '@mediajobs/lib/media-info/ytdlp-messages';
import {
  LIMIT_CATEGORIES, REQUEST_CATEGORIES, TECHNICAL_CATEGORIES, type ErrorCategory, type LimitCategory, type RequestCategory, type TechnicalCategory,
} from '@mediajobs/lib/mediajob/error-categories';
import type { ErrorType, RunnerReport } from '@mediajobs/lib/mediajob/types';

export {
  CONTENT_CATEGORIES, LIMIT_CATEGORIES, REQUEST_CATEGORIES, TECHNICAL_CATEGORIES,
  type ContentCategory, type ErrorCategory, type LimitCategory, type RequestCategory, type TechnicalCategory,
} from '@mediajobs/lib/mediajob/error-categories';

/** The fixed, sanitised phrase for each category. */
export const MESSAGES: Record<ErrorCategory, string> = {
  bot_detection: 'The platform requires a bot check (bot detection)',
  rate_limited: 'The platform rate-limited the download',
  connection_error: 'Connection error while downloading the media',
  download_failed: 'The media could not be downloaded',
  processing_failed: 'Processing the media failed',
  output_unverified: 'The produced file did not match the request and was not delivered',
  upload_failed: 'Uploading the file to the storage destination failed',
  storage_unreachable: 'The storage destination is unreachable or rejected the credentials',
  internal_error: 'Internal error in the download runner',
  private: 'Video is private',
  members_only: 'Video is available to channel members only',
  age_restricted: 'Video is age-restricted',
  geo_blocked: 'Video is not available in this region',
  channel_terminated: 'The channel or account behind this video has been terminated',
  copyright: 'Video is blocked by a copyright claim',
  upcoming: 'Video is not available yet (scheduled or upcoming)',
  unavailable: 'Video is unavailable or has been removed',
  drm_protected: 'Media is DRM-protected',
  duration_limit_exceeded: 'The media is longer than this API key allows',
  filesize_limit_exceeded: 'The file is larger than this API key allows',
  invalid_spec: 'The job\'s spec is invalid',
};

/** Failure reasons (spec "Job failure reasons") set beside the error. */
export const REASONS: Partial<Record<ErrorCategory, string>> = {
  storage_unreachable: 'storage_unreachable',
  duration_limit_exceeded: 'duration_limit_exceeded',
  filesize_limit_exceeded: 'filesize_limit_exceeded',
  invalid_spec: 'invalid_spec',
};

export interface Classification {
  category: ErrorCategory;
  outcome: Exclude<NonNullable<RunnerReport['outcome']>, 'completed'>;
  errorType?: ErrorType;
  error: string;
  reason?: string;
}

/** The report fields of a category; `audioOnlySource` turns DRM into Skipped (spec: audio-only DRM items are skipped). */
export function classification(category: ErrorCategory, opts: { audioOnlySource?: boolean } = {}): Classification {
  if (category === 'drm_protected' && opts.audioOnlySource) {
    return { category, outcome: 'skipped', error: MESSAGES[category], reason: 'drm_audio_only' };
  }
  const fails = [...TECHNICAL_CATEGORIES, ...LIMIT_CATEGORIES, ...REQUEST_CATEGORIES].includes(category as TechnicalCategory | LimitCategory | RequestCategory);
  return {
    category,
    outcome: fails ? 'failed' : 'warning',
    errorType: fails ? 'error' : 'warning',
    error: MESSAGES[category],
    ...(REASONS[category] ? { reason: REASONS[category] } : {}),
  };
}

/**
 * A key limit's failure: the fixed phrase and the numbers that make it
 * clear (the limit by its GET /usage name, what the job came to). Only
 * numbers are added, never a tool's words.
 */
export function overLimit(category: LimitCategory, figures: Readonly<Record<string, number>>): Classification {
  const c = classification(category);
  const text = Object.entries(figures).map(([name, n]) => `${name}: ${n}`).join(', ');
  return { ...c, error: `${c.error} (${text})` };
}

/**
 * A spec the CRD's rules refuse (lib/src/mediajob/spec-check.ts): the
 * problems as the message, each naming its field, never its value.
 */
export function invalidSpec(message: string): Classification {
  return { ...classification('invalid_spec'), error: message };
}

type Rule = readonly [ErrorCategory, RegExp];

/**
 * The job failure each of yt-dlp's reasons means. Timeouts and HTTP error
 * statuses are connection errors to a job (the spec has no finer technical
 * error), and a URL no extractor takes is content that is not there.
 */
export const CATEGORY_OF_REASON: Readonly<Record<YtDlpReason, ErrorCategory>> = {
  bot_detection: 'bot_detection',
  rate_limited: 'rate_limited',
  timeout: 'connection_error',
  http_error: 'connection_error',
  connection_error: 'connection_error',
  processing_failed: 'processing_failed',
  private: 'private',
  members_only: 'members_only',
  age_restricted: 'age_restricted',
  geo_blocked: 'geo_blocked',
  channel_terminated: 'channel_terminated',
  copyright: 'copyright',
  drm_protected: 'drm_protected',
  upcoming: 'upcoming',
  unsupported: 'unavailable',
  unavailable: 'unavailable',
};

/** The lines yt-dlp marks as the error; warnings can mention sign-in or formats without being the cause. */
function errorLines(stderr: string): string {
  const lines = stderr.split(/\r?\n/);
  const errors = lines.filter((l) => /^ERROR:/.test(l));
  // No ERROR: line (killed, crashed, or a Python traceback): look at the tail.
  return (errors.length ? errors : lines.slice(-20)).join('\n');
}

/**
 * Classify a failed yt-dlp run. `exitCode` null means killed by a signal;
 * 2 is yt-dlp's usage error (our options, not the media).
 */
export function classifyYtDlp(stderr: string, exitCode: number | null, opts: { audioOnlySource?: boolean } = {}): Classification {
  if (exitCode === 2 && !/^ERROR:/m.test(stderr)) return classification('internal_error');
  const reason = ytDlpReason(errorLines(stderr));
  return classification(reason === undefined ? 'download_failed' : CATEGORY_OF_REASON[reason], opts);
}

// ffmpeg as the live recorder reads the network itself; its HTTP layer
// (libavformat/http.c via av_strerror) says "Server returned 404 Not Found",
// "Server returned 5XX Server Error reply", "Server returned 403 Forbidden
// (access denied)"; sockets say "Connection refused", "Connection timed out";
// a name that does not resolve is logged as "Failed to resolve hostname" and
// then reported as "Input/output error".
const RECORDER_RULES: readonly Rule[] = [
  ['unavailable', /Server returned 404/],
  ['connection_error', /Server returned|Connection refused|Connection reset|Connection timed out|timed out|Failed to resolve hostname|Name or service not known|Network is unreachable|No route to host|Input\/output error|End of file/i],
];

/**
 * Classify a live recording that failed before it recorded anything: the
 * source's fault (gone, unreachable) when ffmpeg says so, else ours.
 */
export function classifyRecorder(stderr: string): Classification {
  const bounded = boundedLines(stderr);
  for (const [category, re] of RECORDER_RULES) {
    if (re.test(bounded)) return classification(category);
  }
  return classification('processing_failed');
}

/** Classify a failed ffmpeg/ffprobe step: always a technical processing failure, whatever it printed. */
export function classifyFfmpeg(_stderr: string, _exitCode: number | null): Classification {
  return classification('processing_failed');
}

// Signs that the destination could not be reached or refused the
// credentials, in the shapes Node sockets, the AWS SDK (name/Code,
// $metadata.httpStatusCode), Azure/GCS clients (statusCode/code) and our own
// StorageError use.
const UNREACHABLE_CODES = /^(?:ECONNREFUSED|ENOTFOUND|EAI_AGAIN|EHOSTUNREACH|ENETUNREACH|ETIMEDOUT|ECONNRESET|CERT_\w+|UNABLE_TO_VERIFY_LEAF_SIGNATURE|DEPTH_ZERO_SELF_SIGNED_CERT|unreachable|auth\w*|credentials\w*|forbidden|not_found)$/i;
const UNREACHABLE_NAMES = /InvalidAccessKeyId|SignatureDoesNotMatch|AccessDenied|NoSuchBucket|InvalidBucketName|AuthorizationFailure|AuthenticationFailed|ContainerNotFound|Unauthorized|Forbidden|CredentialsProviderError|ExpiredToken|InvalidToken|PermanentRedirect/i;

function errorField(err: unknown, ...path: string[]): unknown {
  let v: unknown = err;
  for (const k of path) {
    if (v === null || typeof v !== 'object') return undefined;
    v = (v as Record<string, unknown>)[k];
  }
  return v;
}

/** Whether a storage error means "cannot reach / not allowed" rather than "broke mid-transfer". */
export function isStorageUnreachable(err: unknown): boolean {
  for (let e: unknown = err, depth = 0; e && depth < 4; e = errorField(e, 'cause'), depth++) {
    const code = errorField(e, 'code') ?? errorField(e, 'Code');
    if (typeof code === 'string' && UNREACHABLE_CODES.test(code)) return true;
    const name = errorField(e, 'name');
    if (typeof name === 'string' && UNREACHABLE_NAMES.test(name)) return true;
    if (typeof code === 'string' && UNREACHABLE_NAMES.test(code)) return true;
    const status = errorField(e, '$metadata', 'httpStatusCode') ?? errorField(e, 'statusCode') ?? errorField(e, 'status');
    if (typeof status === 'number' && [401, 403, 404].includes(status)) return true;
  }
  return false;
}

/**
 * Classify a failed upload. A destination that cannot be reached, or that
 * refuses the credentials, is the spec's storage_unreachable (the job is
 * never redirected to another destination); a transfer that broke after the
 * destination accepted us is "upload failed"; a failure reading our own
 * output file is ours (processing).
 */
export function classifyUpload(err: unknown, opts: { localReadFailed?: boolean } = {}): Classification {
  if (opts.localReadFailed) return classification('processing_failed');
  // The storage layer's own error says which it was (lib/src/storage/types.ts).
  if (errorField(err, 'name') === 'StorageError') {
    const code = errorField(err, 'code');
    return classification(code === 'failed' || code === 'conflict' ? 'upload_failed' : 'storage_unreachable');
  }
  return classification(isStorageUnreachable(err) ? 'storage_unreachable' : 'upload_failed');
}
