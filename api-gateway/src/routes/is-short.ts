// POST /is-short: is a video of the supported platform vertical (short),
// regular or live. Only that platform's single-video URL forms are taken
// (table in lib/src/media-info/platform-url.ts); classification follows the
// spec's rules 1–4 (lib/src/media-info/info.ts). No job, no usage row, no cache.
import { Router } from 'express';
import {
  assessClassification, failureStatus, FAILURES, parsePlatformVideoUrl, platformUrlError, readUrlField,
} from '@mediajobs/lib/media-info/index';
import { HttpError } from '../http-errors.js';
import { jsonBody, lookupForRequest, lookupHeaders, type MediaInfoRouteDeps } from './media-info-http.js';

export function isShortRouter(deps: MediaInfoRouteDeps): Router {
  const router = Router();

  // Authenticated in app.ts, with the spec's own wording for a missing key here.
  router.post('/is-short', ...jsonBody, async (req, res) => {
    const field = readUrlField(req.body);
    if (!field.ok) throw new HttpError(400, field.error);
    const parsed = parsePlatformVideoUrl(field.url);
    if (!parsed.ok) throw new HttpError(400, platformUrlError(parsed.reason));

    const result = await lookupForRequest(deps, '/is-short', parsed.video.canonicalUrl, assessClassification, res, field.url);
    if (!result) return;
    lookupHeaders(res, result.ok ? undefined : result.failure);
    if (!result.ok) throw new HttpError(failureStatus(result.failure), FAILURES[result.failure].message);
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
