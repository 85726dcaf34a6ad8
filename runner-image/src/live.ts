// Live streams: telling a live source from a finished one, waiting for a
// scheduled stream, and recording with ffmpeg.
//
// Why ffmpeg records rather than yt-dlp: yt-dlp's native HLS downloader takes
// the segments a playlist lists at that moment and stops (it only hands live
// streams to ffmpeg when the extractor said `is_live`, which yt-dlp's generic
// extractor never does for a bare .m3u8), and the cap and the stop must be
// ours. The recorder writes MPEG-TS, like yt-dlp's own FFmpegFD does for live
// streams ("produces a file that is playable" when interrupted): every packet
// stands on its own, so whatever is on disk when ffmpeg stops (its `-t` cap,
// the stream's end, SIGTERM) is a valid recording, which the mux step then
// turns into the requested container.
import { stat } from 'node:fs/promises';
import path from 'node:path';
import { boundedGet, GetError, type GetFailure } from '@mediajobs/lib/batches/http-get';
import { errFields, type Logger } from '@mediajobs/lib/logger';
import type { MediaJobSpec } from '@mediajobs/lib/mediajob/types';
import { runProcess, type RunResult } from './child.js';
import { classifyRecorder, classifyYtDlp } from './classify.js';
import { egressGetOptions } from './egress-proxy.js';
import { httpInputArgs, isNetworkUrl } from './ffmpeg.js';
import type { YtDlpFormat, YtDlpInfo } from './plan.js';
import type { DownloadResult, ProbeResult, YtDlpFailure } from './ytdlp.js';

/** Bounds on live work, from the runner's environment (see README). */
export interface LiveLimits {
  /** Cap on a recording when the job gives no maxDuration (and on any maxDuration). */
  maxRecordingSeconds: number;
  /** How long wait_for_video waits for a scheduled stream before giving up. */
  waitForVideoMaxSeconds: number;
  /** Interval between checks while waiting. */
  waitForVideoPollSeconds: number;
}

// Together with mux and upload these stay under the operator's default
// JOB_ACTIVE_DEADLINE_SECONDS (6 h), so a recording is delivered before its
// Job is killed.
export const DEFAULT_LIVE_LIMITS: LiveLimits = {
  maxRecordingSeconds: 4 * 3600,
  waitForVideoMaxSeconds: 3600,
  waitForVideoPollSeconds: 15,
};

/** The format fields the recorder reads beyond plan.ts's slice of the info JSON. */
export type LiveFormat = YtDlpFormat & {
  url?: string;
  http_headers?: Record<string, string> | null;
};

/** The info JSON as the recorder reads it: a single chosen format's fields sit at its top level. */
export type LiveInfo = YtDlpInfo & Omit<Partial<LiveFormat>, 'format_id'>;

export type Liveness = 'live' | 'not_live' | 'unknown';

/** What the extractor said: yt-dlp's `is_live` / `live_status` (null when it could not tell). */
export function livenessOf(info: Pick<YtDlpInfo, 'is_live' | 'live_status'>): Liveness {
  if (info.is_live === true || info.live_status === 'is_live') return 'live';
  if (info.is_live === false || (info.live_status && info.live_status !== 'is_upcoming')) return 'not_live';
  return 'unknown';
}

/**
 * An HLS playlist's verdict (RFC 8216): a media playlist is live while it
 * has no EXT-X-ENDLIST and is not of type VOD; a master playlist names the
 * variant to look at instead. Undefined for anything that is not HLS.
 */
