// What a reconcile pass tells its work queue about what happens next, in
// the manner of controller-runtime (`Result{RequeueAfter}`,
// `reconcile.TerminalError`) and kopf (`TemporaryError(delay)`,
// `PermanentError`). A pass returns when to look again, or throws:
// - nothing to say ({}): done until an event or a resync brings the key back;
// - { requeueAfter }: look again after that many ms (a deadline, a timer);
// - TemporaryError: the world is not ready; retry after its own delay, or
//   with the key's exponential backoff when it has none;
// - PermanentError: retrying cannot help; the queue never retries it and
//   hands it to its owner to record on the object;
// - anything else: treated as temporary (API server, Postgres, network).
// The queue that applies these rules is ./work-queue.ts; docs/adr/0010.

export interface ReconcileResult {
  /** Look at the key again after this many ms (0 or absent: not on its own account). */
  requeueAfter?: number;
}

/** Nothing more to do until something changes. */
export const DONE: ReconcileResult = Object.freeze({});

/** The earliest of several requeue requests made in one pass (absent or 0 ones ask for nothing). */
export function earliest(...results: (ReconcileResult | undefined)[]): ReconcileResult {
  let at: number | undefined;
  for (const r of results) {
    const ms = r?.requeueAfter;
    if (ms !== undefined && ms > 0 && (at === undefined || ms < at)) at = ms;
  }
  return at === undefined ? DONE : { requeueAfter: at };
}

/** A condition that should pass by itself: retry after `delayMs`, or with backoff when none is given. */
export class TemporaryError extends Error {
  constructor(message: string, readonly delayMs?: number, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'TemporaryError';
  }
}

/**
 * A failure no retry can mend. `reason` is machine-readable (it becomes
 * the object's status reason), `message` is for people.
 */
export class PermanentError extends Error {
  constructor(readonly reason: string, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'PermanentError';
  }
}
