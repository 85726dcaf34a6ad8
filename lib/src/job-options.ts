// Job options: the one normalisation of a MediaJob spec's options, and the
// validation of the POST /jobs body that feeds it.
//
// Options reach normalisation three ways, and every one goes through
// normaliseSpecOptions:
// - a POST /jobs body: parseJobRequest validates it first, before anything
//   touches Postgres or the cluster, so every client mistake becomes one 400
//   whose message names the field;
// - a MediaJob applied with kubectl: the CRD's schema validated it, and the
//   operator checks it again as the CRD would (mediajob/spec-check.ts: the
//   apiserver's CRD may lack its rules) before it normalises it, records the
//   job or starts a runner;
// - the runner's MEDIAJOB_SPEC, already normalised by the gateway or the
//   operator: the runner checks the options it acts on the same way
//   (runner-image config.ts) and normalises again, which changes nothing but
//   fills what a hand-written spec leaves out.
// The defaults that need no other field are specOptionsSchema's (types.ts,
// equal to the CRD's); those that depend on other fields and the rule-4
// corrections are here. What comes out is the form the MediaJob spec carries:
// defaults applied, rule-4 corrections done, an unknown `format` already `mp4`.
import { z } from 'zod';
import {
  AUDIO_BITRATES, AUDIO_CODECS, FORMATS, MAX_DURATION_SECONDS, MAX_RESOLUTIONS, MAX_VIDEO_QUALITY, QUALITY_PRESETS,
  STORAGE_PROVIDERS, VIDEO_CODECS, specOptionsSchema,
  type AudioBitrate, type AudioCodec, type Format, type MediaJobOptions, type MediaJobSpecOptionsInput, type QualityPreset,
  type StorageProviderName, type VideoCodec,
} from './mediajob/types.js';
import { MAX_NAME_BYTES } from './storage/types.js';
import type { FieldProblem } from './request-body.js';
import { WEBHOOK_EVENT_TYPES } from './webhook-event-types.js';

/**
 * CRF of each `quality_preset`; a preset overrides `video_quality`. Both
 * are on libx264's scale (the spec's 0–51): 18 is visually lossless for
 * most sources, 23 is x264's own default (so `medium` equals the default
 * `video_quality`), and each step of about 4–6 roughly halves the bitrate.
 * The runner gives libx265 and libvpx-vp9 the value of comparable quality
 * on their own scales (runner-image/src/plan.ts encoderCrf).
 */
export const QUALITY_PRESET_CRF: Readonly<Record<QualityPreset, number>> = {
  highest: 18,
  high: 20,
  medium: 23,
  low: 28,
  lowest: 32,
};

/** When audio is re-encoded and no audio_bitrate was given. */
export const DEFAULT_AUDIO_BITRATE: AudioBitrate = '192k';
export const MAX_FILENAME_LENGTH = 255;
/** The stored name's limit in UTF-8 bytes (storage/types.ts): what every provider and file system can hold whole. */
export const MAX_FILENAME_BYTES = MAX_NAME_BYTES;
/** Why a filename is refused over MAX_FILENAME_BYTES; also the CRDs' rule message. */
export const FILENAME_BYTES_PROBLEM = `must be at most ${MAX_FILENAME_BYTES} bytes in UTF-8 (${MAX_FILENAME_BYTES} ASCII characters, `
  + 'fewer with accented or non-Latin letters) so that the stored name with its extension fits every file system';
export const MAX_FOLDER_LENGTH = 200;
/** Source and webhook addresses longer than this are refused rather than stored. */
export const MAX_URL_LENGTH = 4096;

/** What the gateway needs from a POST /jobs body beyond the job options. */
export interface JobRequest {
  options: MediaJobOptions;
  /** Kept apart because it is a secret: sealed in Postgres, never in a CR or a log. */
  webhookUrl?: string;
  /** Inline storage credentials, unvalidated here (their shape depends on the provider). */
  storage?: Record<string, unknown>;
  storageProvider?: StorageProviderName;
  paused: boolean;
}