export function hlsLiveness(text: string): 'live' | 'vod' | { variant: string } | undefined {
  if (!text.trimStart().startsWith('#EXTM3U')) return undefined;
  if (/^#EXT-X-STREAM-INF/m.test(text)) {
    const lines = text.split(/\r?\n/);
    const i = lines.findIndex((l) => l.startsWith('#EXT-X-STREAM-INF'));
    const uri = lines.slice(i + 1).find((l) => l.trim() && !l.startsWith('#'));
    return uri ? { variant: uri.trim() } : undefined;
  }
  if (/^#EXT-X-ENDLIST/m.test(text) || /^#EXT-X-PLAYLIST-TYPE:\s*VOD/m.test(text)) return 'vod';
  return 'live';
}

const isHls = (f: LiveFormat) => f.protocol === 'm3u8' || f.protocol === 'm3u8_native';
const isHttp = (f: LiveFormat) => f.protocol === 'http' || f.protocol === 'https';

/** The formats yt-dlp selected, with their URLs: requested_formats for a merge, else the single chosen one. */
export function selectedFormats(info: LiveInfo): LiveFormat[] {
  const requested = (info.requested_formats ?? []) as LiveFormat[];
  if (requested.length) return requested;
  const listed = ((info.formats ?? []) as LiveFormat[]).find((f) => f.format_id === info.format_id);
  if (listed?.url) return [listed];
  if (!info.url) return [];
  return [{
    format_id: info.format_id ?? '0', url: info.url, protocol: info.protocol, http_headers: info.http_headers,
    vcodec: info.vcodec, acodec: info.acodec,
  }];
}

/** Answers that are no playlist to read, as opposed to a read that failed. */
const NOT_A_PLAYLIST: ReadonlySet<GetFailure['kind']> = new Set(['status', 'too_large', 'encoding']);

/**
 * A small text body (a playlist), read with the format's headers through
 * the job's egress proxy and its upstream session (egress-proxy.ts
 * egressGetOptions), redirects included.
 * Undefined for an answer that is no playlist: an error status, a body over
 * `maxBytes`, an encoding other than gzip. Throws GetError on refusals,
 * network errors and time-outs.
 */
export async function fetchText(
  url: string, headers: Record<string, string>, read: { timeoutMs: number; signal?: AbortSignal; maxBytes?: number },
): Promise<string | undefined> {
  try {
    const got = await boundedGet(url, {
      ...egressGetOptions(), headers, timeoutMs: read.timeoutMs, maxBytes: read.maxBytes ?? 4 << 20, ...(read.signal && { signal: read.signal }),
    });
    return got.body.toString('utf8');
  } catch (err) {
    if (err instanceof GetError && NOT_A_PLAYLIST.has(err.failure.kind)) return undefined;
    throw err;
  }
}

/**
 * Whether to record instead of download. The extractor's word wins; when it
 * has none (yt-dlp's generic extractor on a bare playlist), an HLS playlist
 * without an end says live. `liveRecording` makes a source nothing can
 * classify (an endless HTTP radio stream) a recording too.
 */
export async function isLiveSource(
  info: LiveInfo,
  spec: Pick<MediaJobSpec, 'liveRecording'>,
  opts: { signal?: AbortSignal; timeoutMs?: number; logger?: Logger } = {},
): Promise<boolean> {
  const said = livenessOf(info);
  if (said !== 'unknown') return said === 'live';
  const formats = selectedFormats(info);
  for (const f of formats.filter(isHls)) {
    const timeoutMs = opts.timeoutMs ?? 15_000;
    // One deadline over the playlist and the variant it names.
    const read = { timeoutMs, signal: AbortSignal.any([AbortSignal.timeout(timeoutMs), ...(opts.signal ? [opts.signal] : [])]) };
    try {
      let url = f.url!;
      let verdict = hlsLiveness((await fetchText(url, f.http_headers ?? {}, read)) ?? '');
      if (verdict && typeof verdict === 'object') {
        url = new URL(verdict.variant, url).toString();
        verdict = hlsLiveness((await fetchText(url, f.http_headers ?? {}, read)) ?? '');
      }
      if (verdict === 'live') return true;
      if (verdict === 'vod') return false;
    } catch (err) {
      // The download that follows meets the same problem and classifies it.
      opts.logger?.debug({ err: errFields(err) }, 'playlist check failed');
    }
  }
  return spec.liveRecording === true && formats.length > 0 && formats.every((f) => isHls(f) || isHttp(f));
}

export interface RecordingPlan {
  inputs: { url: string; headers: Record<string, string>; hls: boolean }[];
  /** ffmpeg -map specifiers: the video of one input, the audio of one input. */
  maps: string[];
  fromStart: boolean;
  capSeconds: number;
  formatIds: string[];
}

/**
 * How to record `chosen`, the formats the spec's rules picked from the
 * probe's list (plan.ts chooseFormats, as for a download: max_resolution
 * means the same for a recording), else yt-dlp's own selection; or why they
 * cannot be recorded: ffmpeg reads HLS and plain HTTP; other live protocols
 * (YouTube's from-start DASH fragments) need yt-dlp's own downloaders and
 * are not recorded.
 */
export function recordingPlan(
  info: LiveInfo,
  spec: Pick<MediaJobSpec, 'liveFromStart' | 'maxDuration' | 'limits'>,
  audioOnly: boolean,
  limits: LiveLimits,
  chosen?: readonly LiveFormat[],
): RecordingPlan | { unsupported: string } {
  const formats = chosen?.length ? [...chosen] : selectedFormats(info);
  if (!formats.length) return { unsupported: 'no format' };
  const bad = formats.find((f) => !f.url || !(isHls(f) || isHttp(f)));
  if (bad) return { unsupported: bad.protocol ?? 'unknown protocol' };
  // The protocol field is the extractor's word; the URL is what ffmpeg opens.
  if (formats.some((f) => !isNetworkUrl(f.url!))) return { unsupported: 'a URL that is not http(s)' };
  // Separate renditions (video-only + audio-only) are two inputs; a muxed
  // rendition is both. Unknown codecs ("maybe video") count as video.
  const videoIdx = formats.findIndex((f) => f.vcodec !== 'none');
  const audioOnlyIdx = formats.findIndex((f) => f.vcodec === 'none' && f.acodec !== 'none');
  const audioIdx = audioOnlyIdx >= 0 ? audioOnlyIdx : videoIdx;
  const maps: string[] = [];
  // '?': a rendition that turns out to lack the stream is not an error.
  if (!audioOnly && videoIdx >= 0) maps.push(`${videoIdx}:v:0?`);
  if (audioIdx >= 0) maps.push(`${audioIdx}:a:0?`);
  // The job's own cap, the runner's, and the owning key's duration limit (spec.limits): the smallest stops it.
  const cap = Math.min(
    spec.maxDuration && spec.maxDuration > 0 ? spec.maxDuration : Infinity, limits.maxRecordingSeconds, spec.limits?.maxDurationSeconds ?? Infinity);
  return {
    inputs: formats.map((f) => ({ url: f.url!, headers: f.http_headers ?? {}, hls: isHls(f) })),
    maps,
    fromStart: spec.liveFromStart === true,
    capSeconds: cap,
    formatIds: formats.map((f) => f.format_id),
  };
}

/**
 * A live playlist that stops gaining segments is reloaded this many times
 * before the recording counts as ended (ffmpeg reloads every half to one
 * target duration, so about 15-30 segment durations of silence).
 */
const HOLD_RELOADS = 30;

/** The recorder's ffmpeg arguments. */
export function recorderArgs(plan: RecordingPlan, output: string, socketTimeoutSeconds: number): string[] {
  const args = ['-hide_banner', '-nostdin', '-loglevel', 'error', '-nostats', '-progress', 'pipe:1', '-y'];
  for (const input of plan.inputs) {
    if (input.hls) {
      // 0 = the oldest segment the playlist still lists (its DVR window); -1 = the live point.
      args.push('-live_start_index', plan.fromStart ? '0' : '-1', '-m3u8_hold_counters', String(HOLD_RELOADS));
    }
    args.push(...httpInputArgs(input.headers, socketTimeoutSeconds, input.url), '-i', input.url);
  }
  for (const m of plan.maps) args.push('-map', m);
  args.push('-c', 'copy', '-t', String(plan.capSeconds), '-f', 'mpegts', output);
  return args;
}

/**
 * Record until the cap, the stream's end, or `signal`. A recording that got
 * any media is a result even when ffmpeg ended on an error (the stream went
 * away mid-way); one that got nothing is classified from ffmpeg's words.
 */
export async function recordLive(
  plan: RecordingPlan,
  dir: string,
  opts: { bin: string; socketTimeoutSeconds: number; signal?: AbortSignal; onProgress?: (fraction: number) => void; logger: Logger },
): Promise<DownloadResult> {
  const output = path.join(dir, 'recording.ts');
  // A stream that wedges without erroring is stopped, gracefully, well after the cap.
  const guard = new AbortController();
  const timer = setTimeout(() => guard.abort(), (plan.capSeconds + Math.max(120, plan.capSeconds / 2)) * 1000);
  timer.unref();
  const signal = opts.signal ? AbortSignal.any([opts.signal, guard.signal]) : guard.signal;
  let run: RunResult;
  try {
    run = await runProcess(opts.bin, recorderArgs(plan, output, opts.socketTimeoutSeconds), {
      signal,
      onStdoutLine: (line) => {
        const m = /^out_time_us=(\d+)$/.exec(line);
        if (m) opts.onProgress?.(Math.min(1, Number(m[1]) / 1e6 / plan.capSeconds));
      },
    });
  } finally {
    clearTimeout(timer);
  }
  const size = await stat(output).then((s) => s.size, () => 0);
  if (size > 0) {
    if (run.exitCode !== 0) opts.logger.info({ exitCode: run.exitCode, signal: run.signal, guard: guard.signal.aborted }, 'recording ended early; keeping what was recorded');
    return { ok: true, files: [{ formatId: plan.formatIds.join('+'), path: output }] };
  }
  const failure: YtDlpFailure = { ok: false, run, category: classifyRecorder(run.stderr).category };
  return failure;
}

/** Whether a failed probe means "not there yet" for wait_for_video: upcoming, or a page or playlist that is not published yet (404). */
export function notYetAvailable(stderr: string, exitCode: number | null): boolean {
  const c = classifyYtDlp(stderr, exitCode).category;
  return c === 'upcoming' || c === 'unavailable';
}

/**
 * The probe, repeated while the stream is not there yet when the job asked
 * to wait (wait_for_video), for at most `limits.waitForVideoMaxSeconds`. A
 * wait that runs out ends as `upcoming` (a content warning: the stream never
 * started within the documented maximum).
 */
export async function probeWaitingForVideo(
  probeOnce: () => Promise<ProbeResult>,
  wait: boolean,
  limits: Pick<LiveLimits, 'waitForVideoMaxSeconds' | 'waitForVideoPollSeconds'>,
  opts: { signal?: AbortSignal; logger: Logger; now?: () => number; sleep?: (ms: number, signal?: AbortSignal) => Promise<void> },
): Promise<ProbeResult> {
  const now = opts.now ?? Date.now;
  const sleep = opts.sleep ?? abortableSleep;
  const deadline = now() + limits.waitForVideoMaxSeconds * 1000;
  for (let attempt = 1; ; attempt++) {
    const r = await probeOnce();
    if (r.ok || !wait || r.category || !notYetAvailable(r.run.stderr, r.run.exitCode)) return r;
    const remaining = deadline - now();
    if (remaining <= 0 || opts.signal?.aborted) return { ...r, category: 'upcoming' };
    const pause = Math.min(limits.waitForVideoPollSeconds * 1000, remaining);
    opts.logger.info({ attempt, retryInMs: pause }, 'waiting for the stream to start (wait_for_video)');
    await sleep(pause, opts.signal);
  }
}

function abortableSleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const t = setTimeout(done, ms);
    function done() {
      clearTimeout(t);
      signal?.removeEventListener('abort', done);
      resolve();
    }
    signal?.addEventListener('abort', done, { once: true });
  });
}

