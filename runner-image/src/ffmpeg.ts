// ffprobe and the ffmpeg mux. Stream copy by default: the mux rewrites the
// container, not the media, so it runs at disk speed. Streamable containers
// go from ffmpeg's stdout straight into the upload.
import path from 'node:path';
import { PassThrough, type Readable, type Writable } from 'node:stream';
import type { MediaJobOptions } from '@mediajobs/lib/mediajob/types';
import { runProcess, type RunResult } from './child.js';
import { activeEgress } from './egress-proxy.js';
import {
  codecPlan, codecPlanArgs, frameScale, type Clip, type CodecPlan, type Container, type Frame, type MeasuredAudio, type YtDlpFormat,
} from './plan.js';

export interface ProbedStream {
  index: number;
  codec_type?: string;
  codec_name?: string;
  width?: number;
  height?: number;
  /** "25/1"; "0/0" when unknown. */
  avg_frame_rate?: string;
  r_frame_rate?: string;
  disposition?: { attached_pic?: number };
  /** As ffprobe prints them, seconds: where the stream begins in the file's time, and how long it runs (not every container says). */
  start_time?: string;
  duration?: string;
}

export interface Probed {
  durationSeconds?: number;
  /** The file's start time: ffmpeg's -ss counts from here. */
  startSeconds?: number;
  formatName?: string;
  streams: ProbedStream[];
}

export type FfprobeResult = { ok: true; probed: Probed } | { ok: false; run: RunResult };

/** `inputArgs`: input options for a network source (httpInputArgs). */
export async function ffprobe(bin: string, file: string, signal?: AbortSignal, inputArgs: readonly string[] = []): Promise<FfprobeResult> {
  const guard = inputGuard(file);
  if (!guard) return { ok: false, run: notHttp() };
  const run = await runProcess(bin, ['-v', 'error', ...inputArgs, ...guard, '-print_format', 'json', '-show_format', '-show_streams', '--', file], {
    captureStdout: true,
    signal,
    maxStdoutBytes: 8 * 1024 * 1024,
  });
  if (run.exitCode !== 0) return { ok: false, run };
  try {
    const raw = JSON.parse(run.stdout) as { format?: { duration?: string; start_time?: string; format_name?: string }; streams?: ProbedStream[] };
    return {
      ok: true,
      probed: {
        durationSeconds: probedNumber(raw.format?.duration),
        startSeconds: probedNumber(raw.format?.start_time),
        formatName: raw.format?.format_name,
        streams: raw.streams ?? [],
      },
    };
  } catch {
    return { ok: false, run };
  }
}

/** A number ffprobe printed as text (durations, start times); undefined for "N/A" or nothing. */
export function probedNumber(s: string | undefined): number | undefined {
  return s !== undefined && Number.isFinite(Number(s)) ? Number(s) : undefined;
}

/** A real video stream: cover art is stored as a one-frame "video" stream and does not count. */
export function videoStream(p: Probed): ProbedStream | undefined {
  return p.streams.find((s) => s.codec_type === 'video' && !s.disposition?.attached_pic);
}

export function audioStream(p: Probed): ProbedStream | undefined {
  return p.streams.find((s) => s.codec_type === 'audio');
}

/** Frames per second of a stream, when ffprobe knows it. */
export function frameRate(s: Pick<ProbedStream, 'avg_frame_rate' | 'r_frame_rate'>): number | undefined {
  for (const r of [s.avg_frame_rate, s.r_frame_rate]) {
    const m = /^(\d+)\/(\d+)$/.exec(r ?? '');
    if (m && Number(m[1]) > 0 && Number(m[2]) > 0) return Number(m[1]) / Number(m[2]);
  }
  return undefined;
}

