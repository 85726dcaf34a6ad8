// The one source of truth for the MediaJob and MediaBatch CustomResourceDefinitions.
// generate-crds.ts renders these objects to crds/*.yaml (and the Helm chart's
// copies); lib/test/crds.test.ts fails when the checked-in YAML is stale.
//
// Descriptions are the user documentation: `kubectl explain mediajob.spec` is
// how a manifest author learns the API, so each one says what the field means
// in the API spec's terms (field name, rule number), not how it is stored.
//
// Constraints mirror the gateway's validation but are never stricter: a
// MediaJob the gateway creates from an accepted request must always pass the
// CRD, or a valid POST /jobs would fail after the row was written. Rules
// across fields are CEL (x-kubernetes-validations, see rules below):
// clipEnd after clipStart, drive never inline, and a MediaJob's spec frozen
// once a runner was created for it; the gateway checks the first two itself
// and never changes a spec.
//
// The field names, types, enums, required fields, defaults and numeric bounds
// are also those of the zod schemas in types.ts, which the TypeScript types
// come from; lib/test/crds.test.ts compares the two field by field. What only
// the CRD has: descriptions, string patterns and lengths, formats, list types.
import { FILENAME_BYTES_PROBLEM, MAX_FILENAME_BYTES, parseClipTime } from '../job-options.js';
import { WEBHOOK_EVENT_TYPES } from '../webhook-event-types.js';
import {
  AUDIO_BITRATES, AUDIO_CODECS, BATCH_KINDS, BATCH_STATUSES, CONDITION_STATUSES, DESTINATION_TYPES,
  ATTEMPT_OUTCOMES, DEFAULT_VIDEO_QUALITY, MAX_ERROR_DETAIL_LENGTH, ERROR_TYPES, FORMATS, GROUP, JOB_STATUSES, JOB_STEPS, MAX_DURATION_SECONDS, MAX_RESOLUTIONS,
  MAX_VIDEO_QUALITY, MEDIABATCH_CONDITION_TYPES, MEDIABATCH_PLURAL, MEDIAJOB_CONDITION_TYPES, MEDIAJOB_PLURAL, QUALITY_PRESETS, STORAGE_PROVIDERS, VERSION,
  VIDEO_CODECS,
  type BatchEpisode, type BatchOptions, type Condition, type Destination, type MediaBatchSpec, type MediaBatchStatus,
  DEFENCE_KINDS, type EpisodeMetadata, type JobLimits, type MediaJobAttempt, type MediaJobResult, type RunnerDownload, type RunnerPhaseSeconds, type RunnerTools, type MediaJobSpec, type MediaJobSpecOptions, type MediaJobStatus,
} from './types.js';

/** The subset of OpenAPI v3 the CRDs use; `description` is required so no node can go undocumented. */
export interface SchemaNode {
  description: string;
  type: 'object' | 'array' | 'string' | 'integer' | 'number' | 'boolean';
  format?: 'int32' | 'int64' | 'date-time' | 'uuid';
  enum?: string[];
  default?: unknown;
  minimum?: number;
  maximum?: number;
  minLength?: number;
  maxLength?: number;
  pattern?: string;
  /** Only extra patterns: RE2 has no lookahead, so "A and not B" needs two patterns. */
  allOf?: { pattern: string }[];
  properties?: Record<string, SchemaNode>;
  /** A map's values (its keys are any strings); never with `properties`. */
  additionalProperties?: SchemaNode;
  maxProperties?: number;
  required?: string[];
  items?: SchemaNode;
  minItems?: number;
  maxItems?: number;
  'x-kubernetes-list-type'?: 'atomic' | 'set' | 'map';
  'x-kubernetes-list-map-keys'?: string[];
  'x-kubernetes-validations'?: ValidationRule[];
}

/** A CEL rule; the apiserver refuses a write that makes it false with `<fieldPath>: Invalid value: "<type>": <message>`. */
export interface ValidationRule {
  rule: string;
  message: string;
  messageExpression?: string;
  fieldPath?: string;
}

export interface PrinterColumn {
  name: string;
  type: 'string' | 'integer' | 'number' | 'boolean' | 'date';
  jsonPath: string;
  description: string;
  priority?: number;
}

export interface CustomResourceDefinition {
  apiVersion: 'apiextensions.k8s.io/v1';
  kind: 'CustomResourceDefinition';
  metadata: { name: string; labels: Record<string, string> };
  spec: {
    group: string;
    scope: 'Namespaced' | 'Cluster';
    names: { plural: string; singular: string; kind: string; listKind: string; shortNames: string[]; categories: string[] };
    versions: {
      name: string;
      served: boolean;
      storage: boolean;
      subresources: { status: Record<string, never> };
      additionalPrinterColumns: PrinterColumn[];
      schema: { openAPIV3Schema: SchemaNode };
    }[];
  };
}

// ---------------------------------------------------------------------------
// Node builders. Each call returns a fresh object, so no two places in a CRD
// share a node (the YAML writer would otherwise emit anchors and aliases).

type Extra = Omit<SchemaNode, 'description' | 'type'>;

const str = (description: string, extra: Extra = {}): SchemaNode => ({ description, type: 'string', ...extra });
const int = (description: string, extra: Extra = {}): SchemaNode => ({ description, type: 'integer', ...extra });
const num = (description: string, extra: Extra = {}): SchemaNode => ({ description, type: 'number', ...extra });
const bool = (description: string, extra: Extra = {}): SchemaNode => ({ description, type: 'boolean', ...extra });
const oneOf = (description: string, values: readonly string[], extra: Extra = {}): SchemaNode =>
  ({ description, type: 'string', enum: [...values], ...extra });
const list = (description: string, items: SchemaNode, extra: Extra = {}): SchemaNode =>
  ({ description, type: 'array', items, ...extra });

/**
 * An object node whose properties are exactly the keys of T: adding a field to
 * the TypeScript type without documenting it in the schema (or the reverse)
 * does not compile; crds.test.ts checks the rest of each field.
 */
function obj<T>(
  description: string,
  properties: { [K in keyof Required<T>]: SchemaNode },
  required: (keyof T & string)[] = [],
  extra: Extra = {},
): SchemaNode {
  const node: SchemaNode = { description, type: 'object', ...extra, properties };
  if (required.length) node.required = required;
  return node;
}

