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
import type { EgressAnswer } from '@mediajobs/lib/egress-proxy';
import type { DefenceKind, ErrorType, RunnerReport } from '@mediajobs/lib/mediajob/types';

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

// ---- Defences (issue 37) ---------------------------------------------------
// What a platform did to stop an attempt, read from what yt-dlp (or ffmpeg)
// said and what the job's egress proxy saw answered to plain-http requests.
// The category stays as above (bot_detection, rate_limited, connection_error,
// download_failed); the defence rides beside it in the report
// (status.defence) for the operator to answer: a new proxy session, a
// cookie file marked unhealthy, a backoff honouring Retry-After, a re-probe.
// The table, with yt-dlp's own words: runner-image/README.md "Defences".

/** What the defence table reads besides the category. */
export interface DefenceEvidence {
  /** The failed run's stderr (yt-dlp's, or ffmpeg's for a direct read). */
  stderr: string;
  /** The probe had succeeded: the failure came while fetching the media. */
  afterProbe: boolean;
  /** The egress proxy's error answers to forward requests (egressAnswers), oldest first. */
  answers: readonly EgressAnswer[];
  /** The URLs of the formats being fetched: an expired signature is read from them. */
  mediaUrls?: readonly string[];
  /** Now, ms since the epoch. */
  now: number;
}

export interface DefenceFinding {
  kind: DefenceKind;
  retryAfterSeconds?: number;
}

/** Only failures on the platform's side can be defences; content verdicts, limits, storage and our own faults are not. */
const DEFENCE_CATEGORIES: ReadonlySet<ErrorCategory> = new Set(['bot_detection', 'rate_limited', 'connection_error', 'download_failed']);

// yt-dlp's words (yt-dlp 2023.03.04 to 2026.08.19):
// - YouTube's playability reason "Sign in to confirm you're not a bot" (a
//   curly apostrophe), passed through with the login hint; "Sign in to
//   confirm your age" is content (age_restricted, decided before this).
// - "YouTube is requiring a captcha challenge before playback"
//   (_video.py, playerCaptchaViewModel); the generic extractor's "Got HTTP
//   Error 403 caused by Cloudflare anti-bot challenge" (cf-mitigated:
//   challenge, or the "Attention Required! | Cloudflare" page).
// - "This content isn't available, try again later. The current session
//   has been rate-limited by YouTube for up to an hour"; "HTTP Error 429:
//   Too Many Requests" anywhere.
// - common.py raise_login_required: "This video is only available for
//   registered users" and extractors' "login required" / "requires login",
//   with the hint "Use --cookies-from-browser or --cookies for the
//   authentication".
// Our own refusal is "HTTP Error 403: Refused by egress policy": never the platform's.
const CAPTCHA = /captcha|anti-bot challenge|Attention Required! \| Cloudflare/i;
const BOT_CHECK = /confirm you.?re not a bot|not a robot|IP is likely being blocked|unusual traffic/i;
const RATE_LIMITED = /HTTP Error 429|Too Many Requests|rate[- ]?limit|try again later/i;
const SIGN_IN = /only available for registered users|(?:log|sign)[- ]?in (?:is )?required|requires? (?:a )?(?:log[- ]?in|sign[- ]?in|account|authentication)|(?:need|have) to (?:log|sign) in|--cookies for the authentication|cookies (?:are|have) (?:no longer valid|expired)/i;
const FORBIDDEN = /HTTP Error 403(?!: Refused by egress policy)|Server returned 403/i;

/**
 * The defence a failure was, if it was one. Order: a captcha before a bot
 * check (YouTube's captcha text follows a bot-check reason), both before a
 * rate limit, a sign-in demand before a plain 403. A 403 while fetching the
 * media whose URL's signature has expired (expire=, Expires=, X-Amz-Date +
 * X-Amz-Expires in the past) is an expired URL, answered by a re-probe; any
 * other 403 (the page, or media whose URL is still valid) is a ban of the
 * exit: a new proxy session.
 */
export function defenceOf(c: Pick<Classification, 'category'>, e: DefenceEvidence): DefenceFinding | undefined {
  if (!DEFENCE_CATEGORIES.has(c.category)) return undefined;
  const text = errorLines(boundedLines(e.stderr));
  const platform403 = e.answers.filter((a) => a.status === 403);
  if (CAPTCHA.test(text) || e.answers.some((a) => a.challenge)) return { kind: 'captcha' };
  if (c.category === 'bot_detection' || BOT_CHECK.test(text)) return { kind: 'bot_check' };
  const limited = [...e.answers].reverse().find((a) => a.status === 429);
  if (c.category === 'rate_limited' || RATE_LIMITED.test(text) || limited) {
    const after = limited?.retryAfter !== undefined ? retryAfterSeconds(limited.retryAfter, e.now) : undefined;
    return { kind: 'rate_limited', ...(after !== undefined ? { retryAfterSeconds: after } : {}) };
  }
  if (SIGN_IN.test(text)) return { kind: 'sign_in' };
  if (FORBIDDEN.test(text) || platform403.length) {
    const urls = [...platform403.map((a) => a.url), ...(e.mediaUrls ?? [])];
    return { kind: e.afterProbe && urls.some((u) => signatureExpired(u, e.now)) ? 'expired_url' : 'forbidden' };
  }
  return undefined;
}

/** The longest wait a Retry-After is taken at (a day): a platform's word, not a reason to park a job for ever. */
const MAX_RETRY_AFTER_SECONDS = 86_400;

/** Retry-After (RFC 9110 10.2.3): delta-seconds or an HTTP date; undefined when it is neither. */
export function retryAfterSeconds(value: string, now: number): number | undefined {
  const v = value.trim();
  const seconds = /^\d+$/.test(v) ? Number(v) : Number.isNaN(Date.parse(v)) ? undefined : Math.ceil((Date.parse(v) - now) / 1000);
  return seconds === undefined ? undefined : Math.min(MAX_RETRY_AFTER_SECONDS, Math.max(0, seconds));
}

/**
 * Whether a signed URL says it has expired: `expire`/`expires`/`Expires`
 * (epoch seconds: YouTube's googlevideo, CloudFront, most CDNs) or
 * `X-Amz-Date` + `X-Amz-Expires` (S3 presigned) in the past.
 */
export function signatureExpired(url: string, now: number): boolean {
  if (!URL.canParse(url)) return false;
  const q = new URL(url).searchParams;
  // YouTube also puts it in the path: /expire/1700000000/.
  const epoch = q.get('expire') ?? q.get('expires') ?? q.get('Expires') ?? /\/expire\/(\d+)\//.exec(new URL(url).pathname)?.[1] ?? null;
  if (epoch !== null && /^\d{9,11}$/.test(epoch)) return Number(epoch) * 1000 < now;
  const amzDate = /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/.exec(q.get('X-Amz-Date') ?? '');
  const amzExpires = Number(q.get('X-Amz-Expires'));
  if (amzDate && Number.isFinite(amzExpires)) {
    const [, y, mo, d, h, mi, s] = amzDate.map(Number) as number[];
    return Date.UTC(y!, mo! - 1, d!, h!, mi!, s!) + amzExpires * 1000 < now;
  }
  return false;
}
