// What to fetch and how to mux it, decided from the job spec and yt-dlp's
// probe. Pure functions: the pipeline runs what these return, and every
// format, codec and resolution rule of the spec lives here, where tables of
// cases can test it without a download. The spec's options arrive normalised
// (config.ts parseSpec, through lib's normaliseSpecOptions): defaults, the
// preset's CRF and rule 4 are applied already, and nothing here re-defaults.
import { parseClipTime } from '@mediajobs/lib/job-options';
import {
  AUDIO_FORMATS, DEFAULT_VIDEO_QUALITY, MAX_VIDEO_QUALITY, type Format, type MediaJobOptions,
} from '@mediajobs/lib/mediajob/types';
import { deliveredSeconds } from './key-limits.js';

/** The slice of yt-dlp's info JSON (`-J`) the runner reads. */
export interface YtDlpFormat {
  format_id: string;
  ext?: string;
  vcodec?: string | null;
  acodec?: string | null;
  width?: number | null;
  height?: number | null;
  filesize?: number | null;
  filesize_approx?: number | null;
  /** Total and audio bitrate, kbit/s. */
  tbr?: number | null;
  abr?: number | null;
  protocol?: string;
  /** yt-dlp: 10 for the language the URL is about (YouTube's original audio), -10 for others (dubs), -1 or absent when unknown. */
  language_preference?: number | null;
  url?: string;
  http_headers?: Record<string, string> | null;
  /** Segments of a fragmented format (HLS, DASH), and how yt-dlp's downloader must fetch it (YouTube: chunked ranges). */
  fragments?: unknown;
  downloader_options?: unknown;
  /** Newer yt-dlp: the cookies for this format's URL, kept out of http_headers. */
  cookies?: string;
  /** yt-dlp 2023.03.04 writes a regex match's repr here for HLS, newer versions a boolean: anything truthy counts. */
  has_drm?: unknown;
}

export interface YtDlpInfo {
  id?: string;
  title?: string | null;
  description?: string | null;
  upload_date?: string | null;
  release_date?: string | null;
  timestamp?: number | null;
  duration?: number | null;
  is_live?: boolean | null;
  live_status?: string | null;
  extractor?: string;
  format_id?: string;
  requested_formats?: YtDlpFormat[] | null;
  formats?: YtDlpFormat[] | null;
  _type?: string;
}

export interface Container {
  format: Format;
  /** File extension and object key extension. */
  ext: string;
  /** ffmpeg muxer (-f). */
  muxer: string;
  contentType: string;
  audioOnly: boolean;
  /** Extra muxer options. */
  muxerArgs: string[];
  /**
   * Whether ffmpeg can write this container to a pipe without losing
   * anything, so the upload runs while it muxes and no output file is ever
   * on disk.
   */
  streamable: boolean;
}

// mp4 is written as fragmented MP4 straight into the upload: a moov with no
// samples, then one fragment per keyframe (frag_duration bounds a fragment,
// which ffmpeg holds in memory, when there is no video to cut at). It plays
// and seeks everywhere MP4 does today (browsers, VLC, QuickTime, ffmpeg; the
// mfra index at the end helps players seek) and saves a whole working copy
// on disk plus the faststart rewrite.
// The others are written to a file first, because their muxers seek back to
// finish the file and a pipe cannot: Matroska/WebM would lose Duration,
// SeekHead and Cues (ffprobe then reports no duration and players cannot
// seek), MP3 its LAME header (encoder delay and padding, so the duration is
// off by a packet or two). mov and m4a stay classic faststart files because
// the tools that ask for them (editors, music libraries) handle fragmented
// files least well. Ogg and Opus are streams by design.
// delay_moov holds the moov back until the first fragment is cut, so it can
// carry the edit lists that place the first samples (B-frame delay, AAC
// priming, a clip's start); without them the first sample is stretched to
// time zero and a clip comes out up to a few frames long.
const FRAGMENTED_MP4 = ['-movflags', '+frag_keyframe+empty_moov+delay_moov+default_base_moof', '-frag_duration', '10000000'];
// +faststart puts the index before the media so players can start before the
// download ends; it costs one extra local rewrite of the file.
const FASTSTART = ['-movflags', '+faststart'];