/** A refused body: its first problem in the order of the spec's table (the answer's `error`), and every problem found. */
export type JobRequestResult = { ok: true; request: JobRequest } | { ok: false; error: string; problems: FieldProblem[] };

const quoted = (values: readonly string[]) => values.map((v) => `'${v}'`).join(', ');

/** Clients commonly send `null` for "not set"; treat it as absent rather than as a type error. */
const optional = <T extends z.ZodType>(schema: T) => z.preprocess((v) => (v === null ? undefined : v), schema.optional());

const enumField = <const T extends readonly [string, ...string[]]>(values: T) =>
  z.enum(values, { error: `must be one of ${quoted(values)}` });

const booleanField = z.boolean({ error: 'must be a boolean (true or false)' });

const httpUrl = () =>
  z
    .string({ error: 'must be a string' })
    .trim()
    .min(1, { error: 'must not be empty' })
    .max(MAX_URL_LENGTH, { error: `must be at most ${MAX_URL_LENGTH} characters` })
    // RFC 3986 has no raw control characters; WHATWG parsing would accept some, and Postgres stores no NUL in text or jsonb.
    .refine((s) => !/[\u0000-\u001f\u007f]/.test(s), { error: 'must not contain control characters' })
    .refine(isHttpUrl, { error: `must be an absolute http or https URL` });

function isHttpUrl(s: string): boolean {
  if (!URL.canParse(s)) return false;
  const u = new URL(s);
  return (u.protocol === 'http:' || u.protocol === 'https:') && u.hostname !== '';
}

// Rule 1: the name becomes part of an object key and a local path, so the
// characters that could climb out of the job's folder are refused outright.
const filenameField = z
  .string({ error: 'must be a string' })
  .max(MAX_FILENAME_LENGTH, { error: `must be at most ${MAX_FILENAME_LENGTH} characters` })
  // Refused rather than shortened: a file stored under another name than the one asked for is a silent loss.
  .refine((s) => Buffer.byteLength(s) <= MAX_FILENAME_BYTES, { error: FILENAME_BYTES_PROBLEM })
  .refine((s) => s.trim() !== '', { error: 'must not be empty' })
  .refine((s) => !s.includes('..'), { error: "must not contain '..'" })
  .refine((s) => !s.includes('/') && !s.includes('\\'), { error: 'must not contain a forward slash or a backslash' })
  .refine((s) => !s.includes('\0'), { error: 'must not contain a null byte' });

/** Why `filename` breaks rule 1 (the message POST /jobs answers), or undefined; for renames of batch episodes. */
export function filenameProblem(filename: unknown): string | undefined {
  const r = filenameField.safeParse(filename);
  return r.success ? undefined : issueProblems(r.error.issues.map((i) => ({ ...i, path: ['filename', ...i.path] })))[0]!.message;
}

// Rule 2: a folder may have sub-folders (inner slashes) but cannot be
// absolute, climb out, or be blank.
const folderField = z
  .string({ error: 'must be a string' })
  .max(MAX_FOLDER_LENGTH, { error: `must be at most ${MAX_FOLDER_LENGTH} characters` })
  .refine((s) => s.trim() !== '', { error: 'must not be empty or whitespace-only' })
  .refine((s) => !s.includes('..'), { error: "must not contain '..'" })
  .refine((s) => !s.startsWith('/') && !s.startsWith('\\'), { error: 'must not start with a forward slash or a backslash' })
  .refine((s) => !s.includes('\0'), { error: 'must not contain a null byte' });

const CLIP_FORMATS = "must be a time as 'HH:MM:SS', 'MM:SS' or seconds (e.g. '01:02:03', '02:03' or '123')";

// Accepted as a JSON number of seconds too, since "seconds" is one of the
// spec's three forms; it is kept as the string the runner passes to ffmpeg.
const clipField = z
  .union([z.string(), z.number()], { error: CLIP_FORMATS })
  .transform((v) => (typeof v === 'number' ? String(v) : v.trim()))
  .refine((s) => parseClipTime(s) !== undefined, { error: CLIP_FORMATS });

