// The MediaJob and MediaBatch custom resources (mediajobs.io/v1alpha1): their
// names, enumerations, and the zod schemas of spec and status that their
// TypeScript types come from. The CRD (crd-source.ts) documents and validates
// the same fields for the apiserver; see "The custom resources' spec and
// status" below for how the two are kept equal.
import { z } from 'zod';
import { WEBHOOK_EVENT_TYPES } from '../webhook-event-types.js';

export const GROUP = 'mediajobs.io';
export const VERSION = 'v1alpha1';
export const API_VERSION = `${GROUP}/${VERSION}`;
export const MEDIAJOB_PLURAL = 'mediajobs';
export const MEDIABATCH_PLURAL = 'mediabatches';

export const VIDEO_FORMATS = ['mp4', 'mkv', 'webm', 'mov'] as const;
export const AUDIO_FORMATS = ['m4a', 'mp3', 'ogg', 'opus'] as const;
export const FORMATS = [...VIDEO_FORMATS, ...AUDIO_FORMATS] as const;
export const VIDEO_CODECS = ['copy', 'h264', 'h265', 'vp9'] as const;
export const AUDIO_CODECS = ['copy', 'aac', 'opus', 'mp3'] as const;
export const AUDIO_BITRATES = ['64k', '128k', '192k', '256k', '320k'] as const;
export const QUALITY_PRESETS = ['highest', 'high', 'medium', 'low', 'lowest'] as const;
export const MAX_RESOLUTIONS = ['best', 'lowest', '2160', '1440', '1080', '720', '480', '360', '240', '144'] as const;
export const JOB_STATUSES = ['Pending', 'Processing', 'Completed', 'Failed', 'Warning', 'Skipped', 'Cancelled', 'CancelledByAdmin'] as const;
export const JOB_STEPS = ['Queued', 'Downloading', 'Muxing', 'Uploading', 'Finished'] as const;
export const STORAGE_PROVIDERS = ['s3', 'blob', 'gcs', 'oss', 'drive'] as const;
export const DESTINATION_TYPES = ['managed', 'saved', 'inline'] as const;
export const ERROR_TYPES = ['error', 'warning'] as const;
export const CONDITION_STATUSES = ['True', 'False', 'Unknown'] as const;
/** Condition types the operator sets on a MediaJob. */
export const MEDIAJOB_CONDITION_TYPES = ['Admitted', 'Running', 'Succeeded'] as const;
/**
 * Condition types the operator sets on a MediaBatch: Accepted (recorded for its owner, its episodes known),
 * EpisodesCreated (every episode has its MediaJob), Complete (every episode done).
 */
export const MEDIABATCH_CONDITION_TYPES = ['Accepted', 'EpisodesCreated', 'Complete'] as const;
export const BATCH_STATUSES = ['paused', 'processing', 'completed', 'finished'] as const;
export const BATCH_KINDS = ['show', 'playlist'] as const;

export type Format = (typeof FORMATS)[number];
export type VideoCodec = (typeof VIDEO_CODECS)[number];
export type AudioCodec = (typeof AUDIO_CODECS)[number];
export type AudioBitrate = (typeof AUDIO_BITRATES)[number];
export type QualityPreset = (typeof QUALITY_PRESETS)[number];
export type MaxResolution = (typeof MAX_RESOLUTIONS)[number];
export type JobStatus = (typeof JOB_STATUSES)[number];
export type JobStep = (typeof JOB_STEPS)[number];
export type StorageProviderName = (typeof STORAGE_PROVIDERS)[number];
export type ErrorType = (typeof ERROR_TYPES)[number];
export type DestinationType = (typeof DESTINATION_TYPES)[number];
export type ConditionStatus = (typeof CONDITION_STATUSES)[number];
export type BatchStatus = (typeof BATCH_STATUSES)[number];
export type BatchKind = (typeof BATCH_KINDS)[number];

/** videoQuality's default and range: libx264's CRF scale, whose own default is 23. */
export const DEFAULT_VIDEO_QUALITY = 23;
export const MAX_VIDEO_QUALITY = 51;
/** maxDuration's bound: the CRD's int32. */
export const MAX_DURATION_SECONDS = 2_147_483_647;