const list2 = (values: readonly string[]): string => values.join(', ');

// RE2 (Go) syntax, also valid as JavaScript: the local cluster and the real
// apiserver must read them alike.
// Only the scheme: the gateway accepts what WHATWG URL parsing accepts
// (e.g. "https:host/path"), and the point here is to keep file:, ytsearch: and
// other yt-dlp pseudo-URLs out of manifests.
const HTTP_URL = String.raw`^[Hh][Tt][Tt][Pp][Ss]?:`;
// Every "." is followed by something other than "." (or ends the name): no "..".
const FILENAME = String.raw`^([^/\\\x00.]|\.[^/\\\x00.])*\.?$`;
const NO_DOUBLE_DOT = String.raw`^([^.\x00]|\.[^.\x00])*\.?$`;
const NO_LEADING_SLASH = String.raw`^[^/\\]`;
const NOT_BLANK = String.raw`\S`;
// Ranges (minutes and seconds below 60) are the gateway's check; the shape is enough here.
const CLIP_TIME = String.raw`^[0-9]+(:[0-9]+){0,2}(\.[0-9]+)?$`;
const DNS_SUBDOMAIN = String.raw`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`;
// metav1.Condition's own validation, so conditions behave like every other controller's.
const CONDITION_TYPE = String.raw`^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$`;
const CONDITION_REASON = String.raw`^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$`;

/**
 * What each pattern asks, in words: the problem of a value that breaks it,
 * for spec-check.ts to name with the field (the pattern itself says little
 * to a manifest's author, and the value is never echoed).
 */
export const PATTERN_PROBLEMS: Readonly<Record<string, string>> = {
  [HTTP_URL]: 'must be an http or https URL',
  [FILENAME]: 'must not contain "..", "/", "\\" or a NUL byte',
  [NO_DOUBLE_DOT]: 'must not contain ".." or a NUL byte',
  [NO_LEADING_SLASH]: 'must not start with "/" or "\\"',
  [NOT_BLANK]: 'must not be empty or whitespace-only',
  [CLIP_TIME]: 'must be a time as HH:MM:SS, MM:SS or seconds (e.g. 01:02:03, 2:30, 90, 12.5)',
  [DNS_SUBDOMAIN]: 'must be a DNS subdomain name: lower-case letters, digits, "-" and "."',
  [CONDITION_TYPE]: 'must be a condition type: letters, digits, "-", "_" and ".", with an optional DNS prefix',
  [CONDITION_REASON]: 'must be a CamelCase reason: a letter, then letters, digits, "_", "," or ":"',
};

// ---------------------------------------------------------------------------
// CEL rules. Only standard CEL and the strings extension's split are used,
// which every Kubernetes since 1.28 (fieldPath, messageExpression) and the
// local cluster evaluate alike.

const CLIP_ORDER = 'clipEnd must be greater than clipStart';
const INLINE_DRIVE = 'drive is available as a saved destination only, never inline';

/** A CLIP_TIME string as seconds (a double): [[HH:]MM:]SS[.fraction]. */
function clipSeconds(field: string): string {
  const part = (i: number): string => `double(${field}.split(':')[${i}])`;
  const parts = `${field}.split(':').size()`;
  return `(${parts} == 1 ? double(${field}) : ${parts} == 2 ? ${part(0)} * 60.0 + ${part(1)} `
    + `: ${part(0)} * 3600.0 + ${part(1)} * 60.0 + ${part(2)})`;
}

/** The API's clip rule (lib/src/job-options.ts): clip_end after clip_start, or after 0 without one. */
function clipRule(): ValidationRule {
  return {
    rule: `!has(self.clipEnd) || ${clipSeconds('self.clipEnd')} > (has(self.clipStart) ? ${clipSeconds('self.clipStart')} : 0.0)`,
    message: CLIP_ORDER,
    messageExpression: "has(self.clipStart) ? 'clipEnd must be greater than clipStart' : 'clipEnd must be greater than 0'",
    fieldPath: '.clipEnd',
  };
}

/** The API's filename rule in bytes (job-options.ts MAX_FILENAME_BYTES): maxLength counts characters only. */
function filenameBytesRule(): ValidationRule {
  return {
    rule: `!has(self.filename) || bytes(self.filename).size() <= ${MAX_FILENAME_BYTES}`,
    message: FILENAME_BYTES_PROBLEM,
    fieldPath: '.filename',
  };
}

function inlineDriveRule(): ValidationRule {
  return {
    rule: "!has(self.type) || self.type != 'inline' || !has(self.provider) || self.provider != 'drive'",
    message: INLINE_DRIVE,
    fieldPath: '.provider',
  };
}

/** A rule's verdict in TypeScript: the field it is about (relative, as a rule's fieldPath) and the problem. */
export interface RuleProblem {
  at: string;
  problem: string;
}

/**
 * The CRDs' rules on one object, in TypeScript, keyed by the rule's
 * message: what spec-check.ts checks of a spec the apiserver did not (its
 * CRD lacked the rules). Each twin reads `self` as the rule does, its
 * fields' types already checked; lib/test/spec-check.test.ts fails on a
 * rule without one. Rules on a change (oldSelf) have none: they judge an
 * update, not what is stored.
 */
export const RULE_TWINS: Readonly<Record<string, (self: Record<string, unknown>) => RuleProblem | undefined>> = {
  // The clip rule with the gateway's reading of the times (job-options.ts
  // parseClipTime: minutes and seconds below 60), which is the runner's: a
  // time only the CRD's shape admits (2:75) would reach a runner that
  // cannot read it.
  [CLIP_ORDER]: (self) => {
    const seconds = (field: 'clipStart' | 'clipEnd') => (typeof self[field] === 'string' ? parseClipTime(self[field]) : undefined);
    for (const field of ['clipStart', 'clipEnd'] as const) {
      if (self[field] !== undefined && seconds(field) === undefined) {
        return { at: `.${field}`, problem: 'must be a time as HH:MM:SS, MM:SS or seconds, with minutes and seconds below 60' };
      }
    }
    const end = seconds('clipEnd');
    if (end === undefined) return undefined;
    const start = seconds('clipStart');
    if (end > (start ?? 0)) return undefined;
    return { at: '.clipEnd', problem: start === undefined ? 'must be greater than 0' : 'must be greater than clipStart' };
  },
  [FILENAME_BYTES_PROBLEM]: (self) => (typeof self.filename === 'string' && Buffer.byteLength(self.filename) > MAX_FILENAME_BYTES
    ? { at: '.filename', problem: FILENAME_BYTES_PROBLEM } : undefined),
  [INLINE_DRIVE]: (self) => (self.type === 'inline' && self.provider === 'drive' ? { at: '.provider', problem: INLINE_DRIVE } : undefined),
};