// The type is string in the spec, but 1080 sent as a number means the same thing.
const maxResolutionField = z
  .union([z.string(), z.number()], { error: `must be one of ${quoted(MAX_RESOLUTIONS)}` })
  .transform((v) => String(v))
  .pipe(enumField(MAX_RESOLUTIONS));

// An unknown format string is silently replaced by mp4 (the spec's rule);
// only a non-string is a client error. Case is folded so 'MP3' is not
// silently turned into an mp4.
const formatField = z
  .string({ error: 'must be a string' })
  .transform((s): Format => {
    const f = s.trim().toLowerCase();
    return (FORMATS as readonly string[]).includes(f) ? (f as Format) : 'mp4';
  });

const VIDEO_QUALITY_RANGE = `must be an integer from 0 to ${MAX_VIDEO_QUALITY}`;

export const jobRequestBodySchema = z.object({
  url: httpUrl(),
  format: optional(formatField),
  video_codec: optional(enumField(VIDEO_CODECS)),
  audio_codec: optional(enumField(AUDIO_CODECS)),
  audio_bitrate: optional(enumField(AUDIO_BITRATES)),
  video_quality: optional(
    z.number({ error: VIDEO_QUALITY_RANGE }).int({ error: VIDEO_QUALITY_RANGE })
      .min(0, { error: VIDEO_QUALITY_RANGE }).max(MAX_VIDEO_QUALITY, { error: VIDEO_QUALITY_RANGE }),
  ),
  quality_preset: optional(enumField(QUALITY_PRESETS)),
  max_resolution: optional(maxResolutionField),
  filename: optional(filenameField),
  folder: optional(folderField),
  webhook_url: optional(httpUrl()),
  webhook_events: optional(
    z.array(enumField(WEBHOOK_EVENT_TYPES), { error: `must be an array of event types (${quoted(WEBHOOK_EVENT_TYPES)})` })
      .min(1, { error: 'must name at least one event type (leave out webhook_url for none)' })
      .transform((types) => [...new Set(types)]),
  ).describe('The event types webhook_url gets (docs/adr/0029); default: every type'),
  audio_only: optional(booleanField),
  download_subtitles: optional(booleanField),
  download_thumbnail: optional(booleanField),
  clip_start: optional(clipField),
  clip_end: optional(clipField),
  live_recording: optional(booleanField),
  live_from_start: optional(booleanField),
  max_duration: optional(
    z.number({ error: `must be an integer number of seconds from 1 to ${MAX_DURATION_SECONDS}` })
      .int({ error: `must be an integer number of seconds from 1 to ${MAX_DURATION_SECONDS}` })
      .min(1, { error: `must be an integer number of seconds from 1 to ${MAX_DURATION_SECONDS}` })
      .max(MAX_DURATION_SECONDS, { error: `must be an integer number of seconds from 1 to ${MAX_DURATION_SECONDS}` }),
  ),
  wait_for_video: optional(booleanField),
  enable_progress_webhook: optional(booleanField),
  storage: optional(
    z.custom<Record<string, unknown>>((v) => typeof v === 'object' && v !== null && !Array.isArray(v), { error: 'must be an object' }),
  ),
  storage_provider: optional(enumField(STORAGE_PROVIDERS)),
  paused: optional(booleanField),
});

// The order errors are reported in when a body has several: the spec table's.
const FIELD_ORDER = Object.keys(jobRequestBodySchema.shape);
/** The fields a POST /jobs body may carry; any other is ignored and named in the answer's `warnings` (unknown-fields.ts). */
export const JOB_REQUEST_FIELDS: readonly string[] = FIELD_ORDER;

type Body = z.infer<typeof jobRequestBodySchema>;

/**
 * Seconds of a clip time in one of the spec's forms: `HH:MM:SS`, `MM:SS`, or
 * seconds; fractions of a second are allowed in the last part. Minutes and
 * seconds after a colon must be below 60; the leading part is unbounded
 * (`90:00` is ninety minutes). Undefined when the text is not such a time.
 */
