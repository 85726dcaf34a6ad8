// What yt-dlp's error messages say went wrong: the one table of patterns
// for every part that runs yt-dlp. The runner turns a reason into a job
// outcome (runner-image/src/classify.ts: Failed for technical errors,
// Warning for content), POST /metadata and /is-short into an HTTP status
// (failures.ts); both read the same words the same way.
//
// The patterns match what yt-dlp actually prints. YouTube's playability
// texts are passed through as `ERROR: [youtube] <id>: <reason>`
// (extractor/youtube/_video.py joins reason and subreason, and adds a login
// hint when the reason says "sign in"), or as a WARNING with the same text
// when --ignore-no-formats-error turns the missing formats into a warning.
// Network failures come from yt-dlp's networking layer in both the
// urllib-era wording of the Debian build (`<urlopen error [Errno 111]
// Connection refused>`) and the newer TransportError wording. A page or
// manifest that cannot be fetched is reported with the extractor's errnote
// (extractor/common.py: "Unable to download webpage", "... JSON metadata",
// "... XML", YouTube's "... API page", "Failed to download m3u8
// information", "Failed to download MPD manifest"), media data with
// "unable to download video data" or the fragment downloader's words.

/**
 * The reasons, each one of the spec's two kinds: a technical error (our
 * side or the platform's is in trouble; retrying may help) or a content
 * warning (the platform's answer about this item).
 */
export const YTDLP_REASON_KIND = {
  bot_detection: 'technical',
  rate_limited: 'technical',
  /** A connection or read that timed out. */
  timeout: 'technical',
  /** An HTTP error status other than the content-is-gone ones (403, 5xx, a 404 for media data). */
  http_error: 'technical',
  connection_error: 'technical',
  /** yt-dlp's own post-processing or disk: only a download meets these. */
  processing_failed: 'technical',
  private: 'content',
  members_only: 'content',
  age_restricted: 'content',
  geo_blocked: 'content',
  channel_terminated: 'content',
  copyright: 'content',
  drm_protected: 'content',
  /** A scheduled stream or premiere that has not started. */
  upcoming: 'content',
  /** No extractor takes the URL. */
  unsupported: 'content',
  /** Removed, never there, or the page itself answers 404/410. */
  unavailable: 'content',
} as const satisfies Record<string, 'technical' | 'content'>;

export type YtDlpReason = keyof typeof YTDLP_REASON_KIND;

// Order matters: the first rule that matches wins.
// - Bot checks and rate limits first: YouTube's session rate-limit text
//   begins "Video unavailable. This content isn't available, try again
//   later." and would otherwise read as removed content.
// - Copyright before geo-blocking: "blocked it in your country on copyright
//   grounds" mentions a country.
// - The age gate before private and members-only: all three say "Sign in".
// - A 404/410 for the page or manifest means the content is not there;
//   any other HTTP status (403, 5xx, or a 404 for the media data while
//   downloading) is trouble, not a verdict.
// - Timeouts before the other network failures: "<urlopen error timed out>"
//   is both.
export const YTDLP_RULES: readonly (readonly [YtDlpReason, RegExp])[] = [
  ['bot_detection', /confirm you.?re not a bot|not a robot|captcha|IP is likely being blocked/i],
  ['rate_limited', /HTTP Error 429|Too Many Requests|rate[- ]?limit|try again later/i],
  ['drm_protected', /DRM[- ]protected|\bDRM\b/],
  ['age_restricted', /confirm your age|age[- ]restricted|age[- ]gated|inappropriate for some users|verify your age/i],
  ['members_only', /members[- ]only|join this channel|channel'?s members|Premium members/i],
  ['private', /private video|video is private|made private|account is private/i],
  ['channel_terminated', /account associated with this video has been terminated|(?:channel|account) (?:has been|was) terminated|closed their (?:\w+ )?account/i],
  ['copyright', /copyright/i],
  ['geo_blocked', /available in your (?:country|region)|geo[- ]?restrict|not available from your location|blocked (?:it )?in your country/i],
  ['upcoming', /Premieres in|live event will begin|will begin in|is upcoming|has not started yet|not currently live/i],
  ['unsupported', /Unsupported URL/i],
  ['unavailable', /(?:Unable|Failed) to download (?:webpage|API page|JSON metadata|m3u8 information|MPD manifest|XML)[^\n]*HTTP Error (?:404|410)|Video unavailable|video is unavailable|This video is not available|has been removed|no longer available|does not exist|requires payment|No video formats found|live event has ended/i],
  ['processing_failed', /Postprocessing:|ffmpeg exited|ffmpeg not found|ffprobe and ffmpeg not found|Conversion failed|No space left on device/i],
  ['timeout', /timed? ?out/i],
  ['http_error', /HTTP Error \d{3}/i],
  ['connection_error', /Connection refused|Connection reset|connection aborted|Remote end closed|Name or service not known|Temporary failure in name resolution|nodename nor servname|getaddrinfo|No address associated|Network is unreachable|No route to host|Host is unreachable|IncompleteRead|SSL|certificate verify failed|Unable to connect|Unable to download|urlopen error|TransportError|Tunnel connection failed|ProxyError|fragment \d+ not found|Giving up after \d+|Did not get any data blocks/i],
];

/**
 * Longest line a pattern sees. yt-dlp's and ffmpeg's messages are a few
 * hundred characters; a source can make one far longer (a URL or a page
 * title echoed in an error), and some rules scan to the end of the line
 * from every match (`[^\n]*`), which grows with the square of its length: a
 * 60 KB line took over a second in one rule. The words that decide come
 * first on a line, so its head is enough.
 */
export const MAX_MATCHED_LINE = 2048;

/** `text` with every line cut to MAX_MATCHED_LINE characters: what any rule over tool output is run on. */
export function boundedLines(text: string): string {
  if (text.length <= MAX_MATCHED_LINE) return text;
  return text.split('\n').map((l) => (l.length > MAX_MATCHED_LINE ? l.slice(0, MAX_MATCHED_LINE) : l)).join('\n');
}

/** The reason yt-dlp's messages in `text` name, or undefined when they name none. */
export function ytDlpReason(text: string): YtDlpReason | undefined {
  const bounded = boundedLines(text);
  for (const [reason, re] of YTDLP_RULES) if (re.test(bounded)) return reason;
  return undefined;
}
