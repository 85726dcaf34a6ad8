// What POST /metadata and POST /is-short share: the JSON-only body, a
// disabled MediaPlatform's 422, the lookup tied to the client's connection,
// and one log line per lookup.
import type { RequestHandler, Response } from 'express';
import type { Logger } from '@mediajobs/lib/logger';
import type { Assess, FailureCategory, LookupResult, MediaInfoExtractor } from '@mediajobs/lib/media-info/index';
import type { PlatformLookup } from '@mediajobs/lib/platforms/directory';
import { PLATFORM_DISABLED_MESSAGE } from '@mediajobs/lib/platforms/types';
import { HttpError } from '../http-errors.js';
import { acceptJson } from '../json-body.js';

export interface MediaInfoRouteDeps {
  logger: Logger;
  mediaInfo: MediaInfoExtractor;
  /** A disabled platform's URL is refused as POST /jobs refuses it (422); absent: none refused. */
  platforms?: PlatformLookup;
}

/** A body is `{"url": "..."}`; 16 KiB is far above the longest accepted URL. */
const MAX_BODY_BYTES = 16 * 1024;

/** Only JSON bodies, checked before anything is read. */
export const jsonBody: RequestHandler[] = acceptJson(MAX_BODY_BYTES);

/**
 * Run a lookup for this request. The yt-dlp process is killed as soon as the
 * client goes away: nobody waits for the answer, and a slot of
 * MEDIA_INFO_MAX_CONCURRENT is freed. Resolves undefined in that case.
 * `clientUrl`, the URL as the client gave it, decides the platform (its 422
 * and its route) when `url` is a rewrite of it: POST /jobs decides by the
 * client's URL, so a platform matching only youtu.be must not be missed by
 * is-short's canonical www.youtube.com URL (ADR 0027).
 */
export async function lookupForRequest<T>(
  deps: MediaInfoRouteDeps,
  endpoint: string,
  url: string,
  assess: Assess<T>,
  res: Response,
  clientUrl = url,
): Promise<Exclude<LookupResult<T>, { aborted: true }> | undefined> {
  if (deps.platforms?.disabledFor(clientUrl)) throw new HttpError(422, PLATFORM_DISABLED_MESSAGE);
  const controller = new AbortController();
  const onClose = () => {
    if (!res.writableFinished) controller.abort();
  };
  res.once('close', onClose);
  const result = await deps.mediaInfo.lookup(url, assess, controller.signal, res.locals.principal?.apiKeyId, clientUrl);
  res.off('close', onClose);
  // A platform's runs name it and the pool proxy they left by (ids; never a URL or a cookie).
  const attempts = result.attempts.map((a) => ({
    stage: a.stage, ms: a.ms, outcome: a.outcome, ...(a.platform !== undefined && { platform: a.platform }), ...(a.proxy !== undefined && { proxy: a.proxy }),
  }));
  if ('aborted' in result) {
    deps.logger.info({ endpoint, attempts }, 'info lookup abandoned: client disconnected');
    return undefined;
  }
  if (result.ok) {
    deps.logger.info({ endpoint, attempts }, 'info lookup');
  } else {
    // The detail is yt-dlp's own error line with URLs removed: for operators, never for clients.
    const details = result.attempts.map((a) => a.detail).filter(Boolean);
    const level = result.failure === 'extractor_missing' ? 'error' : 'warn';
    deps.logger[level]({ endpoint, failure: result.failure, attempts, ...(details.length && { details }) }, 'info lookup failed');
  }
  return result;
}

/**
 * Headers of every answer to a lookup: computed per request and never to be
 * reused by a cache between us and the client; a busy replica says when to
 * come back (Retry-After, RFC 9110 §10.2.3).
 */
export function lookupHeaders(res: Response, failure?: FailureCategory): void {
  res.setHeader('Cache-Control', 'no-store');
  if (failure === 'busy' || failure === 'key_busy') res.setHeader('Retry-After', '1');
}