export function parseClipTime(text: string): number | undefined {
  const m = /^(?:(?:(\d+):)?(\d+):)?(\d+(?:\.\d+)?)$/.exec(text.trim());
  if (!m) return undefined;
  const [, h, mm, ss] = m;
  const seconds = Number(ss);
  if (mm !== undefined && seconds >= 60) return undefined;
  const minutes = mm === undefined ? 0 : Number(mm);
  if (h !== undefined && minutes >= 60) return undefined;
  const total = (h === undefined ? 0 : Number(h)) * 3600 + minutes * 60 + seconds;
  return Number.isFinite(total) ? total : undefined;
}

/** The problems of the schema's issues, in the order of the spec's table (a field's own in the schema's order). */
function issueProblems(issues: readonly z.core.$ZodIssue[]): FieldProblem[] {
  const byField = (i: z.core.$ZodIssue) => {
    const k = FIELD_ORDER.indexOf(String(i.path[0] ?? ''));
    return k < 0 ? FIELD_ORDER.length : k;
  };
  return [...issues].sort((a, b) => byField(a) - byField(b)).map((i) => {
    const field = String(i.path[0] ?? '');
    return { code: 'invalid_field', param: field, message: `Invalid field '${field}': ${i.message}` };
  });
}

/**
 * The rules between fields, in the order they are reported, each judged
 * only when the fields it reads passed their own checks (`fine`): a clip's
 * end after its start, `storage` or `storage_provider`, `webhook_events`
 * with a `webhook_url`.
 */
function crossFieldProblems(body: Record<string, unknown>, fine: (field: string) => boolean): FieldProblem[] {
  const problems: FieldProblem[] = [];
  const given = (field: string) => body[field] !== undefined && body[field] !== null;
  const time = (field: string) => (given(field) && fine(field) ? parseClipTime(String(body[field])) : undefined);
  const [start, end] = [time('clip_start'), time('clip_end')];
  if (start !== undefined && end !== undefined) {
    if (end <= start) problems.push({ code: 'invalid_field', param: 'clip_end', message: "Invalid field 'clip_end': must be greater than clip_start" });
  } else if (end !== undefined && !given('clip_start') && end <= 0) {
    problems.push({ code: 'invalid_field', param: 'clip_end', message: "Invalid field 'clip_end': must be greater than 0" });
  }
  const valid = (field: string) => given(field) && fine(field);
  if (valid('storage') && valid('storage_provider')) {
    problems.push({ code: 'conflicting_fields', param: 'storage_provider', message: 'storage_and_storage_provider_are_exclusive' });
  }
  if (valid('webhook_events') && !given('webhook_url')) {
    problems.push({ code: 'invalid_field', param: 'webhook_events', message: "Invalid field 'webhook_events': needs a webhook_url" });
  }
  return problems;
}

/**
 * Rule-4 corrections: pairs a container cannot hold are changed to the
 * nearest pair it can, rather than failing the job later in ffmpeg.
 */
export function correctCodecs(
  format: Format, videoCodec: VideoCodec, audioCodec: AudioCodec | undefined, audioBitrateGiven: boolean,
): { videoCodec: VideoCodec; audioCodec: AudioCodec | undefined } {
  let audio = audioCodec;
  let video = videoCodec;
  // A bitrate only means something when re-encoding, and aac is the codec
  // every container here but webm/ogg/opus/mp3 holds (those are corrected next).
  if (audioBitrateGiven && audio === undefined) audio = 'aac';
  if (format === 'webm' && video === 'h264') video = 'vp9';
  if (format === 'webm' && audio === 'aac') audio = 'opus';
  if ((format === 'ogg' || format === 'opus') && audio === 'aac') audio = 'opus';
  if (format === 'mp3' && audio === 'aac') audio = 'mp3';
  return { videoCodec: video, audioCodec: audio };
}