export const TERMINAL_STATUSES: readonly JobStatus[] = ['Completed', 'Failed', 'Warning', 'Skipped', 'Cancelled', 'CancelledByAdmin'];

// ---------------------------------------------------------------------------
// The custom resources' spec and status, as zod schemas. They are the one
// source of the TypeScript types below (z.output: what a stored object holds
// once the apiserver applied the CRD's defaults) and of the defaults the
// gateway and the runner apply themselves (job-options.ts
// normaliseSpecOptions), so a default is written once for every path a spec
// takes. The CRD (crd-source.ts) keeps what only it needs: the
// documentation, string patterns and lengths; lib/test/crds.test.ts walks
// both field by field (names, types, enums, required, defaults, numeric
// bounds) and fails on any difference. Generating one from the other was
// the alternative: it would need zod to carry RE2 patterns, list types and
// descriptions in the CRD's own key order, which is more machinery than the
// duplication it saves.

/** Where a job or batch delivers its files. */
export const destinationSchema = z.object({
  /** managed storage, a saved destination of the key/organization, or inline credentials of the request. */
  type: z.enum(DESTINATION_TYPES).default('managed'),
  provider: z.enum(STORAGE_PROVIDERS).optional(),
  /** Secret (in the service namespace) holding the credentials, for saved/inline destinations. */
  secretName: z.string().optional(),
});

const ownerSchema = z.object({ apiKeyId: z.string() });

/** A MediaJob or MediaBatch whose owner is settled (named, or its namespace's bound key: operator namespace-owners.ts). */
export type Owned<T extends { spec: object }> = T & { spec: T['spec'] & { owner: { apiKeyId: string } } };

/**
 * The owning API key's limits on one job (issue 14, "Per-key limits"): not a
 * request field. The gateway writes them from the key when it accepts a job
 * (api-gateway/src/key-limits.ts) and the runner enforces them; a kubectl
 * manifest carries them as written. The gateway also caps maxResolution at
 * max_resolution_limit, which chooses the format; maxResolution here is the
 * hard cap the runner scales down to when even the chosen format is larger.
 */
export const jobLimitsSchema = z.object({
  /**
   * The most lines the delivered video's shorter side may have (a numeric
   * max_resolution_limit: 144 ... 2160): a larger frame is scaled down to it.
   */
  maxResolution: z.number().int().min(2).optional(),
  /** Longer media is refused (Failed); a live recording stops here. */
  maxDurationSeconds: z.number().int().min(1).max(MAX_DURATION_SECONDS).optional(),
  /** A delivered file larger than this is never stored (Failed). */
  maxFilesizeBytes: z.number().int().min(1).optional(),
});

/**
 * The POST /jobs options as a MediaJob stores them, with the defaults the
 * CRD applies. `format` and `audioBitrate` have none: their defaults depend
 * on other fields (rule 5: m4a when audioOnly; rule 4: a given bitrate
 * without a codec selects aac), so normalisation must see whether they were
 * given.
 */
export const specOptionsSchema = z.object({
  url: z.string(),
  format: z.enum(FORMATS).optional(),
  videoCodec: z.enum(VIDEO_CODECS).default('copy'),
  audioCodec: z.enum(AUDIO_CODECS).optional(),
  audioBitrate: z.enum(AUDIO_BITRATES).optional(),
  videoQuality: z.number().int().min(0).max(MAX_VIDEO_QUALITY).default(DEFAULT_VIDEO_QUALITY),
  qualityPreset: z.enum(QUALITY_PRESETS).optional(),
  maxResolution: z.enum(MAX_RESOLUTIONS).default('best'),
  filename: z.string().optional(),
  folder: z.string().optional(),
  audioOnly: z.boolean().default(false),
  downloadSubtitles: z.boolean().default(false),
  downloadThumbnail: z.boolean().default(false),
  clipStart: z.string().optional(),
  clipEnd: z.string().optional(),
  liveRecording: z.boolean().default(false),
  liveFromStart: z.boolean().default(false),
  maxDuration: z.number().int().min(1).max(MAX_DURATION_SECONDS).optional(),
  waitForVideo: z.boolean().default(false),
  enableProgressWebhook: z.boolean().default(false),
  /** The webhook event types the job sends (ADR 0029); absent: every one. */
  webhookEvents: z.array(z.enum(WEBHOOK_EVENT_TYPES)).min(1).optional(),
  // Not a request field: kept with the options so that the job row, the
  // materializer's MediaJob and a batch's episodes carry it as the options travel.
  limits: jobLimitsSchema.optional(),
});

