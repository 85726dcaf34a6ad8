// Which URLs the info endpoints accept, before any process is started.
//
// /is-short takes single-video URLs of the supported video platform only
// (YouTube). The forms are those yt-dlp's YoutubeIE._VALID_URL matches
// (yt_dlp/extractor/youtube/_video.py upstream, extractor/youtube.py in the
// Debian 2023.03.04 build), restricted to the platform's own hosts:
//
//   form        | example                                              | yt-dlp pattern part
//   watch       | https://www.youtube.com/watch?v=ID (also /watch_popup, /watch.php, /?v=, #!v=, #/watch?v=) | (watch|movie)(_popup)?(\.php)?/? then ?|#|#! then v=
//   short-link  | https://youtu.be/ID                                  | youtu\.be/
//   shorts      | https://www.youtube.com/shorts/ID                    | shorts/
//   embed       | https://www.youtube.com/embed/ID, youtube-nocookie.com/embed/ID, /e/ID | embed/ | e/
//   v           | https://www.youtube.com/v/ID, youtube.googleapis.com/v/ID | v/
//   live        | https://www.youtube.com/live/ID                      | live/
//
// Hosts: youtube.com and any one-label subdomain (www, m, music, ...),
// youtubekids.com, youtube-nocookie.com, youtu.be, youtube.googleapis.com;
// the same `(?:\w+\.)?youtube(?:-nocookie|kids)?\.com` yt-dlp matches.
//
// Deliberately not accepted, though yt-dlp's pattern has them: third-party
// front-ends and mirrors (Invidious instances, hooktube, vid.plus, ...) are
// other sites, and a bare 11-character id is not a URL. Channel, playlist,
// clip and search pages are not single videos. Each such URL is a 400 with a
// message saying which forms are accepted.
//
// Every accepted form is reduced to the canonical watch URL, so yt-dlp never
// sees playlist (`list=`) or other page parameters, and one video has one
// key in the URL map test seam whatever form the client sent.

import { z } from 'zod';
import { DEFAULT_OUTBOUND_POLICY, urlFieldError, type OutboundPolicy } from '../outbound.js';
import { parseRequestBody } from '../request-body.js';

export const VIDEO_ID = /^[0-9A-Za-z_-]{11}$/;

export type VideoUrlForm = 'watch' | 'short-link' | 'shorts' | 'embed' | 'v' | 'live';

export interface PlatformVideo {
  videoId: string;
  form: VideoUrlForm;
  /** https://www.youtube.com/watch?v=<id> */
  canonicalUrl: string;
}

export type PlatformUrlResult =
  | { ok: true; video: PlatformVideo }
  | { ok: false; reason: 'not-http-url' | 'other-platform' | 'not-a-video' };

export const PLATFORM_NAME = 'YouTube';

const PLATFORM_HOST = /^(?:[a-z0-9_]+\.)?youtube(?:-nocookie|kids)?\.com$/;
const SHORT_LINK_HOST = 'youtu.be';
const API_HOST = 'youtube.googleapis.com';

/** Path prefixes that put the id in the next path segment (`/<prefix>/<id>`). */
const PATH_FORMS = new Map<string, VideoUrlForm>([['shorts', 'shorts'], ['embed', 'embed'], ['e', 'embed'], ['v', 'v'], ['live', 'live']]);

/** Paths that carry the id in a `v` parameter; yt-dlp: `(?:(?:watch|movie)(?:_popup)?(?:\.php)?/?)?`. */
const WATCH_PATH = /^\/(?:(?:watch|movie)(?:_popup)?(?:\.php)?\/?)?$/;

/**
 * Path segments after /embed/ etc. that are exactly 11 id characters long but
 * name a player feature, not a video (yt-dlp's `(?!videoseries|live_stream)`).
 */
const NOT_IDS = new Set(['videoseries', 'live_stream']);

export function canonicalWatchUrl(videoId: string): string {
  return `https://www.youtube.com/watch?v=${videoId}`;
}

/** Parse an http(s) URL; undefined for anything else (other schemes, yt-dlp pseudo-URLs like `ytsearch:`). */
export function parseHttpUrl(input: string): URL | undefined {
  let u: URL;
  try {
    u = new URL(input);
  } catch {
    return undefined;
  }
  return u.protocol === 'http:' || u.protocol === 'https:' ? u : undefined;
}

/**
 * The value of `v` in a parameter string. Old links separate parameters with
 * `;` and HTML-escaped ones carry `&amp;`; yt-dlp's `(?:.*?[&;])??v=` accepts
 * both, and so does splitting on either.
 */
function vParam(params: string): string | undefined {
  const part = params.split(/[&;]/).find((p) => p.startsWith('v='));
  if (part === undefined) return undefined;
  try {
    return decodeURIComponent(part.slice(2));
  } catch {
    return undefined; // malformed %-escape: not an id
  }
}

/** An id at the start of a path segment: exactly 11 id characters, then the end or a separator like `&` in old `/v/ID&hl=en`. */
function idSegment(segment: string | undefined): string | undefined {
  if (!segment) return undefined;
  const m = /^([0-9A-Za-z_-]{11})(?:[^0-9A-Za-z_-].*)?$/.exec(segment);
  const id = m?.[1];
  return id && !NOT_IDS.has(id) ? id : undefined;
}