/**
 * A MediaJob runs the request it was admitted with: once the operator created
 * a runner Job for it (status.jobName, set with Admitted=True and kept
 * through retries, whose attempts read the spec again), no spec field but
 * cancel may change. Restored and never-admitted jobs stay editable, which
 * changes nothing (docs/gitops.md).
 */
function frozenSpecRule(specFields: string[]): ValidationRule {
  const same = (f: string): string =>
    `(has(self.spec.${f}) ? has(oldSelf.spec.${f}) && self.spec.${f} == oldSelf.spec.${f} : !has(oldSelf.spec.${f}))`;
  return {
    rule: `!has(oldSelf.status) || !has(oldSelf.status.jobName) || (${specFields.filter((f) => f !== 'cancel').map(same).join(' && ')})`,
    message: 'the spec of an admitted MediaJob (status.jobName is set) cannot change, except spec.cancel: '
      + 'apply a changed request as a new MediaJob',
    fieldPath: '.spec',
  };
}

// ---------------------------------------------------------------------------
// Shared pieces.

function folderNode(description: string): SchemaNode {
  return str(description, { minLength: 1, maxLength: 200, pattern: NO_DOUBLE_DOT, allOf: [{ pattern: NO_LEADING_SLASH }, { pattern: NOT_BLANK }] });
}

const FOLDER_RULE = 'At most 200 characters, not empty or whitespace-only, without ".." or a NUL byte, and not starting '
  + 'with "/" or "\\" (rule 2); inner slashes make sub-folders.';

