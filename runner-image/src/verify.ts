// What the runner delivered, checked against what the job asked for before
// it may be reported Completed: the container, the streams and their codecs,
// each stream's span against the expected duration, and the bytes stored.
// The check reads the finished bytes themselves (the file on disk, or a copy
// of the stream as it went into the upload), never the mux plan, and the
// span asked for comes from the request (a clip's length), not the plan.
import { createInterface } from 'node:readline';
import type { Readable, Writable } from 'node:stream';
import { runProcess } from './child.js';
import { probedNumber, type MuxPlan } from './ffmpeg.js';
import type { Clip, Container } from './plan.js';

/** What ffprobe found in a delivered file. */
export interface Observed {
  /** ffprobe's format_name, e.g. `mov,mp4,m4a,3gp,3g2,mj2`. */
  formatName?: string;
  /** ISO BMFF files: the major brand (`isom`, `qt  `, `M4A `), which tells MP4, MOV and M4A apart. */
  brand?: string;
  streams: ObservedStream[];
}

export interface ObservedStream {
  index: number;
  type: string;
  codec?: string;
  /** Earliest packet time and latest packet end seen, seconds; absent when no packet was read. */
  first?: number;
  end?: number;
}

export interface Expected {
  container: Container;
  /** ffmpeg codec names of the streams asked for; absent = no such stream. */
  video?: string;
  audio?: string;
  /** The media span the output must cover (clip length, source duration, recorded span); unknown for some sources. */
  durationSeconds?: number;
  /**
   * Per stream, where the source stream itself leaves less: how long it
   * can span (a source whose video ends before its audio) and how late it
   * starts (MPEG-TS video a little after its audio). Default: the whole
   * durationSeconds, from the start.
   */
  streams?: Partial<Record<'video' | 'audio', { seconds?: number; lateBy?: number }>>;
}

/**
 * What the request asks of the output's span, read from the spec and the
 * inputs, never from the mux plan: the clip the spec asks for (none for a
 * live recording, which is not clipped) and how long the media is, as the
 * inputs say (undefined when they do not).
 */
export interface Asked {
  clip?: Clip;
  mediaSeconds?: number;
}

/** Seconds the request asks to be delivered: a clip's length (to the media's end), else the whole media. */
export function askedSeconds(asked: Asked): number | undefined {
  const { clip, mediaSeconds } = asked;
  if (!clip) return mediaSeconds;
  const end = mediaSeconds === undefined ? clip.end : Math.min(clip.end ?? mediaSeconds, mediaSeconds);
  return end === undefined ? undefined : Math.max(0, end - clip.start);
}

/**
 * What the output must hold: the streams' codecs the plan made, and the
 * span the request asks for (a clip asked is the clip's length, whatever the
 * plan cut), each stream's measured from the sources' own streams. So a
 * plan that lost the clip delivers the whole media, and fails the check.
 */
export function expectedOf(plan: MuxPlan, container: Container, asked: Asked): Expected {
  const start = asked.clip?.start ?? 0;
  const duration = askedSeconds(asked);
  const end = duration !== undefined ? start + duration : undefined;
  const streams: NonNullable<Expected['streams']> = {};
  for (const type of ['video', 'audio'] as const) {
    const m = plan[type];
    if (!m) continue;
    // Where the source stream runs, in the media's time (the file's own, shifted by a cut download's offset).
    const from = (probedNumber(m.stream.start_time) ?? m.input.probed.startSeconds ?? 0) - (m.input.probed.startSeconds ?? 0) + (m.input.offsetSeconds ?? 0);
    const length = probedNumber(m.stream.duration);
    const to = length !== undefined ? from + length : undefined;
    const lateBy = Math.max(0, from - start);
    const seconds = end === undefined ? undefined : Math.min(end, to ?? end) - Math.max(start, from);
    streams[type] = { lateBy, ...(seconds !== undefined ? { seconds } : {}) };
  }
  return {
    container,
    ...(plan.video && plan.codecs.video ? { video: plan.codecs.video.codec } : {}),
    ...(plan.audio && plan.codecs.audio ? { audio: plan.codecs.audio.codec } : {}),
    ...(duration !== undefined && duration > 0 ? { durationSeconds: duration } : {}),
    streams,
  };
}

