// POST /is-short: is a video of the supported platform vertical (short),
// regular or live. Only that platform's single-video URL forms are taken
// (table in lib/src/media-info/platform-url.ts); classification follows the
// spec's rules 1–4 (lib/src/media-info/info.ts). No job, no usage row, no cache.
import type { NextFunction, Request, Response } from 'express';
import { Router } from 'express';
import {
  assessClassification, failureStatus, FAILURES, parsePlatformVideoUrl, platformUrlError, readUrlField,
} from '@mediajobs/lib/media-info/index';
import { requireApiKey } from '../auth.js';
import type { ApiKeyCache } from '../auth.js';
import { sendError } from '../http-errors.js';
import { jsonBody, lookupForRequest, lookupHeaders, type MediaInfoRouteDeps } from './media-info-http.js';

/** The spec words this endpoint's missing-key message differently from every other endpoint's. */
function requireApiKeyForIsShort(cache: ApiKeyCache) {
  const check = requireApiKey(cache);
  return (req: Request, res: Response, next: NextFunction): void => {
    const header = req.headers['x-api-key'];
    const key = Array.isArray(header) ? header[0] : header;
    if (key === undefined || key === '') return sendError(res, 401, 'Missing API key');
    check(req, res, next);
  };
}

export function isShortRouter(deps: MediaInfoRouteDeps): Router {
  const router = Router();

  router.post('/is-short', requireApiKeyForIsShort(deps.keyCache), ...jsonBody, async (req, res) => {
    const field = readUrlField(req.body);
    if (!field.ok) return sendError(res, 400, field.error);
    const parsed = parsePlatformVideoUrl(field.url);
    if (!parsed.ok) return sendError(res, 400, platformUrlError(parsed.reason));

    const result = await lookupForRequest(deps, '/is-short', parsed.video.canonicalUrl, assessClassification, res);
    if (!result) return;
    lookupHeaders(res, result.ok ? undefined : result.failure);
    if (!result.ok) return sendError(res, failureStatus(result.failure), FAILURES[result.failure].message);
    const c = result.value;
    res.json({
      is_short: c.isShort,
      video_type: c.videoType,
      width: c.width,
      height: c.height,
      aspect_ratio: c.aspectRatio,
      duration_seconds: c.durationSeconds,
    });
  });

  return router;
}
