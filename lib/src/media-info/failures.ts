// Why a lookup failed, what the client is told, and whether a second,
// full extraction with a new proxy session can help.
//
// The message a client sees is a fixed phrase per category, never yt-dlp's
// text: stderr carries proxy hosts, signed media URLs and local paths.
// Reading yt-dlp's messages is ytdlp-messages.ts's table, the one the runner
// classifies job failures with too; this module only maps its reasons to
// lookup failures (content verdicts against retryable trouble).
import { ytDlpReason, type YtDlpReason } from './ytdlp-messages.js';

export type FailureKind =
  /** The platform's answer about this content: retrying cannot change it. */
  | 'private'
  | 'content'
  /** Our side or the platform's is in trouble: the client should retry. */
  | 'temporary'
  /** Every extraction slot of this replica is busy. */
  | 'busy'
  /** The caller's API key holds its share of the slots (MEDIA_INFO_MAX_PER_KEY). */
  | 'key_busy'
  /** The extractor program could not be started: a deployment error. */
  | 'internal';

export const FAILURES = {
  private: { kind: 'private', message: 'Video is private' },
  members_only: { kind: 'content', message: 'Video is available to channel members only' },
  age_restricted: { kind: 'content', message: 'Video is age-restricted' },
  geo_blocked: { kind: 'content', message: 'Video is not available in this region' },
  copyright: { kind: 'content', message: 'Video is blocked by a copyright claim' },
  channel_terminated: { kind: 'content', message: 'The channel or account behind this video has been terminated' },
  drm_protected: { kind: 'content', message: 'Video is DRM protected' },
  unavailable: { kind: 'content', message: 'Video is unavailable or has been removed' },
  unsupported: { kind: 'content', message: 'No media found at this URL' },
  playlist: { kind: 'content', message: 'The URL is a playlist or channel, not a single media item' },
  bot_detection: { kind: 'temporary', message: 'Temporary platform error (bot check), please retry' },
  rate_limited: { kind: 'temporary', message: 'Temporary platform error (rate limited), please retry' },
  upstream_error: { kind: 'temporary', message: 'Temporary platform error, please retry' },
  connection_error: { kind: 'temporary', message: 'Temporary network error, please retry' },
  timeout: { kind: 'temporary', message: 'Temporary timeout error, please retry' },
  no_dimensions: { kind: 'temporary', message: 'Temporary classification error (video dimensions unavailable), please retry' },
  extractor_error: { kind: 'temporary', message: 'Temporary extraction error, please retry' },
  busy: { kind: 'busy', message: 'Temporary overload error (too many lookups in progress), please retry' },
  key_busy: { kind: 'key_busy', message: 'Too many lookups in progress for this API key, please retry' },
  // The gateway's usual 500 wording; the cause goes to the log.
  extractor_missing: { kind: 'internal', message: 'Internal server error' },
} as const satisfies Record<string, { kind: FailureKind; message: string }>;

export type FailureCategory = keyof typeof FAILURES;

/**
 * Whether the full extraction (fresh process, new proxy session, no
 * shortcuts, longer bound) may succeed where the lightweight one failed.
 * Geo-blocking depends on the exit address, which a new proxy session
 * changes; the other content verdicts are the platform's final word.
 */
export function worthFallback(category: FailureCategory): boolean {
  return FAILURES[category].kind === 'temporary' || category === 'geo_blocked';
}

/**
 * HTTP status of a failed lookup, for both endpoints:
 * - 403 private: the video exists but is not visible to the service;
 *   the request itself was fine, so not a 400, and retrying cannot help.
 * - 422 other content verdicts (removed, members-only, age-restricted,
 *   geo-blocked, DRM, no media, a playlist): a well-formed request about
 *   content that cannot be looked up.
 * - 502 temporary trouble upstream (timeouts, network, platform errors,
 *   unknown dimensions): the spec's "please retry" answer.
 * - 503 this replica's extraction slots are all busy.
 * - 429 the caller's key holds its share of them (one tenant cannot take every slot).
 * - 500 the extractor program is missing: our deployment, not the client.
 */
export function failureStatus(category: FailureCategory): number {
  switch (FAILURES[category].kind) {
    case 'private':
      return 403;
    case 'content':
      return 422;
    case 'temporary':
      return 502;
    case 'busy':
      return 503;
    case 'key_busy':
      return 429;
    case 'internal':
      return 500;
  }
}

/**
 * The lookup failure each of yt-dlp's reasons means. A scheduled stream is
 * not a failure of a lookup (both endpoints answer it as live), and a
 * lookup downloads nothing, so post-processing trouble can only be an
 * extraction error: neither names a category here.
 */
const FROM_REASON: Readonly<Record<YtDlpReason, FailureCategory | undefined>> = {
  bot_detection: 'bot_detection',
  rate_limited: 'rate_limited',
  timeout: 'timeout',
  http_error: 'upstream_error',
  connection_error: 'connection_error',
  processing_failed: undefined,
  private: 'private',
  members_only: 'members_only',
  age_restricted: 'age_restricted',
  geo_blocked: 'geo_blocked',
  channel_terminated: 'channel_terminated',
  copyright: 'copyright',
  drm_protected: 'drm_protected',
  upcoming: undefined,
  unsupported: 'unsupported',
  unavailable: 'unavailable',
};

/** The lookup failure a yt-dlp reason means, if any. */
export function failureOfReason(reason: YtDlpReason): FailureCategory | undefined {
  return FROM_REASON[reason];
}

function linesStarting(stderr: string, tag: string): string[] {
  return stderr.split(/\r?\n/).filter((l) => l.startsWith(tag));
}

/**
 * The category yt-dlp's messages point at, or undefined when they name
 * none. ERROR lines decide when there are any; otherwise WARNING lines,
 * which is where --ignore-no-formats-error puts the platform's reason
 * (private, unavailable, ...) for a result without formats.
 */
export function reasonFromMessages(stderr: string): FailureCategory | undefined {
  const errors = linesStarting(stderr, 'ERROR:');
  const text = (errors.length ? errors : linesStarting(stderr, 'WARNING:')).join('\n');
  if (!text) return undefined;
  const reason = ytDlpReason(text);
  return reason === undefined ? undefined : failureOfReason(reason);
}

/** A failed run (non-zero exit, no JSON): its category, defaulting to a temporary extraction error. */
export function classifyFailedRun(stderr: string): FailureCategory {
  return reasonFromMessages(stderr) ?? 'extractor_error';
}

/**
 * One line for the gateway's log: yt-dlp's first ERROR line (else its last
 * WARNING), with URLs replaced so signed media URLs and proxy credentials
 * never reach the log, cut to 300 characters.
 */
export function logDetail(stderr: string): string | undefined {
  const line = linesStarting(stderr, 'ERROR:')[0] ?? linesStarting(stderr, 'WARNING:').at(-1);
  if (!line) return undefined;
  const clean = line.replace(/\b[a-z][a-z0-9+.-]*:\/\/\S+/gi, '<url>');
  return clean.length > 300 ? `${clean.slice(0, 297)}...` : clean;
}