export interface MuxInput {
  /** A downloaded file, or the URL of a format read straight from its server (then with inputArgs). */
  path: string;
  /** ffmpeg input options placed before this input's -i (httpInputArgs for a URL). */
  inputArgs?: readonly string[];
  probed: Probed;
  /** This input carries the audio to deliver (the separate audio format), even if another input has audio too. */
  carriesAudio?: boolean;
  /**
   * Where in the media this input begins, seconds: a download of only the
   * segments a clip needs (sections.ts) starts there, and its `probed`
   * duration is the span it holds. 0 for a whole source.
   */
  offsetSeconds?: number;
  /**
   * False for a URL whose server answers no range request: ffmpeg cannot
   * seek in it (its Matroska demuxer then loses the stream), so a clip of it
   * is cut by decoding from the start and dropping what comes before (-ss
   * as an output option), which still stops reading at the clip's end.
   */
  seekable?: boolean;
}

/** Where `at` (seconds into the media) falls in `input`, which may begin later (offsetSeconds). */
export function inputTime(input: Pick<MuxInput, 'offsetSeconds'>, at: number): number {
  return at - (input.offsetSeconds ?? 0);
}

/** Where the media ends, as far as the inputs know: the latest end of any of them. */
export function mediaEnd(inputs: readonly MuxInput[]): number | undefined {
  const ends = inputs.filter((i) => i.probed.durationSeconds !== undefined).map((i) => (i.offsetSeconds ?? 0) + i.probed.durationSeconds!);
  return ends.length ? Math.max(...ends) : undefined;
}

export interface MuxOptions {
  clip?: Clip;
  /** Encode the video even if copy would do (an exact cut off a keyframe). */
  reencodeVideo?: boolean;
  /**
   * The CPUs the job may use (child.ts cpuBudget): the thread count of each
   * decoder and of the video encoder, instead of the machine's cores. Not
   * libx264's own 1.5 per CPU: on 2 CPUs, 2 threads encoded 1080p as fast
   * as 3 (runner bench, transcode row) with 22 MB less memory, and under a
   * CPU quota extra threads only queue.
   */
  threads?: number;
}

/** ffmpeg output target meaning "write to stdout": the upload reads it as ffmpeg writes. */
export const PIPE_OUTPUT = 'pipe:1';

export interface MuxPlan {
  args: string[];
  codecs: CodecPlan;
  /** The delivered video and audio streams as the inputs have them. */
  video?: { input: MuxInput; stream: ProbedStream };
  audio?: { input: MuxInput; stream: ProbedStream };
  /**
   * The delivered video's frame, when known: the input's, or what the key's
   * resolution limit scales it down to (frameScale). As coded: a rotated
   * video plays with the two sides swapped.
   */
  frame?: Frame;
  /** Seconds ffmpeg will write: what progress is measured against. */
  durationSeconds?: number;
  /** Where in the media the output begins, seconds (a clip's start; on a keyframe found, where the copy starts). */
  startSeconds?: number;
  /** ffmpeg writes to stdout (progress then goes to fd 3). */
  streaming: boolean;
}

/** Seconds as ffmpeg reads them; milliseconds are as exact as a clip time gets. */
const secs = (n: number) => n.toFixed(3);

/**
 * The ffmpeg arguments that put one video stream and one audio stream found
 * across `inputs` into `output` (a path, or PIPE_OUTPUT). Undefined when there
 * is nothing to deliver (no audio for an audio-only job, no stream at all).
 *
 * A clip seeks each input (-ss before -i: the demuxer jumps close to the
 * start instead of decoding from zero) and stops after the clip's length
 * (-t). An encoded stream starts exactly at the clip start (ffmpeg decodes
 * from the keyframe before it and drops what precedes the start); a copied
 * stream starts at a packet boundary: -copypriorss:a 0 drops copied audio
 * packets that begin before the start, which the seek to the video's keyframe
 * would otherwise keep. Copied video is only ever cut at a keyframe (see
 * planMux), so it needs no such rule.
 */
