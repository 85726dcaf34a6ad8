// Why a show or playlist could not be expanded, and what the client is told.
// Messages are fixed phrases: never a feed URL (private feeds carry tokens in
// them), a response body or yt-dlp's text. `reason`, for the log only (logger's
// errFields prints it), says which step failed and how, without URLs.

export const BATCH_SOURCE_FAILURES = {
  /** The lookup API knows no podcast under this id. */
  show_not_found: { status: 400, message: 'Podcast show not found' },
  /** The show exists but publishes no RSS feed (e.g. a subscription-only show). */
  show_without_feed: { status: 400, message: 'Podcast show has no public RSS feed' },
  /** yt-dlp's verdict on the playlist: private, removed or never there. */
  playlist_unavailable: { status: 400, message: 'Playlist is private, unavailable or does not exist' },
  /** A feed without a single episode, a playlist without a single video: a batch of nothing. */
  empty: { status: 400, message: 'Batch has no episodes' },
  /** More entries than MAX_PLAYLIST_SIZE: nothing is created, nothing truncated (spec rule 8). */
  too_large: { status: 413, message: 'Batch too large' },
  lookup_failed: { status: 502, message: 'Podcast lookup failed, please retry' },
  feed_failed: { status: 502, message: 'Podcast RSS feed could not be read' },
  playlist_failed: { status: 502, message: 'Playlist could not be read, please retry' },
  /** Every expansion slot of this replica is busy. */
  busy: { status: 503, message: 'Too many batch requests in progress, please retry' },
  /** yt-dlp could not be started: the deployment's fault, not the client's. */
  extractor_missing: { status: 500, message: 'Playlist extraction is unavailable' },
  /** The caller's signal aborted (the client went away): nothing to answer. */
  aborted: { status: 499, message: 'Request aborted' },
} as const satisfies Record<string, { status: number; message: string }>;

export type BatchSourceFailure = keyof typeof BATCH_SOURCE_FAILURES;

export class BatchSourceError extends Error {
  /** The HTTP status the gateway answers with. */
  readonly status: number;

  constructor(
    readonly code: BatchSourceFailure,
    /** For the log only, e.g. `feed: HTTP 404`, `lookup: timeout`; never a URL. */
    readonly reason?: string,
    /** Client-safe; defaults to the failure's fixed phrase. */
    message: string = BATCH_SOURCE_FAILURES[code].message,
  ) {
    super(message);
    this.name = 'BatchSourceError';
    this.status = BATCH_SOURCE_FAILURES[code].status;
  }
}

/** The 413 for a show or playlist over the limit: says which limit, never truncates. */
export function tooLarge(kind: 'show' | 'playlist', limit: number): BatchSourceError {
  const what = kind === 'show' ? 'Podcast show has more than' : 'Playlist has more than';
  const unit = kind === 'show' ? 'episodes' : 'videos';
  return new BatchSourceError('too_large', `${kind}: over ${limit}`, `${what} ${limit} ${unit}; batches are limited to ${limit} and never truncated`);
}

/** The 400 for a show or playlist with nothing in it. */
export function emptyBatch(kind: 'show' | 'playlist'): BatchSourceError {
  return new BatchSourceError('empty', `${kind}: no entries`, kind === 'show' ? 'Podcast show has no episodes' : 'Playlist has no videos');
}