const CONTAINERS: Record<Format, Omit<Container, 'format' | 'audioOnly'>> = {
  mp4: { ext: 'mp4', muxer: 'mp4', contentType: 'video/mp4', muxerArgs: FRAGMENTED_MP4, streamable: true },
  mov: { ext: 'mov', muxer: 'mov', contentType: 'video/quicktime', muxerArgs: FASTSTART, streamable: false },
  mkv: { ext: 'mkv', muxer: 'matroska', contentType: 'video/x-matroska', muxerArgs: [], streamable: false },
  webm: { ext: 'webm', muxer: 'webm', contentType: 'video/webm', muxerArgs: [], streamable: false },
  m4a: { ext: 'm4a', muxer: 'ipod', contentType: 'audio/mp4', muxerArgs: FASTSTART, streamable: false },
  mp3: { ext: 'mp3', muxer: 'mp3', contentType: 'audio/mpeg', muxerArgs: [], streamable: false },
  ogg: { ext: 'ogg', muxer: 'ogg', contentType: 'audio/ogg', muxerArgs: [], streamable: true },
  opus: { ext: 'opus', muxer: 'opus', contentType: 'audio/ogg', muxerArgs: [], streamable: true },
};

/** The output container of a job's format; every audio format is audio-only, whatever audioOnly says. */
export function containerFor(spec: Pick<MediaJobOptions, 'format' | 'audioOnly'>): Container {
  const { format } = spec;
  const audioOnly = spec.audioOnly || (AUDIO_FORMATS as readonly string[]).includes(format);
  return { format, audioOnly, ...CONTAINERS[format] };
}

/**
 * yt-dlp's format selector for the probe. The runner makes its own choice
 * from the probe's format list (chooseFormats); yt-dlp's is the fallback for
 * the rare extractor that returns no list.
 */
export function formatSelector(container: Pick<Container, 'audioOnly'>): string {
  return container.audioOnly ? 'ba/b' : 'bv*+ba/b';
}

/** The formats of `ids` as the probe describes them (only the id when it does not). */
export function formatsById(info: YtDlpInfo, ids: readonly string[]): YtDlpFormat[] {
  const all = info.requested_formats ?? info.formats ?? [];
  return ids.map((id) => all.find((f) => f.format_id === id) ?? { format_id: id });
}

/** The format ids yt-dlp selected in its probe, to download one by one (each to its own file). */
export function selectedFormatIds(info: YtDlpInfo): string[] {
  const requested = info.requested_formats?.map((f) => f.format_id).filter(Boolean) ?? [];
  if (requested.length) return requested;
  if (info.format_id) return [info.format_id];
  return [];
}

/** Bytes expected for a selected format, when the probe knows, so progress can be weighted across files. */
export function expectedBytes(info: YtDlpInfo, formatId: string): number | undefined {
  return formatBytes(formatsById(info, [formatId])[0]);
}

/** A format's size as the probe gives it: the extractor's exact size, else its estimate (yt-dlp: bitrate × duration). */
export function formatBytes(f: YtDlpFormat | undefined): number | undefined {
  const n = f?.filesize ?? f?.filesize_approx;
  return typeof n === 'number' && n > 0 ? n : undefined;
}

/**
 * Bytes a job expects to deliver, for the owning key's storage reservation
 * (status.expectedBytes): the sizes of the formats it fetches (the video
 * and audio it muxes; for an audio-only job, chooseFormats took the audio
 * alone), each the probe's (formatBytes) or else what its server said
 * (`served`, source-read.ts SourceHead), times a clip's share of the media
 * when its duration is known. The source's size, not the output's: a
 * re-encode or another container changes it a little, sidecars add a
 * little, and the reservation has a floor (lib/src/db/jobs.ts
 * reservationFor). Undefined when a size is unknown: the job keeps the
 * default reservation.
 */
export function expectedDeliveryBytes(
  formats: readonly YtDlpFormat[], durationSeconds: number | null | undefined, clip: Clip | undefined,
  served: ReadonlyMap<string, number> = new Map(),
): number | undefined {
  const sizes = formats.map((f) => formatBytes(f) ?? served.get(f.format_id));
  if (!sizes.length || sizes.some((n) => n === undefined)) return undefined;
  const whole = sizes.reduce<number>((sum, n) => sum + n!, 0);
  const known = typeof durationSeconds === 'number' && Number.isFinite(durationSeconds) && durationSeconds > 0;
  const share = clip && known ? deliveredSeconds(durationSeconds, clip) / durationSeconds : 1;
  return Math.ceil(whole * share);
}

