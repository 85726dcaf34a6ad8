// The owning key's limits as the runner enforces them (spec.limits, which
// the gateway writes from the key: api-gateway/src/key-limits.ts). Length:
// media longer than the limit is refused, judged on yt-dlp's duration right
// after the probe when the extractor gives one, else on the files' (ffprobe)
// before the mux; a clip counts its own length. A live recording is capped
// instead (live.ts recordingPlan). Size: a file over the limit is never
// stored, judged on disk before an upload or on the bytes of a streamed one.
// Resolution: the gateway caps maxResolution, so rule 3 chooses a format
// within the limit where the source has one; when it has none (or its size
// is unknown), the mux scales the video down so its shorter side is within
// the limit (plan.ts frameScale, ffmpeg.ts muxPlan), recordings included.
import { pipeline, Transform, type Readable, type TransformCallback } from 'node:stream';
import { overLimit, type Classification } from './classify.js';
import type { Clip } from './plan.js';

/** Seconds of the media a job delivers: the clip's part of it when clipping. */
export function deliveredSeconds(mediaSeconds: number, clip: Clip | undefined): number {
  if (!clip) return mediaSeconds;
  return Math.max(0, Math.min(clip.end ?? mediaSeconds, mediaSeconds) - clip.start);
}

/**
 * The failure of media longer than `limit` seconds, or undefined: no
 * limit, a length nobody knows, or within it. Whole seconds, rounded, as
 * durations are given: 600.4 s passes a 600 s limit.
 */
export function durationOverLimit(mediaSeconds: number | null | undefined, clip: Clip | undefined, limit: number | undefined): Classification | undefined {
  if (limit === undefined || typeof mediaSeconds !== 'number' || !Number.isFinite(mediaSeconds)) return undefined;
  const seconds = Math.round(deliveredSeconds(mediaSeconds, clip));
  if (seconds <= limit) return undefined;
  return overLimit('duration_limit_exceeded', { max_duration_limit_seconds: limit, [clip ? 'clip_seconds' : 'media_seconds']: seconds });
}

/** The failure of a file over `limit` bytes. Not its size: the mux stops just past the limit (ffmpeg.ts withOutputCap), so the whole is never known. */
export function overFilesizeLimit(limit: number): Classification {
  return overLimit('filesize_limit_exceeded', { max_filesize_limit_bytes: limit });
}

/** The failure of a file of `bytes` over `limit`, or undefined. */
export function filesizeOverLimit(bytes: number, limit: number | undefined): Classification | undefined {
  return limit !== undefined && bytes > limit ? overFilesizeLimit(limit) : undefined;
}

/** What a streamed upload fails with once its body passes the limit. */
export class FileTooLarge extends Error {
  override readonly name = 'FileTooLarge';
  constructor(readonly limit: number) {
    super(`the file passed the ${limit}-byte limit`);
  }
}

/**
 * `body` as an upload's body that fails with FileTooLarge (and calls
 * `onOver`: a provider may wrap the error) on the chunk that takes it past
 * `maxBytes`, before its end, so the provider aborts the upload as it does
 * for any broken body and nothing is stored. Either side's end or failure
 * ends the other: a refused upload still stops ffmpeg.
 */
export function capBytes(body: Readable, maxBytes: number, onOver: () => void): Readable {
  let bytes = 0;
  const capped = new Transform({
    transform(chunk: Buffer, _enc: BufferEncoding, cb: TransformCallback) {
      bytes += chunk.length;
      if (bytes <= maxBytes) return cb(null, chunk);
      onOver();
      cb(new FileTooLarge(maxBytes));
    },
  });
  pipeline(body, capped, () => undefined);
  return capped;
}
