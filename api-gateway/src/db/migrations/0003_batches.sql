-- Batches (spec: Batch, Batch statuses): a podcast show or a genuine
-- playlist, one row here (named like its MediaBatch) and one ordinary jobs
-- row per episode. Statements: lib/src/db/batches.ts (this table) and
-- lib/src/db/jobs.ts (the episode rows).

-- The counts are kept, never computed by scanning jobs: an episode's first
-- terminal status adds one in the transaction that records it (syncStatus),
-- so GET /batch/{id} reads one row. failed_episodes counts failed and
-- skipped episodes, as the spec's Batch and batch_completed have it;
-- skipped_episodes is the skipped part of it. No CHECK ties the sum to the
-- total: a violated check would roll back the episode's status mirror for
-- ever, where an overcount is only a wrong figure.
CREATE TABLE batches (
  id                 uuid PRIMARY KEY,
  -- No foreign key to api_keys, for the reason jobs has none (0001).
  api_key_id         uuid NOT NULL,
  kind               text NOT NULL CHECK (kind IN ('show', 'playlist')),
  show_url           text NOT NULL,
  folder             text NULL,
  status             text NOT NULL CHECK (status IN ('paused', 'processing', 'completed', 'finished')),
  total_episodes     int NOT NULL CHECK (total_episodes > 0),
  completed_episodes int NOT NULL DEFAULT 0 CHECK (completed_episodes >= 0),
  failed_episodes    int NOT NULL DEFAULT 0 CHECK (failed_episodes >= 0),
  skipped_episodes   int NOT NULL DEFAULT 0 CHECK (skipped_episodes >= 0),
  webhook_url_enc    text NULL,
  -- As jobs.destination: {type, provider, secretName}, never a credential.
  destination        jsonb NULL,
  cr_namespace       text NULL,
  cr_name            text NULL,
  created_at         timestamptz NOT NULL DEFAULT now(),
  updated_at         timestamptz NOT NULL DEFAULT now(),
  finished_at        timestamptz NULL
);

-- Episode rows: which batch, and where in it (the feed's or playlist's order).
-- The foreign key costs the episode insert a KEY SHARE lock on a row the same
-- transaction has just written; the rollup's UPDATE of counts takes NO KEY
-- UPDATE, which that lock does not block.
ALTER TABLE jobs ADD COLUMN batch_id uuid NULL REFERENCES batches (id);
ALTER TABLE jobs ADD COLUMN batch_index int NULL;
-- What the feed or playlist said about the episode (title, description,
-- release date, artwork), for its MediaJob; the job's own title etc. columns
-- stay what the runner reports.
ALTER TABLE jobs ADD COLUMN episode jsonb NULL;
ALTER TABLE jobs ADD CONSTRAINT jobs_batch_index_check CHECK ((batch_id IS NULL) = (batch_index IS NULL) AND batch_index >= 0);

-- A batch's episode_jobs in order, read from the index alone (id included).
CREATE UNIQUE INDEX jobs_batch_idx ON jobs (batch_id, batch_index) INCLUDE (id) WHERE batch_id IS NOT NULL;
-- The batch controller's next episodes to create: only those without a
-- MediaJob are in it, so it shrinks to nothing as a batch is worked through.
CREATE INDEX jobs_batch_uncreated_idx ON jobs (batch_id, batch_index) WHERE batch_id IS NOT NULL AND cr_name IS NULL;

-- Batch events (batch_completed) have no job; batch_id orders them after
-- every event of the batch's episodes queued before them (the claim in
-- lib/src/db/outbox.ts), and episode events carry it too.
ALTER TABLE outbox ADD COLUMN batch_id uuid NULL;
CREATE INDEX outbox_batch_open_idx ON outbox (batch_id, id) WHERE batch_id IS NOT NULL AND delivered_at IS NULL AND failed_at IS NULL;