/* ------------------------------------------------------------------ */
/* Codecs                                                               */
/* ------------------------------------------------------------------ */

// RFC 6381 codec strings (what DASH and HLS manifests, and so yt-dlp, say)
// to the names ffmpeg and ffprobe use. Order matters: the MP3 object types
// of mp4a come before the generic mp4a → aac.
const CODEC_NAMES: [RegExp, string][] = [
  [/^(avc[1-4]|h\.?264)\b/i, 'h264'],
  [/^(hev1|hvc1|h\.?265|hevc)\b/i, 'hevc'],
  [/^(vp0?9)\b/i, 'vp9'],
  [/^(vp0?8)\b/i, 'vp8'],
  [/^(av01|av1)\b/i, 'av1'],
  [/^(mp4a\.(40\.34|6b|69)|mp3)$/i, 'mp3'],
  [/^(mp4a|aac)\b/i, 'aac'],
  [/^opus$/i, 'opus'],
  [/^vorbis$/i, 'vorbis'],
  [/^flac$/i, 'flac'],
  [/^alac$/i, 'alac'],
  [/^(ac-3|ac3)$/i, 'ac3'],
  [/^(ec-3|eac3)$/i, 'eac3'],
];

/** ffmpeg's name for a yt-dlp codec string; `none` stays `none`; undefined when unknown. */
export function ffmpegCodecName(codec: string | null | undefined): string | undefined {
  if (codec === null || codec === undefined || codec === '') return undefined;
  if (codec === 'none') return 'none';
  for (const [re, name] of CODEC_NAMES) if (re.test(codec)) return name;
  return codec.toLowerCase().split('.')[0];
}

// Codecs each container takes as they are (ffmpeg names, as ffprobe reports
// them), as ffmpeg 5.1's muxers have them: `-c copy -f mov` refuses VP9, AV1
// and Opus, `-f ipod` (m4a) refuses MP3, FLAC in MP4 is still experimental,
// and Vorbis in MP4 muxes but nothing plays it. runner-image/test/mux.test.ts
// muxes every pair the plan makes.
export const VIDEO_OK: Readonly<Record<Format, readonly string[]>> = {
  mp4: ['h264', 'hevc', 'av1', 'vp9', 'mpeg4'],
  mov: ['h264', 'hevc', 'prores', 'mpeg4'],
  mkv: ['*'],
  webm: ['vp8', 'vp9', 'av1'],
  m4a: [], mp3: [], ogg: [], opus: [],
};
export const AUDIO_OK: Readonly<Record<Format, readonly string[]>> = {
  mp4: ['aac', 'mp3', 'opus', 'alac', 'ac3', 'eac3'],
  mov: ['aac', 'mp3', 'alac', 'pcm_s16le', 'ac3', 'eac3'],
  mkv: ['*'],
  webm: ['opus', 'vorbis'],
  m4a: ['aac', 'alac'],
  mp3: ['mp3'],
  ogg: ['vorbis', 'opus', 'flac'],
  opus: ['opus'],
};

export function fits(list: readonly string[], codec: string | undefined): boolean {
  return list.includes('*') || (codec !== undefined && list.includes(codec));
}

export type VideoTarget = 'h264' | 'h265' | 'vp9';
type AudioTarget = 'aac' | 'opus' | 'mp3';
const VIDEO_CODEC_NAME: Record<VideoTarget, string> = { h264: 'h264', h265: 'hevc', vp9: 'vp9' };
const AUDIO_CODEC_NAME: Record<AudioTarget, string> = { aac: 'aac', opus: 'opus', mp3: 'mp3' };
// What a container gets when the source's codec, or the codec asked for,
// cannot go into it. Audio follows the spec ("copy, with automatic fallback
// to aac") where AAC fits and rule 4's choices where it does not; video is
// H.264, the codec every video container here but WebM takes (rule 4: VP9).
const AUDIO_FALLBACK: Record<Format, AudioTarget> = {
  mp4: 'aac', mov: 'aac', mkv: 'aac', webm: 'opus', m4a: 'aac', mp3: 'mp3', ogg: 'opus', opus: 'opus',
};
const videoFallback = (format: Format): VideoTarget => (format === 'webm' ? 'vp9' : 'h264');
// A source re-encoded only to cut it exactly stays in its own codec family.
const SAME_FAMILY: Record<string, VideoTarget> = { h264: 'h264', hevc: 'h265', vp9: 'vp9' };