/** The options a body gave, camelCase as the spec has them; what it left out stays out, for normalisation to see. */
function givenOptions(b: Body): MediaJobSpecOptionsInput {
  return {
    url: b.url,
    format: b.format,
    videoCodec: b.video_codec,
    audioCodec: b.audio_codec,
    audioBitrate: b.audio_bitrate,
    videoQuality: b.video_quality,
    qualityPreset: b.quality_preset,
    maxResolution: b.max_resolution,
    filename: b.filename,
    folder: b.folder,
    audioOnly: b.audio_only,
    downloadSubtitles: b.download_subtitles,
    downloadThumbnail: b.download_thumbnail,
    clipStart: b.clip_start,
    clipEnd: b.clip_end,
    liveRecording: b.live_recording,
    liveFromStart: b.live_from_start,
    maxDuration: b.max_duration,
    waitForVideo: b.wait_for_video,
    enableProgressWebhook: b.enable_progress_webhook,
    webhookEvents: b.webhook_events,
  };
}

/**
 * Validate a POST /jobs body. Unknown fields are ignored (clients may send
 * fields of newer API versions; unknownFieldWarnings names them). Every
 * problem is found: the schema's, in the order of the spec's table, then
 * the rules between fields; the first is the answer's `error`.
 */
export function parseJobRequest(body: unknown): JobRequestResult {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    return { ok: false, error: 'Request body must be a JSON object', problems: [] };
  }
  const fields = body as Record<string, unknown>;
  const missingUrl = fields.url === undefined || fields.url === null;
  const parsed = jobRequestBodySchema.safeParse(body);
  if (missingUrl || !parsed.success) {
    const issues = parsed.success ? [] : parsed.error.issues.filter((i) => !(missingUrl && i.path[0] === 'url'));
    const failed = new Set(issues.map((i) => String(i.path[0] ?? '')));
    const problems = [
      ...(missingUrl ? [{ code: 'missing_field' as const, param: 'url', message: "Missing required field 'url'" }] : []),
      ...issueProblems(issues),
      ...crossFieldProblems(fields, (f) => !failed.has(f)),
    ];
    return { ok: false, error: problems[0]!.message, problems };
  }
  const b = parsed.data;
  const problems = crossFieldProblems(fields, () => true);
  if (problems.length) return { ok: false, error: problems[0]!.message, problems };
  return {
    ok: true,
    request: {
      options: normaliseSpecOptions(givenOptions(b)),
      ...(b.webhook_url !== undefined && { webhookUrl: b.webhook_url }),
      ...(b.storage !== undefined && { storage: b.storage }),
      ...(b.storage_provider !== undefined && { storageProvider: b.storage_provider }),
      paused: b.paused ?? false,
    },
  };
}

/**
 * Who wrote a spec. A client's (a POST /jobs body, a kubectl manifest) says
 * by leaving `audioBitrate` out that it chose none, so a bitrate without a
 * codec selects aac (rule 4). The service's (what the gateway or the operator
 * normalised, as the runner reads it) always carries a bitrate, the default
 * included, so its presence chooses nothing: normalising it again changes
 * nothing.
 */
export type SpecAuthor = 'client' | 'service';

/**
 * The normalised options of a MediaJob spec: the schema's defaults, then the
 * ones that depend on other fields (format: rule 5; audioBitrate), the
 * preset's CRF (a preset overrides videoQuality) and the rule-4 corrections.
 * `spec` may be a whole spec: only its options are read and returned. It
 * must be valid for specOptionsSchema (the gateway, the CRD or the runner's
 * guard checked it); anything else throws.
 */
export function normaliseSpecOptions(spec: MediaJobSpecOptionsInput, author: SpecAuthor = 'client'): MediaJobOptions {
  const s = specOptionsSchema.parse(spec);
  const format: Format = s.format ?? (s.audioOnly ? 'm4a' : 'mp4');
  const bitrateChosen = author === 'client' && s.audioBitrate !== undefined;
  const { videoCodec, audioCodec } = correctCodecs(format, s.videoCodec, s.audioCodec, bitrateChosen);
  return definedOnly({
    ...s,
    format,
    videoCodec,
    audioCodec,
    audioBitrate: s.audioBitrate ?? DEFAULT_AUDIO_BITRATE,
    videoQuality: s.qualityPreset !== undefined ? QUALITY_PRESET_CRF[s.qualityPreset] : s.videoQuality,
  });
}

/** Absent stays absent, not a key holding undefined, so the object compares equal to its own JSON. */
function definedOnly<T extends object>(o: T): T {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as T;
}