export function muxPlan(
  inputs: MuxInput[], output: string, container: Container,
  spec: Pick<MediaJobOptions, 'videoCodec' | 'audioCodec' | 'audioBitrate' | 'videoQuality' | 'limits'>, opts: MuxOptions = {},
): MuxPlan | undefined {
  let video: MuxPlan['video'];
  let audio: MuxPlan['audio'];
  for (const input of inputs) {
    const v = videoStream(input.probed);
    const a = audioStream(input.probed);
    if (v && !video) video = { input, stream: v };
    if (a && (!audio || (input.carriesAudio && !audio.input.carriesAudio))) audio = { input, stream: a };
  }
  if (container.audioOnly) video = undefined;
  if (!video && !audio) return undefined;
  if (container.audioOnly && !audio) return undefined;

  // The key's resolution limit is a hard cap: a frame larger than it (rule 3
  // found none within it, or could not tell) is scaled down: an encode.
  const scale = video ? frameScale(video.stream, spec.limits?.maxResolution) : undefined;
  const codecs = codecPlan(
    spec, container, { video: video?.stream.codec_name, audio: audio?.stream.codec_name }, { reencodeVideo: opts.reencodeVideo || scale !== undefined },
  );
  const streaming = output === PIPE_OUTPUT;
  const clip = opts.clip;
  const args = ['-hide_banner', '-nostdin', '-loglevel', 'error', '-nostats', '-progress', streaming ? 'pipe:3' : 'pipe:1', '-y'];
  // Unseekable inputs come alone (one progressive URL), so one output-side -ss serves.
  const seekOnOutput = clip !== undefined && clip.start > 0 && inputs.some((i) => i.seekable === false);
  for (const input of inputs) {
    const start = clip && !seekOnOutput ? inputTime(input, clip.start) : 0;
    if (start > 0) args.push('-ss', secs(start));
    if (opts.threads) args.push('-threads', String(opts.threads));
    const guard = inputGuard(input.path);
    // Not reached for a URL that is not http(s): ffprobe refused it before it became an input.
    if (!guard) throw new Error('a mux input is neither a local file nor an http(s) URL');
    // A file of ours passed ffprobe under the file-only whitelist before it became an input (pipeline.ts muxInputs).
    args.push(...(input.inputArgs ?? []), ...(isNetworkUrl(input.path) ? guard : []), '-i', input.path);
  }
  const at = (m: { input: MuxInput; stream: ProbedStream }) => `${inputs.indexOf(m.input)}:${m.stream.index}`;
  if (video) args.push('-map', at(video));
  if (audio) args.push('-map', at(audio));
  args.push(...withThreadBudget(codecPlanArgs(codecs), opts.threads));
  if (opts.threads && codecs.video && !codecs.video.copy) args.push('-threads', String(opts.threads));
  if (scale) args.push('-vf', scale.filter);
  // AAC from MPEG-TS (HLS) carries ADTS headers that MP4 stores as
  // AudioSpecificConfig. The mp4 muxer converts by itself only when it writes
  // its moov at the end; fragmented MP4 writes it first, so the filter must
  // be there from the start. It passes AAC without ADTS headers through.
  if (container.format === 'mp4' && codecs.audio?.copy && codecs.audio.codec === 'aac') args.push('-bsf:a', 'aac_adtstoasc');
  if (clip) {
    if (seekOnOutput) args.push('-ss', secs(clip.start));
    if (clip.end !== undefined) args.push('-t', secs(clip.end - clip.start));
    // Not for Matroska/WebM sources: there ffmpeg 5.1 dates laced audio
    // packets after a seek so that the rule drops the clip's first seconds
    // of audio (seen with Opus: the audio began 3.98 s into a 4 s clip);
    // without it the copy keeps at most one packet from before the start.
    if (clip.start > 0 && audio && codecs.audio?.copy && !audio.input.probed.formatName?.startsWith('matroska')) args.push('-copypriorss:a', '0');
  }
  args.push('-f', container.muxer, ...container.muxerArgs, output);

  const whole = mediaEnd(inputs);
  let durationSeconds = whole;
  if (clip) {
    const end = clip.end !== undefined && (whole === undefined || clip.end < whole) ? clip.end : whole;
    durationSeconds = end === undefined ? undefined : end - clip.start;
  }
  const frame = scale ? scale.frame : video?.stream.width && video.stream.height ? { width: video.stream.width, height: video.stream.height } : undefined;
  return {
    args, codecs, streaming,
    ...(video ? { video } : {}),
    ...(frame ? { frame } : {}),
    ...(audio ? { audio } : {}),
    ...(durationSeconds !== undefined && durationSeconds > 0 ? { durationSeconds } : {}),
    ...(clip ? { startSeconds: clip.start } : {}),
  };
}