/**
 * Encoder speed settings. CRF sets the quality; these set how hard the
 * encoder works for it. Measured at 1080p on 2 vCPUs (ffmpeg 5.1): libx264
 * veryfast ~31 fps (medium ~15), libx265 veryfast ~6 fps (ultrafast ~11),
 * libvpx-vp9 good/cpu-used 4 with row threading ~6 fps. A download service
 * re-encodes on request, so real-time-ish speed beats the last few percent
 * of size; veryfast x265 still keeps most of HEVC's size advantage.
 */
export const ENCODER_ARGS: Record<VideoTarget, readonly string[]> = {
  // yuv420p: 10-bit or 4:4:4 sources would otherwise become High 10 / 4:4:4
  // H.264, which browsers and most devices cannot play.
  h264: ['-c:v', 'libx264', '-preset', 'veryfast', '-pix_fmt', 'yuv420p'],
  h265: ['-c:v', 'libx265', '-preset', 'veryfast', '-x265-params', 'log-level=error'],
  // -b:v 0 makes -crf a constant-quality target instead of a bitrate cap.
  vp9: ['-c:v', 'libvpx-vp9', '-deadline', 'good', '-cpu-used', '4', '-row-mt', '1', '-b:v', '0'],
};
const AUDIO_ENCODERS: Record<AudioTarget, string> = { aac: 'aac', opus: 'libopus', mp3: 'libmp3lame' };

export interface StreamCodecs {
  video?: string;
  audio?: string;
}

/** How one output stream is made: copied bit for bit, or encoded. */
export type StreamPlan =
  | { copy: true; codec: string }
  | { copy: false; codec: string; args: string[] };

export interface CodecPlan {
  video?: StreamPlan;
  audio?: StreamPlan;
}

/** videoQuality is the CRF on the API's scale, libx264's (normalisation already put a preset's CRF there). */
type CodecSpec = Pick<MediaJobOptions, 'videoCodec' | 'audioCodec' | 'audioBitrate' | 'videoQuality'>;

// Each encoder's CRF scale, as three anchors the API's scale maps onto: 0
// (the best its constant-quality mode does), the value that looks like
// libx264's default 23, and its worst. A number in between is interpolated
// linearly on each side of the middle anchor, so the whole API range stays
// reachable and order-preserving for every codec.
// - libx265: 0–51 like x264, but offset: its default 28 "should visually
//   correspond to libx264 video at CRF 23, but result in about half the
//   file size" (ffmpeg's H.265 encoding guide).
// - libvpx-vp9 in constant quality (-crf with -b:v 0): 0–63, a different
//   quantizer scale; 31 is the value ffmpeg's VP9 guide and Google's VP9 VOD
//   settings give for 1080p, the x264-default counterpart.
const CRF_SCALES: Record<VideoTarget, { likeX264Default: number; max: number }> = {
  h264: { likeX264Default: DEFAULT_VIDEO_QUALITY, max: MAX_VIDEO_QUALITY },
  h265: { likeX264Default: 28, max: 51 },
  vp9: { likeX264Default: 31, max: 63 },
};

/** The CRF on `target`'s own scale that means the quality `crf` means on the API's (libx264's) scale. */
export function encoderCrf(target: VideoTarget, crf: number): number {
  const { likeX264Default: mid, max } = CRF_SCALES[target];
  // The API's default is libx264's own, the middle anchor of every scale.
  const c = Math.min(MAX_VIDEO_QUALITY, Math.max(0, crf));
  const v = c <= DEFAULT_VIDEO_QUALITY
    ? (c * mid) / DEFAULT_VIDEO_QUALITY
    : mid + ((c - DEFAULT_VIDEO_QUALITY) * (max - mid)) / (MAX_VIDEO_QUALITY - DEFAULT_VIDEO_QUALITY);
  return Math.round(v);
}