/** The POST /jobs options, camelCase; descriptions quote the API field they come from. */
function optionProperties(): { [K in keyof Required<MediaJobSpecOptions>]: SchemaNode } {
  return {
    url: str(
      'URL of the video, audio item or live stream to download (API "url"), http or https. A MediaJob always '
      + 'downloads one item: show and genuine playlist URLs (rule 8) become a MediaBatch with one MediaJob per episode.',
      { minLength: 1, maxLength: 8192, pattern: HTTP_URL },
    ),
    format: oneOf(
      `Output container (API "format"). Video: mp4, mkv, webm, mov; audio: m4a, mp3, ogg, opus. When absent: mp4, or m4a `
      + 'when audioOnly is true (rule 5). Because that default depends on audioOnly the schema leaves the field empty and '
      + 'the operator fills it in. The API silently replaces an unknown format with mp4; a manifest with one is rejected '
      + 'instead, so a typo is not mistaken for a choice.',
      FORMATS,
    ),
    videoCodec: oneOf(
      'Video codec (API "video_codec"). copy keeps the source stream without re-encoding; h264, h265 and vp9 re-encode '
      + 'at videoQuality or qualityPreset. Corrected automatically when incompatible with the format (rule 4): webm with '
      + 'h264 becomes vp9. Default copy.',
      VIDEO_CODECS, { default: 'copy' },
    ),
    audioCodec: oneOf(
      'Audio codec (API "audio_codec"): copy, aac, opus or mp3. When absent: copy, falling back to aac when the source '
      + 'audio does not fit the container; aac when audioBitrate is set (rule 4). Corrections (rule 4): webm with aac '
      + 'becomes opus, ogg or opus with aac becomes opus, mp3 with aac becomes mp3. With maxResolution 144 or lowest, '
      + 'separate audio is the lowest available AAC track unless this field is set (rule 3).',
      AUDIO_CODECS,
    ),
    audioBitrate: oneOf(
      `Audio bitrate when audio is re-encoded (API "audio_bitrate"): ${list2(AUDIO_BITRATES)}. When absent: 192k. `
      + 'Setting it without audioCodec selects aac (rule 4), which is why the schema does not write 192k in: a defaulted '
      + 'bitrate would be indistinguishable from a chosen one.',
      AUDIO_BITRATES,
    ),
    videoQuality: int(
      'Constant rate factor (CRF) of re-encoded video (API "video_quality"), 0 to 51, lower is better. Used only when '
      + 'videoCodec is not copy; qualityPreset overrides it. Default 23.',
      { minimum: 0, maximum: MAX_VIDEO_QUALITY, default: DEFAULT_VIDEO_QUALITY },
    ),
    qualityPreset: oneOf(
      `Named quality level (API "quality_preset"): ${list2(QUALITY_PRESETS)}. Overrides videoQuality when set.`,
      QUALITY_PRESETS,
    ),
    maxResolution: oneOf(
      'Highest resolution to deliver (API "max_resolution"), compared with the shorter side of the video, so horizontal '
      + 'and vertical videos are treated alike (rule 3). best: the best available format. lowest: the smallest '
      + 'available format. A number (2160 ... 144): the highest available resolution at or below it; if every format '
      + 'exceeds it, the smallest format is used and the video is not resized (only the owning key\'s limit, '
      + 'limits.maxResolution, resizes). With 144 and lowest, separate audio '
      + 'is the lowest available AAC track unless audioCodec is set. Default best.',
      MAX_RESOLUTIONS, { default: 'best' },
    ),
    filename: str(
      'Name of the delivered file without extension (API "filename"). At most 255 characters and 196 bytes of UTF-8, '
      + 'without "..", "/", "\\" or a NUL byte (rule 1); sanitised for storage, never shortened. When absent the job id is used; a given name that would '
      + 'overwrite an existing file gets "-" and the first 8 characters of the job id appended.',
      { minLength: 1, maxLength: 255, pattern: FILENAME },
    ),
    folder: folderNode(
      'Folder for the file inside the destination (API "folder"): the object key is '
      + '[folder_prefix/]<base_folder>/[folder/]<name>.<ext>, base_folder being "videos" unless the saved destination '
      + `says otherwise. ${FOLDER_RULE}`,
    ),
    audioOnly: bool(
      'Deliver the audio only (API "audio_only"): m4a without re-encoding unless format or audioCodec say otherwise '
      + '(rule 5). Default false.',
      { default: false },
    ),
    downloadSubtitles: bool(
      'Also fetch subtitles (API "download_subtitles"); the result then carries subtitleKey and the API a presigned '
      + 'subtitle URL. Default false.',
      { default: false },
    ),
    downloadThumbnail: bool(
      'Also fetch the thumbnail (API "download_thumbnail"). Implemented for show episodes only: for other sources it is '
      + 'accepted but produces no thumbnail and no thumbnailKey (rule 6). Default false.',
      { default: false },
    ),
    clipStart: str(
      'Keep the media from this point on (API "clip_start"): HH:MM:SS, MM:SS or seconds, optionally with a fraction '
      + '(e.g. 01:02:03, 2:30, 90, 12.5).',
      { pattern: CLIP_TIME },
    ),
    clipEnd: str(
      'Keep the media up to this point (API "clip_end"), in the same formats as clipStart; must be greater than '
      + 'clipStart.',
      { pattern: CLIP_TIME },
    ),
    liveRecording: bool(
      'Record a live stream (API "live_recording"). Live URLs are detected automatically, so this is rarely needed. '
      + 'Default false.',
      { default: false },
    ),
    liveFromStart: bool(
      'Record a live stream from its beginning instead of from the live point (API "live_from_start"). Default false.',
      { default: false },
    ),
    maxDuration: int(
      'Maximum recording length in seconds (API "max_duration"), a safety cap for live streams.',
      { format: 'int32', minimum: 1, maximum: MAX_DURATION_SECONDS },
    ),
    waitForVideo: bool(
      'Wait for a scheduled or upcoming stream to start instead of failing (API "wait_for_video"). Default false.',
      { default: false },
    ),
    enableProgressWebhook: bool(
      'Send "progress" webhooks to the webhook URL at each stage (API "enable_progress_webhook"): downloading 0, '
      + 'download_complete 33, muxing 33, mux_complete 66, uploading 66 percent; completion is the job_completed '
      + 'webhook. Default false.',
      { default: false },
    ),
    webhookEvents: list(
      'The webhook event types the webhook URL gets (API "webhook_events", docs/adr/0029): any of '
      + `${list2(WEBHOOK_EVENT_TYPES)}. Absent: every type. progress still needs enableProgressWebhook.`,
      oneOf('One event type.', WEBHOOK_EVENT_TYPES),
      { minItems: 1, maxItems: WEBHOOK_EVENT_TYPES.length, 'x-kubernetes-list-type': 'set' },
    ),
    limits: obj<JobLimits>(
      'The owning API key\'s limits (GET /usage "max_resolution_limit", "max_duration_limit_seconds", '
      + '"max_filesize_limit_bytes"); not an API field. The gateway writes them from the key when it accepts a job (it '
      + 'also caps maxResolution at the key\'s "max_resolution_limit" and refuses clips and maxDuration over the '
      + 'duration limit); the runner enforces them. A manifest applied with kubectl carries them as written: only the '
      + 'gateway applies a key\'s limits.',
      {
        maxResolution: int(
          'The most lines the delivered video\'s shorter side may have (a numeric "max_resolution_limit": 144 ... 2160), '
          + 'whatever maxResolution asks: when even the chosen format is larger (every format of the source exceeds '
          + 'it, or its size was unknown), the video is scaled down to it, aspect ratio kept, and so re-encoded '
          + '(videoCodec when it names one, else the source\'s codec family where the container holds it). An odd '
          + 'number counts as the even one below it. Audio-only jobs are unaffected.',
          { format: 'int32', minimum: 2 },
        ),
        maxDurationSeconds: int(
          'Media longer than this many seconds (for a clip, the clip\'s length) fails with reason '
          + 'duration_limit_exceeded before anything is stored; a live recording stops after this many seconds.',
          { format: 'int32', minimum: 1, maximum: MAX_DURATION_SECONDS },
        ),
        maxFilesizeBytes: int(
          'A delivered media file larger than this many bytes fails the job with reason filesize_limit_exceeded; '
          + 'nothing is left in the destination.',
          { format: 'int64', minimum: 1 },
        ),
      },
    ),
  };
}

function ownerNode(what: string): SchemaNode {
  return obj<NonNullable<MediaJobSpec['owner']>>(
    `Who the ${what} belongs to: its usage and quotas, its saved destinations and the GET /jobs listing it appears in.`,
    {
      apiKeyId: str(
        `Id (UUID) of the API key that owns the ${what}; the ${what} then appears in that key's API listings like one `
        + 'created through the API. Required in the service\'s namespace. In any other namespace the owner is the key '
        + 'an admin bound the namespace to (annotation mediajobs.io/owner-api-key-id): leave it out, or name that key; '
        + 'another key fails the ' + what + ' (owner_not_allowed), and so does a namespace bound to none (namespace_not_bound).',
        { format: 'uuid' },
      ),
    },
    ['apiKeyId'],
  );
}

function destinationNode(what: string): SchemaNode {
  return obj<Destination>(
    `Where the ${what} delivers its files (API "storage" and "storage_provider"). Default: managed storage.`,
    {
      type: oneOf(
        'managed: the service\'s managed storage. saved: a destination saved for the API key or its organization '
        + '(API "storage_provider"; the key\'s destinations first, then the organization\'s; without a provider, the one '
        + 'marked default, else the most recently saved; rule 9). inline: credentials sent with the request (API '
        + '"storage"), kept in secretName only until the job ends. If the destination cannot be resolved or initialised '
        + 'at upload time the job fails with reason storage_unreachable; it is never delivered elsewhere. Default managed.',
        DESTINATION_TYPES, { default: 'managed' },
      ),
      provider: oneOf(
        `Storage provider of a saved or inline destination: ${list2(STORAGE_PROVIDERS)}. drive is available as a saved `
        + 'destination only, never inline.',
        STORAGE_PROVIDERS,
      ),
      secretName: str(
        'Secret holding the credentials of a saved or inline destination: in the operator\'s DESTINATIONS_NAMESPACE for '
        + 'a MediaJob of the service\'s namespace (where the gateway keeps saved destinations), else in this namespace. '
        + 'The operator reads it to '
        + 'prepare the runner\'s credentials; unused for managed storage. A saved destination\'s Secret must be the '
        + 'owner\'s; another job\'s runner credentials (a Secret owned by a MediaJob) are refused (storage_unreachable).',
        { maxLength: 253, pattern: DNS_SUBDOMAIN },
      ),
    },
    [],
    { default: { type: 'managed' }, 'x-kubernetes-validations': [inlineDriveRule()] },
  );
}