/**
 * Record a live source into `dir` as the Downloading step's result (one
 * MPEG-TS file): `opts.formats` when the spec's rules chose (see
 * recordingPlan), else yt-dlp's selection.
 */
export async function recordLiveSource(
  info: LiveInfo,
  spec: Pick<MediaJobSpec, 'liveFromStart' | 'maxDuration' | 'limits'>,
  audioOnly: boolean,
  dir: string,
  opts: {
    bin: string; socketTimeoutSeconds: number; limits?: LiveLimits; formats?: readonly LiveFormat[]; signal?: AbortSignal;
    onProgress?: (fraction: number) => void; logger: Logger;
  },
): Promise<DownloadResult> {
  const plan = recordingPlan(info, spec, audioOnly, opts.limits ?? DEFAULT_LIVE_LIMITS, opts.formats);
  if ('unsupported' in plan) {
    opts.logger.warn({ protocol: plan.unsupported }, 'live stream in a protocol the recorder cannot read');
    const run: RunResult = { exitCode: null, signal: null, stdout: '', stderr: '', stdoutTruncated: false };
    return { ok: false, run, category: 'download_failed' };
  }
  opts.logger.info({ formats: plan.formatIds, capSeconds: plan.capSeconds, fromStart: plan.fromStart }, 'recording live stream');
  return recordLive(plan, dir, opts);
}