/**
 * How each output stream is made. Copy is the default and keeps the source
 * bit for bit. Whatever the spec says, the result is a pair the container
 * holds: the gateway applies rule 4 already, but a kubectl-made MediaJob, a
 * pair rule 4 does not cover (mov+vp9, m4a+mp3, webm+h265) or a source codec
 * the container refuses all end here in the container's fallback codec.
 * `reencodeVideo` asks for an encode even when copy would do (an exact cut
 * that does not start on a keyframe, a frame scaled down to the key's
 * resolution limit); it keeps the source's codec family.
 */
export function codecPlan(spec: CodecSpec, container: Container, source: StreamCodecs, opts: { reencodeVideo?: boolean } = {}): CodecPlan {
  const plan: CodecPlan = {};
  const { format } = container;
  if (source.video && !container.audioOnly) {
    const asked = spec.videoCodec;
    let target: VideoTarget | undefined;
    if (asked !== 'copy') {
      target = fits(VIDEO_OK[format], VIDEO_CODEC_NAME[asked]) ? asked : videoFallback(format);
    } else if (!fits(VIDEO_OK[format], source.video)) {
      target = videoFallback(format);
    } else if (opts.reencodeVideo) {
      const same = SAME_FAMILY[source.video];
      target = same && fits(VIDEO_OK[format], VIDEO_CODEC_NAME[same]) ? same : videoFallback(format);
    }
    if (!target) plan.video = { copy: true, codec: source.video };
    else {
      const args = [...ENCODER_ARGS[target], '-crf', String(encoderCrf(target, spec.videoQuality))];
      // Apple players only take HEVC in MP4/MOV under the hvc1 sample entry (ffmpeg writes hev1 by default).
      if (target === 'h265' && (format === 'mp4' || format === 'mov')) args.push('-tag:v', 'hvc1');
      plan.video = { copy: false, codec: VIDEO_CODEC_NAME[target], args };
    }
  }
  if (source.audio) {
    const asked = spec.audioCodec;
    let target: AudioTarget | undefined;
    if (asked && asked !== 'copy') target = fits(AUDIO_OK[format], AUDIO_CODEC_NAME[asked]) ? asked : AUDIO_FALLBACK[format];
    else if (!fits(AUDIO_OK[format], source.audio)) target = AUDIO_FALLBACK[format];
    plan.audio = target
      ? { copy: false, codec: AUDIO_CODEC_NAME[target], args: ['-c:a', AUDIO_ENCODERS[target], '-b:a', spec.audioBitrate] }
      : { copy: true, codec: source.audio };
  }
  return plan;
}

/** ffmpeg codec arguments for a plan. */
export function codecPlanArgs(plan: CodecPlan): string[] {
  const args: string[] = [];
  if (plan.video) args.push(...(plan.video.copy ? ['-c:v', 'copy'] : plan.video.args));
  if (plan.audio) args.push(...(plan.audio.copy ? ['-c:a', 'copy'] : plan.audio.args));
  return args;
}

/** ffmpeg codec arguments for the output (codecPlan, as arguments). */
export function codecArgs(spec: CodecSpec, container: Container, source: StreamCodecs, opts: { reencodeVideo?: boolean } = {}): string[] {
  return codecPlanArgs(codecPlan(spec, container, source, opts));
}

/* ------------------------------------------------------------------ */
/* Format choice (spec rule 3)                                          */
/* ------------------------------------------------------------------ */

type Kind = 'video' | 'audio' | 'muxed' | 'other';

// yt-dlp says `none` for a stream a format does not have and leaves the codec
// out when it does not know (HLS variants without CODECS, plain files): an
// unknown codec may be there.
function kindOf(f: YtDlpFormat): Kind {
  const video = f.vcodec !== 'none';
  const audio = f.acodec !== 'none';
  if (video && audio) return 'muxed';
  if (video) return 'video';
  if (audio) return 'audio';
  return 'other'; // storyboards, images
}

/** The shorter side of a format's frame: what max_resolution compares against, for horizontal and vertical video alike. */
export function shortSide(f: Pick<YtDlpFormat, 'width' | 'height'>): number | undefined {
  return f.width && f.height ? Math.min(f.width, f.height) : undefined;
}

/** Audio bitrate, kbit/s, when known. */
function audioRate(f: YtDlpFormat): number | undefined {
  const r = f.abr ?? (kindOf(f) === 'audio' ? f.tbr : undefined);
  return typeof r === 'number' && r > 0 ? r : undefined;
}

