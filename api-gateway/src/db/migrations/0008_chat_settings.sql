-- Chat notifications for failed jobs (spec: POST /user/chat), one setting
-- per API key. Statements: lib/src/db/chat-settings.ts. The incoming-webhook
-- address is a credential (whoever has it can post to the channel), so it
-- is stored sealed with SECRET_KEYS and never answered back.
CREATE TABLE chat_settings (
  -- No foreign key to api_keys, for the reason jobs has none (0001).
  api_key_id      uuid PRIMARY KEY,
  webhook_url_enc text NOT NULL,
  notify_level    text NOT NULL CHECK (notify_level IN ('all', 'errors_only', 'warnings_only')),
  created_at      timestamptz NOT NULL DEFAULT now(),
  updated_at      timestamptz NOT NULL DEFAULT now()
);

-- Chat notifications travel through the outbox like webhooks (durable,
-- retried), on their own channel: a chat message is the chat service's JSON
-- as it is, unsigned, and has no job_id, so it neither waits behind the
-- job's webhook events nor shows in the job's webhook delivery log.
ALTER TABLE outbox ADD COLUMN channel text NOT NULL DEFAULT 'webhook' CHECK (channel IN ('webhook', 'chat'));
