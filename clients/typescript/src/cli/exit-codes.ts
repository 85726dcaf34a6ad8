// The CLI's exit codes, one per outcome (documented in the package README).
import type { JobStatus } from '../types.js';

export const EXIT = {
  ok: 0,
  /** A bug of the CLI itself. */
  internal: 1,
  /** Bad arguments or configuration (no MEDIAJOBS_API_KEY). */
  usage: 2,
  /** The API answered with an error (401, 404, 409, 400 ...). */
  api: 3,
  /** The API could not be reached (after the retries). */
  unreachable: 4,
  failed: 10,
  warning: 11,
  cancelled: 12,
  skipped: 13,
  /** Ctrl-C while waiting: the job itself goes on. */
  interrupted: 130,
} as const;

/** The exit code of a job that ended in `status`. */
export function exitForStatus(status: JobStatus): number {
  switch (status) {
    case 'Completed': return EXIT.ok;
    case 'Failed': return EXIT.failed;
    case 'Warning': return EXIT.warning;
    case 'Skipped': return EXIT.skipped;
    case 'Cancelled':
    case 'CancelledByAdmin': return EXIT.cancelled;
    default: return EXIT.ok;
  }
}
