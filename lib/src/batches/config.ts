// Settings of batch expansion, merged into the gateway's config schema next
// to mediaInfoSchema (playlists run yt-dlp with those settings) and
// outboundSchema (every fetch asks that policy).
import { z } from 'zod';
import { envInt } from '../config.js';
import { DEFAULT_PODCAST_LOOKUP_ENDPOINT } from './show.js';

export const DEFAULT_MAX_PLAYLIST_SIZE = 500;

/** An http(s) URL without user:password, for an endpoint the operator names. */
const endpointUrl = z.string().trim().refine((v) => {
  if (!URL.canParse(v)) return false;
  const u = new URL(v);
  return (u.protocol === 'https:' || u.protocol === 'http:') && !u.username && !u.password;
}, 'must be an http(s) URL without credentials');

export const batchSourcesSchema = z.object({
  /**
   * The podcast platform's public lookup API, called as
   * `GET <endpoint>?id=<show id>&entity=podcast` for a show's RSS feed URL.
   * Tests and air-gapped deployments point it at a fake or a mirror.
   */
  PODCAST_LOOKUP_ENDPOINT: endpointUrl.default(DEFAULT_PODCAST_LOOKUP_ENDPOINT),
  /** Most episodes or videos one batch may have; a larger show or playlist is refused with 413, never truncated. */
  MAX_PLAYLIST_SIZE: envInt(1, 10_000).default(DEFAULT_MAX_PLAYLIST_SIZE),
});

export type BatchSourcesConfig = z.infer<typeof batchSourcesSchema>;
