// yt-dlp in two runs: a probe (-J) that resolves the URL and picks the
// formats, then a download of exactly those formats, each to its own file, so
// the mux is a step of ours (with its own progress) instead of yt-dlp's. The
// download run reads the probe's info JSON (--load-info-json) instead of
// resolving the URL again, and is started while the probe runs (startYtDlp).
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { ErrorCategory } from './classify.js';
import { runProcess, type RunResult } from './child.js';
import { activeEgress } from './egress-proxy.js';
import { networkInputArgs } from './ffmpeg.js';
import { expectedBytes, type YtDlpInfo } from './plan.js';
import type { SourceBytes } from './byte-rate.js';

export interface YtDlpOptions {
  bin: string;
  /** Seconds before a stalled connection is abandoned. */
  socketTimeoutSeconds: number;
  /** Extra options from the deployment (YTDLP_ARGS). */
  extraArgs?: string[];
  signal?: AbortSignal;
}

/**
 * Options every run gets: nothing from a config file or cache on the image,
 * bounded retries, the job's egress proxy (egress-proxy.ts) for every
 * request yt-dlp makes (pages, redirects, manifests, fragments, subtitles,
 * thumbnails), and the input options of our own ffmpeg runs for the ffmpeg
 * yt-dlp starts as its downloader (downloaderInputArgs). Both come after
 * the deployment's options, so YTDLP_ARGS cannot route around them.
 */
export function commonArgs(opts: YtDlpOptions): string[] {
  const egress = activeEgress();
  return [
    '--ignore-config',
    '--no-cache-dir',
    '--no-playlist',
    '--socket-timeout', String(opts.socketTimeoutSeconds),
    '--retries', '3',
    '--fragment-retries', '3',
    '--extractor-retries', '2',
    ...(opts.extraArgs ?? []),
    ...(egress ? ['--proxy', egress.url] : []),
    ...downloaderInputArgs(),
  ];
}

/**
 * yt-dlp hands a format to ffmpeg (its FFmpegFD) when HLS has features its
 * own downloader lacks, when an extractor says `m3u8` rather than
 * `m3u8_native`, and for every HLS format once YTDLP_ARGS asks for ffmpeg
 * (`--downloader m3u8:ffmpeg`, `--hls-prefer-ffmpeg`). ffmpeg then opens the
 * format's URL as it stands, and a master playlist's variant may be
 * `file:///...`: yt-dlp's own downloaders refuse file URLs, ffmpeg without
 * a whitelist reads the file, and the job would deliver it. So its inputs
 * take networkInputArgs, as ours do: a URL other than http(s) fails the
 * download. yt-dlp puts `ffmpeg_i1` (else `ffmpeg_i`) right before each
 * `-i`, after its own input options, so these win; they replace any the
 * deployment gave under the same keys.
 */
export function downloaderInputArgs(): string[] {
  return ['--downloader-args', `ffmpeg_i1,ffmpeg_i:${networkInputArgs().map(configQuote).join(' ')}`];
}

/** A failed run; `category` is set when the failure is known without reading stderr. */
export interface YtDlpFailure {
  ok: false;
  run: RunResult;
  category?: ErrorCategory;
}

export type ProbeResult = { ok: true; info: YtDlpInfo; infoPath: string } | YtDlpFailure;

/** Resolve the URL and select formats (`-J`); the info JSON is kept in `workDir` for the download run. */
export async function probe(url: string, formatSelector: string, workDir: string, opts: YtDlpOptions): Promise<ProbeResult> {
  const run = await runProcess(opts.bin, [...commonArgs(opts), '-J', '-f', formatSelector, '--', url], {
    captureStdout: true,
    signal: opts.signal,
    // Metadata only, but a page with thousands of formats and long
    // descriptions is still far below this.
    maxStdoutBytes: 64 * 1024 * 1024,
  });
  if (run.exitCode !== 0) return { ok: false, run };
  let info: YtDlpInfo;
  try {
    if (run.stdoutTruncated) throw new Error('info JSON too large');
    info = JSON.parse(run.stdout) as YtDlpInfo;
  } catch {
    return { ok: false, run, category: 'internal_error' };
  }
  const infoPath = path.join(workDir, 'info.json');
  await writeFile(infoPath, run.stdout);
  return { ok: true, info, infoPath };
}

