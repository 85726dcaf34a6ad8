-- Billing through Stripe (issue 14 item 8; docs/adr/0016).
-- A key billed through Stripe names its Stripe customer; a marketplace
-- key's end users are billed to their account's (the parent's) customer.
-- Statements: src/db/api-keys.ts (the column), lib/src/db/outbox.ts (the
-- usage reports).
ALTER TABLE api_keys
  ADD COLUMN billing_customer text NULL CHECK (billing_customer ~ '^cus_[A-Za-z0-9]{1,64}$');

-- Each completed job's stored bytes are reported to Stripe through the
-- outbox (durable, retried, sent once: its event id is the meter event's
-- identifier and idempotency key), on a channel of their own: a billing
-- row has no job_id (it neither waits behind the job's webhook events nor
-- shows in its delivery log) and no address (Stripe's is the operator's
-- setting, STRIPE_API_URL); its payload names the customer.
ALTER TABLE outbox
  DROP CONSTRAINT outbox_channel_check,
  ADD CONSTRAINT outbox_channel_check CHECK (channel IN ('webhook', 'chat', 'billing')),
  ALTER COLUMN target_enc DROP NOT NULL,
  ADD CONSTRAINT outbox_target_check CHECK ((channel = 'billing') = (target_enc IS NULL));