/**
 * The plan with ffmpeg stopping once its output passes `maxBytes` (-fs, an
 * output option, so just before the output): a file over the key's size
 * limit is never written whole. Its output then has more than `maxBytes`
 * bytes exactly when the whole would have had (ffmpeg stops at the first
 * packet that reaches -fs), which is how the caller tells.
 */
export function withOutputCap(plan: MuxPlan, maxBytes: number | undefined): MuxPlan {
  if (maxBytes === undefined) return plan;
  const output = plan.args[plan.args.length - 1]!;
  return { ...plan, args: [...plan.args.slice(0, -1), '-fs', String(maxBytes + 1), output] };
}

/**
 * Encoder arguments sized to the job's CPUs. ffmpeg's -threads (added by
 * the caller) sizes libx264's and libvpx's threads, but libx265 runs its own
 * thread pool, one thread per core of the node whatever the pod's limit,
 * unless x265's `pools` says how many (x265 docs: "--pools ... a number
 * N allocates N threads"); its frame threads then follow the pool.
 */
export function withThreadBudget(codecArgs: readonly string[], threads: number | undefined): string[] {
  const at = codecArgs.indexOf('-x265-params');
  if (!threads || at < 0) return [...codecArgs];
  const out = [...codecArgs];
  out[at + 1] = `${out[at + 1]}:pools=${threads}`;
  return out;
}

/**
 * The keyframe of the video stream at `at` seconds into the file (within
 * half a frame), as seconds into the file, so a stream copy can start there
 * exactly. Reads only the packets around that point (-read_intervals seeks
 * there), not the file. Undefined when there is none or it cannot tell: the
 * caller then encodes, which is exact whatever the keyframes.
 */
export async function keyframeAt(bin: string, input: MuxInput, stream: ProbedStream, at: number, signal?: AbortSignal): Promise<number | undefined> {
  const fps = frameRate(stream);
  const tolerance = fps ? 0.5 / fps : 0.02;
  // -read_intervals takes the file's own timestamps; -ss counts from its start time.
  const abs = (input.probed.startSeconds ?? 0) + at;
  const guard = inputGuard(input.path);
  if (!guard) return undefined;
  const run = await runProcess(bin, [
    '-v', 'error', '-select_streams', String(stream.index),
    '-read_intervals', `${Math.max(0, abs - 1).toFixed(6)}%${(abs + 1).toFixed(6)}`,
    '-show_entries', 'packet=pts_time,flags', '-of', 'csv=p=0', ...(input.inputArgs ?? []), ...guard, '--', input.path,
  ], { captureStdout: true, signal, maxStdoutBytes: 4 * 1024 * 1024 });
  if (run.exitCode !== 0) return undefined;
  for (const line of run.stdout.split('\n')) {
    const [pts, flags] = line.trim().split(',');
    if (flags?.includes('K') && pts && Math.abs(Number(pts) - abs) <= tolerance) return Number(pts) - (input.probed.startSeconds ?? 0);
  }
  return undefined;
}

/**
 * The mux plan for a job: copy where the codecs allow, and, for a clip whose
 * start is not on a keyframe, the video encoded so the clip starts exactly
 * where asked (a copied stream can only start at a keyframe: it would begin
 * up to a GOP early, or, hidden behind an MP4 edit list, still carry those
 * frames for players that ignore edit lists and for MKV/WebM, which have
 * none). The encode keeps the source's codec family at the job's CRF.
 */