export const mediaJobSpecSchema = specOptionsSchema.extend({
  /** Set by the gateway; absent for kubectl manifests (the operator then uses metadata.uid). */
  jobId: z.string().optional(),
  /** Required in the service's namespace; elsewhere the namespace's bound key when absent (operator namespace-owners.ts). */
  owner: ownerSchema.optional(),
  webhookUrl: z.string().optional(),
  destination: destinationSchema.default({ type: 'managed' }),
  /** Delete the finished MediaJob after this many seconds; absent on a manifest: kept (GitOps re-applies find it finished). */
  ttlSecondsAfterFinished: z.number().int().min(0).optional(),
  batchId: z.string().optional(),
  /**
   * Set by the operator's batch controller on the episode jobs of a show: the only
   * jobs for which downloadThumbnail produces a thumbnail (spec rule 6). Not an
   * API field; for every other job downloadThumbnail is accepted and ignored.
   */
  showEpisode: z.boolean().optional(),
  /**
   * Set by the batch controller on a show's episode jobs: what the feed says
   * about the episode, which the runner reports instead of what yt-dlp reads
   * from the enclosure file (spec rule 6, job_completed). No description: it
   * is null for podcast sources.
   */
  episode: z.object({
    title: z.string().optional(),
    releaseDate: z.string().optional(),
    thumbnailUrl: z.string().optional(),
  }).optional(),
  /** Cancel the job (kubectl, GitOps): CancelledByAdmin unless it ended first (docs/adr/0013). */
  cancel: z.boolean().optional(),
});

export const mediaJobResultSchema = z.object({
  storageKey: z.string(),
  fileSize: z.number().int().min(0).optional(),
  /** Bytes the job stored: the media and its sidecars (the key's storage usage); absent from older runners: fileSize counts. */
  uploadedBytes: z.number().int().min(0).optional(),
  actualQuality: z.string().optional(),
  format: z.string().optional(),
  title: z.string().optional(),
  description: z.string().optional(),
  releaseDate: z.string().optional(),
  subtitleKey: z.string().optional(),
  thumbnailKey: z.string().optional(),
});

export const conditionSchema = z.object({
  type: z.string(),
  status: z.enum(CONDITION_STATUSES),
  reason: z.string(),
  message: z.string(),
  lastTransitionTime: z.string(),
  observedGeneration: z.number().int().min(0).optional(),
});

/** The runner's phases, as the phase label of mediajobs_runner_phase_seconds names them: its Downloading, Muxing and Uploading steps. */
export const RUNNER_PHASES = ['download', 'mux', 'upload'] as const;
export type RunnerPhase = (typeof RUNNER_PHASES)[number];

/**
 * Seconds one runner attempt spent in each step it entered (a step entered
 * again, as when a direct read falls back to a download, adds up). Only
 * the steps it went through: a failed attempt has the phases up to its
 * failure. Observed by the operator in mediajobs_runner_phase_seconds.
 */
export const runnerPhaseSecondsSchema = z.object({
  download: z.number().min(0).optional(),
  mux: z.number().min(0).optional(),
  upload: z.number().min(0).optional(),
});

/**
 * What a platform did to stop an attempt (runner-image/README.md "Defences"):
 * the runner's classification of its failure, which the operator answers
 * (a new proxy session, a cookie marked unhealthy, a backoff, a re-probe)
 * and feeds the platform's circuit breaker with. The category stays the
 * error category (bot_detection, rate_limited, download_failed).
 */
export const DEFENCE_KINDS = ['bot_check', 'sign_in', 'rate_limited', 'captcha', 'forbidden', 'expired_url'] as const;
export type DefenceKind = (typeof DEFENCE_KINDS)[number];

