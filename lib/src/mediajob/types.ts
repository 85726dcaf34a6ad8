// The MediaJob and MediaBatch custom resources as TypeScript types (mediajobs.io/v1alpha1).
// The CRD's OpenAPI schema (crd-source.ts) is the source of truth for
// validation and documentation; these types mirror it for code.

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

export const TERMINAL_STATUSES: readonly JobStatus[] = ['Completed', 'Failed', 'Warning', 'Skipped', 'Cancelled', 'CancelledByAdmin'];

export interface Destination {
  /** managed storage, a saved destination of the key/organization, or inline credentials of the request. */
  type: DestinationType;
  provider?: StorageProviderName;
  /** Secret (in the service namespace) holding the credentials, for saved/inline destinations. */
  secretName?: string;
}

/** The normalised options of one job: defaults applied, rule-4 corrections done. */
export interface MediaJobOptions {
  url: string;
  format: Format;
  videoCodec: VideoCodec;
  audioCodec?: AudioCodec;
  audioBitrate: AudioBitrate;
  videoQuality: number;
  qualityPreset?: QualityPreset;
  maxResolution: MaxResolution;
  filename?: string;
  folder?: string;
  audioOnly: boolean;
  downloadSubtitles: boolean;
  downloadThumbnail: boolean;
  clipStart?: string;
  clipEnd?: string;
  liveRecording: boolean;
  liveFromStart: boolean;
  maxDuration?: number;
  waitForVideo: boolean;
  enableProgressWebhook: boolean;
}

/**
 * The options as a MediaJob stores them. The gateway always writes normalised
 * options, but a manifest applied with kubectl may leave out `format` and
 * `audioBitrate`: their defaults depend on other fields (rule 5: m4a when
 * audioOnly; rule 4: a given bitrate without a codec selects aac), so the CRD
 * cannot fill them in and normalisation must see whether they were given.
 */
export type MediaJobSpecOptions = Omit<MediaJobOptions, 'format' | 'audioBitrate'> & {
  format?: Format;
  audioBitrate?: AudioBitrate;
};

export interface MediaJobSpec extends MediaJobSpecOptions {
  jobId?: string;
  owner: { apiKeyId: string };
  webhookUrl?: string;
  destination: Destination;
  batchId?: string;
  /**
   * Set by the operator's batch controller on the episode jobs of a show: the only
   * jobs for which downloadThumbnail produces a thumbnail (spec rule 6). Not an
   * API field; for every other job downloadThumbnail is accepted and ignored.
   */
  showEpisode?: boolean;
}

export interface MediaJobResult {
  storageKey: string;
  fileSize: number;
  actualQuality?: string;
  format?: string;
  title?: string;
  description?: string;
  releaseDate?: string;
  subtitleKey?: string;
  thumbnailKey?: string;
}

export interface Condition {
  type: string;
  status: ConditionStatus;
  reason: string;
  message: string;
  lastTransitionTime: string;
  observedGeneration?: number;
}

export interface MediaJobStatus {
  jobId?: string;
  status?: JobStatus;
  step?: JobStep;
  progress?: number;
  result?: MediaJobResult;
  error?: string;
  errorType?: ErrorType;
  reason?: string;
  jobName?: string;
  startTime?: string;
  finishTime?: string;
  observedGeneration?: number;
  conditions?: Condition[];
}

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

/** Encoding options a batch shares with its episodes; url, filename and folder are per episode or per batch. */
export type BatchOptions = Omit<MediaJobSpecOptions, 'url' | 'filename' | 'folder'>;

export interface BatchEpisode {
  jobId?: string;
  url: string;
  title?: string;
  description?: string;
  releaseDate?: string;
  filename?: string;
}

export interface MediaBatchSpec {
  batchId?: string;
  showUrl: string;
  kind?: BatchKind;
  owner: { apiKeyId: string };
  folder?: string;
  paused: boolean;
  webhookUrl?: string;
  destination: Destination;
  options: BatchOptions;
  episodes?: BatchEpisode[];
}

export interface MediaBatchStatus {
  batchId?: string;
  status?: BatchStatus;
  totalEpisodes?: number;
  completedEpisodes?: number;
  failedEpisodes?: number;
  skippedEpisodes?: number;
  episodeJobs?: string[];
  observedGeneration?: number;
  conditions?: Condition[];
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
  reason?: string;
  /** The outcome the runner reached: completed, failed (technical), warning (content), skipped (DRM). */
  outcome?: 'completed' | 'failed' | 'warning' | 'skipped';
}

/** Runner exit codes (see docs/design/spine.md). */
export const RUNNER_EXIT = { completed: 0, failed: 10, warning: 11, skipped: 12 } as const;

/** The job id of a MediaJob: spec.jobId (gateway-made) or metadata.uid (kubectl-applied). */
export function jobIdOf(mj: Pick<MediaJob, 'spec' | 'metadata'>): string {
  return mj.spec.jobId ?? mj.metadata.uid!;
}
