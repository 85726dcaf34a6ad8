// One job, start to finish: Downloading → Muxing → Uploading → Finished,
// each step's progress within its span of the stage table
// (lib/src/mediajob/progress-stages.ts). Every failure becomes a classified
// report; nothing here throws for a media or storage problem. The mux and upload,
// and the check of what was stored, are deliver.ts's.
import { mkdir, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { errFields, redactUrls, type Logger } from '@mediajobs/lib/logger';
import type { NormalisedMediaJobSpec, RunnerReport } from '@mediajobs/lib/mediajob/types';
import { classification, classifyFfmpeg, classifyYtDlp, defenceOf, type ErrorCategory } from './classify.js';
import { deliver, type Delivery, type DeliveryContext } from './deliver.js';
import type { ResolvedDestination } from './destination.js';
import { ffprobe, measureAudio, remuxIndexed, type FfprobeResult, type MuxInput } from './ffmpeg.js';
import {
  actualQuality, chooseFormats, clipOf, containerFor, expectedDeliveryBytes, formatSelector, formatsById, formatsToMeasure, selectedFormatIds,
  withMeasurements,
  type Clip, type Container, type FormatChoice, type MeasuredAudio, type YtDlpFormat, type YtDlpInfo,
} from './plan.js';
import type { StatusReporter } from './report.js';
import { drmItemIsAudioOnly, saysDrmProtected } from './drm.js';
import { DEFAULT_LIVE_LIMITS, isLiveSource, probeWaitingForVideo, recordLiveSource, type LiveLimits } from './live.js';
import { describedAs } from './episode.js';
import { durationOverLimit } from './key-limits.js';
import { egressAnswers, withEgress, type EgressOptions } from './egress-proxy.js';
import { copyCookies, platformYtdlpArgs, type PlatformRun } from './platform.js';
import { toolVersions, ytdlpAgeDays } from './tool-versions.js';
import { deliverSidecars } from './sidecars.js';
import { clipSections, withHlsFragments, type Section } from './sections.js';
import { readableInputs, transportIsDefault } from './source-read.js';
import { JobSteps, tail, toolDetail } from './steps.js';
import { download, probe, startYtDlp, type DownloadResult, type ProbeResult, type StartedYtDlp, type YtDlpOptions } from './ytdlp.js';

/** How far past a clip's end an MPEG-TS download is copied for the cut: more than any GOP. */
const REMUX_MARGIN_SECONDS = 10;

export interface Tools {
  ytdlp: string;
  ffmpeg: string;
  ffprobe: string;
  socketTimeoutSeconds: number;
  ytdlpArgs?: string[];
  live?: LiveLimits;
  /** The CPUs ffmpeg's threads are sized by (child.ts cpuBudget); ffmpeg's own count of the machine's cores otherwise. */
  threads?: number;
  /** The outbound policy every fetch of the job passes (egress-proxy.ts); main.ts always sets it, with the platform's upstream and source address. */
  egress?: Omit<EgressOptions, 'logger'>;
  /** The job's MediaPlatform (platform.ts): its yt-dlp options and cookie file, the ids its defences are reported with. */
  platform?: PlatformRun;
  /** yt-dlp older than this (days, by its version's date) is warned about at start; 90 when absent. */
  ytdlpMaxAgeDays?: number;
}

export interface JobContext {
  spec: NormalisedMediaJobSpec;
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

export async function runJob(ctx: JobContext): Promise<RunnerReport> {
  const versions = reportToolVersions(ctx);
  // A platform's options come after the deployment's, then the runner's own (the cookie file's copy).
  const platform = ctx.tools.platform;
  const job: JobContext = platform
    ? { ...ctx, tools: { ...ctx.tools, ytdlpArgs: [...(ctx.tools.ytdlpArgs ?? []), ...platformYtdlpArgs(platform, await copyCookies(platform, ctx.workDir))] } }
    : ctx;
  // The download's yt-dlp is started with the probe (startYtDlp); a job that
  // ends before downloading, or records a live stream, stops it unused.
  let downloader: StartedYtDlp | undefined;
  const steps = async () => {
    try {
      return await runSteps(job, (opts) => (downloader = startYtDlp(opts)));
    } finally {
      downloader?.cancel();
    }
  };
  const report = await (job.tools.egress ? withEgress({ ...job.tools.egress, logger: job.logger }, steps) : steps());
  const tools = await versions;
  return Object.keys(tools).length ? { ...report, tools } : report;
}

/**
 * The attempt's yt-dlp and ffmpeg versions: logged, patched into
 * status.tools as soon as known (the operator's mediajobs_runner_tool_info),
 * and a warning when yt-dlp is older than YTDLP_MAX_AGE_DAYS.
 */
async function reportToolVersions(ctx: JobContext): Promise<NonNullable<RunnerReport['tools']>> {
  const tools = await toolVersions({ ytdlp: ctx.tools.ytdlp, ffmpeg: ctx.tools.ffmpeg }, ctx.signal);
  ctx.logger.info({ tools }, 'tool versions');
  const maxAge = ctx.tools.ytdlpMaxAgeDays ?? 90;
  const age = tools.ytdlp ? ytdlpAgeDays(tools.ytdlp, Date.now()) : undefined;
  if (age !== undefined && age > maxAge) {
    ctx.logger.warn({ ytdlp: tools.ytdlp, ageDays: age, maxAgeDays: maxAge }, 'yt-dlp is older than YTDLP_MAX_AGE_DAYS: platforms answer old extractors with bot checks; update the runner image');
  }
  if (Object.keys(tools).length) void ctx.reporter.setTools(tools);
  return tools;
}

async function runSteps(ctx: JobContext, startDownloader: (opts: YtDlpOptions) => StartedYtDlp): Promise<RunnerReport> {
  const { spec, logger, tools, signal } = ctx;
  const steps = new JobSteps(ctx.reporter, logger, undefined, spec.url);
  const container = containerFor(spec);
  // Whether the item has no video: decides Skipped for DRM (spec: audio-only
  // DRM items are skipped). Before the probe the job's own request is the
  // best guess (podcast episodes are audio-only jobs).
  let audioOnlySource = container.audioOnly;
  // What the defence table reads (classify.ts defenceOf): whether the probe had passed, and the media's URLs.
  let afterProbe = false;
  let mediaUrls: string[] = [];
  const failYtDlp = (f: Extract<ProbeResult | DownloadResult, { ok: false }>) => withDefence(tools.platform, steps.fail(
    f.category ? classification(f.category) : classifyYtDlp(f.run.stderr, f.run.exitCode, { audioOnlySource }), toolDetail('yt-dlp', f.run),
  ), { stderr: f.run.stderr, afterProbe, answers: egressAnswers(), mediaUrls, now: Date.now() });

  // A fresh attempt clears whatever an earlier attempt of the pod reported.
  steps.enter('Downloading', { result: null, error: null, errorType: null, errorDetail: null, reason: null, phaseSeconds: null, defence: null, download: null });
  if ('error' in ctx.destination) {
    return steps.fail(classification('storage_unreachable'), { err: errFields(ctx.destination.error) });
  }
  const dlDir = path.join(ctx.workDir, 'download');
  const outDir = path.join(ctx.workDir, 'output');
  await mkdir(dlDir, { recursive: true });
  await mkdir(outDir, { recursive: true });
  const ytOpts = { bin: tools.ytdlp, socketTimeoutSeconds: tools.socketTimeoutSeconds, extraArgs: tools.ytdlpArgs, signal };

  // Downloading
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
  afterProbe = true;
  if (info._type === 'playlist') return steps.fail(classification('unavailable'), { why: 'a playlist, not a single item' });
  const formats = info.formats ?? [];
  // From here the item's formats say it, not the request: an audio_only job
  // on a video whose download then fails for DRM is a Warning, not Skipped.
  if (formats.length) audioOnlySource = formats.every((f) => f.vcodec === 'none');
  const live = await isLiveSource(info, spec, { signal, logger });
  if (live) early?.cancel();
  const clip = live ? undefined : clipOf(spec);
  // The key's duration limit, on the extractor's word before anything is
  // fetched; a recording is capped instead (live.ts), and media whose
  // extractor says nothing is judged on its files (deliver.ts).
  const maxSeconds = live ? undefined : spec.limits?.maxDurationSeconds;
  const tooLong = durationOverLimit(info.duration, clip, maxSeconds);
  if (tooLong) return steps.fail(tooLong, { durationSeconds: info.duration });
  // The spec's format and resolution rules choose (plan.ts), for recordings
  // as for downloads; yt-dlp's own choice stands for lists with nothing usable.
  const choice = await chooseJobFormats(formats, spec, container, tools, logger, signal);
  const formatIds = choice ? choice.formats.map((f) => f.format_id) : selectedFormatIds(info);
  mediaUrls = formatsById(info, formatIds).map((f) => f.url).filter((u): u is string => typeof u === 'string');
  if (!formatIds.length) return steps.fail(classification('unavailable'), { why: 'no format selected' });
  const delivery: DeliveryContext = {
    spec, container, ...(clip ? { clip } : {}), live, ...(maxSeconds !== undefined ? { maxSeconds } : {}), tools, destination: ctx.destination, dlDir, outDir, steps, logger, ...(signal ? { signal } : {}),
    target: { ext: container.ext, contentType: container.contentType, jobId: ctx.jobId, filename: spec.filename, folder: spec.folder },
  };

  // Formats on plain HTTP(S) are read by ffmpeg straight from their URLs: one
  // pass that downloads, muxes and uploads (ADR 0007). Anything else, and a
  // pass that fails on its source, is downloaded with yt-dlp first.
  // A clip of a seekable MP4 fetches only its index and its bytes (clip-window.ts), into the job's scratch directory.
  const clipRead = clip ? { clip, dir: path.join(ctx.workDir, 'clip-window') } : undefined;
  const read = !live && choice ? await readableInputs(choice, { ...tools, logger }, signal, clipRead) : undefined;
  const direct = read?.inputs;
  if (direct) early?.cancel();
  const sizes = choice && read ? choice.formats.map((f) => read.bytes.get(f.format_id)) : [];
  if (direct && !clip && sizes.length && sizes.every((n) => n !== undefined)) delivery.sourceBytes = sizes.reduce<number>((a, n) => a + n!, 0);
  // What it will deliver, for the key's storage reservation; a recording's size is anyone's guess.
  const expected = live ? undefined : expectedDeliveryBytes(choice?.formats ?? formatsById(info, formatIds), info.duration, clip, read?.bytes);
  if (expected !== undefined) {
    logger.info({ expectedBytes: expected }, 'expected size');
    void ctx.reporter.setExpectedBytes(expected);
  }
  logger.info({ formats: formatIds, extractor: info.extractor }, 'downloading');
  const delivered = (direct && (await deliverDirect(delivery, direct))) || await fetchAndDeliver(ctx, delivery, {
    info, infoPath: probed.infoPath, formatIds, choice, live, clip, liveLimits,
    // The run started with the probe, unless a direct read was tried (and stopped it).
    started: () => (!direct && early) || startDownloader(ytOpts), restart: () => startDownloader(ytOpts),
  }, failYtDlp);
  if (!delivered.ok) return delivered.report!;
  await rm(dlDir, { recursive: true, force: true });
  const sidecars = await deliverSidecars(spec, {
    infoPath: probed.infoPath, workDir: ctx.workDir, jobId: ctx.jobId, mediaKey: delivered.uploaded.result.key, destination: ctx.destination, ytdlp: ytOpts,
    ffmpeg: tools.ffmpeg, logger,
  });
  steps.enter('Finished');
  return { ...completedReport(delivered, container, describedAs(spec, info), sidecars, logger), phaseSeconds: steps.phaseSeconds() };
}

/**
 * A failed report with the platform's defence beside its category, when the
 * job runs for a platform and the failure was one (classify.ts defenceOf):
 * the ids of the attempt's proxy and cookie file ride along, never their
 * contents. A job of no platform reports as before.
 */
function withDefence(platform: PlatformRun | undefined, report: RunnerReport, evidence: Parameters<typeof defenceOf>[1]): RunnerReport {
  if (!platform || report.outcome !== 'failed' || !report.category) return report;
  const found = defenceOf({ category: report.category as ErrorCategory }, evidence);
  if (!found) return report;
  return { ...report, defence: { ...found, ...(platform.proxyId ? { proxyId: platform.proxyId } : {}), ...(platform.cookieId ? { cookieId: platform.cookieId } : {}) } };
}

/**
 * The one pass that reads the formats from their URLs. Undefined when it
 * failed on its source before the upload's tail: the job goes on with a
 * download, back at Downloading.
 */
async function deliverDirect(delivery: DeliveryContext, direct: MuxInput[]): Promise<Delivery | undefined> {
  const delivered = await deliver(delivery, direct, true);
  if (delivered.ok || delivered.report) return delivered;
  if (delivery.steps.step !== 'Downloading') delivery.steps.enter('Downloading');
  return undefined;
}

interface FetchPlan {
  info: YtDlpInfo;
  infoPath: string;
  formatIds: string[];
  choice: FormatChoice | undefined;
  live: boolean;
  clip: Clip | undefined;
  liveLimits: LiveLimits;
  started: () => StartedYtDlp;
  restart: () => StartedYtDlp;
}

/** Download (yt-dlp) or record (a live stream) the formats, then mux and deliver them. */
async function fetchAndDeliver(
  ctx: JobContext, delivery: DeliveryContext, f: FetchPlan,
  failYtDlp: (failure: Extract<ProbeResult | DownloadResult, { ok: false }>) => RunnerReport,
): Promise<Delivery> {
  const { spec, tools, logger, signal } = ctx;
  const { steps, dlDir } = delivery;
  const fetched = f.live
    ? await recordLiveSource(f.info, spec, delivery.container.audioOnly, dlDir, {
      bin: tools.ffmpeg, socketTimeoutSeconds: tools.socketTimeoutSeconds, limits: f.liveLimits, formats: f.choice?.formats, signal, logger,
      onProgress: steps.withinStep('Downloading'),
    }).then((r) => (r.ok ? { ok: true as const, files: r.files, probes: new Map<string, Promise<FfprobeResult>>(), sections: new Map<string, Section>() } : r))
    : await downloadFormats({
      ctx, info: f.info, infoPath: f.infoPath, formatIds: f.formatIds, clip: f.clip, dlDir, steps, started: f.started, restart: f.restart,
    });
  if (!fetched.ok) return { ok: false, report: failYtDlp(fetched) };

  steps.enter('Muxing');
  const inputs = await muxInputs(ctx, fetched, { choice: f.choice, clip: f.clip, steps });
  if (!Array.isArray(inputs)) return { ok: false, report: inputs };
  return deliver(delivery, inputs, false);
}

/** The report of a delivered job: its file, the frame it has, and what the item (or a show's feed) says of it. */
function completedReport(
  delivered: Extract<Delivery, { ok: true }>, container: Container, described: ReturnType<typeof describedAs>,
  sidecars: Awaited<ReturnType<typeof deliverSidecars>>, logger: Logger,
): RunnerReport {
  const { uploaded, plan } = delivered;
  const result = {
    storageKey: uploaded.result.key,
    fileSize: uploaded.result.size,
    // Everything this job stored, sidecars included: what the key's storage usage counts.
    uploadedBytes: uploaded.result.size + sidecars.bytes,
    format: container.format,
    // The delivered frame: the chosen input's, or the key's resolution limit's.
    ...optional('actualQuality', actualQuality(plan.frame?.width, plan.frame?.height)),
    ...described,
    ...sidecars.keys,
  };
  logger.info({ storageKey: result.storageKey, fileSize: result.fileSize, actualQuality: result.actualQuality }, 'job completed');
  return { step: 'Finished', progress: 100, outcome: 'completed', result };
}

/** Downloaded files, each probed as soon as it was complete, and what of each a clip's cut kept. */
type Fetched = { ok: true; files: { formatId: string; path: string }[]; probes: Map<string, Promise<FfprobeResult>>; sections: ReadonlyMap<string, Section> };

/**
 * yt-dlp's download of the chosen formats, each to its own file. A clip of
 * segmented formats fetches only the segments it needs (sections.ts); should
 * that download fail, the whole formats are downloaded.
 */
async function downloadFormats(d: {
  ctx: JobContext; info: YtDlpInfo; infoPath: string; formatIds: string[]; clip?: Clip; dlDir: string; steps: JobSteps;
  started: () => StartedYtDlp; restart: () => StartedYtDlp;
}): Promise<Fetched | Extract<DownloadResult, { ok: false }>> {
  const { ctx: { tools, logger, signal, workDir }, info, formatIds, clip, dlDir } = d;
  const probes = new Map<string, Promise<FfprobeResult>>();
  const ytOpts = { bin: tools.ytdlp, socketTimeoutSeconds: tools.socketTimeoutSeconds, extraArgs: tools.ytdlpArgs, signal };
  const from = async (infoPath: string, started: StartedYtDlp, sections: ReadonlyMap<string, Section>) => {
    const r = await download(infoPath, info, formatIds, dlDir, {
      ...ytOpts, started, onProgress: d.steps.withinStep('Downloading'),
      // Each file is probed as soon as it is complete, while the next one downloads.
      onFile: (file) => {
        const p = ffprobe(tools.ffprobe, file.path, signal);
        p.catch(() => undefined); // awaited by muxInputs, unless the download fails first
        probes.set(file.path, p);
      },
    });
    return r.ok ? { ok: true as const, files: r.files, probes, sections } : r;
  };
  const cut = clip ? await cutForClip(info, formatIds, clip, tools, signal) : undefined;
  if (!cut) return from(d.infoPath, d.started(), new Map());
  const cutPath = path.join(workDir, 'info-clip.json');
  await writeFile(cutPath, JSON.stringify(cut.info));
  logger.info({ sections: Object.fromEntries(cut.sections) }, 'downloading the segments the clip needs');
  const part = await from(cutPath, d.started(), cut.sections);
  if (part.ok || signal?.aborted) return part;
  logger.warn({ exitCode: part.run.exitCode, stderr: tail(part.run.stderr) }, 'downloading the clip\'s segments failed; downloading the whole formats');
  probes.clear();
  await rm(dlDir, { recursive: true, force: true });
  return from(d.infoPath, d.restart(), new Map());
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

/** The downloaded files as mux inputs (their probes, a cut's offsets), or the report of why they cannot be. */
async function muxInputs(
  ctx: JobContext, fetched: Fetched, o: { choice?: FormatChoice; clip?: Clip; steps: JobSteps },
): Promise<MuxInput[] | RunnerReport> {
  const { tools, signal } = ctx;
  const { clip, choice, steps } = o;
  const inputs: MuxInput[] = [];
  for (const downloaded of fetched.files) {
    let file = downloaded;
    let p = await (fetched.probes.get(file.path) ?? ffprobe(tools.ffprobe, file.path, signal));
    const section = fetched.sections.get(file.formatId);
    if (p.ok && clip && clip.start > 0 && p.probed.formatName === 'mpegts') {
      // ffmpeg seeks in MPEG-TS (HLS segments) by searching timestamps, and
      // can land past the keyframe before the clip's start: the clip's video
      // then begins up to a GOP late. A copy into Matroska gives it an index
      // (of what the clip can need: to its end and a margin past it).
      const until = clip.end !== undefined ? clip.end - (section?.offsetSeconds ?? 0) + REMUX_MARGIN_SECONDS : undefined;
      const indexed = await remuxIndexed(tools.ffmpeg, file.path, until, signal);
      if (indexed.exitCode !== 0) return steps.fail(classifyFfmpeg(indexed.stderr, indexed.exitCode), toolDetail('ffmpeg', indexed));
      await rm(file.path, { force: true });
      file = { ...file, path: `${file.path}.mkv` };
      p = await ffprobe(tools.ffprobe, file.path, signal);
    }
    if (!p.ok) return steps.fail(classifyFfmpeg(p.run.stderr, p.run.exitCode), toolDetail('ffprobe', p.run));
    inputs.push({
      path: file.path, carriesAudio: choice !== undefined && file.formatId === choice.audioFrom,
      // A cut format holds its kept segments' span, whatever its container says.
      ...(section ? { offsetSeconds: section.offsetSeconds, probed: { ...p.probed, durationSeconds: section.spanSeconds } } : { probed: p.probed }),
    });
  }
  return inputs;
}

function optional<K extends string, V>(key: K, value: V | undefined): Partial<Record<K, V>> {
  return value === undefined || value === '' ? {} : ({ [key]: value } as Record<K, V>);
}

/**
 * The formats to download by the spec's rules. Audio renditions yt-dlp knows
 * no codec or bitrate of (HLS EXT-X-MEDIA) are measured first, since the
 * rules choose among tracks by exactly those.
 */
async function chooseJobFormats(
  formats: readonly YtDlpFormat[], spec: NormalisedMediaJobSpec, container: Container, tools: Tools, logger: Logger, signal?: AbortSignal,
): Promise<FormatChoice | undefined> {
  const unknown = formatsToMeasure(formats);
  const measured = new Map<string, MeasuredAudio>();
  await Promise.all(unknown.map(async (f) => {
    const m = await measureAudio(tools.ffprobe, f, { signal, timeoutSeconds: tools.socketTimeoutSeconds });
    if (m) measured.set(f.format_id, m);
  }));
  if (unknown.length) logger.info({ measured: Object.fromEntries(measured) }, 'measured audio renditions');
  const unmeasured = unknown.filter((f) => !measured.has(f.format_id)).map((f) => f.format_id);
  if (unmeasured.length) logger.warn({ unmeasured }, 'audio renditions could not be measured; the choice is made without them');
  return chooseFormats(withMeasurements(formats, measured), spec, container);
}