function usable(formats: readonly YtDlpFormat[]): YtDlpFormat[] {
  return formats.filter((f) => f.format_id && !f.has_drm && kindOf(f) !== 'other' && f.ext !== 'mhtml');
}

/**
 * The highest (or lowest) by `rate`; formats whose rate is known come before
 * those whose rate is not, and ties keep yt-dlp's order, which sorts its
 * list worst to best by its own rules (codec, fps, size...).
 */
function pickBy(pool: YtDlpFormat[], rate: (f: YtDlpFormat) => number | undefined, want: 'highest' | 'lowest'): YtDlpFormat | undefined {
  const known = pool.filter((f) => rate(f) !== undefined);
  const use = known.length ? known : pool;
  if (!use.length) return undefined;
  // Stable sort: equal rates stay in yt-dlp's order.
  const sorted = [...use].sort((a, b) => (rate(a) ?? 0) - (rate(b) ?? 0));
  return want === 'highest' ? sorted[sorted.length - 1] : sorted[0];
}

type ChoiceSpec = Pick<MediaJobOptions, 'maxResolution' | 'videoCodec' | 'audioCodec'>;

/**
 * Rule 3 on the video formats: `best` takes the largest shorter side,
 * `lowest` the smallest, a number the largest at or below it, or the
 * smallest when every format exceeds it. Rule 3 never resizes what it
 * chooses; only the key's resolution limit (limits.maxResolution) does, at
 * the mux (frameScale), when even this choice is larger. Within the chosen
 * resolution, a format whose codec the container takes as is comes first
 * when copying (no needless re-encode), then yt-dlp's order decides: its
 * best for `best` and numbers, its worst for `lowest`.
 */
function chooseVideo(candidates: YtDlpFormat[], spec: ChoiceSpec, container: Container): YtDlpFormat | undefined {
  if (!candidates.length) return undefined;
  const res = spec.maxResolution;
  let pool = candidates;
  const sized = candidates.filter((f) => shortSide(f) !== undefined);
  // Formats of unknown size cannot be compared; when some sizes are known, those decide.
  if (sized.length) {
    const sides = [...new Set(sized.map((f) => shortSide(f)!))].sort((a, b) => a - b);
    let side: number;
    if (res === 'best') side = sides[sides.length - 1]!;
    else if (res === 'lowest') side = sides[0]!;
    else side = [...sides].reverse().find((s) => s <= Number(res)) ?? sides[0]!;
    pool = sized.filter((f) => shortSide(f) === side);
  }
  if (spec.videoCodec === 'copy') {
    const fitting = pool.filter((f) => fits(VIDEO_OK[container.format], ffmpegCodecName(f.vcodec)));
    if (fitting.length) pool = fitting;
  }
  return res === 'lowest' ? pool[0] : pool[pool.length - 1];
}

/**
 * Which separate audio format to take, among the tracks in the preferred
 * language (yt-dlp's language_preference). For `144` and `lowest` without an
 * audio codec in the spec (rule 3): the lowest-bitrate AAC track, or, in a
 * container AAC cannot go into (WebM, Ogg, Opus, MP3), the lowest-bitrate
 * track the container holds, rather than a small AAC track re-encoded at
 * audio_bitrate. Otherwise the highest bitrate, among the tracks the
 * container holds as they are when the audio is copied (so `audio_only`
 * delivers m4a without re-encoding whenever the source has AAC), among all
 * when it is encoded anyway.
 */
function chooseAudio(all: YtDlpFormat[], spec: ChoiceSpec, container: Container): YtDlpFormat | undefined {
  if (!all.length) return undefined;
  // The language first, as yt-dlp sorts: never a dubbed track over the original for a bitrate.
  const lang = (f: YtDlpFormat) => f.language_preference ?? -1;
  const best = Math.max(...all.map(lang));
  const candidates = all.filter((f) => lang(f) === best);
  const ok = AUDIO_OK[container.format];
  const codec = (f: YtDlpFormat) => ffmpegCodecName(f.acodec);
  const fitting = candidates.filter((f) => fits(ok, codec(f)));
  const res = spec.maxResolution;
  if (spec.audioCodec === undefined && (res === '144' || res === 'lowest')) {
    const aac = fits(ok, 'aac') ? candidates.filter((f) => codec(f) === 'aac') : [];
    return pickBy(aac.length ? aac : fitting.length ? fitting : candidates, audioRate, 'lowest');
  }
  const encoding = spec.audioCodec !== undefined && spec.audioCodec !== 'copy';
  return pickBy(!encoding && fitting.length ? fitting : candidates, audioRate, 'highest');
}