function webhookUrlNode(events: string): SchemaNode {
  return str(
    `URL that receives ${events} as JSON POSTs (API "webhook_url"; 10 s timeout, 3 attempts with exponential backoff, `
    + 'a stable event id per event). For manifests only: the gateway keeps webhook URLs encrypted in its database and '
    + 'never writes them into a custom resource. Never passed to the runner.',
    { maxLength: 8192, pattern: HTTP_URL },
  );
}

function conditionsNode(types: string): SchemaNode {
  return list(
    `The latest observations of the object's state, one per type (${types}), each with the generation it was set for.`,
    obj<Condition>(
      'One condition, in the standard Kubernetes shape (metav1.Condition).',
      {
        type: str(`Condition type: ${types}.`, { maxLength: 316, pattern: CONDITION_TYPE }),
        status: oneOf('Whether the condition holds: True, False or Unknown.', CONDITION_STATUSES),
        reason: str(
          'Machine-readable CamelCase reason for the last transition (e.g. JobCreated).',
          { minLength: 1, maxLength: 1024, pattern: CONDITION_REASON },
        ),
        message: str('Human-readable details of the last transition; may be empty.', { maxLength: 32768 }),
        lastTransitionTime: str('When status last changed (RFC 3339).', { format: 'date-time' }),
        observedGeneration: int(
          'The metadata.generation the condition was set for; older than metadata.generation means it may be stale.',
          { format: 'int64', minimum: 0 },
        ),
      },
      ['type', 'status', 'reason', 'message', 'lastTransitionTime'],
    ),
    { 'x-kubernetes-list-type': 'map', 'x-kubernetes-list-map-keys': ['type'] },
  );
}

function observedGenerationNode(): SchemaNode {
  return int(
    'The metadata.generation the operator last reconciled: when it is lower than metadata.generation, the status '
    + 'does not reflect the latest spec yet.',
    { format: 'int64', minimum: 0 },
  );
}

function typeMetaProperties(): Record<'apiVersion' | 'kind', SchemaNode> {
  return {
    apiVersion: str(
      'Versioned schema of this representation of an object. Servers convert recognized schemas to the latest '
      + 'internal value and may reject unrecognized values.',
    ),
    kind: str(
      'REST resource this object represents. Servers infer it from the endpoint the client submits requests to; '
      + 'in CamelCase.',
    ),
  };
}

/** A CRD of this group: one served, stored version with a status subresource (MediaJob, MediaBatch, and lib/src/platforms' cluster-scoped kinds). */
export function crd(
  kind: string, plural: string, shortName: string, columns: PrinterColumn[], description: string,
  spec: SchemaNode, status: SchemaNode, rootRules: ValidationRule[] = [], scope: 'Namespaced' | 'Cluster' = 'Namespaced',
): CustomResourceDefinition {
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: `${plural}.${GROUP}`, labels: { 'app.kubernetes.io/part-of': 'mediajobs' } },
    spec: {
      group: GROUP,
      scope,
      names: { plural, singular: kind.toLowerCase(), kind, listKind: `${kind}List`, shortNames: [shortName], categories: ['media'] },
      versions: [{
        name: VERSION,
        served: true,
        storage: true,
        subresources: { status: {} },
        additionalPrinterColumns: columns,
        schema: {
          openAPIV3Schema: {
            description,
            type: 'object',
            properties: { ...typeMetaProperties(), spec, status },
            required: ['spec'],
            ...(rootRules.length && { 'x-kubernetes-validations': rootRules }),
          },
        },
      }],
    },
  };
}

// ---------------------------------------------------------------------------
// MediaJob.

function mediaJobSpec(): SchemaNode {
  return obj<MediaJobSpec>(
    'What to download and how: every POST /jobs option in camelCase, plus the owner and the destination. The gateway '
    + 'writes the options normalised (defaults applied, rule 4 corrections done); a manifest may give only url and '
    + 'owner.',
    {
      jobId: str(
        'Job id (UUID) used by the API (POST /jobs "job_id", GET /jobs/{id}). Set by the gateway; leave it out of '
        + 'manifests, the operator then uses metadata.uid.',
        { format: 'uuid' },
      ),
      owner: ownerNode('job'),
      ...optionProperties(),
      webhookUrl: webhookUrlNode('job_processing, job_completed, job_failed, job_skipped and progress webhooks'),
      destination: destinationNode('job'),
      ttlSecondsAfterFinished: int(
        'Delete this MediaJob this many seconds after it finished (Postgres keeps the record), as a Job\'s '
        + 'ttlSecondsAfterFinished. A manifest without it is kept, so a pipeline that applies it again finds it finished '
        + 'and nothing runs twice; the gateway\'s MediaJobs go after the operator\'s FINISHED_MEDIAJOB_TTL_SECONDS.',
        { minimum: 0 },
      ),
      batchId: str('Id (UUID) of the MediaBatch this job is an episode of; absent for single jobs.', { format: 'uuid' }),
      showEpisode: bool(
        'Set by the operator on the episode jobs of a show batch; not an API field. downloadThumbnail delivers a '
        + 'thumbnail (thumbnailKey) only for such jobs and is ignored for every other source (rule 6).',
      ),
      episode: obj<EpisodeMetadata>(
        'Set by the operator on the episode jobs of a show batch; not an API field. What the show\'s feed says about the '
        + 'episode: the job reports this title and release date (job_completed "title", "release_date") instead of what '
        + 'the media file says, no description (null for podcast sources), and downloadThumbnail delivers this artwork.',
        {
          title: str('Title of the episode from the feed (API "title").', { maxLength: 4096 }),
          releaseDate: str('Exact release date of the episode from the feed, ISO 8601 (API "release_date").', { maxLength: 64 }),
          thumbnailUrl: str(
            'The episode\'s artwork (else the show\'s) from the feed: the thumbnail downloadThumbnail delivers (rule 6).',
            { maxLength: 8192, pattern: HTTP_URL },
          ),
        },
      ),
      cancel: bool(
        'Set to true to cancel the job (kubectl patch, GitOps): the operator records CancelledByAdmin unless the job '
        + 'ended first (a Completed job stays Completed; POST /jobs/{id}/cancel wins as Cancelled when it came first), '
        + 'deletes the runner Job and its pod, and the runner removes any partial upload. Deleting an unfinished '
        + 'MediaJob does the same (finalizer mediajobs.io/cancel-on-delete). See docs/adr/0013-cancellation.md.',
      ),
    },
    ['url'],
    { 'x-kubernetes-validations': [clipRule(), filenameBytesRule()] },
  );
}