/** status.defence; kind is a string in the schema, so a newer runner's kind never makes the apiserver refuse its report. */
export const runnerDefenceSchema = z.object({
  kind: z.string(),
  /** The platform's Retry-After, when it said one (HTTP 429 read by the egress proxy on a forward request). */
  retryAfterSeconds: z.number().int().min(0).optional(),
  /** The attempt's proxy (RUNNER_PROXY_ID) and cookie file (RUNNER_COOKIE_ID), ids only. */
  proxyId: z.string().optional(),
  cookieId: z.string().optional(),
});

/** status.tools: the versions of the tools the attempt ran (mediajobs_runner_tool_info). */
export const runnerToolsSchema = z.object({
  ytdlp: z.string().optional(),
  ffmpeg: z.string().optional(),
});

/**
 * status.download: the runner's figures of its read of the source (issue
 * 38), each absent while unknown. Bytes are the source's (what yt-dlp or a
 * direct read fetched), not the delivered file's; speed and time left are
 * there only while the source is being read.
 */
export const runnerDownloadSchema = z.object({
  downloadedBytes: z.number().int().min(0).optional(),
  totalBytes: z.number().int().min(0).optional(),
  /** Bytes per second over the last few seconds. */
  speedBps: z.number().int().min(0).optional(),
  /** Seconds left at that speed; only with totalBytes. */
  etaSeconds: z.number().int().min(0).optional(),
});

/** The longest status.errorDetail (lib/src/cause-line.ts bounds it so). */
export const MAX_ERROR_DETAIL_LENGTH = 200;

/** How one runner attempt of a MediaJob ended (status.attempts[]). */
export const ATTEMPT_OUTCOMES = ['Completed', 'Failed', 'Warning', 'Skipped'] as const;

/** One finished runner attempt of a MediaJob (docs/adr/0018-retry-policy.md). */
export const mediaJobAttemptSchema = z.object({
  /** 1 for the first run, counting up. */
  attempt: z.number().int().min(1),
  /** The attempt's batch/v1 Job. */
  jobName: z.string(),
  startTime: z.string().optional(),
  finishTime: z.string().optional(),
  outcome: z.enum(ATTEMPT_OUTCOMES),
  /** What it failed of: the runner's error category, or what the cluster did to its pod (evicted, oom_killed, node_lost, timeout). */
  category: z.string().optional(),
  reason: z.string().optional(),
  error: z.string().optional(),
  /** Set when another attempt was scheduled after this one: the wait before it. */
  retryAfterSeconds: z.number().int().min(0).optional(),
  /** What the attempt's runner reported of its phases (its final report): what the operator observes once per attempt. */
  phaseSeconds: runnerPhaseSecondsSchema.optional(),
  /** The platform's defence the attempt met (its status.defence): what the operator answered and counted once. */
  defence: runnerDefenceSchema.optional(),
});

