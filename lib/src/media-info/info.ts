// Pure functions over yt-dlp's info JSON (`yt-dlp -J`): is it live, what are
// the dimensions of the best video format, and the fields of the two info
// endpoints. Nothing here runs a process, so every rule is table-tested with
// info shaped like yt-dlp's (lib/test/media-info-info.test.ts).
//
// The JSON comes from another program, so every field is read defensively:
// a wrong type counts as absent, never as a value.

/** The part of a yt-dlp format dict these rules read. */
export interface YtDlpFormat {
  format_id?: string;
  format_note?: string | null;
  width?: number | null;
  height?: number | null;
  /** 'none' for audio-only formats and storyboards; null or absent when unknown. */
  vcodec?: string | null;
  acodec?: string | null;
  has_drm?: boolean | null;
}

/** The part of yt-dlp's info dict these rules read. */
export interface YtDlpInfo {
  _type?: string;
  id?: string;
  title?: string | null;
  /** not_live, is_live, is_upcoming, was_live, post_live (yt-dlp fills it from is_live/was_live when an extractor does not). */
  live_status?: string | null;
  is_live?: boolean | null;
  formats?: YtDlpFormat[] | null;
  /** A single media URL, for info without a formats list. */
  url?: string | null;
  /** Of the selected format(s), after yt-dlp's format selection. */
  width?: number | null;
  height?: number | null;
  vcodec?: string | null;
  duration?: number | null;
  extractor?: string | null;
  extractor_key?: string | null;
  uploader?: string | null;
  channel?: string | null;
  thumbnail?: string | null;
  description?: string | null;
  view_count?: number | null;
  like_count?: number | null;
  upload_date?: string | null;
  filesize?: number | null;
  filesize_approx?: number | null;
  /** True when DRM formats were found (and, without --allow-unplayable-formats, dropped from `formats`). */
  _has_drm?: boolean | null;
}

export interface Dimensions {
  width: number;
  height: number;
}

export type VideoType = 'short' | 'video' | 'live';

/** What POST /is-short reports (camelCase here; the route names the fields as the spec does). */
export interface VideoClassification {
  isShort: boolean;
  videoType: VideoType;
  width: number | null;
  height: number | null;
  /** height / width: above 1 is vertical. (yt-dlp's own `aspect_ratio` is the inverse, width / height.) */
  aspectRatio: number | null;
  /** Rounded; 0 when the platform gives none (live and upcoming streams). */
  durationSeconds: number;
}

/**
 * What POST /metadata reports. The contract lists each field as a number or
 * a string, never null (unlike /is-short's dimensions): what the extractor
 * does not say is left out.
 */
export interface MediaMetadata {
  title?: string;
  duration?: number;
  width?: number;
  height?: number;
  extractor?: string;
  uploader?: string;
  thumbnail?: string;
  description?: string;
  viewCount?: number;
  likeCount?: number;
  uploadDate?: string;
  filesizeApprox?: number;
}

function positiveInt(v: unknown): number | undefined {
  return typeof v === 'number' && Number.isInteger(v) && v > 0 ? v : undefined;
}

function finiteNumber(v: unknown): number | undefined {
  return typeof v === 'number' && Number.isFinite(v) ? v : undefined;
}

function nonNegativeInt(v: unknown): number | undefined {
  return typeof v === 'number' && Number.isFinite(v) && v >= 0 ? Math.round(v) : undefined;
}

function text(v: unknown): string | undefined {
  return typeof v === 'string' ? v : undefined;
}

/**
 * Live, including scheduled streams that have not started (`is_upcoming`).
 * A stream that has ended (`was_live`, `post_live`) is a recording and is
 * classified by its dimensions like any video.
 */
export function isLive(info: YtDlpInfo): boolean {
  if (info.live_status === 'is_live' || info.live_status === 'is_upcoming') return true;
  // Extractors that set only the boolean; yt-dlp derives live_status from it,
  // but info that skipped that step should not read as a regular video.
  return (info.live_status === undefined || info.live_status === null) && info.is_live === true;
}

