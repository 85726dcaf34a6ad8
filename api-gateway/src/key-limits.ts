// The per-key limits (issue 14, "Per-key limits") applied to a job's options
// when the gateway accepts it: POST /jobs, its shows and playlists (whose
// shared options become every episode's) and POST /jobs/bulk all call
// applyKeyLimits here. The resolution limit is applied here, by capping
// max_resolution (which chooses the format), and travels on as a number
// for the runner, which scales a larger delivered frame down to it: a hard
// cap even when every format of the source exceeds it. The duration and
// file-size limits travel in the options (`limits`) for the runner, which
// alone learns how long the media is, how large its frame and how large the
// file comes out. A request already longer than the duration
// limit (a clip, a live max_duration) is refused here, before anything is
// written. The admin CLI stores the limits and GET /usage shows them.
import { parseClipTime } from '@mediajobs/lib/job-options';
import { MAX_RESOLUTIONS, type JobLimits, type MaxResolution, type MediaJobOptions } from '@mediajobs/lib/mediajob/types';
import type { ApiKeyRecord } from './db/api-keys.js';
import { HttpError } from './http-errors.js';

export type KeyLimits = Pick<ApiKeyRecord, 'maxResolution' | 'maxDurationSeconds' | 'maxFilesizeBytes'>;

/** Rule 3's values in order of size: lowest below every number, best above. */
function rank(r: MaxResolution): number {
  if (r === 'lowest') return 0;
  if (r === 'best') return Infinity;
  return Number(r);
}

function isMaxResolution(v: string | null): v is MaxResolution {
  return v !== null && (MAX_RESOLUTIONS as readonly string[]).includes(v);
}

/**
 * max_resolution under the key's limit: the smaller of the two, so `best`
 * or a higher number gets the limit and `lowest` or a lower number is kept.
 * A stored value that is not one of rule 3's (the admin CLI allows none)
 * limits nothing.
 */
export function cappedResolution(asked: MaxResolution, limit: string | null): MaxResolution {
  if (!isMaxResolution(limit)) return asked;
  return rank(asked) <= rank(limit) ? asked : limit;
}

/** Seconds the request itself asks for, where it says: a clip with an end, a live recording's max_duration. */
function askedSeconds(o: MediaJobOptions): { field: 'clip_end' | 'max_duration'; seconds: number; what: string }[] {
  const asked = [];
  if (o.clipEnd !== undefined) {
    const seconds = parseClipTime(o.clipEnd)! - (o.clipStart !== undefined ? parseClipTime(o.clipStart)! : 0);
    asked.push({ field: 'clip_end' as const, seconds, what: `the clip is ${seconds} seconds long` });
  }
  if (o.maxDuration !== undefined) asked.push({ field: 'max_duration' as const, seconds: o.maxDuration, what: `${o.maxDuration} seconds` });
  return asked;
}

/** The 400 of a request longer than the key's duration limit, naming the field and the limit. */
function refuseOverDuration(o: MediaJobOptions, limit: number | null): void {
  const over = limit === null ? undefined : askedSeconds(o).find((a) => a.seconds > limit);
  if (over) {
    throw new HttpError(400, `Invalid field '${over.field}': ${over.what}, more than this API key allows (max_duration_limit_seconds: ${limit})`, {}, {
      code: 'over_key_limit', param: over.field,
    });
  }
}

/**
 * The limits the runner enforces, only those the key has; undefined when it
 * has none. The resolution limit only as a number of lines: `best` limits
 * nothing, and `lowest` (the smallest format, whatever its size) has no
 * number to scale to, so the capped max_resolution alone carries it.
 */
export function runnerLimits(key: KeyLimits): JobLimits | undefined {
  const lines = isMaxResolution(key.maxResolution) ? Number(key.maxResolution) : NaN;
  const limits: JobLimits = {
    ...(Number.isInteger(lines) && { maxResolution: lines }),
    ...(key.maxDurationSeconds !== null && { maxDurationSeconds: key.maxDurationSeconds }),
    ...(key.maxFilesizeBytes !== null && { maxFilesizeBytes: key.maxFilesizeBytes }),
  };
  return Object.keys(limits).length ? limits : undefined;
}

/**
 * A job's options under its key's limits: max_resolution capped, and the
 * runner's `limits` set from the key alone (a request never sets them).
 * Throws a 400 HttpError when the request is already longer than the
 * duration limit.
 */
export function applyKeyLimits(options: MediaJobOptions, key: KeyLimits): MediaJobOptions {
  refuseOverDuration(options, key.maxDurationSeconds);
  const { limits: _fromRequest, ...rest } = options;
  const limits = runnerLimits(key);
  return { ...rest, maxResolution: cappedResolution(options.maxResolution, key.maxResolution), ...(limits && { limits }) };
}