export const mediaJobStatusSchema = z.object({
  jobId: z.string().optional(),
  status: z.enum(JOB_STATUSES).optional(),
  step: z.enum(JOB_STEPS).optional(),
  progress: z.number().int().min(0).max(100).optional(),
  /**
   * Bytes the runner expects to deliver, once it has chosen what to fetch
   * (the chosen formats' sizes, a clip's share of them): the job's storage
   * reservation from then on (lib/src/db/jobs.ts mirrorStatus). Absent
   * while nobody knows (a live recording, a source that gives no size).
   */
  expectedBytes: z.number().int().min(0).optional(),
  result: mediaJobResultSchema.optional(),
  error: z.string().optional(),
  errorType: z.enum(ERROR_TYPES).optional(),
  /**
   * A failure's cause as the tool said it: its first relevant line, cleaned
   * of URL credentials and queries, other hosts' URLs, internal addresses,
   * paths and secrets (lib/src/cause-line.ts),
   * at most MAX_ERROR_DETAIL_LENGTH characters. Beside `error`, the
   * category's fixed phrase.
   */
  errorDetail: z.string().max(MAX_ERROR_DETAIL_LENGTH).optional(),
  reason: z.string().optional(),
  /**
   * The runner's error category (lib/src/mediajob/error-categories.ts) of
   * the failure it reported; a string, not an enum, so a newer runner's
   * category never makes the apiserver refuse its report.
   */
  category: z.string().optional(),
  /** The runner's final report of the seconds it spent in each phase (this attempt's). */
  phaseSeconds: runnerPhaseSecondsSchema.optional(),
  /** The defence the platform answered this attempt with, when its failure was one (the runner's report). */
  defence: runnerDefenceSchema.optional(),
  /** The yt-dlp and ffmpeg versions of this attempt, reported by the runner at its start. */
  tools: runnerToolsSchema.optional(),
  /** The runner's figures of its read of the source, as it goes. */
  download: runnerDownloadSchema.optional(),
  /**
   * The files the current attempt's runner stored and has not deleted, key →
   * bytes, each written by the runner the moment its upload completes.
   * Whatever the attempt's end leaves out of the job's result is deleted by
   * the operator when it records that end (operator/src/stored-files.ts), so
   * a runner killed between its upload and its report leaves no file behind.
   */
  storedFiles: z.record(z.string(), z.number().int().min(0)).optional(),
  jobName: z.string().optional(),
  startTime: z.string().optional(),
  finishTime: z.string().optional(),
  /** When a re-applied manifest's finished job was restored from its record (docs/gitops.md); its TTL counts from then. */
  restoredTime: z.string().optional(),
  /** The current runner attempt (1 when absent): the one running, or the one waiting for retryAt. */
  attempt: z.number().int().min(1).optional(),
  /** The attempts that ended, oldest first (at most RETRY_MAX_ATTEMPTS). */
  attempts: z.array(mediaJobAttemptSchema).optional(),
  /** While the job waits to be tried again: when the next attempt may start (RFC 3339). */
  retryAt: z.string().optional(),
  observedGeneration: z.number().int().min(0).optional(),
  conditions: z.array(conditionSchema).optional(),
});

/** Encoding options a batch shares with its episodes; url, filename and folder are per episode or per batch. */
export const batchOptionsSchema = specOptionsSchema.omit({ url: true, filename: true, folder: true });

export const batchEpisodeSchema = z.object({
  jobId: z.string().optional(),
  url: z.string(),
  title: z.string().optional(),
  description: z.string().optional(),
  releaseDate: z.string().optional(),
  filename: z.string().optional(),
});

export const mediaBatchSpecSchema = z.object({
  batchId: z.string().optional(),
  showUrl: z.string(),
  kind: z.enum(BATCH_KINDS).optional(),
  /** As a MediaJob's: required in the service's namespace, else the namespace's bound key when absent. */
  owner: ownerSchema.optional(),
  folder: z.string().optional(),
  paused: z.boolean().default(false),
  webhookUrl: z.string().optional(),
  destination: destinationSchema.default({ type: 'managed' }),
  // prefault: the CRD's default {} is filled in further by each option's own default, as the apiserver does.
  options: batchOptionsSchema.prefault({}),
  episodes: z.array(batchEpisodeSchema).optional(),
});

export const mediaBatchStatusSchema = z.object({
  batchId: z.string().optional(),
  status: z.enum(BATCH_STATUSES).optional(),
  totalEpisodes: z.number().int().min(0).optional(),
  completedEpisodes: z.number().int().min(0).optional(),
  failedEpisodes: z.number().int().min(0).optional(),
  skippedEpisodes: z.number().int().min(0).optional(),
  /** `<completed + failed>/<total>`, for the Done printer column (one JSONPath per column). */
  done: z.string().optional(),
  episodeJobs: z.array(z.string()).optional(),
  observedGeneration: z.number().int().min(0).optional(),
  conditions: z.array(conditionSchema).optional(),
});

