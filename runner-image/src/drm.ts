// DRM: telling a DRM-protected audio-only item (a podcast episode behind
// FairPlay, say: Skipped, spec "audio-only DRM-protected episode with no
// video stream") from DRM-protected video (a content warning).
//
// yt-dlp drops formats it marks `has_drm` before selecting (YoutubeDL
// `_has_drm` / `formats = [f for f in formats if not f.get('has_drm')]`), so
// when every format is protected the probe fails with "This video is DRM
// protected" and says nothing about what the formats were. A second probe
// with --allow-unplayable-formats keeps them in the list, which is enough to
// see whether any of them carries video. yt-dlp 2023.03.04 serialises
// `has_drm` of HLS formats as the regex match object's repr (a string), newer
// versions as a boolean: anything truthy counts.
import { runProcess } from './child.js';
import type { YtDlpFormat } from './plan.js';
import { commonArgs, type YtDlpOptions } from './ytdlp.js';

export type DrmFormat = YtDlpFormat & { has_drm?: unknown };

/** Whether yt-dlp's error output says the item is DRM-protected (extractor or HLS downloader wording). */
export function saysDrmProtected(stderr: string): boolean {
  return /^ERROR:.*\bDRM[- ]protected/im.test(stderr);
}

/**
 * Whether a format list is audio only: every format that carries media says
 * `vcodec: none`. Storyboards and images (no audio, no video) do not count;
 * a format whose codecs are unknown might be video, so it does not qualify.
 */
export function isAudioOnly(formats: readonly YtDlpFormat[]): boolean {
  const media = formats.filter((f) => !(f.vcodec === 'none' && f.acodec === 'none'));
  return media.length > 0 && media.every((f) => f.vcodec === 'none');
}

export function hasDrm(formats: readonly DrmFormat[]): boolean {
  return formats.some((f) => Boolean(f.has_drm));
}

/**
 * After a failure that said "DRM protected": whether the item has no video
 * at all. Undefined when the second probe cannot tell (it failed too, or no
 * format is marked protected), so the caller keeps what it knew before.
 */
export async function drmItemIsAudioOnly(url: string, opts: YtDlpOptions): Promise<boolean | undefined> {
  const run = await runProcess(
    opts.bin,
    [...commonArgs(opts), '-J', '--allow-unplayable-formats', '--ignore-no-formats-error', '--', url],
    { captureStdout: true, signal: opts.signal, maxStdoutBytes: 64 * 1024 * 1024 },
  );
  if (run.exitCode !== 0 || run.stdoutTruncated) return undefined;
  let formats: DrmFormat[];
  try {
    formats = (JSON.parse(run.stdout) as { formats?: DrmFormat[] | null }).formats ?? [];
  } catch {
    return undefined;
  }
  if (!hasDrm(formats)) return undefined;
  return isAudioOnly(formats);
}
