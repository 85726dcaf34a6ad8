// Mux (ffmpeg) and upload one job's inputs, and check what was stored
// before it counts (verify.ts). Two ways: streamed into the upload (MP4,
// Ogg, Opus: no output file), or muxed to a file that is checked, then
// uploaded. With `reading` (inputs read from their URLs, ADR 0007) ffmpeg's
// pass is also the download: its progress is the download's, and a pass
// that fails on its source is handed back for the caller to download first.
import { fdatasync as fdatasyncCallback } from 'node:fs';
import { rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { errFields, type Logger } from '@mediajobs/lib/logger';
import type { NormalisedMediaJobSpec, RunnerReport } from '@mediajobs/lib/mediajob/types';
import { isStorageError } from '@mediajobs/lib/storage/index';
import type { RunResult } from './child.js';
import { classification, classifyFfmpeg, classifyUpload, type Classification } from './classify.js';
import { uploadJobFile, type ResolvedDestination, type UploadJobFile, type UploadOutcome } from './destination.js';
import { audioStream, mediaEnd, mux, muxToFd, muxToStream, PIPE_OUTPUT, planMux, withOutputCap, type MuxInput, type MuxPlan } from './ffmpeg.js';
import { capBytes, durationOverLimit, filesizeOverLimit, overFilesizeLimit } from './key-limits.js';
import { clipOf, type Clip, type Container } from './plan.js';
import { toolDetail, type JobSteps } from './steps.js';
import { expectedOf, inspectFile, inspectStream, wrongDelivery, type Expected, type Inspection } from './verify.js';

const fdatasync = promisify(fdatasyncCallback);

export interface DeliveryContext {
  spec: NormalisedMediaJobSpec;
  container: Container;
  /** The clip the mux cuts (plan.ts clipOf of the spec; none for a live recording). */
  clip?: Clip;
  /** A live recording: not clipped, whatever the spec asks. */
  live?: boolean;
  /** The key's duration limit on what is delivered; absent for a live recording, which is capped instead. */
  maxSeconds?: number;
  tools: { ffmpeg: string; ffprobe: string; threads?: number };
  destination: ResolvedDestination;
  /** Where the downloads are (removed once no longer needed) and where a muxed file goes. */
  dlDir: string;
  outDir: string;
  /** The object's name parts (uploadJobFile). */
  target: Pick<UploadJobFile, 'ext' | 'contentType' | 'jobId' | 'filename' | 'folder'>;
  steps: JobSteps;
  logger: Logger;
  signal?: AbortSignal;
  /**
   * A direct read's source size, every format's as its server said (none
   * for a clip, which reads a part): the bytes read are reported as the
   * share of the media's duration read (ffmpeg tells how far it got, not
   * what it fetched).
   */
  sourceBytes?: number;
}

export type Delivered = { ok: true; uploaded: Extract<UploadOutcome, { ok: true }>; plan: MuxPlan };
/** A report, or, without one, a direct read that failed on its source: download, then deliver again. */
export type Delivery = Delivered | { ok: false; report?: RunnerReport };

type Failed = (c: Classification, detail?: Record<string, unknown>, sourceFailed?: boolean) => Delivery;

/** One delivery as its two ways share it: the plan, what it must produce, and how a failure is reported. */
interface Pass {
  ctx: DeliveryContext;
  plan: MuxPlan;
  expected: Expected;
  reading: boolean;
  failed: Failed;
  onProgress: (fraction: number) => void;
}

export async function deliver(ctx: DeliveryContext, inputs: MuxInput[], reading: boolean): Promise<Delivery> {
  const { container, clip, tools, steps, logger, signal } = ctx;
  const failed: Failed = (c, detail, sourceFailed = false) => {
    if (reading && sourceFailed && !signal?.aborted) {
      logger.warn({ category: c.category, ...detail }, 'reading the source directly failed; downloading it with yt-dlp instead');
      return { ok: false };
    }
    return { ok: false, report: steps.fail(c, detail) };
  };
  const end = mediaEnd(inputs);
  const mediaSeconds = end ?? 0;
  if (clip && mediaSeconds > 0 && clip.start >= mediaSeconds) {
    return failed(classification('processing_failed'), { why: 'the clip starts after the end of the media', clip, mediaSeconds });
  }
  // What the probe could not say, the files do: checked before any byte is muxed or stored.
  const tooLong = durationOverLimit(end, clip, ctx.maxSeconds);
  if (tooLong) return failed(tooLong, { mediaSeconds });
  const output = container.streamable ? PIPE_OUTPUT : path.join(ctx.outDir, `output.${container.ext}`);
  const planned = await planMux(tools.ffprobe, inputs, output, container, ctx.spec, clip, signal, tools.threads);
  if (!planned) {
    const hasAudio = inputs.some((i) => audioStream(i.probed));
    return failed(classification(container.audioOnly && !hasAudio ? 'unavailable' : 'processing_failed'), { why: 'no usable stream' });
  }
  const plan = withOutputCap(planned, ctx.spec.limits?.maxFilesizeBytes);
  logger.info({ video: plan.codecs.video, audio: plan.codecs.audio, clip, streaming: plan.streaming, reading }, 'muxing');
  // The check's span is the request's (the spec's clip), not the plan's.
  const asked = { ...(ctx.live ? {} : { clip: clipOf(ctx.spec) }), ...(end !== undefined ? { mediaSeconds: end } : {}) };
  const pass: Pass = { ctx, plan, expected: expectedOf(plan, container, asked), reading, failed, onProgress: reading ? readProgress(ctx) : steps.withinStep('Muxing') };
  return plan.streaming ? deliverStreamed(pass) : deliverFile(pass, output);
}

/** A direct read's progress: the share of the duration read, and that share of the source's bytes when their size is known. */
function readProgress(ctx: DeliveryContext): (fraction: number) => void {
  const downloading = ctx.steps.withinStep('Downloading');
  const total = ctx.sourceBytes;
  return (fraction) => downloading(fraction, total === undefined ? undefined : { downloaded: Math.floor(Math.min(1, fraction) * total), total });
}

/** After a pass that was also the download, its muxing is done too. */
function afterReading({ ctx: { steps }, reading, onProgress }: Pass): void {
  if (!reading || steps.step !== 'Downloading') return;
  // The whole source was read: its last figures say so before the step moves on.
  onProgress(1);
  steps.enter('Muxing');
}

/**
 * Mux and upload at once: ffmpeg's output goes straight into the upload, and
 * no output file is ever written outside storage. Local managed storage
 * makes ffmpeg's stdout its staged file (writeTo), so the bytes skip node
 * and are checked there before it is published; other providers read it as
 * a stream (open), a copy of which goes to ffprobe as it passes, and each key
 * they try gets its own ffmpeg (a refused key destroys the body it was
 * given). The downloads stay on disk until the upload is through.
 */
async function deliverStreamed(pass: Pass): Promise<Delivery> {
  const { ctx, plan, expected, failed, onProgress } = pass;
  const { tools, steps, signal } = ctx;
  const maxBytes = ctx.spec.limits?.maxFilesizeBytes;
  let muxRun: Promise<RunResult> | undefined;
  let inspection: Promise<Inspection> | undefined;
  let refused: { why: string; verifyMs: number } | undefined;
  let tooLarge: Classification | undefined;
  // What remains once ffmpeg is done is the upload's tail.
  const onMuxed = (r: RunResult) => {
    if (r.exitCode !== 0) return;
    afterReading(pass);
    if (steps.step === 'Muxing') steps.enter('Uploading');
  };
  const uploaded = await uploadJobFile(ctx.destination, {
    ...ctx.target,
    open: () => {
      const copy = inspectStream(tools.ffprobe, signal);
      const m = muxToStream(tools.ffmpeg, plan, { signal, onProgress, copyTo: copy.input });
      muxRun = m.done;
      inspection = Promise.all([copy.observed, m.done]).then(([observed]) => ({ ...(observed ? { observed } : {}), bytes: m.bytes() }));
      inspection.catch(() => undefined); // awaited once the upload is through
      m.done.then(onMuxed, () => undefined);
      return maxBytes === undefined ? m.body : capBytes(m.body, maxBytes, () => (tooLarge = overFilesizeLimit(maxBytes)));
    },
    writeTo: async (file) => {
      muxRun = muxToFd(tools.ffmpeg, plan, file.fd, { signal, onProgress });
      const r = await muxRun;
      if (r.exitCode !== 0) throw new Error(`ffmpeg exited with ${r.exitCode ?? r.signal}`);
      tooLarge = filesizeOverLimit((await stat(file.path)).size, maxBytes);
      if (tooLarge) throw new Error('the staged file is over the key\'s file-size limit');
      // Judged before uploadStaged publishes it: a file that fails is discarded,
      // never visible. Its pages go to disk meanwhile, so the fsync of
      // publishing finds nothing left to write, and the check costs the job
      // only what it takes beyond that.
      const started = performance.now();
      const [checked, synced] = await Promise.all([inspectWritten(ctx, expected, file.path), fdatasync(file.fd).then(() => performance.now(), () => started)]);
      const written = { ...checked, ms: Math.max(0, performance.now() - synced) };
      inspection = Promise.resolve(written);
      const why = wrongDelivery(expected, written.observed, written.bytes, written.bytes);
      if (why) {
        refused = { why, verifyMs: Math.round(written.ms) };
        throw new Error('the staged file failed verification');
      }
      onMuxed(r);
    },
  });
  if (refused) return failed(classification('output_unverified'), refused, true);
  // Before ffmpeg's exit: the aborted upload is what stopped it.
  if (tooLarge) return failed(tooLarge, { maxBytes });
  const muxed = muxRun ? await muxRun : undefined;
  // A failed ffmpeg fails the upload as a broken source; any other upload
  // failure (a storage problem) comes first, since it is also what made
  // ffmpeg stop on a closed pipe.
  const sourceFailed = !uploaded.ok && isStorageError(uploaded.error) && uploaded.error.reason === 'source_error';
  if (!uploaded.ok && !sourceFailed) return failed(classifyUpload(uploaded.error, { localReadFailed: false }), { err: errFields(uploaded.error) });
  if (muxed && muxed.exitCode !== 0) return failed(classifyFfmpeg(muxed.stderr, muxed.exitCode), toolDetail('ffmpeg', muxed), true);
  if (!uploaded.ok) return failed(classifyUpload(uploaded.error, { localReadFailed: false }), { err: errFields(uploaded.error) }, true);
  return verified(pass, uploaded, inspection ?? Promise.resolve({ bytes: 0 }));
}

/** Mux into a file, check it (a file that fails never reaches the destination), then upload it: 66 → 100. */
async function deliverFile(pass: Pass, output: string): Promise<Delivery> {
  const { ctx, plan, expected, failed, onProgress } = pass;
  const muxed = await mux(ctx.tools.ffmpeg, plan, { signal: ctx.signal, onProgress });
  if (muxed.exitCode !== 0) return failed(classifyFfmpeg(muxed.stderr, muxed.exitCode), toolDetail('ffmpeg', muxed), true);
  afterReading(pass);
  const maxBytes = ctx.spec.limits?.maxFilesizeBytes;
  const tooLarge = filesizeOverLimit((await stat(output)).size, maxBytes);
  if (tooLarge) return failed(tooLarge, { maxBytes });
  // The downloads are no longer needed: free the disk before uploading.
  await rm(ctx.dlDir, { recursive: true, force: true });
  const written = await inspectWritten(ctx, expected, output);
  const why = wrongDelivery(expected, written.observed, written.bytes, written.bytes);
  if (why) return failed(classification('output_unverified'), { why, verifyMs: Math.round(written.ms ?? 0) }, true);

  ctx.steps.enter('Uploading');
  const uploaded = await uploadJobFile(ctx.destination, { ...ctx.target, file: output, onProgress: ctx.steps.withinStep('Uploading') });
  if (!uploaded.ok) return failed(classifyUpload(uploaded.error, { localReadFailed: uploaded.localReadFailed }), { err: errFields(uploaded.error) });
  await rm(ctx.outDir, { recursive: true, force: true });
  return verified(pass, uploaded, Promise.resolve(written));
}

/** A finished file read back from disk, with the time that took. */
async function inspectWritten(ctx: DeliveryContext, expected: Expected, file: string): Promise<Inspection> {
  const started = performance.now();
  const observed = await inspectFile(ctx.tools.ffprobe, file, expected.durationSeconds, ctx.signal);
  const { size } = await stat(file);
  return { ...(observed ? { observed } : {}), bytes: size, ms: performance.now() - started };
}

/**
 * The stored object against what was asked: delivered, or deleted from the
 * destination and failed (a direct read then starts over with the download).
 */
async function verified(pass: Pass, uploaded: Extract<UploadOutcome, { ok: true }>, inspection: Promise<Inspection>): Promise<Delivery> {
  const { ctx: { destination, logger }, plan, expected, failed } = pass;
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
    .catch((err: unknown) => logger.error({ err: errFields(err), storageKey: uploaded.result.key }, 'could not delete a file that failed verification'));
  return failed(classification('output_unverified'), { why, verifyMs }, true);
}
