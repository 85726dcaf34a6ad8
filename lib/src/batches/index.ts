// Batches' sources (issue 13): which POST /jobs URLs are a show or a genuine
// playlist (detect.ts, no network), and what is in them: a show's episodes
// from its RSS feed (show.ts, feed.ts), a playlist's videos from yt-dlp's
// flat extraction (playlist.ts). Every failure is a BatchSourceError with
// the HTTP status to answer (errors.ts). Nothing here creates a batch, a job
// or a row: the gateway decides what to do with the list, the operator's
// batch controller creates the episode jobs.
import type { MediaInfoOptions } from '../media-info/extractor.js';
import type { OutboundPolicy } from '../outbound.js';
import type { BatchSourcesConfig } from './config.js';
import type { BatchSource } from './detect.js';
import { BatchSourceError } from './errors.js';
import type { ShowEpisode } from './feed.js';
import { PlaylistExpander, type PlaylistEntry } from './playlist.js';
import { resolveShow, type ShowResolverOptions } from './show.js';

export * from './config.js';
export * from './detect.js';
export * from './errors.js';
export * from './feed.js';
export * from './playlist.js';
export * from './release-date.js';
export * from './show.js';

export type BatchSourceOf<K extends 'show' | 'playlist'> = Extract<BatchSource, { kind: K }>;

export type ExpandedBatch =
  | { kind: 'show'; podcastId: string; title?: string; episodes: ShowEpisode[] }
  | { kind: 'playlist'; listId: string; canonicalUrl: string; episodes: PlaylistEntry[] };

export interface BatchSourcesOptions {
  /** PODCAST_LOOKUP_ENDPOINT. */
  lookupEndpoint: string;
  /** MAX_PLAYLIST_SIZE, for shows and playlists alike. */
  maxEntries: number;
  /** The outbound-address policy every show fetch asks (the gateway's AppDeps.outbound). */
  policy: OutboundPolicy;
  /** /metadata's extractor settings (mediaInfoOptions(config)); maxConcurrent also bounds expansions at once. */
  mediaInfo: Partial<MediaInfoOptions>;
  /** Override the show fetches' bounds (tests). */
  showFetch?: Partial<Pick<ShowResolverOptions, 'lookupTimeoutMs' | 'feedTimeoutMs' | 'maxLookupBytes' | 'maxFeedBytes' | 'maxRedirects'>>;
}

/** BatchSources' options from the merged config (batchSourcesSchema and mediaInfoSchema). */
export function batchSourcesOptions(config: BatchSourcesConfig, mediaInfo: Partial<MediaInfoOptions>, policy: OutboundPolicy): BatchSourcesOptions {
  return { lookupEndpoint: config.PODCAST_LOOKUP_ENDPOINT, maxEntries: config.MAX_PLAYLIST_SIZE, policy, mediaInfo };
}

/**
 * Expands a show or playlist into its episodes. At most
 * `mediaInfo.maxConcurrent` expansions run at once per replica (each holds a
 * feed of up to 20 MB or a yt-dlp process); more are refused with `busy` (503).
 */
export class BatchSources {
  private readonly playlists: PlaylistExpander;
  private readonly maxConcurrent: number;
  private inFlight = 0;

  constructor(readonly options: BatchSourcesOptions) {
    this.playlists = new PlaylistExpander(options.mediaInfo, options.maxEntries);
    this.maxConcurrent = this.playlists.options.maxConcurrent;
  }

  /** The episodes of a show or the videos of a playlist; throws BatchSourceError. */
  async expand(source: BatchSourceOf<'show'> | BatchSourceOf<'playlist'>, signal?: AbortSignal): Promise<ExpandedBatch> {
    if (this.inFlight >= this.maxConcurrent) throw new BatchSourceError('busy', 'expansion slots full');
    this.inFlight++;
    try {
      if (source.kind === 'playlist') {
        const episodes = await this.playlists.expand(source.canonicalUrl, signal);
        return { kind: 'playlist', listId: source.listId, canonicalUrl: source.canonicalUrl, episodes };
      }
      const show = await resolveShow(source.podcastId, {
        lookupEndpoint: this.options.lookupEndpoint,
        maxEpisodes: this.options.maxEntries,
        policy: this.options.policy,
        ...this.options.showFetch,
      }, signal);
      return { kind: 'show', podcastId: show.podcastId, ...(show.title !== undefined && { title: show.title }), episodes: show.episodes };
    } finally {
      this.inFlight--;
    }
  }

  /** Expansions running now (for tests and metrics). */
  get running(): number {
    return this.inFlight;
  }
}