/**
 * How far a delivered span may differ from the expected one: a frame or an
 * audio packet at each end of an exact cut, a copied stream's first GOP
 * boundary, encoder delay and the sources' own stream-length differences
 * (audio often runs a few hundred ms past the video) all fit in 0.5 s, or 2%
 * for long media whose declared duration is itself an estimate. An output
 * that lost a stream, its frames, or seconds of a clip does not.
 */
function durationTolerance(expectedSeconds: number): number {
  return Math.max(0.5, expectedSeconds * 0.02);
}

/** How late a stream may start in the output (a copied stream begins at a packet boundary). */
const START_TOLERANCE_SECONDS = 0.5;

/** ffprobe's format_name for each output container's demuxer. */
const DEMUXER: Record<Container['muxer'], string> = {
  mp4: 'mov,mp4', mov: 'mov,mp4', ipod: 'mov,mp4', matroska: 'matroska', webm: 'matroska,webm', mp3: 'mp3', ogg: 'ogg', opus: 'ogg',
};

/** The major brand ffmpeg's mov and ipod muxers write; an MP4 has any other (isom, iso5, iso6, mp42 ...). */
const BRANDS: Partial<Record<Container['format'], string>> = { mov: 'qt  ', m4a: 'M4A ' };

/** Why `observed` is not what was asked for, in words for the log; undefined when it is. */
export function mismatch(expected: Expected, observed: Observed): string | undefined {
  const demuxer = DEMUXER[expected.container.muxer];
  if (!demuxer || !observed.formatName?.startsWith(demuxer)) return `container is ${observed.formatName ?? 'unknown'}, not ${expected.container.format}`;
  const brand = BRANDS[expected.container.format];
  if (demuxer === 'mov,mp4' && (brand ? observed.brand !== brand : observed.brand === 'qt  ' || observed.brand === 'M4A ')) {
    return `container is ${observed.brand === 'qt  ' ? 'mov' : observed.brand === 'M4A ' ? 'm4a' : 'mp4'} (${observed.brand?.trim() ?? 'no brand'}), not ${expected.container.format}`;
  }
  const real = observed.streams.filter((s) => s.type === 'video' || s.type === 'audio');
  for (const type of ['video', 'audio'] as const) {
    const want = expected[type];
    const got = real.filter((s) => s.type === type);
    if (!want) {
      if (got.length) return `has ${type} that was not asked for`;
      continue;
    }
    if (got.length !== 1) return `has ${got.length} ${type} streams, not 1`;
    const s = got[0]!;
    if (s.codec !== want) return `${type} is ${s.codec ?? 'unknown'}, not ${want}`;
    if (s.first === undefined || s.end === undefined) return `${type} has no packets`;
    const own = expected.streams?.[type];
    if (s.first > (own?.lateBy ?? 0) + START_TOLERANCE_SECONDS) return `${type} starts at ${s.first.toFixed(3)} s`;
    const seconds = own?.seconds ?? expected.durationSeconds;
    if (seconds !== undefined) {
      const spans = s.end - Math.max(0, s.first);
      if (seconds - spans > durationTolerance(seconds)) return `${type} spans ${spans.toFixed(3)} s of ${seconds.toFixed(3)} s`;
    }
  }
  if (expected.durationSeconds !== undefined) {
    const end = Math.max(...real.map((s) => s.end ?? 0));
    if (end - expected.durationSeconds > durationTolerance(expected.durationSeconds)) {
      return `runs ${end.toFixed(3)} s, asked for ${expected.durationSeconds.toFixed(3)} s`;
    }
  }
  return undefined;
}

/** A delivered file as read back: what ffprobe found (undefined when it could not read it) and how many bytes were written. */
export interface Inspection {
  observed?: Observed;
  bytes: number;
  /** How long the job waited for it, when it was read before the upload ended. */
  ms?: number;
}

/** Why a delivery fails the check, or undefined: read, not empty, stored whole, and what was asked for. */
export function wrongDelivery(expected: Expected, observed: Observed | undefined, written: number, stored: number): string | undefined {
  if (written === 0) return 'the file is empty';
  if (stored !== written) return `${stored} bytes stored of ${written} written`;
  if (!observed) return 'ffprobe could not read the file';
  return mismatch(expected, observed);
}

