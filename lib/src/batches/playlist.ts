// A genuine playlist's videos, listed by yt-dlp's flat playlist extraction:
// `--flat-playlist` lists the entries without extracting any video, and
// `--playlist-end <limit + 1>` stops reading after one entry more than
// MAX_PLAYLIST_SIZE, so a playlist of thousands costs a few pages, and
// seeing limit + 1 entries proves it is too large (413, never truncated).
//
// The run honours /metadata's extractor settings (lib/src/media-info): the
// command and extra arguments, the gateway's egress (media-info/egress.ts:
// every fetch under the outbound policy, redirects included) or the proxy
// with a fresh `{session}`, a MediaPlatform's route (its pool's session,
// cookies and yt-dlp options, docs/adr/0027), the full
// lookup's wall-clock bound (MEDIA_INFO_FULL_TIMEOUT_MS) with SIGKILL at the
// deadline, and MEDIA_INFO_URL_MAP keyed by the canonical
// https://www.youtube.com/playlist?list=<ID> URL, so tests can hand yt-dlp a
// local document its generic extractor reads as a playlist (an RSS feed).
//
// Entry URLs: the platform's videos as canonical watch URLs (one video, one
// URL, whatever form yt-dlp printed); other URLs as given, without yt-dlp's
// internal `#__youtubedl_smuggle` fragment. Entries without an http(s) URL
// cannot become jobs and are left out. Unavailable videos ("[Private
// video]") stay in: they are the playlist's, and their jobs end with the
// platform's reason.
import { randomBytes } from 'node:crypto';
import { DEFAULT_MEDIA_INFO_OPTIONS, openRoute, proxyArgs, type LookupRoute, type MediaInfoOptions } from '../media-info/extractor.js';
import { classifyFailedRun, FAILURES, logDetail } from '../media-info/failures.js';
import { canonicalWatchUrl, parseHttpUrl, parsePlatformVideoUrl, VIDEO_ID } from '../media-info/platform-url.js';
import { runBounded, type BoundedRun } from '../media-info/run.js';
import { BatchSourceError, emptyBatch, tooLarge } from './errors.js';

export interface PlaylistEntry {
  url: string;
  title?: string;
}

const ARGS = [
  '--ignore-config',
  '--no-cache-dir',
  '--dump-single-json',
  '--skip-download',
  '--yes-playlist',
  '--flat-playlist',
  '--no-progress',
  '--extractor-retries', '1',
];

const MAX_INFO_BYTES = 32 * 1024 * 1024;

/** The shape of a flat entry as yt-dlp prints it (`_type` url or url_transparent). */
interface FlatEntry {
  url?: unknown;
  id?: unknown;
  ie_key?: unknown;
  title?: unknown;
}

function entryUrl(entry: FlatEntry): string | undefined {
  if (typeof entry.url === 'string') {
    const url = parseHttpUrl(entry.url);
    if (url) {
      if (url.hash.startsWith('#__youtubedl_smuggle')) url.hash = '';
      const video = parsePlatformVideoUrl(url.href);
      return video.ok ? video.video.canonicalUrl : url.href;
    }
  }
  // Some extractor versions give the platform's entries an id and no URL.
  if (entry.ie_key === 'Youtube' && typeof entry.id === 'string' && VIDEO_ID.test(entry.id)) return canonicalWatchUrl(entry.id);
  return undefined;
}

/** The entries of a playlist info JSON; throws BatchSourceError for anything else. */
export function entriesOfPlaylist(info: unknown, maxEntries: number): PlaylistEntry[] {
  const playlist = info as { _type?: unknown; entries?: unknown } | null;
  if (typeof playlist !== 'object' || playlist === null || playlist._type !== 'playlist' || !Array.isArray(playlist.entries)) {
    throw new BatchSourceError('playlist_unavailable', 'playlist: yt-dlp found no playlist');
  }
  if (playlist.entries.length > maxEntries) throw tooLarge('playlist', maxEntries);
  const entries: PlaylistEntry[] = [];
  for (const raw of playlist.entries as unknown[]) {
    if (typeof raw !== 'object' || raw === null) continue;
    const entry = raw as FlatEntry;
    const url = entryUrl(entry);
    if (url === undefined) continue;
    const title = typeof entry.title === 'string' && entry.title.trim() ? entry.title.trim() : undefined;
    entries.push({ url, ...(title !== undefined && { title }) });
  }
  if (entries.length === 0) throw emptyBatch('playlist');
  return entries;
}

/** What a finished run says: the info JSON, or the BatchSourceError it means. */
function infoOfRun(run: BoundedRun): unknown {
  const detail = logDetail(run.stderr);
  const reason = (what: string) => `playlist: ${what}${detail ? ` (${detail})` : ''}`;
  if (run.spawnError) throw new BatchSourceError('extractor_missing', `playlist: ${run.spawnError.code ?? 'spawn failed'}`);
  if (run.aborted) throw new BatchSourceError('aborted', 'playlist: aborted');
  if (run.timedOut) throw new BatchSourceError('playlist_failed', 'playlist: timeout');
  let info: unknown = null;
  if (run.exitCode === 0 && !run.stdoutTruncated) {
    try {
      info = JSON.parse(run.stdout);
    } catch {
      throw new BatchSourceError('playlist_failed', reason('output is not JSON'));
    }
  }
  if (info === null || typeof info !== 'object') {
    // yt-dlp's own words decide: the platform's verdict on the playlist, or trouble worth a retry.
    const category = classifyFailedRun(run.stderr);
    const kind = FAILURES[category].kind;
    throw new BatchSourceError(kind === 'private' || kind === 'content' ? 'playlist_unavailable' : 'playlist_failed', reason(category));
  }
  return info;
}

export class PlaylistExpander {
  readonly options: MediaInfoOptions;

  constructor(options: Partial<MediaInfoOptions>, readonly maxEntries: number) {
    this.options = { ...DEFAULT_MEDIA_INFO_OPTIONS, ...options };
  }

  /** The yt-dlp argv for a canonical playlist URL; `session` fills the proxy's `{session}`; `route`, a platform's. */
  argv(canonicalUrl: string, session: string, route?: LookupRoute): string[] {
    const socketTimeout = Math.max(1, Math.floor(this.options.fullTimeoutMs / 2000));
    return [
      ...this.options.command,
      ...ARGS,
      '--playlist-end', String(this.maxEntries + 1),
      '--socket-timeout', String(socketTimeout),
      ...proxyArgs(this.options, session, route),
      '--', this.options.urlMap.get(canonicalUrl) ?? canonicalUrl,
    ];
  }

  /** The playlist's entries (at most maxEntries), or a BatchSourceError. */
  async expand(canonicalUrl: string, signal?: AbortSignal): Promise<PlaylistEntry[]> {
    // A playlist of a MediaPlatform is read through its pool, with its cookies and options, as /metadata is.
    const opened = await openRoute(this.options.routes, canonicalUrl);
    if ('failure' in opened) throw new BatchSourceError('playlist_failed', `playlist: ${opened.detail}`);
    let run: BoundedRun;
    try {
      run = await runBounded(this.argv(canonicalUrl, randomBytes(8).toString('hex'), opened.route), {
        timeoutMs: this.options.fullTimeoutMs,
        maxStdoutBytes: MAX_INFO_BYTES,
        ...(signal && { signal }),
        ...(this.options.egress && { env: this.options.egress.env() }),
      });
    } finally {
      await opened.route?.close();
    }
    return entriesOfPlaylist(infoOfRun(run), this.maxEntries);
  }
}