export async function planMux(
  ffprobeBin: string, inputs: MuxInput[], output: string, container: Container,
  spec: Parameters<typeof muxPlan>[3], clip: Clip | undefined, signal?: AbortSignal, threads?: number,
): Promise<MuxPlan | undefined> {
  const plan = muxPlan(inputs, output, container, spec, { clip, threads });
  if (!plan || !clip || clip.start <= 0 || !plan.video || !plan.codecs.video?.copy) return plan;
  const at = inputTime(plan.video.input, clip.start);
  const keyframe = await keyframeAt(ffprobeBin, plan.video.input, plan.video.stream, at, signal);
  if (keyframe === undefined) return muxPlan(inputs, output, container, spec, { clip, reencodeVideo: true, threads });
  // ffmpeg's seek lands on the last keyframe at or before -ss: a keyframe a
  // few ms after the start asked for would have it start a whole GOP early.
  // The copy starts on the keyframe itself (1 ms past it, against rounding).
  if (keyframe <= at) return plan;
  return muxPlan(inputs, output, container, spec, { clip: { ...clip, start: clip.start + (keyframe - at) + 0.001 }, threads });
}

/**
 * Copy the audio and video of `file` (MPEG-TS) into Matroska at
 * `<file>.mkv`, whose cues let ffmpeg seek exactly; up to `untilSeconds`
 * into the file when given (what a clip can need). Data streams (timed ID3,
 * SCTE-35) stay behind: Matroska holds none.
 */
export function remuxIndexed(bin: string, file: string, untilSeconds: number | undefined, signal?: AbortSignal): Promise<RunResult> {
  return runProcess(bin, [
    '-hide_banner', '-nostdin', '-loglevel', 'error', '-y', ...LOCAL_INPUT, '-i', file, '-map', '0:v?', '-map', '0:a?', '-c', 'copy',
    ...(untilSeconds !== undefined ? ['-t', secs(untilSeconds)] : []), '-f', 'matroska', `${file}.mkv`,
  ], { signal });
}

interface MuxRunOptions {
  signal?: AbortSignal;
  onProgress?: (fraction: number) => void;
}

// -progress prints key=value blocks; out_time_us is how far the output has got.
function progressLine(plan: MuxPlan, opts: MuxRunOptions) {
  return (line: string) => {
    const m = /^out_time_us=(\d+)$/.exec(line);
    if (m && plan.durationSeconds) opts.onProgress?.(Math.min(1, Number(m[1]) / 1e6 / plan.durationSeconds));
  };
}

/** Run a mux that writes a file; `onProgress` gets the fraction of the duration written so far. */
export async function mux(bin: string, plan: MuxPlan, opts: MuxRunOptions = {}): Promise<RunResult> {
  return runProcess(bin, plan.args, { signal: opts.signal, onStdoutLine: progressLine(plan, opts) });
}

/**
 * Run a mux that writes to stdout into an open file: a staged upload of
 * storage on this machine's disk (StorageProvider.stage), which then gets
 * the bytes without their passing through node.
 */
export function muxToFd(bin: string, plan: MuxPlan, fd: number, opts: MuxRunOptions = {}): Promise<RunResult> {
  return runProcess(bin, plan.args, { signal: opts.signal, onStdoutLine: progressLine(plan, opts), stdoutFd: fd });
}

/**
 * Run a mux that writes to stdout, as a stream for the upload. The stream
 * ends only when ffmpeg exits 0: a failed or killed ffmpeg errors it, so a
 * truncated output is never stored as a complete file. If the upload gives
 * up first (destroys the stream), ffmpeg's stdout is closed and it stops on
 * the broken pipe instead of blocking on a full one.
 */
