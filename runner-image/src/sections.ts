// A clip of a segmented source fetches only the segments it needs.
//
// DASH: yt-dlp's info JSON lists each format's fragments (an init segment,
// then media segments with their durations), and its download run fetches
// exactly the list it is given (--load-info-json). The runner hands it the
// list cut to the segments that overlap the clip: each DASH media segment
// starts at a stream access point, so the cut needs nothing before the
// segment holding the clip's start. The file yt-dlp writes keeps the
// segments' own timestamps (tfdt), so it begins at the first kept segment:
// the mux seeks by the clip's start minus that offset (MuxInput.offsetSeconds).
//
// HLS segments are not in the info JSON (yt-dlp reads the media playlist
// when it downloads), so the runner reads the playlist itself and hands
// yt-dlp the same kind of list (withHlsFragments): a VOD playlist of plain
// segments, an init section first when it has one, becomes a fragment list
// yt-dlp's DASH segment downloader fetches and joins (MPEG-TS and fMP4
// segments both join by concatenation). ffmpeg 5.1's own HLS demuxer cannot
// be used for this: after a seek into fMP4 segments it loses the init
// section and writes a file without frames (seen here, and caught by
// verify.ts).
import { Parser, type Manifest } from 'm3u8-parser';
import { fetchText } from './live.js';
import type { Clip, YtDlpFormat, YtDlpInfo } from './plan.js';

interface Fragment {
  url?: string;
  path?: string;
  duration?: number;
}

/** What was kept of one format: where its first kept segment starts and how long the kept segments last, seconds. */
export interface Section {
  offsetSeconds: number;
  spanSeconds: number;
}

/**
 * The fragments of `fragments` a clip needs: the leading ones without a
 * duration (the init segment), then every media segment overlapping the
 * clip. Undefined when the list cannot be cut (a media segment of unknown
 * duration) or cutting saves nothing.
 */
export function clipFragments(fragments: readonly Fragment[], clip: Clip, lead = 0): { fragments: Fragment[]; section: Section } | undefined {
  let head = 0;
  while (head < fragments.length && fragments[head]!.duration === undefined) head++;
  const media = fragments.slice(head);
  if (!media.length || media.some((f) => typeof f.duration !== 'number' || !(f.duration > 0))) return undefined;
  const starts: number[] = [];
  let t = 0;
  for (const f of media) {
    starts.push(t);
    t += f.duration!;
  }
  const overlaps = (i: number) => starts[i]! + media[i]!.duration! > clip.start && (clip.end === undefined || starts[i]! < clip.end);
  const first = media.findIndex((_, i) => overlaps(i));
  if (first < 0) return undefined;
  let last = first;
  while (last + 1 < media.length && overlaps(last + 1)) last++;
  const from = Math.max(0, first - lead);
  if (from === 0 && last === media.length - 1) return undefined;
  const kept = media.slice(from, last + 1);
  const span = kept.reduce((sum, f) => sum + f.duration!, 0);
  return { fragments: [...fragments.slice(0, head), ...kept], section: { offsetSeconds: starts[from]!, spanSeconds: span } };
}

/**
 * The info JSON for downloading only what `clip` needs of the chosen DASH
 * formats, and what each cut format holds; undefined when no format can be
 * cut. The page URL is left out of it: yt-dlp starts over from the page
 * when a download from the info JSON fails, which would fetch whole formats
 * the mux then takes for cut ones. The caller downloads whole instead.
 */
export function clipSections(
  info: YtDlpInfo, formatIds: readonly string[], clip: Clip, lead: ReadonlyMap<string, number> = new Map(),
): { info: YtDlpInfo; sections: Map<string, Section> } | undefined {
  const sections = new Map<string, Section>();
  const formats = (info.formats ?? []).map((f: YtDlpFormat & { fragments?: unknown }) => {
    if (!formatIds.includes(f.format_id) || f.protocol !== 'http_dash_segments' || !Array.isArray(f.fragments)) return f;
    const cut = clipFragments(f.fragments as Fragment[], clip, lead.get(f.format_id));
    if (!cut) return f;
    sections.set(f.format_id, cut.section);
    return { ...f, fragments: cut.fragments };
  });
  if (!sections.size) return undefined;
  const { webpage_url: _page, original_url: _original, requested_formats: _requested, ...rest } = info as YtDlpInfo & Record<string, unknown>;
  return { info: { ...rest, formats } as YtDlpInfo, sections };
}

/** yt-dlp's protocols for an HLS media playlist, which is the format's `url`. */
const HLS = ['m3u8_native', 'm3u8'];

/** The largest playlist read: a VOD playlist of ten thousand segments is well under it. */
const MAX_PLAYLIST_BYTES = 8 * 1024 * 1024;

/**
 * The fragments of an HLS media playlist, for yt-dlp's segment downloader;
 * undefined for what that downloader could not join as is: a live or event
 * playlist still growing (no EXT-X-ENDLIST), encrypted segments (EXT-X-KEY),
 * byte ranges, or discontinuities (segments whose timestamps restart).
 */
export function hlsFragments(playlist: string, playlistUrl: string): { fragments: Fragment[]; independent: boolean } | undefined {
  const parser = new Parser();
  parser.push(playlist);
  parser.end();
  const m: Manifest = parser.manifest;
  if (!m.endList || !m.segments.length || m.playlists?.length) return undefined;
  const init = m.segments[0]!.map;
  for (const s of m.segments) {
    if ((s.key && s.key.method !== 'NONE') || s.byterange || s.discontinuity || s.map?.byterange || s.map?.uri !== init?.uri) return undefined;
    if (!(s.duration > 0)) return undefined;
  }
  const abs = (uri: string) => new URL(uri, playlistUrl).href;
  return {
    fragments: [...(init ? [{ url: abs(init.uri) }] : []), ...m.segments.map((s) => ({ url: abs(s.uri), duration: s.duration }))],
    independent: m.independentSegments === true,
  };
}

/**
 * `info` with the chosen HLS formats turned into fragment lists yt-dlp
 * downloads as it does DASH's (clipSections can then cut them). A playlist
 * that cannot be read or joined leaves its format as it was: downloaded
 * whole by yt-dlp's HLS downloader.
 */
export async function withHlsFragments(
  info: YtDlpInfo, formatIds: readonly string[], opts: { timeoutSeconds: number; signal?: AbortSignal },
): Promise<{ info: YtDlpInfo; lead: Map<string, number> }> {
  const lead = new Map<string, number>();
  const read = { timeoutMs: opts.timeoutSeconds * 1000, maxBytes: MAX_PLAYLIST_BYTES, ...(opts.signal && { signal: opts.signal }) };
  const formats = await Promise.all((info.formats ?? []).map(async (f) => {
    if (!formatIds.includes(f.format_id) || !HLS.includes(f.protocol ?? '') || !f.url || f.fragments !== undefined) return f;
    const text = await fetchText(f.url, f.http_headers ?? {}, read).catch(() => undefined);
    const list = text === undefined ? undefined : hlsFragments(text, f.url);
    if (!list) return f;
    // Without EXT-X-INDEPENDENT-SEGMENTS a segment need not start with a
    // keyframe: the one before the clip's comes too, for the keyframe it holds.
    if (!list.independent) lead.set(f.format_id, 1);
    return { ...f, protocol: 'http_dash_segments', fragments: list.fragments };
  }));
  return { info: { ...info, formats }, lead };
}
