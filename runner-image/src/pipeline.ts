// One job, start to finish: Downloading (0→33) → Muxing (33→66) →
// Uploading (66→100) → Finished. Every failure becomes a classified report;
// nothing here throws for a media or storage problem.
import { fdatasync as fdatasyncCallback } from 'node:fs';
import { mkdir, rm, stat, writeFile } from 'node:fs/promises';
import { promisify } from 'node:util';
import path from 'node:path';
import type { Logger } from '@mediajobs/lib/logger';
import type { JobStep, MediaJobSpec, RunnerReport } from '@mediajobs/lib/mediajob/types';
import { isStorageError } from '@mediajobs/lib/storage/index';
import type { RunResult } from './child.js';
import { classification, classifyFfmpeg, classifyUpload, classifyYtDlp, type Classification } from './classify.js';
import { uploadJobFile, type ResolvedDestination, type UploadOutcome } from './destination.js';
import { audioStream, ffprobe, mediaEnd, remuxIndexed, measureAudio, mux, muxToFd, muxToStream, PIPE_OUTPUT, planMux, type FfprobeResult, type MuxInput, type MuxPlan } from './ffmpeg.js';
import {
  actualQuality, chooseFormats, clipOf, containerFor, formatSelector, formatsToMeasure, releaseDateOf, selectedFormatIds, withMeasurements,
  type Clip, type Container, type FormatChoice, type MeasuredAudio, type YtDlpFormat, type YtDlpInfo,
} from './plan.js';
import type { StatusReporter } from './report.js';
import { drmItemIsAudioOnly, saysDrmProtected } from './drm.js';
import { DEFAULT_LIVE_LIMITS, isLiveSource, probeWaitingForVideo, recordLiveSource, type LiveLimits } from './live.js';
import { deliverSidecars } from './sidecars.js';
import { clipSections, withHlsFragments, type Section } from './sections.js';
import { readableInputs, transportIsDefault } from './source-read.js';
import { expectedOf, inspectFile, inspectStream, wrongDelivery, type Inspection } from './verify.js';
import { download, probe, startYtDlp, type StartedYtDlp, type YtDlpFailure, type YtDlpOptions } from './ytdlp.js';

const fdatasync = promisify(fdatasyncCallback);

/** How far past a clip's end an MPEG-TS download is copied for the cut: more than any GOP. */
const REMUX_MARGIN_SECONDS = 10;

/** Progress at the start of each step (spec: progress stages). */
export const STEP_PROGRESS: Record<Exclude<JobStep, 'Queued'>, number> = { Downloading: 0, Muxing: 33, Uploading: 66, Finished: 100 };

export interface Tools {
  ytdlp: string;
  ffmpeg: string;
  ffprobe: string;
  socketTimeoutSeconds: number;
  ytdlpArgs?: string[];
  live?: LiveLimits;
  /** The CPUs ffmpeg's threads are sized by (child.ts cpuBudget); ffmpeg's own count of the machine's cores otherwise. */
  threads?: number;
}

export interface JobContext {
  spec: MediaJobSpec;
  jobId: string;
  /** This job's private scratch directory; the caller removes it. */
  workDir: string;
  reporter: StatusReporter;
  logger: Logger;
  tools: Tools;
  /** The destination, or why it could not be set up (reported as storage_unreachable before any download). */
  destination: ResolvedDestination | { error: unknown };
  signal?: AbortSignal;
}

