-- Sealed values are bound to their place (lib/src/secret-box.ts v2,
-- lib/src/db/sealed-columns.ts). A chat notification's outbox row copies its
-- key's chat_settings.webhook_url_enc and names no job or batch, so nothing
-- on it said whose setting it copied: chat_key_id does, and the target
-- opens with that setting's place. NULL on every other row, and on chat
-- rows queued before this migration (v1 values, which open without a place).
ALTER TABLE outbox ADD COLUMN chat_key_id uuid NULL;
