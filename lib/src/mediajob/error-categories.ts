// The categories a runner classifies a job that did not complete into: the
// names it reports as `category` (status.category, the termination
// message), which the operator's retry policy (operator/src/retry-policy.ts)
// reads. The runner owns the classification and its fixed phrases
// (runner-image/src/classify.ts); the names are here because both ends of
// the wire read them.

/** Technical failures: the job ends Failed, errorType error. */
export const TECHNICAL_CATEGORIES = [
  'bot_detection',
  'rate_limited',
  'connection_error',
  'download_failed',
  'processing_failed',
  'output_unverified',
  'upload_failed',
  'storage_unreachable',
  'internal_error',
] as const;

/** Content issues: the job ends Warning (drm_protected on an audio-only source: Skipped). */
export const CONTENT_CATEGORIES = [
  'private',
  'members_only',
  'age_restricted',
  'geo_blocked',
  'channel_terminated',
  'copyright',
  'upcoming',
  'unavailable',
  'drm_protected',
] as const;

/**
 * The owning key's limits (spec.limits): the job fails (errorType error,
 * the category as its reason). Not a content warning: the source is fine,
 * and another key, or a shorter clip, gets it; and the client is told as
 * for any failed job (job_failed webhook, red chat notification).
 */
export const LIMIT_CATEGORIES = ['duration_limit_exceeded', 'filesize_limit_exceeded'] as const;

/**
 * The request itself: a spec the CRD's rules refuse (a field, or fields
 * that contradict each other), which reached the operator or the runner
 * because the apiserver did not apply those rules (./spec-check.ts). The
 * job fails (errorType error, the category as its reason) before anything
 * runs, and no attempt is ever tried again: the same spec fails the same way.
 */
export const REQUEST_CATEGORIES = ['invalid_spec'] as const;

export const ERROR_CATEGORIES = [...TECHNICAL_CATEGORIES, ...CONTENT_CATEGORIES, ...LIMIT_CATEGORIES, ...REQUEST_CATEGORIES] as const;

export type TechnicalCategory = (typeof TECHNICAL_CATEGORIES)[number];
export type ContentCategory = (typeof CONTENT_CATEGORIES)[number];
export type LimitCategory = (typeof LIMIT_CATEGORIES)[number];
export type RequestCategory = (typeof REQUEST_CATEGORIES)[number];
export type ErrorCategory = (typeof ERROR_CATEGORIES)[number];

export function isErrorCategory(s: string | undefined): s is ErrorCategory {
  return s !== undefined && (ERROR_CATEGORIES as readonly string[]).includes(s);
}