export type Destination = z.output<typeof destinationSchema>;
export type JobLimits = z.output<typeof jobLimitsSchema>;
/** The options as a MediaJob stores them: a manifest applied with kubectl may leave out `format` and `audioBitrate`. */
export type MediaJobSpecOptions = z.output<typeof specOptionsSchema>;
/** The options as a client may write them, before any default. */
export type MediaJobSpecOptionsInput = z.input<typeof specOptionsSchema>;
/** The normalised options of one job: defaults applied, rule-4 corrections done. */
export type MediaJobOptions = Omit<MediaJobSpecOptions, 'format' | 'audioBitrate'> & { format: Format; audioBitrate: AudioBitrate };
export type MediaJobSpec = z.output<typeof mediaJobSpecSchema>;
export type EpisodeMetadata = NonNullable<MediaJobSpec['episode']>;
/** A spec whose options are normalised, as the gateway and the operator hand it on (the runner's MEDIAJOB_SPEC). */
export type NormalisedMediaJobSpec = MediaJobSpec & MediaJobOptions;
export type MediaJobResult = z.output<typeof mediaJobResultSchema>;
export type Condition = z.output<typeof conditionSchema>;
export type MediaJobStatus = z.output<typeof mediaJobStatusSchema>;
export type MediaJobAttempt = z.output<typeof mediaJobAttemptSchema>;
export type RunnerPhaseSeconds = z.output<typeof runnerPhaseSecondsSchema>;
export type RunnerDefence = Omit<z.output<typeof runnerDefenceSchema>, 'kind'> & { kind: DefenceKind };
export type RunnerTools = z.output<typeof runnerToolsSchema>;
export type RunnerDownload = z.output<typeof runnerDownloadSchema>;
export type AttemptOutcome = (typeof ATTEMPT_OUTCOMES)[number];
export type BatchOptions = z.output<typeof batchOptionsSchema>;
export type BatchEpisode = z.output<typeof batchEpisodeSchema>;
export type MediaBatchSpec = z.output<typeof mediaBatchSpecSchema>;
export type MediaBatchStatus = z.output<typeof mediaBatchStatusSchema>;

/** The part of ObjectMeta this project reads and writes. */
export interface ObjectMeta {
  name?: string;
  namespace?: string;
  uid?: string;
  resourceVersion?: string;
  generation?: number;
  creationTimestamp?: string;
  deletionTimestamp?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  finalizers?: string[];
}

export interface MediaJob {
  apiVersion: typeof API_VERSION;
  kind: 'MediaJob';
  metadata: ObjectMeta;
  spec: MediaJobSpec;
  status?: MediaJobStatus;
}

export interface MediaBatch {
  apiVersion: typeof API_VERSION;
  kind: 'MediaBatch';
  metadata: ObjectMeta;
  spec: MediaBatchSpec;
  status?: MediaBatchStatus;
}

/** What the runner reports through /status and repeats in its termination message. */
export interface RunnerReport {
  step?: JobStep;
  progress?: number;
  result?: MediaJobResult;
  error?: string;
  errorType?: ErrorType;
  /** The tool's cause, cleaned (status.errorDetail). */
  errorDetail?: string;
  reason?: string;
  /** The error category of a job that did not complete (lib/src/mediajob/error-categories.ts): what the retry policy reads. */
  category?: string;
  /** The outcome the runner reached: completed, failed (technical), warning (content), skipped (DRM). */
  outcome?: 'completed' | 'failed' | 'warning' | 'skipped';
  /** Seconds spent in each step it entered, failed attempts included (mediajobs_runner_phase_seconds). */
  phaseSeconds?: RunnerPhaseSeconds;
  /** The platform's defence, when the failure was one (runner-image/README.md "Defences"). */
  defence?: RunnerDefence;
  /** The yt-dlp and ffmpeg versions the attempt ran. */
  tools?: RunnerTools;
}

/** Runner exit codes (see docs/design/spine.md). */
export const RUNNER_EXIT = { completed: 0, failed: 10, warning: 11, skipped: 12 } as const;

/** The job id of a MediaJob: spec.jobId (gateway-made), else the status's (a re-applied manifest restored from its record keeps the first run's id), else metadata.uid (kubectl-applied). */
export function jobIdOf(mj: Pick<MediaJob, 'spec' | 'metadata' | 'status'>): string {
  return mj.spec.jobId ?? mj.status?.jobId ?? mj.metadata.uid!;
}
