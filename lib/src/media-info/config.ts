// Settings of the metadata lookups, merged into the gateway's config schema.
import { z } from 'zod';
import { envInt } from '../config.js';
import { DEFAULT_MEDIA_INFO_OPTIONS, FULL_TIMEOUT_MS, LIGHT_TIMEOUT_MS, type MediaInfoOptions } from './extractor.js';

// http(s) only: the gateway puts it behind its egress proxy, which reaches it with CONNECT and absolute-form
// requests (media-info/egress.ts) and cannot speak socks to one.
const PROXY_PROTOCOLS = new Set(['http:', 'https:']);

const words = (s: string) => s.split(/\s+/).filter(Boolean);

/** `{"<url>": "<url>", ...}`: both sides http(s). */
const urlMapSchema = z.string().transform((raw, ctx) => {
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch {
    parsed = undefined;
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
    ctx.addIssue({ code: 'custom', message: 'must be a JSON object of URL to URL' });
    return z.NEVER;
  }
  const map = new Map<string, string>();
  for (const [from, to] of Object.entries(parsed)) {
    if (typeof to !== 'string' || !/^https?:\/\//.test(from) || !/^https?:\/\//.test(to)) {
      ctx.addIssue({ code: 'custom', message: `entry ${JSON.stringify(from)}: keys and values must be http(s) URLs` });
      return z.NEVER;
    }
    map.set(from, to);
  }
  return map;
});

export const mediaInfoSchema = z.object({
  /**
   * The yt-dlp command, split on whitespace (no quoting), e.g.
   * `/opt/yt-dlp/bin/yt-dlp` or `python3 -m yt_dlp`.
   */
  MEDIA_INFO_YTDLP: z.string().trim().min(1).default('yt-dlp').transform(words),
  /** Extra yt-dlp options for both runs, split on whitespace, e.g. `--cookies /secrets/cookies.txt`. */
  MEDIA_INFO_YTDLP_ARGS: z.string().default('').transform(words),
  /** Hard bound of the lightweight run; the spec's 6 s is also the maximum. */
  MEDIA_INFO_LIGHT_TIMEOUT_MS: envInt(100, LIGHT_TIMEOUT_MS).default(LIGHT_TIMEOUT_MS),
  /** Hard bound of the full fallback run; the spec's 20 s is also the maximum. */
  MEDIA_INFO_FULL_TIMEOUT_MS: envInt(100, FULL_TIMEOUT_MS).default(FULL_TIMEOUT_MS),
  /**
   * An http(s) proxy yt-dlp's fetches go through; every `{session}` becomes a
   * new random id per run, e.g. `http://user-session-{session}:password@pool.example:8000`.
   * The gateway's egress proxy connects through it (egress.ts).
   */
  MEDIA_INFO_PROXY: z
    .string()
    .refine((s) => {
      try {
        return PROXY_PROTOCOLS.has(new URL(s.replaceAll('{session}', 'x')).protocol);
      } catch {
        return false;
      }
    }, 'must be an http or https proxy URL (socks cannot be chained behind the outbound policy)')
    .optional(),
  /** Concurrent lookups per replica (each is one yt-dlp process at a time). */
  MEDIA_INFO_MAX_CONCURRENT: envInt(1, 1000).default(DEFAULT_MEDIA_INFO_OPTIONS.maxConcurrent),
  /** Concurrent lookups of one API key per replica, so one key cannot hold every slot. */
  MEDIA_INFO_MAX_PER_KEY: envInt(1, 1000).default(DEFAULT_MEDIA_INFO_OPTIONS.maxPerKey),
  /**
   * Test seam, off unless set: JSON object mapping a URL (after validation
   * and canonicalisation) to the URL yt-dlp is actually given. Lets tests
   * send platform URL forms while yt-dlp reads locally served media.
   */
  MEDIA_INFO_URL_MAP: urlMapSchema.optional(),
});

export type MediaInfoConfig = z.infer<typeof mediaInfoSchema>;

export function mediaInfoOptions(config: MediaInfoConfig): MediaInfoOptions {
  return {
    command: config.MEDIA_INFO_YTDLP,
    extraArgs: config.MEDIA_INFO_YTDLP_ARGS,
    lightTimeoutMs: config.MEDIA_INFO_LIGHT_TIMEOUT_MS,
    fullTimeoutMs: config.MEDIA_INFO_FULL_TIMEOUT_MS,
    maxConcurrent: config.MEDIA_INFO_MAX_CONCURRENT,
    maxPerKey: config.MEDIA_INFO_MAX_PER_KEY,
    urlMap: config.MEDIA_INFO_URL_MAP ?? new Map(),
    ...(config.MEDIA_INFO_PROXY !== undefined && { proxy: config.MEDIA_INFO_PROXY }),
  };
}