const ENTRIES = ['-show_entries', 'format=format_name:format_tags=major_brand:stream=index,codec_type,codec_name:stream_disposition=attached_pic:packet=stream_index,pts_time,dts_time,duration_time'];

/**
 * ffprobe's output (`-of compact`) folded as it arrives: the format and
 * streams, and per stream the earliest packet time and latest packet end,
 * so a whole stream's packets never pile up in memory. (Packets come
 * before the stream sections, which ffprobe prints at the end.)
 */
async function fold(lines: Readable): Promise<Observed> {
  const observed: Observed = { streams: [] };
  const spans = new Map<number, { first: number; end: number }>();
  for await (const line of createInterface({ input: lines, crlfDelay: Infinity })) {
    const [section, ...fields] = line.split('|');
    const f = Object.fromEntries(fields.map((kv) => {
      const eq = kv.indexOf('=');
      return [kv.slice(0, eq), kv.slice(eq + 1)];
    }));
    const num = (k: string) => probedNumber(f[k]);
    if (section === 'packet') {
      // pts is absent on some containers' first packets (Ogg headers); dts then dates them.
      const at = num('pts_time') ?? num('dts_time');
      if (at === undefined) continue;
      const index = num('stream_index') ?? -1;
      const span = spans.get(index);
      const end = at + (num('duration_time') ?? 0);
      spans.set(index, span ? { first: Math.min(span.first, at), end: Math.max(span.end, end) } : { first: at, end });
    } else if (section === 'stream') {
      // Cover art is a one-frame "video" stream, not the video asked for.
      if (f['disposition:attached_pic'] === '1') continue;
      observed.streams.push({ index: num('index') ?? -1, type: f.codec_type ?? '', ...(f.codec_name ? { codec: f.codec_name } : {}) });
    } else if (section === 'format') {
      observed.formatName = f.format_name;
      if (f['tag:major_brand']) observed.brand = f['tag:major_brand'];
    }
  }
  for (const s of observed.streams) Object.assign(s, spans.get(s.index));
  return observed;
}

/**
 * Inspect a finished file on disk. Only its ends are read: the first
 * seconds and the last seconds before the expected end (ffprobe seeks there
 * with the container's index), which is all the check needs and keeps it to
 * milliseconds for a file of any length.
 */
export async function inspectFile(bin: string, file: string, expectedSeconds: number | undefined, signal?: AbortSignal): Promise<Observed | undefined> {
  const tail = expectedSeconds !== undefined ? Math.max(0, expectedSeconds - 3) : undefined;
  const intervals = tail !== undefined && tail > 3 ? `%+3,${tail.toFixed(3)}%` : undefined;
  return inspect(bin, [...(intervals ? ['-read_intervals', intervals] : []), '--', file], undefined, signal);
}

/**
 * Inspect bytes as they are produced: write them to the returned stream
 * (a copy of what goes into the upload) and await `observed` once it ends.
 * ffprobe reads the whole stream, since a pipe cannot seek.
 */
export function inspectStream(bin: string, signal?: AbortSignal): { input: Writable; observed: Promise<Observed | undefined> } {
  let input: Writable | undefined;
  // ffprobe is spawned, and its stdin handed over, before inspect's first await.
  const observed = inspect(bin, ['-i', 'pipe:0'], (stdin) => (input = stdin), signal);
  if (!input) throw new Error('ffprobe was not started');
  return { input, observed };
}

async function inspect(bin: string, source: string[], takeStdin: ((stdin: Writable) => void) | undefined, signal?: AbortSignal): Promise<Observed | undefined> {
  let folded: Promise<Observed> | undefined;
  const run = await runProcess(bin, ['-v', 'error', ...ENTRIES, '-of', 'compact', ...source], {
    signal,
    ...(takeStdin ? { stdinStream: takeStdin } : {}),
    pipeStdout: (out) => {
      folded = fold(out);
      folded.catch(() => undefined);
    },
  });
  if (run.exitCode !== 0 || !folded) return undefined;
  return folded;
}
