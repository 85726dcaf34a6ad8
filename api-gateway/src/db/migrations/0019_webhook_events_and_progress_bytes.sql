-- Issue 38 item 6 (docs/adr/0029): what a job's webhook gets, and what a
-- job shows of its download and of its failure's cause.
-- batches.webhook_events: the event types the request's webhook_events
-- named, for the batch's own batch_completed; NULL (no filter) sends every
-- type. A job's (an episode's too) is its options' webhookEvents.
-- lib/src/db/outbox.ts queues only the types they name.
ALTER TABLE batches ADD COLUMN webhook_events text[] NULL;
-- The runner's download figures (status.download), NULL while unknown;
-- speed and time left only while the source is read.
ALTER TABLE jobs ADD COLUMN downloaded_bytes bigint NULL;
ALTER TABLE jobs ADD COLUMN total_bytes bigint NULL;
ALTER TABLE jobs ADD COLUMN speed_bps bigint NULL;
ALTER TABLE jobs ADD COLUMN eta_seconds integer NULL;
-- A failed or warned job's cleaned cause line (status.errorDetail).
ALTER TABLE jobs ADD COLUMN error_detail text NULL;
