// The chat notification setting the gateway checks POST /user/chat against.
import { z } from 'zod';

/** The chat service's incoming-webhook addresses all begin with this. */
export const DEFAULT_CHAT_WEBHOOK_PREFIX = 'https://hooks.slack.com/services/';

export const chatSchema = z.object({
  /**
   * What every `webhook_url` of POST /user/chat must begin with: the chat
   * service's incoming-webhook prefix, or a self-hosted service's (and a
   * local receiver's in tests). An https URL ending in `/`, unless local.
   */
  CHAT_WEBHOOK_PREFIX: z.string().trim().refine((v) => {
    if (!URL.canParse(v)) return false;
    const u = new URL(v);
    return (u.protocol === 'https:' || u.protocol === 'http:') && !u.username && !u.password && v.endsWith('/');
  }, 'must be an http(s) URL prefix ending in /, without credentials').default(DEFAULT_CHAT_WEBHOOK_PREFIX),
});

export type ChatConfig = z.infer<typeof chatSchema>;