function mediaJobResult(): SchemaNode {
  return obj<MediaJobResult>(
    'What was delivered; written by the runner when the upload has finished.',
    {
      storageKey: str(
        'Object key of the file in the destination (API "s3_key", webhook "key"). Not downloadable on its own: '
        + 'GET /jobs/{id} gives a presigned "s3_url", valid 24 hours.',
      ),
      fileSize: int('Size of the delivered file in bytes (API "file_size").', { format: 'int64', minimum: 0 }),
      uploadedBytes: int(
        'Bytes the job stored: the file and its subtitles and thumbnail. Added once to the owning key\'s storage usage (GET /usage).',
        { format: 'int64', minimum: 0 },
      ),
      actualQuality: str('Resolution actually delivered, the shorter side with a p, e.g. 720p (API "actual_quality").'),
      format: str('Container of the delivered file, e.g. mp4.'),
      title: str('Title of the media (video and podcast sources).'),
      description: str('Description of the media; absent for podcast sources.'),
      releaseDate: str(
        'Release date, ISO 8601: the exact date for podcast sources, the upload date at midnight UTC for video sources.',
      ),
      subtitleKey: str('Object key of the subtitles, when downloadSubtitles was set and subtitles were found.'),
      thumbnailKey: str('Object key of the thumbnail, when one was produced (show episodes only, rule 6).'),
    },
    ['storageKey'],
  );
}

function runnerPhaseSeconds(what: string): SchemaNode {
  const phase = (step: string) => num(`Seconds in the ${step} step.`, { minimum: 0 });
  return obj<RunnerPhaseSeconds>(
    `${what} Only the steps the runner entered; a failed attempt has those up to its failure. Observed by the operator `
    + 'once per attempt in the mediajobs_runner_phase_seconds histogram (docs/metrics.md).',
    { download: phase('Downloading (probe and download)'), mux: phase('Muxing'), upload: phase('Uploading') },
  );
}

function defenceNode(description: string): SchemaNode {
  return obj<{ kind: string; retryAfterSeconds?: number; proxyId?: string; cookieId?: string }>(
    description,
    {
      kind: str(`What the platform did: ${list2(DEFENCE_KINDS)}.`),
      retryAfterSeconds: int('The platform\'s Retry-After in seconds, when it sent one.', { format: 'int32', minimum: 0 }),
      proxyId: str('The id of the ProxyPool proxy the attempt went through.'),
      cookieId: str('The id (the Secret\'s key) of the cookie file the attempt used.'),
    },
    ['kind'],
  );
}

function mediaJobAttempt(): SchemaNode {
  return obj<MediaJobAttempt>(
    'One runner attempt that ended. A technical failure another attempt can fix is tried again with a backoff '
    + '(docs/adr/0018-retry-policy.md); each attempt runs in its own Job.',
    {
      attempt: int('The attempt\'s number: 1 for the first run.', { format: 'int32', minimum: 1 }),
      jobName: str('The batch/v1 Job that ran this attempt.'),
      startTime: str('When the attempt\'s runner started (RFC 3339).', { format: 'date-time' }),
      finishTime: str('When the attempt ended (RFC 3339).', { format: 'date-time' }),
      outcome: oneOf('How the attempt ended: Completed, Failed, Warning, Skipped.', ATTEMPT_OUTCOMES),
      category: str(
        'What the attempt failed of: the runner\'s error category (connection_error, rate_limited, private ...), or what '
        + 'the cluster did to its pod (evicted, oom_killed, node_lost) or timeout.',
      ),
      reason: str('The failure reason the attempt reported, e.g. storage_unreachable.'),
      error: str('The sanitised error message of the attempt.'),
      retryAfterSeconds: int('Set when another attempt followed: the wait before it, in seconds.', { format: 'int32', minimum: 0 }),
      phaseSeconds: runnerPhaseSeconds('Seconds the attempt\'s runner spent in each step (from its final report).'),
      defence: defenceNode('The defence the platform answered this attempt with (its status.defence), when its failure was one.'),
    },
    ['attempt', 'jobName', 'outcome'],
  );
}

