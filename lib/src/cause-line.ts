// The one cleaner of a failure's cause (issue 38): the line a person reads
// of what yt-dlp, ffmpeg or a library said, in the operator's transition
// log line, a job's `error_detail` (GET /jobs/{id}, job_failed and
// job_warning) and the runner's status.errorDetail. Tool output carries
// signed URLs, proxy credentials, local paths and tokens; what leaves here
// carries none of them, and is at most MAX_ERROR_DETAIL_LENGTH characters.
// Nor does it carry infrastructure detail (the spec's "no infrastructure
// detail"): a proxy's or a cluster's names and addresses, another host's URL.
// Only the job's own source, which the client gave, is named.
import { BlockList, isIPv6 } from 'node:net';
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

/** A file path (absolute, relative with ./ or ../, or a file: URL) where a word starts: never a URL's path, which follows its host. */
const PATH = /(^|[\s'"(=,[])(?:file:(?:\/{1,3}|(?=[^\s'"<>]))|~?\/|\.\.?\/)(?:[^\s'"()<>,;/]+\/)*[^\s'"()<>,;:]*/g;

/**
 * A URL of any scheme (wherever redactUrls would see one: the leftmost match
 * takes the whole scheme), or a scheme-relative one (`//host/…`) where a word
 * starts. It runs to a space or quote; closing punctuation is split off after.
 */
const ANY_URL = /[a-z][a-z0-9+.-]*:\/\/(?=[^\s/'"<>])[^\s'"<>]*|(?<![\w+.:/-])\/\/(?=[^\s/'"<>])[^\s'"<>]*/gi;

/** An IPv6 address (maybe bracketed, with a zone or a port) or what looks like one; isIPv6 decides. */
const IPV6 = /(?<![\w:.%[])(\[?)((?:[0-9a-f]{0,4}:){2,}[0-9a-f.]*(?:%[\w.-]+)?)(\](?::\d{1,5})?)?(?![\w:])/gi;

/** An IPv4 address, maybe with a port. */
const IPV4 = /(?<![\w.])(\d{1,3}(?:\.\d{1,3}){3})(?::\d{1,5})?(?!\w|\.\d)/g;

/** Names only a cluster or a cloud's own network resolves (Kubernetes services, GCE's .internal), and localhost. */
const INTERNAL_NAME = /(?<![\w.-])((?:[a-z0-9](?:[a-z0-9-]*[a-z0-9])?\.)+(?:svc|cluster\.local|internal)|localhost)(?::\d{1,5})?(?![\w-]|\.[\w-])/gi;

/** Addresses no client needs: private, loopback, link-local, shared (100.64/10, some clusters' pods), unspecified; IPv4-mapped IPv6 ones too. */
const INTERNAL_ADDRESSES = new BlockList();
for (const [net, prefix] of [['10.0.0.0', 8], ['172.16.0.0', 12], ['192.168.0.0', 16], ['127.0.0.0', 8], ['169.254.0.0', 16], ['100.64.0.0', 10], ['0.0.0.0', 8]] as const) {
  INTERNAL_ADDRESSES.addSubnet(net, prefix, 'ipv4');
}
for (const [net, prefix] of [['::1', 128], ['::', 128], ['fe80::', 10], ['fc00::', 7]] as const) INTERNAL_ADDRESSES.addSubnet(net, prefix, 'ipv6');

const URL_MARK = '<url>';
const HOST_MARK = '<host>';

/** ffmpeg's `[demuxer @ 0x55d0c1e2a9c0]` context: the address says nothing to a reader. */
const CONTEXT_ADDRESS = / @ 0x[0-9a-f]+\]/gi;

/**
 * The cause's first relevant line, fit for a person: a tool's `ERROR:` line
 * when it printed one, else its first line that is not banner or progress
 * (else its first line at all); a URL of the job's `source` host without
 * credentials or queries (redactUrls), any other URL as `<url>`, private,
 * loopback and link-local addresses and cluster-internal names as `<host>`
 * (the source's own host stays, even when it is one: test media is served
 * on 127.0.0.1), file paths as `<path>`, the value of any secret-named
 * `key=value` or `key: value` censored, at most MAX_ERROR_DETAIL_LENGTH
 * characters. Without a source (or with one that is no URL) every URL goes.
 * Undefined when there is nothing to say.
 */
export function cleanCause(text: string | null | undefined, source?: string): string | undefined {
  const lines = (text ?? '').replace(CONTROLS, (c) => (c === '\r' ? '\n' : '')).split('\n').map((l) => l.trim()).filter(Boolean);
  const line = lines.find((l) => /^ERROR:/.test(l)) ?? lines.find((l) => !NOISE.some((n) => n.test(l))) ?? lines[0];
  if (!line) return undefined;
  const own = hostOfUrl(source);
  // URLs first: a path inside one is the URL's, and each is cleaned on its own (cleanUrl).
  const clean = line.replace(ANY_URL, (url) => cleanUrl(url, own)).replace(PATH, '$1<path>')
    .replace(IPV6, (all, open: string, addr: string, close: string | undefined) => maskAddress(all, open, addr, close, own))
    .replace(IPV4, (all, addr: string) => (addr !== own && INTERNAL_ADDRESSES.check(addr, 'ipv4') ? HOST_MARK : all))
    .replace(INTERNAL_NAME, (all, name: string) => (name.toLowerCase() !== own ? HOST_MARK : all))
    .replace(CONTEXT_ADDRESS, ']')
    .replace(COOKIE_HEADER, `$1${CENSOR}`)
    .replace(SECRET_PAIR, `$1$2${CENSOR}`);
  return clean.length > MAX_ERROR_DETAIL_LENGTH ? `${clean.slice(0, MAX_ERROR_DETAIL_LENGTH - 1)}…` : clean;
}

/** A URL's host as compared (lower case, no brackets, no trailing dot); undefined for what is no URL. */
function hostOfUrl(url: string | undefined): string | undefined {
  if (!url) return undefined;
  try {
    return bareHost(new URL(url).hostname);
  } catch {
    return undefined;
  }
}

function bareHost(host: string): string {
  return host.toLowerCase().replace(/^\[(.*)\]$/, '$1').replace(/\.$/, '');
}

/**
 * One URL of a cause: the source's own (credentials and query gone) or
 * `<url>`; a file: URL is left to PATH. Closing punctuation the URL ran into
 * stays text (a `)` or `]` the URL opened stays the URL's).
 */
function cleanUrl(token: string, own: string | undefined): string {
  if (/^file:/i.test(token)) return token;
  let url = token;
  while (/[.,;:!?)\]}]$/.test(url)) {
    const last = url.at(-1)!;
    const opener = last === ')' ? '(' : last === ']' ? '[' : undefined;
    if (opener && url.split(opener).length > url.split(last).length - 1) break;
    url = url.slice(0, -1);
  }
  const after = token.slice(url.length);
  const authority = url.replace(/^[a-z0-9+.-]*:?\/\//i, '').split(/[/?#\\]/)[0]!;
  const hostPort = authority.slice(authority.lastIndexOf('@') + 1);
  const host = bareHost(hostPort.startsWith('[') ? hostPort.slice(0, hostPort.indexOf(']') + 1) : hostPort.replace(/:\d*$/, ''));
  if (own === undefined || host !== own) return URL_MARK + after;
  const kept = redactUrls(url);
  // A scheme redactUrls does not know keeps its credentials or query there: then not even the source's URL is said.
  const rest = kept.replace(/^[a-z0-9+.-]*:?\/\//i, '');
  return (rest.split(/[/?#]/)[0]!.includes('@') || /[?#](?!…$)/.test(rest) ? URL_MARK : kept) + after;
}

/** An IPv6 candidate as `<host>` when it is an internal address other than the source's host (a trailing `:` is text, not the address's). */
function maskAddress(all: string, open: string, addr: string, close: string | undefined, own: string | undefined): string {
  let a = addr;
  let tail = '';
  while (!isIPv6(a.replace(/%.*$/, '')) && a.endsWith(':')) {
    a = a.slice(0, -1);
    tail += ':';
  }
  const bare = a.replace(/%.*$/, '');
  if (!isIPv6(bare) || bare.toLowerCase() === own || !INTERNAL_ADDRESSES.check(bare, 'ipv6')) return all;
  if (open && close) return HOST_MARK;
  return `${open}${HOST_MARK}${tail}${close ?? ''}`;
}