export function muxToStream(
  bin: string, plan: MuxPlan, opts: MuxRunOptions & { copyTo?: Writable } = {},
): { body: Readable; done: Promise<RunResult>; bytes(): number } {
  const body = new PassThrough();
  let stdout: Readable | undefined;
  let bytes = 0;
  body.once('close', () => stdout?.destroy());
  const done = runProcess(bin, plan.args, {
    signal: opts.signal,
    onStdoutLine: progressLine(plan, opts),
    pipeStdout: (out) => {
      stdout = out;
      out.on('data', (chunk: Buffer) => (bytes += chunk.length));
      out.pipe(body, { end: false });
      const copy = opts.copyTo;
      if (copy) {
        out.pipe(copy);
        // Ended however ffmpeg's output ends (a destroyed pipe does not end what it fed).
        out.once('close', () => {
          if (!copy.writableEnded) copy.end();
        });
      }
    },
  }).then(
    (run) => {
      if (run.exitCode === 0) body.end();
      else body.destroy(new Error(`ffmpeg exited with ${run.exitCode ?? run.signal}`));
      return run;
    },
    (err: unknown) => {
      body.destroy(err instanceof Error ? err : new Error(String(err)));
      throw err;
    },
  );
  return { body, done, bytes: () => bytes };
}

/**
 * What ffmpeg may open for a network input: HTTP(S) and the protocols they
 * are built of (tcp, tls; httpproxy is the CONNECT tunnel an https URL takes
 * through the egress proxy), and crypto for AES-128 HLS segments. Never
 * file, data, pipe or any other: a playlist from the web must not make
 * ffmpeg read local files (a segment `file:///etc/passwd`) or reach
 * anything around the egress proxy (rtmp, udp, ...). The HLS demuxer passes
 * the list on to every playlist, key and segment it opens.
 */
export const NETWORK_PROTOCOLS = 'http,https,tcp,tls,crypto,httpproxy';

/** For a file of ours (a download, a recording): nothing but files, whatever a demuxer finds inside it. */
export const LOCAL_PROTOCOLS = 'file';
const LOCAL_INPUT = ['-protocol_whitelist', LOCAL_PROTOCOLS] as const;

/** Whether `url` is an absolute http(s) URL, the only kind of network input ffmpeg is given. */
export function isNetworkUrl(url: string): boolean {
  return /^https?:\/\/[^/]/i.test(url);
}

/**
 * The input options an ffmpeg or ffprobe input gets last (so they win over
 * any given before): a local path reads only files; an http(s) URL only the
 * network protocols, through the job's egress proxy. Undefined for anything
 * else (another scheme, a protocol prefix such as `concat:` or
 * `subfile,,...:`): such an input is refused. Every probe of an input and
 * every URL input of the mux take it; a downloaded file reaches the mux only
 * after its probe under the file-only list passed (pipeline.ts muxInputs),
 * which keeps the mux's arguments as plan.test.ts states them.
 */
export function inputGuard(input: string): string[] | undefined {
  if (path.isAbsolute(input) && !input.includes(':')) return [...LOCAL_INPUT];
  return isNetworkUrl(input) ? networkInputArgs() : undefined;
}

/**
 * The input options of a network input: the network protocols only, through
 * the job's egress proxy. Ours (inputGuard) and the ffmpeg yt-dlp starts as
 * its downloader (ytdlp.ts commonArgs) take the same.
 */
export function networkInputArgs(): string[] {
  const egress = activeEgress();
  return ['-protocol_whitelist', NETWORK_PROTOCOLS, ...(egress ? ['-http_proxy', egress.url] : [])];
}

/** The result of a run refused before it started (the input is not one ffmpeg may open). */
function notHttp(): RunResult {
  return { exitCode: null, signal: null, stdout: '', stderr: 'refused: the input is not an http(s) URL or a local file', stdoutTruncated: false };
}