/** One argument as yt-dlp's config reader (Python's shlex.split, POSIX mode) reads it back. */
export function configQuote(arg: string): string {
  return `'${arg.replace(/'/g, `'\\''`)}'`;
}

/** What yt-dlp prints on stderr when it reads options from stdin. */
const STDIN_PROMPT = /^Reading options from STDIN.*\r?\n?/m;

/**
 * A yt-dlp run started before its options are known. Starting Python and
 * importing yt-dlp costs a few hundred ms of CPU, the same for every run; a
 * run started with `--config-locations -` does that and then waits for its
 * options on stdin (yt-dlp: '"-" for stdin'), so the download run gets ready
 * while the probe runs instead of after it.
 */
export interface StartedYtDlp {
  /** Hand the run its options; resolves when it exits. Once only. */
  run(args: string[], onStdoutLine?: (line: string) => void): Promise<RunResult>;
  /** Stop a run that was never given options (the job ended, or records a live stream instead). */
  cancel(): void;
}

export function startYtDlp(opts: YtDlpOptions): StartedYtDlp {
  let give!: (config: string) => void;
  let refuse!: (err: Error) => void;
  const config = new Promise<string>((resolve, reject) => {
    give = resolve;
    refuse = reject;
  });
  let onLine: ((line: string) => void) | undefined;
  let given = false;
  const unused = new AbortController();
  const signal = opts.signal ? AbortSignal.any([opts.signal, unused.signal]) : unused.signal;
  const done = runProcess(opts.bin, [...commonArgs(opts), '--config-locations', '-'], {
    stdin: config,
    signal,
    onStdoutLine: (line) => onLine?.(line),
  });
  // A failure to start surfaces to whoever runs it; unused, it is nobody's.
  done.catch(() => undefined);
  return {
    run(args, onStdoutLine) {
      if (given) throw new Error('this yt-dlp run has its options already');
      given = true;
      onLine = onStdoutLine;
      give(args.map(configQuote).join(' ') + '\n');
      return done.then((run) => ({ ...run, stderr: run.stderr.replace(STDIN_PROMPT, '') }));
    },
    cancel() {
      if (given) return;
      given = true;
      unused.abort();
      refuse(new Error('not needed'));
    },
  };
}

export interface DownloadedFile {
  formatId: string;
  path: string;
}

export type DownloadResult = { ok: true; files: DownloadedFile[] } | YtDlpFailure;

const PROGRESS_TAG = 'MJPROGRESS';
const FILE_TAG = 'MJFILE';

/** Parse one progress line of our template; undefined for anything else yt-dlp prints. */
export function parseProgressLine(line: string): { status: string; downloaded?: number; total?: number; estimate?: number; fragment?: number; fragments?: number; formatId: string } | undefined {
  if (!line.startsWith(`${PROGRESS_TAG} `)) return undefined;
  const [, status = '', downloaded, total, estimate, fragment, fragments, ...rest] = line.split(' ');
  const num = (s: string | undefined) => {
    const n = Number(s);
    return s && s !== 'NA' && Number.isFinite(n) ? n : undefined;
  };
  return { status, downloaded: num(downloaded), total: num(total), estimate: num(estimate), fragment: num(fragment), fragments: num(fragments), formatId: rest.join(' ') };
}

/**
 * Overall download fraction across the selected formats, weighted by their
 * expected sizes when the probe knows them all, equally otherwise.
 */
export class DownloadProgress {
  private readonly weights: Map<string, number>;
  private readonly done = new Map<string, number>();
  /** Per format, the bytes yt-dlp has read of it and its size (its own, else the probe's), as last said. */
  private readonly read = new Map<string, number>();
  private readonly sizes = new Map<string, number | undefined>();

  constructor(info: YtDlpInfo, formatIds: string[]) {
    const sizes = formatIds.map((id) => expectedBytes(info, id));
    formatIds.forEach((id, i) => this.sizes.set(id, sizes[i]));
    const known = sizes.every((s) => s !== undefined);
    const total = known ? sizes.reduce<number>((a, s) => a + (s ?? 0), 0) : formatIds.length;
    this.weights = new Map(formatIds.map((id, i) => [id, known && total > 0 ? (sizes[i] ?? 0) / total : 1 / formatIds.length]));
  }

  /** Feed a parsed progress line; returns the overall fraction 0..1. */
  update(p: NonNullable<ReturnType<typeof parseProgressLine>>): number {
    let f: number | undefined;
    if (p.status === 'finished') f = 1;
    else if (p.downloaded !== undefined && p.total) f = p.downloaded / p.total;
    else if (p.fragment !== undefined && p.fragments) f = (p.fragment - 1) / p.fragments;
    else if (p.downloaded !== undefined && p.estimate) f = p.downloaded / p.estimate;
    if (f !== undefined && this.weights.has(p.formatId)) {
      // Estimates can overshoot; a file is only complete when yt-dlp says so.
      this.done.set(p.formatId, Math.max(this.done.get(p.formatId) ?? 0, p.status === 'finished' ? 1 : Math.min(0.99, f)));
    }
    if (this.weights.has(p.formatId)) {
      const size = p.total ?? p.estimate ?? this.sizes.get(p.formatId);
      if (p.downloaded !== undefined) this.read.set(p.formatId, Math.max(this.read.get(p.formatId) ?? 0, p.downloaded));
      // A finished file is as large as what was read of it, whatever was estimated.
      this.sizes.set(p.formatId, p.status === 'finished' ? this.read.get(p.formatId) ?? size : size);
    }
    let sum = 0;
    for (const [id, w] of this.weights) sum += w * (this.done.get(id) ?? 0);
    return Math.min(1, sum);
  }

  /**
   * Bytes read of every format so far, and their sum of sizes when each
   * one's is known (yt-dlp's total or estimate, else the probe's);
   * undefined until yt-dlp said a byte count.
   */
  bytes(): SourceBytes | undefined {
    if (!this.read.size) return undefined;
    let downloaded = 0;
    for (const n of this.read.values()) downloaded += n;
    const sizes = [...this.sizes.values()];
    const known = sizes.every((n) => n !== undefined);
    return { downloaded, ...(known && { total: sizes.reduce<number>((a, n) => a + (n ?? 0), 0) }) };
  }
}

export interface DownloadOptions extends YtDlpOptions {
  /** Gets the overall fraction downloaded, and the bytes once yt-dlp counts them. */
  onProgress?: (fraction: number, bytes?: SourceBytes) => void;
  /** Called as each format's file is complete, before the others are (to probe it meanwhile). */
  onFile?: (file: DownloadedFile) => void;
  /** A run started ahead (startYtDlp) to use instead of starting one now. */
  started?: StartedYtDlp;
}

/**
 * Download the probed formats, each to its own file under `dir`, from the
 * info JSON at `infoPath`: yt-dlp does not resolve the URL again
 * (--load-info-json), it only selects the formats from that JSON; only when
 * that download fails (expired format URLs) does it warn and start over
 * from the page URL.
 */
export async function download(
  infoPath: string,
  info: YtDlpInfo,
  formatIds: string[],
  dir: string,
  opts: DownloadOptions,
): Promise<DownloadResult> {
  const progress = new DownloadProgress(info, formatIds);
  const files: DownloadedFile[] = [];
  const started = opts.started ?? startYtDlp(opts);
  const run = await started.run(
    [
      '--load-info-json', infoPath,
      // A comma downloads each format on its own instead of merging them.
      '-f', formatIds.join(','),
      '-o', path.join(dir, 'f%(autonumber)s.%(ext)s'),
      // The mux step remuxes everything anyway; yt-dlp's fixups would be a
      // second pass over the same bytes.
      '--fixup', 'never',
      '--no-mtime',
      '--newline',
      '--progress',
      '--progress-template',
      `download:${PROGRESS_TAG} %(progress.status)s %(progress.downloaded_bytes)s %(progress.total_bytes)s %(progress.total_bytes_estimate)s %(progress.fragment_index)s %(progress.fragment_count)s %(info.format_id)s`,
      '--print', `after_move:${FILE_TAG} %(format_id)s\t%(filepath)s`,
    ],
    (line) => {
      const p = parseProgressLine(line);
      if (p) {
        const fraction = progress.update(p);
        opts.onProgress?.(fraction, progress.bytes());
        return;
      }
      if (line.startsWith(`${FILE_TAG} `)) {
        const [formatId = '', filePath = ''] = line.slice(FILE_TAG.length + 1).split('\t');
        if (filePath) {
          const file = { formatId, path: filePath };
          files.push(file);
          opts.onFile?.(file);
        }
      }
    },
  );
  if (run.exitCode !== 0) return { ok: false, run };
  if (files.length !== formatIds.length) {
    return { ok: false, run, category: 'download_failed' };
  }
  return { ok: true, files };
}
