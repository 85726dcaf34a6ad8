// POST /metadata: what yt-dlp knows about a URL, without downloading it.
// Accepts any http(s) URL whose host the outbound-address policy lets the
// service contact (see metadataUrl in lib/src/media-info/platform-url.ts,
// lib/src/outbound.ts and the README). No job, no usage row, no cache.
import { Router } from 'express';
import { assessMetadata, failureStatus, FAILURES, metadataUrl, readUrlField } from '@mediajobs/lib/media-info/index';
import type { OutboundPolicy } from '@mediajobs/lib/outbound';
import { HttpError } from '../http-errors.js';
import { jsonBody, lookupForRequest, lookupHeaders, type MediaInfoRouteDeps } from './media-info-http.js';

const FAILED = 'Failed to extract metadata';

export interface MetadataRouteDeps extends MediaInfoRouteDeps {
  /** The gateway's outbound-address policy (OUTBOUND_ALLOWED_CIDRS); default: no allowance. */
  outbound?: OutboundPolicy;
}

export function metadataRouter(deps: MetadataRouteDeps): Router {
  const router = Router();
  const mapped = deps.mediaInfo.options.urlMap.size;
  if (mapped) deps.logger.warn({ entries: mapped }, 'MEDIA_INFO_URL_MAP is set: lookups of these URLs read other URLs (a test seam)');

  router.post('/metadata', ...jsonBody, async (req, res) => {
    const field = readUrlField(req.body);
    if (!field.ok) throw new HttpError(400, field.error);
    const target = metadataUrl(field.url, deps.outbound);
    if (!target.ok) throw new HttpError(400, target.error);

    const result = await lookupForRequest(deps, '/metadata', target.url, assessMetadata, res);
    if (!result) return;
    lookupHeaders(res, result.ok ? undefined : result.failure);
    if (!result.ok) {
      throw new HttpError(failureStatus(result.failure), FAILED, { details: FAILURES[result.failure].message });
    }
    const m = result.value;
    res.json({
      title: m.title,
      duration: m.duration,
      width: m.width,
      height: m.height,
      extractor: m.extractor,
      uploader: m.uploader,
      thumbnail: m.thumbnail,
      description: m.description,
      view_count: m.viewCount,
      like_count: m.likeCount,
      upload_date: m.uploadDate,
      filesize_approx: m.filesizeApprox,
    });
  });

  return router;
}
