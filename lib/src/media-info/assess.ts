// When an info JSON answers each endpoint, and what it is when it does not.
import type { Assess } from './extractor.js';
import { reasonFromMessages, type FailureCategory } from './failures.js';
import { classifyVideo, hasFormats, isLive, isPlaylist, metadataOf, type MediaMetadata, type VideoClassification, type YtDlpInfo } from './info.js';

/**
 * Why an item has no usable formats: the platform's reason from yt-dlp's
 * messages (private, removed, ...), else DRM when yt-dlp dropped DRM
 * formats, else `fallback`.
 */
function missingReason(info: YtDlpInfo, stderr: string, fallback: FailureCategory): FailureCategory {
  return reasonFromMessages(stderr) ?? (info._has_drm ? 'drm_protected' : fallback);
}

/**
 * /is-short: classified when live (dimensions optional) or when the best
 * video format has dimensions. An ordinary video without them is
 * `no_dimensions` (temporary: the full run may find them; a 502 if it does
 * not), unless yt-dlp said why there are no formats.
 */
export const assessClassification: Assess<VideoClassification> = (info, stderr) => {
  if (isPlaylist(info)) return { ok: false, failure: 'playlist' };
  const classified = classifyVideo(info);
  if (classified) return { ok: true, value: classified };
  return { ok: false, failure: missingReason(info, stderr, 'no_dimensions') };
};

/**
 * /metadata: answered when there is media (formats, or a live or scheduled
 * stream, which has none before it starts). Missing dimensions are not a
 * failure here: a direct file link tells yt-dlp nothing about them, and
 * the fields are then null.
 */
export const assessMetadata: Assess<MediaMetadata> = (info, stderr) => {
  if (isPlaylist(info)) return { ok: false, failure: 'playlist' };
  if (hasFormats(info) || isLive(info)) return { ok: true, value: metadataOf(info) };
  return { ok: false, failure: missingReason(info, stderr, 'unavailable') };
};
