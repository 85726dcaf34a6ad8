// Which POST /jobs URLs make a batch (spec rule 8), decided from the URL's
// form alone: no request is made to tell a playlist or a show from a video.
// Expanding a batch (reading the feed, listing the playlist) is show.ts's and
// playlist.ts's; what a single-job URL may be is the gateway's.
//
// Playlists, on the video platform's hosts (those platform-url.ts accepts:
// youtube.com and its one-label subdomains www/m/music/..., youtube-nocookie.com,
// youtubekids.com, youtu.be, youtube.googleapis.com), any path:
//
//   list parameter                 | kind     | why
//   PL…, UU…, OL…                  | playlist | a user playlist, a channel's uploads, an album (OLAK5uy_…);
//                                  |          | also next to a video (watch?v=X&list=PL…): the whole list, rule 8
//   RD… (mixes), WL, LL (and LL…)  | single   | generated per viewer, or private to one: a one-video request
//   anything else, or no list      | single   | not a genuine playlist id; the single-job rules decide
//
// A genuine id is its prefix and at least 10 more id characters
// ([0-9A-Za-z_-]), as yt-dlp's playlist id pattern requires; a shorter or
// malformed `list` is no playlist at all and leaves the URL a single request.
// The `list` parameter is read from the query with `&` or `;` separators (and
// so from HTML-escaped `&amp;list=`), like platform-url.ts reads `v`.
//
// Shows, on the podcast platform (podcasts.apple.com; itunes.apple.com, its
// old host, which redirects there):
//
//   /<country>/podcast/<slug>/id<digits>, with or without <country> and <slug>,
//   a trailing slash, any case in the fixed words, any query parameters
//
// except an episode link, the same path with `?i=<episode id>`: that names one
// episode, which yt-dlp's episode extractor downloads as a single item (its
// pattern for episode pages requires `i=`), so it stays a single request.
import { parseHttpUrl, parsePlatformVideoUrl } from '../media-info/platform-url.js';

export type BatchSource =
  | { kind: 'single' }
  | {
    kind: 'playlist';
    /** The list parameter, e.g. `PLxxxxxxxxxxxxxxxx`. */
    listId: string;
    /** https://www.youtube.com/playlist?list=<listId>: what yt-dlp is given, and the MEDIA_INFO_URL_MAP key. */
    canonicalUrl: string;
  }
  | {
    kind: 'show';
    /** The show's numeric id on the podcast platform (the digits of `id<digits>`). */
    podcastId: string;
  };

const GENUINE_LIST = /^(?:PL|UU|OL)[0-9A-Za-z_-]{10,}$/;
const SHOW_HOSTS = new Set(['podcasts.apple.com', 'itunes.apple.com']);
/** `[<country>/]podcast/[<slug>/]id<digits>`, path segments only, trailing slash removed. */
const COUNTRY = /^[a-z]{2}$/i;
const SHOW_ID = /^id(\d{1,20})$/i;

export function canonicalPlaylistUrl(listId: string): string {
  return `https://www.youtube.com/playlist?list=${listId}`;
}

/** The first `list` value of a query string (without `?`), `&`- or `;`-separated. */
function listParam(query: string): string | undefined {
  const part = query.split(/[&;]/).find((p) => p.startsWith('list='));
  if (part === undefined) return undefined;
  try {
    return decodeURIComponent(part.slice(5));
  } catch {
    return undefined; // malformed %-escape: not an id
  }
}

/** The show id of a show page path, or undefined. */
function showId(pathname: string): string | undefined {
  const segments = pathname.split('/').filter(Boolean);
  if (segments.length > 0 && COUNTRY.test(segments[0]!)) segments.shift();
  if (segments.length < 2 || segments.length > 3 || segments[0]!.toLowerCase() !== 'podcast') return undefined;
  return SHOW_ID.exec(segments.at(-1)!)?.[1];
}

function isEpisodeLink(url: URL): boolean {
  return url.searchParams.has('i');
}

/** Classify a POST /jobs URL as a single request, a genuine playlist or a podcast show (rule 8). */
export function detectBatchSource(input: string): BatchSource {
  const url = parseHttpUrl(input);
  if (!url) return { kind: 'single' };
  if (SHOW_HOSTS.has(url.hostname)) {
    const podcastId = showId(url.pathname);
    return podcastId !== undefined && !isEpisodeLink(url) ? { kind: 'show', podcastId } : { kind: 'single' };
  }
  const platform = parsePlatformVideoUrl(input);
  if (!platform.ok && platform.reason !== 'not-a-video') return { kind: 'single' };
  const listId = listParam(url.search.slice(1));
  if (listId === undefined || !GENUINE_LIST.test(listId)) return { kind: 'single' };
  return { kind: 'playlist', listId, canonicalUrl: canonicalPlaylistUrl(listId) };
}