function mediaJobStatus(): SchemaNode {
  const conditionTypes = list2(MEDIAJOB_CONDITION_TYPES);
  return obj<MediaJobStatus>(
    'Observed state, written only through the status subresource: by the operator (status, times, conditions) and '
    + 'the runner (step, progress, expectedBytes, result, error, phaseSeconds, storedFiles, defence, tools).',
    {
      jobId: str('The job id the API knows this job by: spec.jobId, or metadata.uid for manifests.'),
      status: oneOf(
        'Job status as the API reports it: Pending (accepted, waiting for a runner), Processing, Completed, Failed '
        + '(technical error, errorType error), Warning (content issue, errorType warning), Skipped (DRM-protected '
        + 'audio-only episode), Cancelled, CancelledByAdmin.',
        JOB_STATUSES,
      ),
      step: oneOf(
        'Stage of the work: Queued, Downloading, Muxing, Uploading, Finished (the API\'s "step").',
        JOB_STEPS,
      ),
      progress: int('Progress in percent, 0 to 100, reported by the runner.', { format: 'int32', minimum: 0, maximum: 100 }),
      expectedBytes: int(
        'Bytes the runner expects to deliver, reported once it has chosen the formats (their sizes, a clip\'s share): the '
        + 'owning key\'s storage reservation for this job from then on (GET /usage). Absent while unknown (live recordings, '
        + 'sources that give no size): the job keeps the default reservation.',
        { format: 'int64', minimum: 0 },
      ),
      result: mediaJobResult(),
      error: str('Sanitised error message when the job failed or ended with a warning (API "error").'),
      errorType: oneOf(
        'error: technical failure (rate limit, bot detection, connection error, upload or processing failure). '
        + 'warning: content issue (private, members-only, geo-blocked, unavailable), which sends no job_failed webhook.',
        ERROR_TYPES,
      ),
      errorDetail: str(
        'The failure\'s cause as the tool said it (API "error_detail"): its first relevant line, e.g. ffmpeg\'s "moov atom '
        + 'not found", without URL credentials or query strings, file paths or secrets; beside error, the category\'s fixed '
        + 'phrase. Reported by the runner.',
        { maxLength: MAX_ERROR_DETAIL_LENGTH },
      ),
      reason: str(
        'Machine-readable failure reason, e.g. storage_unreachable when the destination could not be resolved or '
        + 'initialised at upload time.',
      ),
      category: str(
        'The runner\'s error category of the failure it reported (connection_error, rate_limited, private ...): what the '
        + 'retry policy reads (docs/adr/0018-retry-policy.md).',
      ),
      phaseSeconds: runnerPhaseSeconds('Seconds the runner spent in each step, from its final report (the last attempt\'s).'),
      defence: defenceNode(
        'The defence the platform answered the last attempt with, when its failure was one (runner-image/README.md '
        + '"Defences"); the operator answers it (another proxy session, a cookie marked unhealthy, a backoff, a re-probe) '
        + 'and counts it against the platform\'s circuit breaker.',
      ),
      tools: obj<RunnerTools>(
        'The yt-dlp and ffmpeg versions the last attempt ran, reported by the runner at its start '
        + '(mediajobs_runner_tool_info).',
        { ytdlp: str('yt-dlp\'s version (a date, e.g. 2026.08.19).'), ffmpeg: str('ffmpeg\'s version, e.g. 5.1.9-0+deb12u1.') },
      ),
      download: obj<RunnerDownload>(
        'The runner\'s figures of its read of the source (API "downloaded_bytes", "total_bytes", "speed_bps", '
        + '"eta_seconds"), each absent while unknown; speed and time left only while the source is read.',
        {
          downloadedBytes: int('Bytes of the source read so far.', { format: 'int64', minimum: 0 }),
          totalBytes: int('Bytes of the source in all, when the source or yt-dlp says.', { format: 'int64', minimum: 0 }),
          speedBps: int('Bytes per second of the read over the last seconds.', { format: 'int64', minimum: 0 }),
          etaSeconds: int('Seconds left of the read at that speed (with totalBytes only).', { format: 'int64', minimum: 0 }),
        },
      ),
      storedFiles: {
        description: 'The files the current attempt\'s runner stored and has not deleted, object key to bytes, each written '
          + 'the moment its upload completed. When the attempt ends, the operator deletes every one its result does not '
          + 'name (a failed or cancelled attempt\'s, or one whose runner was killed between upload and report), then '
          + 'removes the field (docs/adr/0018-retry-policy.md).',
        type: 'object',
        additionalProperties: int('Bytes stored under this key.', { format: 'int64', minimum: 0 }),
        maxProperties: 64,
      },
      jobName: str('Name of the batch/v1 Job running this MediaJob\'s runner pod (the current attempt\'s).'),
      startTime: str('When processing started (RFC 3339).', { format: 'date-time' }),
      finishTime: str('When the job reached a final status (RFC 3339).', { format: 'date-time' }),
      restoredTime: str(
        'When the operator restored this finished job from its record instead of running it again: the same manifest '
        + 'applied after its MediaJob was deleted (docs/gitops.md). Its ttlSecondsAfterFinished counts from then (RFC 3339).',
        { format: 'date-time' },
      ),
      attempt: int(
        'The current runner attempt, 1 when absent: the one running, or the one waiting for retryAt.',
        { format: 'int32', minimum: 1 },
      ),
      attempts: list('The runner attempts that ended, oldest first (at most RETRY_MAX_ATTEMPTS).', mediaJobAttempt(), {
        'x-kubernetes-list-type': 'atomic',
      }),
      retryAt: str(
        'While the job waits to be tried again after a failure another attempt can fix: when the next attempt may start '
        + '(RFC 3339). The job is Pending meanwhile, with reason retry_scheduled.',
        { format: 'date-time' },
      ),
      observedGeneration: observedGenerationNode(),
      conditions: conditionsNode(conditionTypes),
    },
  );
}

