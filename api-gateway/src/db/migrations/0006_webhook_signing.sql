-- Signed webhooks (issue 15, Standard Webhooks): one signing secret per API
-- key, and a log of every delivery attempt. Statements:
-- lib/src/db/webhook-secrets.ts (webhook_secrets), lib/src/db/webhook-log.ts
-- (webhook_attempts), lib/src/db/outbox.ts (outbox).

-- The key's signing secret, `whsec_…`, sealed with the SecretBox (the
-- operator must sign with it, so it cannot be hashed). A rotation keeps the
-- secret it replaced for 24 hours after rotated_at, and deliveries carry
-- both signatures meanwhile. `revealed`: false for a secret the operator
-- created on the key's first delivery, which nobody was ever shown; a
-- rotation drops such a secret at once instead of keeping it 24 hours.
-- No foreign key to api_keys, for the reason jobs has none (0001).
CREATE TABLE webhook_secrets (
  api_key_id          uuid PRIMARY KEY,
  secret_enc          text NOT NULL,
  revealed            boolean NOT NULL,
  created_at          timestamptz NOT NULL DEFAULT now(),
  previous_secret_enc text NULL,
  rotated_at          timestamptz NULL,
  CHECK ((previous_secret_enc IS NULL) = (rotated_at IS NULL))
);

-- How often an event was sent again on request (POST /jobs/{id}/webhooks/{event_id}/redeliver):
-- the attempts of each round are counted from 1 in webhook_attempts.
ALTER TABLE outbox ADD COLUMN redeliveries int NOT NULL DEFAULT 0;

-- One row per POST attempted (or refused before connecting): kept as long as
-- the event, which is kept as long as the job record (nothing deletes
-- either today; whatever comes to delete events deletes their attempts in
-- the same transaction). No foreign key: it would keep `TRUNCATE outbox`
-- (the outbox tests) from running alone. `error` is a class
-- (timeout, connection_refused, address_refused, ...) or `HTTP <status>`,
-- never an exception's text; the excerpt is the response body's first bytes
-- with URL queries and secret-looking tokens removed.
CREATE TABLE webhook_attempts (
  id               bigserial PRIMARY KEY,
  outbox_id        bigint NOT NULL,
  round            int NOT NULL,
  attempt          int NOT NULL,
  attempted_at     timestamptz NOT NULL,
  duration_ms      int NOT NULL,
  status_code      int NULL,
  error            text NULL,
  response_excerpt text NULL
);

CREATE INDEX webhook_attempts_outbox_idx ON webhook_attempts (outbox_id, id);