export interface FormatChoice {
  /** Formats to download, each to its own file: the video (or muxed) format first, then a separate audio format. */
  formats: YtDlpFormat[];
  /** The format whose audio is delivered: the separate audio format, else the muxed one; absent when there is none. */
  audioFrom?: string;
}

/**
 * The formats to download for a job, by the spec's rules, from the probe's
 * format list. Undefined when the list has nothing usable (the pipeline then
 * falls back on yt-dlp's own choice).
 */
export function chooseFormats(formats: readonly YtDlpFormat[], spec: ChoiceSpec, container: Container): FormatChoice | undefined {
  const all = usable(formats);
  const audioTracks = all.filter((f) => kindOf(f) === 'audio');
  const withVideo = all.filter((f) => kindOf(f) !== 'audio');
  if (container.audioOnly) {
    const audio = chooseAudio(audioTracks, spec, container);
    if (audio) return { formats: [audio], audioFrom: audio.format_id };
    // No audio-only format: the audio comes out of the best muxed one.
    const muxed = withVideo.filter((f) => kindOf(f) === 'muxed');
    const best = muxed[muxed.length - 1];
    return best ? { formats: [best], audioFrom: best.format_id } : undefined;
  }
  const video = chooseVideo(withVideo, spec, container);
  const audio = chooseAudio(audioTracks, spec, container);
  if (!video && !audio) return undefined;
  const picked = [video, audio].filter((f): f is YtDlpFormat => f !== undefined);
  const audioFrom = audio?.format_id ?? (video && kindOf(video) === 'muxed' ? video.format_id : undefined);
  return { formats: picked, ...(audioFrom ? { audioFrom } : {}) };
}

/**
 * Audio-only formats whose codec or bitrate yt-dlp does not know, when they
 * decide the choice (more than one audio track). yt-dlp's HLS parser leaves
 * both out for EXT-X-MEDIA renditions (common.py: "TODO: update acodec for
 * audio only formats with the same GROUP-ID"; an EXT-X-MEDIA tag has no
 * CODECS or BANDWIDTH), so the pipeline measures these with ffprobe.
 */
export function formatsToMeasure(formats: readonly YtDlpFormat[]): YtDlpFormat[] {
  const tracks = usable(formats).filter((f) => kindOf(f) === 'audio');
  if (tracks.length < 2) return [];
  // Only what ffprobe can read directly: a playlist or a file over HTTP.
  const readable = (f: YtDlpFormat) => Boolean(f.url) && /^(m3u8|m3u8_native|https?)$/.test(f.protocol ?? '');
  return tracks.filter((f) => (ffmpegCodecName(f.acodec) === undefined || audioRate(f) === undefined) && readable(f));
}

export interface MeasuredAudio {
  /** ffmpeg codec name. */
  codec?: string;
  /** kbit/s. */
  kbps?: number;
}

/** The format list with measured codecs and bitrates filled in where yt-dlp had none. */
export function withMeasurements(formats: readonly YtDlpFormat[], measured: ReadonlyMap<string, MeasuredAudio>): YtDlpFormat[] {
  return formats.map((f) => {
    const m = measured.get(f.format_id);
    if (!m) return f;
    return {
      ...f,
      ...(ffmpegCodecName(f.acodec) === undefined && m.codec ? { acodec: m.codec } : {}),
      ...(audioRate(f) === undefined && m.kbps ? { abr: m.kbps } : {}),
    };
  });
}

/* ------------------------------------------------------------------ */
/* Clipping (spec: clip_start, clip_end)                                */
/* ------------------------------------------------------------------ */

export interface Clip {
  /** Seconds from the start of the media. */
  start: number;
  /** Seconds from the start of the media; absent = to the end. */
  end?: number;
}

/**
 * The clip a spec asks for, or undefined for the whole media. The spec was
 * checked before (config.ts parseSpec: times the runner reads, the end
 * after the start), so a clip is never dropped: a time that cannot be read
 * here throws, rather than deliver the whole media for a clip.
 */