function video(videoId: string, form: VideoUrlForm): PlatformUrlResult {
  return { ok: true, video: { videoId, form, canonicalUrl: canonicalWatchUrl(videoId) } };
}

function onPlatformHost(host: string, path: string, search: string, hash: string): PlatformUrlResult {
  // Anchor redirects: https://www.youtube.com/#/watch?v=ID is the page /watch?v=ID.
  if (hash.startsWith('#/')) {
    const inner = new URL(hash.slice(1), `https://${host}`);
    return onPlatformHost(host, inner.pathname, inner.search, inner.hash);
  }
  if (WATCH_PATH.test(path)) {
    // The id is in the query (?v=) or, on old pages, the fragment (#!v= or #v=).
    const id = vParam(search.slice(1)) ?? vParam(hash.replace(/^#!?/, ''));
    return id !== undefined && VIDEO_ID.test(id) ? video(id, 'watch') : { ok: false, reason: 'not-a-video' };
  }
  const [, prefix, segment] = path.split('/');
  const form = prefix !== undefined ? PATH_FORMS.get(prefix) : undefined;
  const id = form ? idSegment(segment) : undefined;
  return form && id ? video(id, form) : { ok: false, reason: 'not-a-video' };
}

/** Classify a URL as a single video of the supported platform (see the table above). */
export function parsePlatformVideoUrl(input: string): PlatformUrlResult {
  const u = parseHttpUrl(input);
  if (!u) return { ok: false, reason: 'not-http-url' };
  // WHATWG URL lowercases the host; paths and ids stay case-sensitive, as in yt-dlp.
  const host = u.hostname;
  if (host === SHORT_LINK_HOST) {
    const id = idSegment(u.pathname.split('/')[1]);
    return id ? video(id, 'short-link') : { ok: false, reason: 'not-a-video' };
  }
  if (host === API_HOST) {
    const [, prefix, segment] = u.pathname.split('/');
    const id = prefix === 'v' ? idSegment(segment) : undefined;
    return id ? video(id, 'v') : { ok: false, reason: 'not-a-video' };
  }
  if (PLATFORM_HOST.test(host)) return onPlatformHost(host, u.pathname, u.search, u.hash);
  return { ok: false, reason: 'other-platform' };
}

/** The accepted forms, for error messages. */
export const ACCEPTED_FORMS = 'watch?v=<id>, youtu.be/<id>, /shorts/<id>, /embed/<id>, /live/<id>';

export const URL_MAX_LENGTH = 2048;

export type UrlFieldResult = { ok: true; url: string } | { ok: false; error: string };

/** The body of POST /metadata and POST /is-short (the OpenAPI document's UrlRequest). */
export const urlRequestSchema = z.object({
  url: z.string({ error: 'must be a string' }).trim()
    .min(1, { error: "Missing required field 'url'" })
    .max(URL_MAX_LENGTH, { error: `must be at most ${URL_MAX_LENGTH} characters` }),
});

/** The `url` field of an info request body, trimmed; messages in the style of POST /jobs (lib/src/request-body.ts). */
export function readUrlField(body: unknown): UrlFieldResult {
  const r = parseRequestBody(urlRequestSchema, body);
  return r.ok ? { ok: true, url: r.data.url } : { ok: false, error: r.error };
}

/** Messages of the 400s /is-short answers for URLs it does not take. */
export function platformUrlError(reason: Exclude<PlatformUrlResult, { ok: true }>['reason']): string {
  switch (reason) {
    case 'not-http-url':
      return "Invalid field 'url': must be an http or https URL";
    case 'other-platform':
      return `Unsupported URL: only ${PLATFORM_NAME} video URLs are accepted (${ACCEPTED_FORMS})`;
    case 'not-a-video':
      return `Unsupported ${PLATFORM_NAME} URL: not a single video; accepted forms: ${ACCEPTED_FORMS}`;
  }
}

export type MetadataUrlResult = { ok: true; url: string } | { ok: false; error: string };

/**
 * The URL /metadata hands to yt-dlp: any http(s) URL (yt-dlp's extractors,
 * then its generic one, decide whether there is media) whose host the
 * outbound-address policy lets the service contact (lib/src/outbound.ts;
 * literal hosts only: yt-dlp resolves names and follows redirects itself,
 * see the README). A video URL of the supported platform is reduced to its
 * canonical watch URL like on /is-short, so a `list=` parameter never turns
 * the lookup into a playlist.
 */
export function metadataUrl(input: string, policy: OutboundPolicy = DEFAULT_OUTBOUND_POLICY): MetadataUrlResult {
  const u = parseHttpUrl(input);
  if (!u) return { ok: false, error: "Invalid field 'url': must be an http or https URL" };
  const refused = urlFieldError(policy, 'url', u);
  if (refused) return { ok: false, error: refused };
  const platform = parsePlatformVideoUrl(input);
  // The URL as parsed, which is what the policy judged: the parser drops the
  // leading and trailing control characters and spaces the raw text may carry
  // (a NUL there could never be a child's argument).
  return { ok: true, url: platform.ok ? platform.video.canonicalUrl : u.href };
}
