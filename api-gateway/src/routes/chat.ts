// The chat notification endpoints (spec: POST /user/chat; GET and DELETE
// are this service's, documented in api-gateway/README.md). One setting per
// API key: the incoming-webhook address (sealed, never answered back, not
// even in part beyond the configured prefix) and the notify level. Which
// job endings notify is lib/src/chat/notification.ts's; queueing them is the
// jobs table owner's, in the transaction that records the ending.
import { Router, type RequestHandler, type Response } from 'express';
import { NOTIFY_LEVELS, type NotifyLevel } from '@mediajobs/lib/chat/notification';
import { deleteChatSetting, getChatSetting, saveChatSetting } from '@mediajobs/lib/db/chat-settings';
import { errFields, type Logger } from '@mediajobs/lib/logger';
import { urlFieldError, type OutboundPolicy } from '@mediajobs/lib/outbound';
import type { SecretBox } from '@mediajobs/lib/secret-box';
import type pg from 'pg';
import { z } from 'zod';
import { parseRequestBody } from '@mediajobs/lib/request-body';
import { HttpError, invalidBody } from '../http-errors.js';
import { acceptJson } from '../json-body.js';

export interface ChatDeps {
  pool: pg.Pool;
  logger: Logger;
  secretBox: SecretBox;
  outbound: OutboundPolicy;
  /** CHAT_WEBHOOK_PREFIX. */
  webhookPrefix: string;
}

export const UNAVAILABLE = 'Chat webhook configuration is temporarily unavailable';
export const BAD_LEVEL = "Invalid notify_level. Must be 'all', 'errors_only', or 'warnings_only'";
const MAX_URL = 2048;

export function chatRouter(deps: ChatDeps): Router {
  const router = Router();
  router.post('/user/chat', ...acceptJson(16 * 1024), saveChat(deps));
  router.get('/user/chat', showChat(deps));
  router.delete('/user/chat', removeChat(deps));
  return router;
}

/**
 * The body's webhook_url, checked: the configured prefix (which fixes the
 * scheme and host, so no user info can follow it) and the outbound policy.
 */
function webhookUrl(deps: ChatDeps, value: string): string {
  const url = value.trim();
  if (!url.startsWith(deps.webhookPrefix) || url.length === deps.webhookPrefix.length || url.length > MAX_URL || !URL.canParse(url)) {
    throw new HttpError(400, `Invalid webhook_url. Must start with '${deps.webhookPrefix}'`);
  }
  const refused = urlFieldError(deps.outbound, 'webhook_url', url);
  if (refused) throw new HttpError(400, refused);
  return url;
}

/** The POST /user/chat body (the OpenAPI document's ChatSettingsRequest); the prefix is checked by webhookUrl. */
export const chatRequest = z.object({
  webhook_url: z.string({ error: 'must be a string' }).describe("Must start with the chat service's incoming-webhook prefix (CHAT_WEBHOOK_PREFIX)"),
  notify_level: z.enum(NOTIFY_LEVELS, { error: BAD_LEVEL }).default('all'),
});

/** A store failure is the spec's 503, logged without the address. */
function unavailable(deps: ChatDeps, err: unknown): HttpError {
  deps.logger.error({ err: errFields(err) }, 'chat settings store failed');
  return new HttpError(503, UNAVAILABLE);
}

const apiKeyId = (res: Response): string => res.locals.principal!.apiKeyId;

function saveChat(deps: ChatDeps): RequestHandler {
  return async (req, res) => {
    const body = parseRequestBody(chatRequest, req.body);
    if (!body.ok) throw invalidBody(body);
    const url = webhookUrl(deps, body.data.webhook_url);
    const level: NotifyLevel = body.data.notify_level;
    await saveChatSetting(deps.pool, apiKeyId(res), deps.secretBox.sealable(url), level).catch((err) => {
      throw unavailable(deps, err);
    });
    res.json({ message: 'Chat notifications configured', configured: true, notify_level: level });
  };
}

function showChat(deps: ChatDeps): RequestHandler {
  return async (_req, res) => {
    const setting = await getChatSetting(deps.pool, apiKeyId(res)).catch((err) => {
      throw unavailable(deps, err);
    });
    if (!setting) {
      res.json({ configured: false });
      return;
    }
    res.json({
      configured: true, notify_level: setting.notifyLevel, webhook_url_prefix: deps.webhookPrefix,
      created_at: setting.createdAt, updated_at: setting.updatedAt,
    });
  };
}

function removeChat(deps: ChatDeps): RequestHandler {
  return async (_req, res) => {
    const removed = await deleteChatSetting(deps.pool, apiKeyId(res)).catch((err) => {
      throw unavailable(deps, err);
    });
    res.json({ message: removed ? 'Chat notifications removed' : 'No chat notifications were configured', configured: false });
  };
}