export function clipOf(spec: Pick<MediaJobOptions, 'clipStart' | 'clipEnd'>): Clip | undefined {
  const read = (field: 'clipStart' | 'clipEnd') => {
    const text = spec[field];
    if (text === undefined) return undefined;
    const seconds = parseClipTime(text);
    if (seconds === undefined) throw new Error(`spec.${field} is not a time the runner can read`);
    return seconds;
  };
  const start = read('clipStart') ?? 0;
  const end = read('clipEnd');
  if (end !== undefined && end <= start) throw new Error('spec.clipEnd is not after clipStart');
  if (start === 0 && end === undefined) return undefined;
  return { start, ...(end !== undefined ? { end } : {}) };
}

/* ------------------------------------------------------------------ */
/* The key's resolution limit (limits.maxResolution)                    */
/* ------------------------------------------------------------------ */

export interface Frame {
  width: number;
  height: number;
}

/** How the delivered video is scaled down to the key's resolution limit. */
export interface FrameScale {
  /** The ffmpeg video filter (-vf). */
  filter: string;
  /** The delivered frame, when the source's is known. */
  frame?: Frame;
}

/**
 * Whether, and how, a video of `source`'s frame is scaled down so that its
 * shorter side (a vertical video's width) is at most `limit` lines: the
 * key's max_resolution_limit as a hard cap, for a source whose every format
 * exceeds it. Undefined without a limit or when the frame is within it.
 * The other side keeps the aspect ratio, rounded to an even number as
 * ffmpeg's `-2` does (4:2:0 video has even dimensions); an odd limit counts
 * as the even number below it. A frame of unknown size gets a filter that
 * only ever shrinks, sized on the decoded frame itself.
 */
export function frameScale(source: Partial<Frame>, limit: number | undefined): FrameScale | undefined {
  if (limit === undefined) return undefined;
  const lines = Math.max(2, limit - (limit % 2));
  const { width, height } = source;
  const known = Boolean(width && height);
  if (known && Math.min(width!, height!) <= lines) return undefined;
  // Decided on the frame the filter gets (after ffmpeg's autorotation, so a
  // rotated phone video is judged upright); iw >= ih: landscape or square.
  // Commas inside quotes do not split the filter graph.
  const side = (s: 'iw' | 'ih') => `min(trunc(${s}/2)*2,${lines})`;
  const filter = `scale=w='if(gte(iw,ih),-2,${side('iw')})':h='if(gte(iw,ih),${side('ih')},-2)'`;
  if (!known) return { filter };
  const [short, long] = [Math.min(width!, height!), Math.max(width!, height!)];
  // ffmpeg's -2: the other side from the aspect ratio, to the nearest even number.
  const other = Math.round((long * lines) / (short * 2)) * 2;
  return { filter, frame: width! >= height! ? { width: other, height: lines } : { width: lines, height: other } };
}

/* ------------------------------------------------------------------ */
/* Metadata                                                             */
/* ------------------------------------------------------------------ */

/** "720p" from the delivered video's dimensions: the shorter side, for horizontal and vertical video alike. */
export function actualQuality(width: number | undefined, height: number | undefined): string | undefined {
  if (!width || !height) return undefined;
  return `${Math.min(width, height)}p`;
}

/** yt-dlp's upload_date (YYYYMMDD) as an ISO 8601 instant at midnight UTC (spec: release_date for video sources). */
export function releaseDateOf(info: Pick<YtDlpInfo, 'upload_date' | 'release_date' | 'timestamp'>): string | undefined {
  const raw = info.upload_date ?? info.release_date;
  const m = typeof raw === 'string' ? /^(\d{4})(\d{2})(\d{2})$/.exec(raw) : null;
  if (m) {
    const d = new Date(Date.UTC(Number(m[1]), Number(m[2]) - 1, Number(m[3])));
    // Reject dates Date silently rolled over (20240230 → March 1st).
    if (d.getUTCFullYear() === Number(m[1]) && d.getUTCMonth() === Number(m[2]) - 1 && d.getUTCDate() === Number(m[3])) {
      return d.toISOString();
    }
  }
  if (typeof info.timestamp === 'number' && Number.isFinite(info.timestamp)) {
    const d = new Date(info.timestamp * 1000);
    return new Date(Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate())).toISOString();
  }
  return undefined;
}