/** The MediaJob CRD: one download job. */
export function mediaJobCrd(): CustomResourceDefinition {
  const spec = mediaJobSpec();
  return crd(
    'MediaJob', MEDIAJOB_PLURAL, 'mj',
    [
      { name: 'Status', type: 'string', jsonPath: '.status.status', description: 'Job status (Pending, Processing, Completed, Failed, ...).' },
      { name: 'Step', type: 'string', jsonPath: '.status.step', description: 'Stage of the work (Queued, Downloading, Muxing, Uploading, Finished).' },
      { name: 'Progress', type: 'integer', jsonPath: '.status.progress', description: 'Progress in percent.' },
      {
        name: 'Reason', type: 'string', jsonPath: '.status.reason',
        description: 'Why a job waits (key_running_limit, platform_limit, platform_paused, retry_scheduled, ...) or ended (platform_disabled, timeout, ...).',
      },
      { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp', description: 'Time since the job was created.' },
      { name: 'URL', type: 'string', jsonPath: '.spec.url', description: 'Source URL.', priority: 1 },
    ],
    'A media download job (mediajobs.io): the service downloads the media at spec.url, optionally clips and transcodes '
    + 'it, and delivers the file to spec.destination. The gateway creates one per POST /jobs (named after the job id); '
    + 'a MediaJob applied with kubectl is processed the same way. Finished MediaJobs are deleted after a retention '
    + 'period; the API keeps their record.',
    spec,
    mediaJobStatus(),
    [frozenSpecRule(Object.keys(spec.properties ?? {}))],
  );
}

// ---------------------------------------------------------------------------
// MediaBatch.

function batchOptions(): SchemaNode {
  // url, filename and folder are per episode (or per batch); the rest is shared.
  const { url: _url, filename: _filename, folder: _folder, ...shared } = optionProperties();
  return obj<BatchOptions>(
    'Encoding options shared by every episode: the same fields, rules and defaults as a MediaJob\'s spec.',
    shared,
    [],
    { default: {}, 'x-kubernetes-validations': [clipRule()] },
  );
}

function batchEpisode(): SchemaNode {
  return obj<BatchEpisode>(
    'One episode or video of the batch (API episode entry).',
    {
      jobId: str('Id (UUID) of the episode\'s MediaJob (API "job_id"); set once the job exists.', { format: 'uuid' }),
      url: str('URL of the episode or video (API "url").', { minLength: 1, maxLength: 8192, pattern: HTTP_URL }),
      title: str('Title of the episode (API "title").'),
      description: str('Description of the episode (API "description"; default mode only, absent in paused mode).'),
      releaseDate: str('Release date of the episode, ISO 8601 (API "release_date"; default mode only).'),
      filename: str(
        'File name for this episode without extension; set by renames (PATCH /batch/{id}/jobs) while the batch is '
        + 'paused. At most 255 characters and 196 bytes of UTF-8, without "..", "/", "\\" or a NUL byte (rule 1).',
        { minLength: 1, maxLength: 255, pattern: FILENAME },
      ),
    },
    ['url'],
    { 'x-kubernetes-validations': [filenameBytesRule()] },
  );
}

function mediaBatchSpec(): SchemaNode {
  return obj<MediaBatchSpec>(
    'The show or playlist and the options of its episodes.',
    {
      batchId: str(
        'Batch id (UUID) used by the API (POST /jobs "batch_id", GET /batch/{id}). Set by the gateway; leave it out of '
        + 'manifests, the operator then uses metadata.uid.',
        { format: 'uuid' },
      ),
      showUrl: str(
        'URL of the podcast show or the genuine video playlist (API "show_url"). A playlist is genuine when its list '
        + 'parameter begins with PL, UU or OL; RD (mixes), WL and LL lists are single-video requests (rule 8). A '
        + 'playlist over 500 videos is rejected, never truncated.',
        { minLength: 1, maxLength: 8192, pattern: HTTP_URL },
      ),
      kind: oneOf('show: a podcast show; playlist: a genuine video playlist. Detected from showUrl when absent.', BATCH_KINDS),
      owner: ownerNode('batch'),
      folder: folderNode(`Folder prefix of every episode's file (API Batch "folder"). ${FOLDER_RULE}`),
      paused: bool(
        'Create the episode jobs without starting them (API "paused"; show batches only, rule 7). While paused, episode '
        + 'files can be renamed (PATCH /batch/{id}/jobs); setting it to false (POST /batch/{id}/start) enqueues every '
        + 'episode. Default false.',
        { default: false },
      ),
      webhookUrl: webhookUrlNode('the batch_completed webhook and the episode jobs\' webhooks'),
      destination: destinationNode('batch'),
      options: batchOptions(),
      episodes: list(
        'The episodes or videos, one MediaJob each; filled in by the gateway from the show or playlist.',
        batchEpisode(),
      ),
    },
    ['showUrl'],
  );
}

function mediaBatchStatus(): SchemaNode {
  return obj<MediaBatchStatus>(
    'Observed state of the batch, rolled up from its episode jobs by the operator. Progress percent is '
    + '(completedEpisodes + failedEpisodes) / totalEpisodes * 100; the batch is done when completedEpisodes + '
    + 'failedEpisodes >= totalEpisodes.',
    {
      batchId: str('The batch id the API knows this batch by: spec.batchId, or metadata.uid for manifests.'),
      status: oneOf(
        'paused: episode jobs exist but are not enqueued. processing: episodes are running. completed: every episode '
        + 'completed. finished: every episode is done and some failed or were skipped. Both completed and finished send '
        + 'the batch_completed webhook.',
        BATCH_STATUSES,
      ),
      totalEpisodes: int('Number of episodes (API "total_episodes").', { format: 'int32', minimum: 0 }),
      completedEpisodes: int('Episodes completed (API "completed_episodes").', { format: 'int32', minimum: 0 }),
      failedEpisodes: int(
        'Episodes that failed, ended with a warning or were skipped (API "failed_episodes"; skipped episodes count here '
        + 'too, as they do for batch completion).',
        { format: 'int32', minimum: 0 },
      ),
      skippedEpisodes: int(
        'Episodes skipped, e.g. audio-only DRM-protected episodes (API "skipped_episodes"); also counted in failedEpisodes.',
        { format: 'int32', minimum: 0 },
      ),
      done: str('Episodes done out of the total, "<completedEpisodes + failedEpisodes>/<totalEpisodes>" (e.g. 3/10).'),
      episodeJobs: list('Job ids (UUID) of the episode jobs, one per episode (API "episode_jobs").', str('Job id of one episode.')),
      observedGeneration: observedGenerationNode(),
      conditions: conditionsNode(list2(MEDIABATCH_CONDITION_TYPES)),
    },
  );
}

/** The MediaBatch CRD: a show or playlist expanded into one MediaJob per episode. */
export function mediaBatchCrd(): CustomResourceDefinition {
  return crd(
    'MediaBatch', MEDIABATCH_PLURAL, 'mb',
    [
      { name: 'Status', type: 'string', jsonPath: '.status.status', description: 'Batch status (paused, processing, completed, finished).' },
      { name: 'Done', type: 'string', jsonPath: '.status.done', description: 'Episodes done (completed, failed or skipped) of the total.' },
      { name: 'Failed', type: 'integer', jsonPath: '.status.failedEpisodes', description: 'Episodes failed or skipped.' },
      { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp', description: 'Time since the batch was created.' },
      { name: 'URL', type: 'string', jsonPath: '.spec.showUrl', description: 'Show or playlist URL.', priority: 1 },
    ],
    'A batch of download jobs for a podcast show or a genuine video playlist (mediajobs.io): one MediaJob per episode, '
    + 'sharing the owner, destination, folder and options. The gateway creates one when POST /jobs receives a show or '
    + 'playlist URL (rule 8).',
    mediaBatchSpec(),
    mediaBatchStatus(),
  );
}

/** Both CRDs, in the order they are installed. */
export function allCrds(): CustomResourceDefinition[] {
  return [mediaJobCrd(), mediaBatchCrd()];
}