/**
 * ffmpeg input options that fetch a URL as yt-dlp would: the format's own
 * HTTP headers (yt-dlp's http_headers: User-Agent, Referer, cookies the
 * extractor set), and a socket timeout, so a stalled server fails the read
 * instead of hanging it. A User-Agent among the headers replaces ffmpeg's
 * own (its http protocol adds one only when the headers have none). The
 * protocol whitelist and the egress proxy come with them (inputGuard).
 */
export function httpInputArgs(headers: Readonly<Record<string, string>>, timeoutSeconds: number, url?: string): string[] {
  const lines = Object.entries(headers).map(([k, v]) => `${k}: ${v}\r\n`).join('');
  // Without the URL (source-read.ts builds a format's options apart from it): as for any http(s) URL.
  const guard = url === undefined ? networkInputArgs() : inputGuard(url);
  if (!guard) throw new Error('not an http(s) URL');
  return [...guard, '-rw_timeout', String(timeoutSeconds * 1_000_000), ...(lines ? ['-headers', lines] : [])];
}

/** Reads of an audio format's first seconds, the first included: one refused or reset request must not decide a rendition. */
const MEASURE_ATTEMPTS = 2;

/**
 * Codec and bitrate of an audio format yt-dlp knows neither of, read from the
 * first seconds of its playlist or file. The bitrate is counted from packet
 * sizes, which works for every container (MPEG-TS and fragmented MP4 often
 * declare none). A failed read is tried once more, since the rules choose
 * among renditions by what is measured and an unmeasured one would lose to
 * a worse one. Undefined when it cannot be read in time.
 */
export async function measureAudio(bin: string, f: YtDlpFormat, opts: { signal?: AbortSignal; timeoutSeconds: number }): Promise<MeasuredAudio | undefined> {
  if (!f.url || !isNetworkUrl(f.url)) return undefined;
  for (let attempt = 1; attempt <= MEASURE_ATTEMPTS; attempt++) {
    const m = await measureAudioOnce(bin, f.url, f.http_headers ?? {}, opts);
    if (m !== undefined || opts.signal?.aborted) return m;
  }
  return undefined;
}

async function measureAudioOnce(
  bin: string, url: string, headers: Readonly<Record<string, string>>, opts: { signal?: AbortSignal; timeoutSeconds: number },
): Promise<MeasuredAudio | undefined> {
  const signal = AbortSignal.any([AbortSignal.timeout(opts.timeoutSeconds * 2000), ...(opts.signal ? [opts.signal] : [])]);
  const run = await runProcess(bin, [
    '-v', 'error',
    // A playlist from the network must not make ffprobe open local files or other protocols.
    ...httpInputArgs(headers, opts.timeoutSeconds, url),
    '-read_intervals', '%+5', '-select_streams', 'a:0',
    '-show_entries', 'stream=codec_name:packet=size,pts_time,duration_time', '-of', 'json', '--', url,
  ], { captureStdout: true, signal, maxStdoutBytes: 4 * 1024 * 1024 });
  if (run.exitCode !== 0) return undefined;
  try {
    const raw = JSON.parse(run.stdout) as { streams?: { codec_name?: string }[]; packets?: { size?: string; pts_time?: string; duration_time?: string }[] };
    const codec = raw.streams?.[0]?.codec_name;
    const packets = (raw.packets ?? []).filter((p) => p.pts_time !== undefined && Number.isFinite(Number(p.pts_time)));
    let kbps: number | undefined;
    if (packets.length > 1) {
      const first = Number(packets[0]!.pts_time);
      const last = packets[packets.length - 1]!;
      const span = Number(last.pts_time) + (Number(last.duration_time) || 0) - first;
      const bytes = packets.reduce((sum, p) => sum + (Number(p.size) || 0), 0);
      // Less than a second says little about a variable bitrate.
      if (span >= 1) kbps = Math.round((bytes * 8) / span / 1000);
    }
    return { ...(codec ? { codec } : {}), ...(kbps ? { kbps } : {}) };
  } catch {
    return undefined;
  }
}
