// The one cleaner of a failure's cause (issue 38): the line a person reads
// of what yt-dlp, ffmpeg or a library said, in the operator's transition
// log line, a job's `error_detail` (GET /jobs/{id}, job_failed and
// job_warning) and the runner's status.errorDetail. Tool output carries
// signed URLs, proxy credentials, local paths and tokens; what leaves here
// carries none of them, and is at most MAX_ERROR_DETAIL_LENGTH characters.
import { SECRET_FIELDS, redactUrls } from './logger.js';
import { MAX_ERROR_DETAIL_LENGTH } from './mediajob/types.js';

const CENSOR = '[redacted]';

/**
 * Secret names a tool's text uses beside the logger's field names: OAuth's
 * `client_secret`, and `passwd`. A name may carry a prefix (`access_token`,
 * `refresh_token`, `X-Auth-Token`), which `\b` alone would not let match.
 */
const SECRET_NAMES = [...SECRET_FIELDS.filter((f) => f !== 'storage' && f !== 'credentials' && f !== 'cookie'), 'secret', 'passwd'];

/** `name=value` and `name: value` of a secret-named field in a text (`storage` and `credentials` name objects, not values). */
const SECRET_PAIR = new RegExp(
  `\\b((?:[a-z0-9]+[-_])*(?:${SECRET_NAMES.map((f) => f.replace(/[-_]/g, '[-_]?')).join('|')}))`
  + `(["']?\\s*[=:]\\s*)((?:(?:Bearer|Basic|Digest|Token)\\s+)?(?:"[^"]*"|'[^']*'|[^\\s&;,]+))`,
  'gi',
);

/** A Cookie or Set-Cookie header: every pair after it is a secret (the pairs run on past `;`), to the end of the line. */
const COOKIE_HEADER = /\b((?:set-)?cookie\s*[=:]\s*).*/gi;

// Terminal colours (yt-dlp colours its ERROR: on a terminal) and other controls.
const CONTROLS = /\u001b\[[0-9;]*[A-Za-z]|[\u0000-\u0008\u000b-\u001f\u007f]/g;

/**
 * Lines that never are the cause: ffmpeg's banner and stream dump, yt-dlp's
 * debug and progress lines. A tool's cause comes after them.
 */
const NOISE = [
  /^(ffmpeg|ffprobe) version /i, /^built with /, /^configuration: /, /^lib[a-z]+\s+\d/, /^\[debug\] /, /^\[download\]\s/,
  /^(Input|Output) #\d/, /^Stream #\d/, /^(Duration|Metadata|Stream mapping):/, /^[A-Za-z_]+\s+: /, /^Press \[q\]/, /^size=.*time=/,
];

/** A file path (absolute, or a file: URL) where a word starts: never a URL's path, which follows its host. */
const PATH = /(^|[\s'"(=,[])(?:file:\/\/\/?|~?\/)(?:[^\s'"()<>,;/]+\/)*[^\s'"()<>,;:]*/g;

/** ffmpeg's `[demuxer @ 0x55d0c1e2a9c0]` context: the address says nothing to a reader. */
const CONTEXT_ADDRESS = / @ 0x[0-9a-f]+\]/gi;

/**
 * The cause's first relevant line, fit for a person: a tool's `ERROR:` line
 * when it printed one, else its first line that is not banner or progress
 * (else its first line at all); URLs without credentials or queries
 * (redactUrls), file paths as `<path>`, the value of any secret-named
 * `key=value` or `key: value` censored, at most MAX_ERROR_DETAIL_LENGTH
 * characters. Undefined when there is nothing to say.
 */
export function cleanCause(text: string | null | undefined): string | undefined {
  const lines = (text ?? '').replace(CONTROLS, (c) => (c === '\r' ? '\n' : '')).split('\n').map((l) => l.trim()).filter(Boolean);
  const line = lines.find((l) => /^ERROR:/.test(l)) ?? lines.find((l) => !NOISE.some((n) => n.test(l))) ?? lines[0];
  if (!line) return undefined;
  const clean = redactUrls(line)
    .replace(PATH, '$1<path>')
    .replace(CONTEXT_ADDRESS, ']')
    .replace(COOKIE_HEADER, `$1${CENSOR}`)
    .replace(SECRET_PAIR, `$1$2${CENSOR}`);
  return clean.length > MAX_ERROR_DETAIL_LENGTH ? `${clean.slice(0, MAX_ERROR_DETAIL_LENGTH - 1)}…` : clean;
}