/** Strip query strings and fragments from URLs in a text, so signed URLs stay out of logs. */
export function redactUrls(text: string): string {
  return text.replace(/\b(https?:\/\/[^\s?#'"<>]+)[?#][^\s'"<>]*/gi, '$1?…');
}

function tail(text: string, lines = 8): string {
  return redactUrls(text.trim().split(/\r?\n/).slice(-lines).join('\n')).slice(-2000);
}

export async function runJob(ctx: JobContext): Promise<RunnerReport> {
  // The download's yt-dlp is started with the probe (startYtDlp); a job that
  // ends before downloading, or records a live stream, stops it unused.
  let downloader: StartedYtDlp | undefined;
  try {
    return await runSteps(ctx, (opts) => (downloader = startYtDlp(opts)));
  } finally {
    downloader?.cancel();
  }
}

/**
 * What a clip needs of the chosen segmented formats (sections.ts). HLS
 * playlists are read here, outside yt-dlp: not when YTDLP_ARGS routes its
 * connections (proxy, source address) somewhere this process does not go.
 */
async function cutForClip(info: YtDlpInfo, formatIds: string[], clip: Clip, tools: Tools, signal?: AbortSignal) {
  const hls = transportIsDefault(tools.ytdlpArgs ?? [])
    ? await withHlsFragments(info, formatIds, { timeoutSeconds: tools.socketTimeoutSeconds, signal })
    : { info, lead: new Map<string, number>() };
  return clipSections(hls.info, formatIds, clip, hls.lead);
}

async function runSteps(ctx: JobContext, startDownloader: (opts: YtDlpOptions) => StartedYtDlp): Promise<RunnerReport> {
  const { spec, reporter, logger, tools, signal } = ctx;
  let step: JobStep = 'Downloading';
  let progress = 0;
  const container = containerFor(spec);
  // Whether the item has no video: decides Skipped for DRM (spec: audio-only
  // DRM items are skipped). Before the probe the job's own request is the
  // best guess (podcast episodes are audio-only jobs).
  let audioOnlySource = container.audioOnly;
  const fail = (c: Classification, detail?: Record<string, unknown>): RunnerReport => {
    // Details (stderr tail, error codes) go to the pod log for operators; the
    // report carries only the fixed phrase.
    logger.warn({ step, category: c.category, ...detail }, 'job did not complete');
    return { step, progress, outcome: c.outcome, error: c.error, ...(c.errorType ? { errorType: c.errorType } : {}), ...(c.reason ? { reason: c.reason } : {}) };
  };
  const toolDetail = (tool: string, run: RunResult) => ({ tool, exitCode: run.exitCode, signal: run.signal, stderr: tail(run.stderr) });
  const failTool = (tool: string, run: RunResult, c: Classification) => fail(c, toolDetail(tool, run));
  const failYtDlp = (f: YtDlpFailure) =>
    failTool('yt-dlp', f.run, f.category ? classification(f.category) : classifyYtDlp(f.run.stderr, f.run.exitCode, { audioOnlySource }));
  const enter = (next: JobStep) => {
    step = next;
    progress = STEP_PROGRESS[next as Exclude<JobStep, 'Queued'>];
  };
  const within = (start: number, span: number) => (fraction: number) => {
    progress = Math.max(progress, Math.floor(start + span * Math.min(1, Math.max(0, fraction))));
    reporter.setProgress(progress);
  };

  // A fresh attempt clears whatever an earlier attempt of the pod reported.
  enter('Downloading');
  // Not awaited: status is best effort and must not slow the job (patches stay in order).
  void reporter.setStep('Downloading', progress, { result: null, error: null, errorType: null, reason: null });

  if ('error' in ctx.destination) {
    return fail(classification('storage_unreachable'), { err: errName(ctx.destination.error) });
  }
  const destination = ctx.destination;
  const dlDir = path.join(ctx.workDir, 'download');
  const outDir = path.join(ctx.workDir, 'output');
  await mkdir(dlDir, { recursive: true });
  await mkdir(outDir, { recursive: true });
  const ytOpts = { bin: tools.ytdlp, socketTimeoutSeconds: tools.socketTimeoutSeconds, extraArgs: tools.ytdlpArgs, signal };

  // Downloading: 0 → 33
  logger.info({ url: redactUrls(spec.url), format: container.format }, 'probing source');
  const liveLimits = tools.live ?? DEFAULT_LIVE_LIMITS;
  // Ready while the probe runs; not while waiting (up to an hour) for a scheduled stream.
  const early = spec.waitForVideo === true ? undefined : startDownloader(ytOpts);
  const probed = await probeWaitingForVideo(
    () => probe(spec.url, formatSelector(container), ctx.workDir, ytOpts), spec.waitForVideo === true, liveLimits, { signal, logger });
  if (!probed.ok) {
    // yt-dlp drops DRM formats before saying so; only a second look tells an audio-only item (Skipped).
    if (saysDrmProtected(probed.run.stderr)) audioOnlySource = (await drmItemIsAudioOnly(spec.url, ytOpts)) ?? audioOnlySource;
    return failYtDlp(probed);
  }
  const info = probed.info;
  if (info._type === 'playlist') return fail(classification('unavailable'), { why: 'a playlist, not a single item' });
  const formats = info.formats ?? [];
  // From here the item's formats say it, not the request: an audio_only job
  // on a video whose download then fails for DRM is a Warning, not Skipped.
  if (formats.length) audioOnlySource = formats.every((f) => f.vcodec === 'none');
  const live = await isLiveSource(info, spec, { signal, logger });
  if (live) early?.cancel();
  // The spec's format and resolution rules choose (plan.ts), for recordings
  // as for downloads; yt-dlp's own choice stands for lists with nothing usable.
  const choice = await chooseJobFormats(formats, spec, container, tools, logger, signal);
  const formatIds = choice ? choice.formats.map((f) => f.format_id) : selectedFormatIds(info);
  if (!formatIds.length) return fail(classification('unavailable'), { why: 'no format selected' });
  const clip = live ? undefined : clipOf(spec);
  const target = { ext: container.ext, contentType: container.contentType, jobId: ctx.jobId, filename: spec.filename, folder: spec.folder };

  // Mux (ffmpeg) and upload `inputs`. With `reading` (inputs read from their
  // URLs), ffmpeg's pass is also the download, so its progress is the
  // download's; a failed pass is then `retryable` by downloading first.
  type Delivery = { ok: true; uploaded: Extract<UploadOutcome, { ok: true }>; plan: MuxPlan } | { ok: false; report?: RunnerReport };
  const deliver = async (inputs: MuxInput[], reading: boolean): Promise<Delivery> => {
    const failed = (c: Classification, detail?: Record<string, unknown>, sourceFailed = false): Delivery => {
      if (reading && sourceFailed && !signal?.aborted) {
        logger.warn({ category: c.category, ...detail }, 'reading the source directly failed; downloading it with yt-dlp instead');
        return { ok: false };
      }
      return { ok: false, report: fail(c, detail) };
    };
    const mediaSeconds = mediaEnd(inputs) ?? 0;
    if (clip && mediaSeconds > 0 && clip.start >= mediaSeconds) {
      return failed(classification('processing_failed'), { why: 'the clip starts after the end of the media', clip, mediaSeconds });
    }
    const output = container.streamable ? PIPE_OUTPUT : path.join(outDir, `output.${container.ext}`);
    const plan = await planMux(tools.ffprobe, inputs, output, container, spec, clip, signal, tools.threads);
    if (!plan) {
      const hasAudio = inputs.some((i) => audioStream(i.probed));
      return failed(classification(container.audioOnly && !hasAudio ? 'unavailable' : 'processing_failed'), { why: 'no usable stream' });
    }
    logger.info({ video: plan.codecs.video, audio: plan.codecs.audio, clip, streaming: plan.streaming, reading }, 'muxing');
    const muxProgress = reading ? within(0, 33) : within(33, 33);
    // What follows a pass that was also the download: its muxing is done too.
    const afterReading = () => {
      if (reading && step === 'Downloading') {
        enter('Muxing');
        void reporter.setStep('Muxing', progress);
      }
    };
    // What was stored is checked before it counts (verify.ts): a file that
    // fails is deleted from the destination and the job fails, or, for a
    // pass that read the source directly, starts over with the download.
    const expected = expectedOf(plan, container);
    const inspectWritten = async (file: string): Promise<Inspection> => {
      const started = performance.now();
      const observed = await inspectFile(tools.ffprobe, file, expected.durationSeconds, signal);
      const { size } = await stat(file);
      return { ...(observed ? { observed } : {}), bytes: size, ms: performance.now() - started };
    };
    const verified = async (uploaded: Extract<UploadOutcome, { ok: true }>, inspection: Promise<Inspection>): Promise<Delivery> => {
      const started = performance.now();
      const { observed, bytes, ms = 0 } = await inspection;
      const why = wrongDelivery(expected, observed, bytes, uploaded.result.size);
      // The time the job waited for the check: what ran alongside the upload costs nothing here.
      const verifyMs = Math.round(ms + performance.now() - started);
      if (!why) {
        logger.info({ verifyMs }, 'delivered file verified');
        return { ok: true, uploaded, plan };
      }
      await destination.provider.delete(uploaded.result.key)
        .catch((err: unknown) => logger.error({ err: errName(err), storageKey: uploaded.result.key }, 'could not delete a file that failed verification'));
      return failed(classification('output_unverified'), { why, verifyMs }, true);
    };
    if (plan.streaming) {
      // Mux and upload at once: ffmpeg's output goes straight into the upload,
      // and no output file is ever written outside storage. Local managed
      // storage makes ffmpeg's stdout its staged file (writeTo), so the bytes
      // skip node and are checked there; other providers read it as a stream
      // (open), a copy of which goes to ffprobe as it passes, and each key
      // they try gets its own ffmpeg (a refused key destroys the body it was
      // given). The downloads stay on disk until the upload is through.
      let muxRun: Promise<RunResult> | undefined;
      let inspection: Promise<Inspection> | undefined;
      let refused: { why: string; verifyMs: number } | undefined;
      // What remains once ffmpeg is done is the upload's tail.
      const onMuxed = (r: RunResult) => {
        if (r.exitCode !== 0) return;
        afterReading();
        if (step === 'Muxing') {
          enter('Uploading');
          void reporter.setStep('Uploading', progress);
        }
      };
      const uploaded = await uploadJobFile(destination, {
        ...target,
        open: () => {
          const copy = inspectStream(tools.ffprobe, signal);
          const m = muxToStream(tools.ffmpeg, plan, { signal, onProgress: muxProgress, copyTo: copy.input });
          muxRun = m.done;
          inspection = Promise.all([copy.observed, m.done]).then(([observed]) => ({ observed, bytes: m.bytes() }));
          inspection.catch(() => undefined); // awaited once the upload is through
          m.done.then(onMuxed, () => undefined);
          return m.body;
        },
        writeTo: async (file) => {
          muxRun = muxToFd(tools.ffmpeg, plan, file.fd, { signal, onProgress: muxProgress });
          const r = await muxRun;
          if (r.exitCode !== 0) throw new Error(`ffmpeg exited with ${r.exitCode ?? r.signal}`);
          // Judged before uploadStaged publishes it: a file that fails is discarded,
          // never visible. Its pages go to disk meanwhile, so the fsync of
          // publishing finds nothing left to write and the check costs the job
          // only what it takes beyond that.
          const started = performance.now();
          const [checked, synced] = await Promise.all([inspectWritten(file.path), fdatasync(file.fd).then(() => performance.now(), () => started)]);
          // The job's cost of the check: how long it ran past the fsync publishing needs anyway.
          const written = { ...checked, ms: Math.max(0, performance.now() - synced) };
          inspection = Promise.resolve(written);
          const why = wrongDelivery(expected, written.observed, written.bytes, written.bytes);
          if (why) {
            refused = { why, verifyMs: Math.round(written.ms ?? 0) };
            throw new Error('the staged file failed verification');
          }
          onMuxed(r);
        },
      });
      if (refused) return failed(classification('output_unverified'), refused, true);
      const muxed = muxRun ? await muxRun : undefined;
      // A failed ffmpeg fails the upload as a broken source; any other upload
      // failure (a storage problem) comes first, since it is also what made
      // ffmpeg stop on a closed pipe.
      const sourceFailed = !uploaded.ok && isStorageError(uploaded.error) && uploaded.error.reason === 'source_error';
      if (!uploaded.ok && !sourceFailed) return failed(classifyUpload(uploaded.error, { localReadFailed: false }), { err: errName(uploaded.error) });
      if (muxed && muxed.exitCode !== 0) return failed(classifyFfmpeg(muxed.stderr, muxed.exitCode), toolDetail('ffmpeg', muxed), true);
      if (!uploaded.ok) return failed(classifyUpload(uploaded.error, { localReadFailed: false }), { err: errName(uploaded.error) }, true);
      return verified(uploaded, inspection ?? Promise.resolve({ bytes: 0 }));
    }
    const muxed = await mux(tools.ffmpeg, plan, { signal, onProgress: muxProgress });
    if (muxed.exitCode !== 0) return failed(classifyFfmpeg(muxed.stderr, muxed.exitCode), toolDetail('ffmpeg', muxed), true);
    afterReading();
    // The downloads are no longer needed: free the disk before uploading.
    await rm(dlDir, { recursive: true, force: true });
    // Checked before it is uploaded: a file that fails never reaches the destination.
    const written = await inspectWritten(output);
    const why = wrongDelivery(expected, written.observed, written.bytes, written.bytes);
    if (why) return failed(classification('output_unverified'), { why, verifyMs: Math.round(written.ms ?? 0) }, true);

    // Uploading: 66 → 100
    enter('Uploading');
    void reporter.setStep('Uploading', progress);
    const uploaded = await uploadJobFile(destination, { ...target, file: output, onProgress: within(66, 33) });
    if (!uploaded.ok) return failed(classifyUpload(uploaded.error, { localReadFailed: uploaded.localReadFailed }), { err: errName(uploaded.error) });
    await rm(outDir, { recursive: true, force: true });
    return verified(uploaded, Promise.resolve(written));
  };

  // Formats on plain HTTP(S) are read by ffmpeg straight from their URLs: one
  // pass that downloads, muxes and uploads (ADR 0007). Anything else, and a
  // pass that fails on its source, is downloaded with yt-dlp first.
  let delivered: Delivery | undefined;
  const direct = !live && choice ? await readableInputs(choice, tools, signal) : undefined;
  if (direct) {
    early?.cancel();
    logger.info({ formats: formatIds, extractor: info.extractor }, 'downloading');
    delivered = await deliver(direct, true);
    if (!delivered.ok && !delivered.report) {
      // Still Downloading unless the pass got as far as the upload's tail;
      // the progress made so far stands (the download only raises it).
      if (step !== 'Downloading') {
        enter('Downloading');
        void reporter.setStep('Downloading', progress);
      }
      delivered = undefined;
    }
  }
  if (!delivered) {
    if (!direct) logger.info({ formats: formatIds, extractor: info.extractor }, 'downloading');
    const probes = new Map<string, Promise<FfprobeResult>>();
    // A clip of DASH formats fetches only the segments it needs (sections.ts);
    // should that download fail, the whole formats are downloaded as before.
    const cut = clip ? await cutForClip(info, formatIds, clip, tools, signal) : undefined;
    let sections: ReadonlyMap<string, Section> = new Map();
    const downloadFrom = (infoPath: string, started: StartedYtDlp) => download(infoPath, info, formatIds, dlDir, {
      ...ytOpts, started, onProgress: within(0, 33),
      // Each file is probed as soon as it is complete, while the next one downloads.
      onFile: (file) => {
        const p = ffprobe(tools.ffprobe, file.path, signal);
        p.catch(() => undefined); // awaited below, unless the download fails first
        probes.set(file.path, p);
      },
    });
    const downloadFormats = async () => {
      const started = (!direct && early) || startDownloader(ytOpts);
      if (!cut) return downloadFrom(probed.infoPath, started);
      const cutPath = path.join(ctx.workDir, 'info-clip.json');
      await writeFile(cutPath, JSON.stringify(cut.info));
      logger.info({ sections: Object.fromEntries(cut.sections) }, 'downloading the segments the clip needs');
      const part = await downloadFrom(cutPath, started);
      if (part.ok || signal?.aborted) {
        if (part.ok) sections = cut.sections;
        return part;
      }
      logger.warn({ exitCode: part.run.exitCode, stderr: tail(part.run.stderr) }, 'downloading the clip\'s segments failed; downloading the whole formats');
      probes.clear();
      await rm(dlDir, { recursive: true, force: true });
      return downloadFrom(probed.infoPath, startDownloader(ytOpts));
    };
    const downloaded = live
      ? await recordLiveSource(info, spec, container.audioOnly, dlDir, {
        bin: tools.ffmpeg, socketTimeoutSeconds: tools.socketTimeoutSeconds, limits: liveLimits, formats: choice?.formats, signal, logger, onProgress: within(0, 33),
      })
      : await downloadFormats();
    if (!downloaded.ok) return failYtDlp(downloaded);

    // Muxing: 33 → 66
    enter('Muxing');
    void reporter.setStep('Muxing', progress);
    const inputs: MuxInput[] = [];
    for (const downloadedFile of downloaded.files) {
      let file = downloadedFile;
      let p = await (probes.get(file.path) ?? ffprobe(tools.ffprobe, file.path, signal));
      const section = sections.get(file.formatId);
      if (p.ok && clip && clip.start > 0 && p.probed.formatName === 'mpegts') {
        // ffmpeg seeks in MPEG-TS (HLS segments) by searching timestamps, and
        // can land past the keyframe before the clip's start: the clip's video
        // then begins up to a GOP late. A copy into Matroska gives it an index
        // (of what the clip can need: to its end and a margin past it).
        const until = clip.end !== undefined ? clip.end - (section?.offsetSeconds ?? 0) + REMUX_MARGIN_SECONDS : undefined;
        const indexed = await remuxIndexed(tools.ffmpeg, file.path, until, signal);
        if (indexed.exitCode !== 0) return failTool('ffmpeg', indexed, classifyFfmpeg(indexed.stderr, indexed.exitCode));
        await rm(file.path, { force: true });
        file = { ...file, path: `${file.path}.mkv` };
        p = await ffprobe(tools.ffprobe, file.path, signal);
      }
      if (!p.ok) return failTool('ffprobe', p.run, classifyFfmpeg(p.run.stderr, p.run.exitCode));
      inputs.push({
        path: file.path, carriesAudio: choice !== undefined && file.formatId === choice.audioFrom,
        // A cut format holds its kept segments' span, whatever its container says.
        ...(section ? { offsetSeconds: section.offsetSeconds, probed: { ...p.probed, durationSeconds: section.spanSeconds } } : { probed: p.probed }),
      });
    }
    delivered = await deliver(inputs, false);
  }
  if (!delivered.ok) return delivered.report!;
  const { uploaded, plan } = delivered;
  await rm(dlDir, { recursive: true, force: true });
  const sidecars = await deliverSidecars(spec, {
    infoPath: probed.infoPath, workDir: ctx.workDir, jobId: ctx.jobId, mediaKey: uploaded.result.key, destination, ytdlp: ytOpts, logger,
  });

  enter('Finished');
  const result = {
    storageKey: uploaded.result.key,
    fileSize: uploaded.result.size,
    format: container.format,
    // The runner never scales: the delivered frame is the chosen input's.
    ...optional('actualQuality', actualQuality(plan.video?.stream.width, plan.video?.stream.height)),
    ...optional('title', info.title ?? undefined),
    ...optional('description', info.description ?? undefined),
    ...optional('releaseDate', releaseDateOf(info)),
    ...sidecars,
  };
  logger.info({ storageKey: result.storageKey, fileSize: result.fileSize, actualQuality: result.actualQuality }, 'job completed');
  return { step: 'Finished', progress: 100, outcome: 'completed', result };
}

function optional<K extends string, V>(key: K, value: V | undefined): Partial<Record<K, V>> {
  return value === undefined || value === '' ? {} : ({ [key]: value } as Record<K, V>);
}

/** An error's kind for the log: name, code and reason, never its message (storage and SDK messages can name hosts). */
function errName(err: unknown): Record<string, unknown> {
  const e = err as { name?: unknown; code?: unknown; reason?: unknown } | null;
  return { name: e?.name, code: e?.code, reason: e?.reason };
}

/**
 * The formats to download by the spec's rules. Audio renditions yt-dlp knows
 * no codec or bitrate of (HLS EXT-X-MEDIA) are measured first, since the
 * rules choose among tracks by exactly those.
 */
async function chooseJobFormats(
  formats: readonly YtDlpFormat[], spec: MediaJobSpec, container: Container, tools: Tools, logger: Logger, signal?: AbortSignal,
): Promise<FormatChoice | undefined> {
  const unknown = formatsToMeasure(formats);
  const measured = new Map<string, MeasuredAudio>();
  await Promise.all(unknown.map(async (f) => {
    const m = await measureAudio(tools.ffprobe, f, { signal, timeoutSeconds: tools.socketTimeoutSeconds });
    if (m) measured.set(f.format_id, m);
  }));
  if (unknown.length) logger.info({ measured: Object.fromEntries(measured) }, 'measured audio renditions');
  return chooseFormats(withMeasurements(formats, measured), spec, container);
}
