// A podcast show id to its episodes: the platform's public lookup API gives
// the show's RSS feed URL, the feed gives the episodes (feed.ts). The lookup
// is called as the real API is (`GET <endpoint>?id=<digits>&entity=podcast`,
// answer `{"resultCount": n, "results": [{"kind": "podcast", "feedUrl", ...}]}`,
// served as text/javascript), so PODCAST_LOOKUP_ENDPOINT can point at the
// platform or at a fake of it.
//
// Both fetches are bounded in time, size and redirects, and every hop asks
// the outbound-address policy (http-get.ts): the feed URL is whatever the
// show's publisher registered. Nothing is created here; a failure is a
// BatchSourceError the caller answers with.
import { parseHttpUrl } from '../media-info/platform-url.js';
import type { OutboundPolicy } from '../outbound.js';
import { BatchSourceError, emptyBatch, tooLarge } from './errors.js';
import { decodeXml, FeedParseError, parseShowFeed, type ShowEpisode } from './feed.js';
import { boundedGet, describeFailure, GetError, type GetResult } from './http-get.js';

export const DEFAULT_PODCAST_LOOKUP_ENDPOINT = 'https://itunes.apple.com/lookup';

export interface ShowResolverOptions {
  /** PODCAST_LOOKUP_ENDPOINT. */
  lookupEndpoint: string;
  /** MAX_PLAYLIST_SIZE: a feed with more episodes is refused (413), never truncated. */
  maxEpisodes: number;
  policy: OutboundPolicy;
  lookupTimeoutMs?: number;
  feedTimeoutMs?: number;
  maxLookupBytes?: number;
  maxFeedBytes?: number;
  maxRedirects?: number;
}

export const SHOW_FETCH_DEFAULTS = {
  lookupTimeoutMs: 10_000,
  feedTimeoutMs: 10_000,
  maxLookupBytes: 1024 * 1024,
  maxFeedBytes: 20 * 1024 * 1024,
  maxRedirects: 5,
} as const;

export interface ResolvedShow {
  podcastId: string;
  /** The RSS feed the episodes came from (after redirects). Not for clients: private feeds carry tokens. */
  feedUrl: string;
  title?: string;
  imageUrl?: string;
  /** In feed order (feed.ts); at most maxEpisodes. */
  episodes: ShowEpisode[];
}

/** The lookup API's URL for one show. */
export function lookupUrl(endpoint: string, podcastId: string): string {
  const url = new URL(endpoint);
  url.searchParams.set('id', podcastId);
  url.searchParams.set('entity', 'podcast');
  return url.href;
}

/** `results[0].feedUrl` of a lookup answer; throws the BatchSourceError the answer means. */
export function feedUrlOfLookup(body: string): string {
  let answer: unknown;
  try {
    answer = JSON.parse(body);
  } catch {
    throw new BatchSourceError('lookup_failed', 'lookup: answer is not JSON');
  }
  const results = (answer as { results?: unknown } | null)?.results;
  if (!Array.isArray(results)) throw new BatchSourceError('lookup_failed', 'lookup: answer has no results array');
  const show = results[0] as { kind?: unknown; feedUrl?: unknown } | undefined;
  // An id of another kind of item (an album, an app) is no show.
  if (typeof show !== 'object' || show === null || (show.kind !== undefined && show.kind !== 'podcast')) {
    throw new BatchSourceError('show_not_found', 'lookup: no podcast under this id');
  }
  const feedUrl = typeof show.feedUrl === 'string' ? parseHttpUrl(show.feedUrl.trim()) : undefined;
  if (!feedUrl) throw new BatchSourceError('show_without_feed', 'lookup: result has no http(s) feedUrl');
  return feedUrl.href;
}

async function fetchStep(step: 'lookup' | 'feed', get: () => Promise<GetResult>): Promise<GetResult> {
  try {
    return await get();
  } catch (err) {
    if (!(err instanceof GetError)) throw err;
    if (err.failure.kind === 'aborted') throw new BatchSourceError('aborted', `${step}: aborted`);
    // The API answers an unknown id with 200 and no results; any error status
    // (a 404 included: a wrong endpoint path) is the lookup failing, not a verdict.
    throw new BatchSourceError(step === 'lookup' ? 'lookup_failed' : 'feed_failed', `${step}: ${describeFailure(err.failure)}`);
  }
}

/** The show's episodes, or a BatchSourceError (not found, no feed, too large, unreadable). */
export async function resolveShow(podcastId: string, options: ShowResolverOptions, signal?: AbortSignal): Promise<ResolvedShow> {
  const o = { ...SHOW_FETCH_DEFAULTS, ...options };
  const common = { policy: o.policy, maxRedirects: o.maxRedirects, ...(signal && { signal }) };

  const lookupAt = lookupUrl(o.lookupEndpoint, podcastId);
  const lookup = await fetchStep('lookup', () => boundedGet(lookupAt, {
    ...common, timeoutMs: o.lookupTimeoutMs, maxBytes: o.maxLookupBytes, accept: 'application/json, text/javascript',
  }));
  const feedAt = feedUrlOfLookup(lookup.body.toString('utf8'));

  const feed = await fetchStep('feed', () => boundedGet(feedAt, {
    ...common, timeoutMs: o.feedTimeoutMs, maxBytes: o.maxFeedBytes, accept: 'application/rss+xml, application/xml, text/xml, */*',
  }));
  let parsed;
  try {
    parsed = parseShowFeed(decodeXml(feed.body));
  } catch (err) {
    if (err instanceof FeedParseError) throw new BatchSourceError('feed_failed', `feed: ${err.message}`);
    throw err;
  }
  if (parsed.episodes.length > o.maxEpisodes) throw tooLarge('show', o.maxEpisodes);
  if (parsed.episodes.length === 0) throw emptyBatch('show');
  return { podcastId, feedUrl: feed.url, ...parsed };
}