/** True for formats that carry a picture: not audio-only, not a storyboard (yt-dlp marks both with vcodec 'none'). */
function isVideoFormat(f: YtDlpFormat): boolean {
  return f.vcodec !== 'none' && f.format_note !== 'storyboard';
}

/**
 * Width and height of the best available video format: yt-dlp sorts
 * `formats` from worst to best, so the last video format with both
 * dimensions is the best one whose shape is known. Storyboards have
 * dimensions too (thumbnail grids) but vcodec 'none', so they never count.
 * Without a formats list (some extractors give one media URL), the top-level
 * width/height are that single format's.
 */
export function bestVideoDimensions(info: YtDlpInfo): Dimensions | undefined {
  const formats = Array.isArray(info.formats) ? info.formats : [];
  for (let i = formats.length - 1; i >= 0; i--) {
    const f = formats[i];
    if (!f || typeof f !== 'object' || !isVideoFormat(f)) continue;
    const width = positiveInt(f.width);
    const height = positiveInt(f.height);
    if (width && height) return { width, height };
  }
  if (formats.length === 0 && info.vcodec !== 'none') {
    const width = positiveInt(info.width);
    const height = positiveInt(info.height);
    if (width && height) return { width, height };
  }
  return undefined;
}

/** A playlist or channel result (with --flat-playlist its entries are not extracted). */
export function isPlaylist(info: YtDlpInfo): boolean {
  return info._type === 'playlist' || info._type === 'multi_video';
}

/** Whether yt-dlp found anything to play (formats, or a single media URL). */
export function hasFormats(info: YtDlpInfo): boolean {
  return (Array.isArray(info.formats) && info.formats.length > 0) || typeof info.url === 'string';
}

/**
 * The spec's is-short classification, or undefined when an ordinary (not
 * live) video has no known dimensions: the caller must then try harder or
 * fail, never guess.
 *
 * - `is_short`: height > width of the best video format (a square is not short).
 * - `video_type`: `live` for live and upcoming streams whatever their shape;
 *   otherwise `short` when is_short, else `video`.
 * - A live stream without dimensions: null dimensions, is_short false.
 */
export function classifyVideo(info: YtDlpInfo): VideoClassification | undefined {
  const dims = bestVideoDimensions(info);
  const live = isLive(info);
  if (!dims && !live) return undefined;
  const isShort = dims ? dims.height > dims.width : false;
  const duration = finiteNumber(info.duration);
  return {
    isShort,
    videoType: live ? 'live' : isShort ? 'short' : 'video',
    width: dims?.width ?? null,
    height: dims?.height ?? null,
    aspectRatio: dims ? dims.height / dims.width : null,
    durationSeconds: duration !== undefined && duration > 0 ? Math.round(duration) : 0,
  };
}

/** The spec's metadata fields. Dimensions are those of the best video format, as on /is-short. */
export function metadataOf(info: YtDlpInfo): MediaMetadata {
  const dims = bestVideoDimensions(info);
  const duration = finiteNumber(info.duration);
  const uploadDate = text(info.upload_date);
  const all: MediaMetadata = {
    title: text(info.title),
    duration: duration !== undefined && duration >= 0 ? duration : undefined,
    width: dims?.width,
    height: dims?.height,
    extractor: text(info.extractor),
    // YouTube fills both; some extractors only know the channel.
    uploader: text(info.uploader) ?? text(info.channel),
    thumbnail: text(info.thumbnail),
    description: text(info.description),
    viewCount: nonNegativeInt(info.view_count),
    likeCount: nonNegativeInt(info.like_count),
    uploadDate: uploadDate && /^\d{8}$/.test(uploadDate) ? uploadDate : undefined,
    // An exact size of the selected format(s) is the best approximation
    // there is; yt-dlp sums the parts of a merged selection into filesize_approx.
    filesizeApprox: nonNegativeInt(info.filesize) ?? nonNegativeInt(info.filesize_approx),
  };
  // Absent rather than present as undefined, so the object is what the answer is.
  return Object.fromEntries(Object.entries(all).filter(([, v]) => v !== undefined)) as MediaMetadata;
}
