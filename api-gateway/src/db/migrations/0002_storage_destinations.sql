-- Saved storage destinations (spec: "Saved storage destination"), inline
-- credentials of jobs, and organization admin keys.

-- A key allowed to manage its organization's destinations (?owner=organization).
ALTER TABLE api_keys ADD COLUMN org_admin boolean NOT NULL DEFAULT false;

-- One row per owner (an API key or an organization), provider and source.
-- Both sources may exist for one owner and provider; the keyvault one wins.
--   keyvault: the credentials are in the Kubernetes Secret `secret_name`
--             (in the service's namespace); nothing secret is in this row.
--   legacy:   the credentials are in `credentials_enc`, sealed with the
--             SecretBox (the ciphertext names its key id, so keys rotate).
-- `config` holds only what the API may show: bucket or container, endpoint,
-- region, folder_prefix, base_folder, a masked access key.
CREATE TABLE storage_destinations (
  id              uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  owner_kind      text NOT NULL CHECK (owner_kind IN ('api_key', 'organization')),
  owner_id        uuid NOT NULL,
  provider        text NOT NULL CHECK (provider IN ('s3', 'blob', 'gcs', 'oss', 'drive')),
  source          text NOT NULL CHECK (source IN ('keyvault', 'legacy')),
  config          jsonb NOT NULL,
  secret_name     text NULL,
  credentials_enc text NULL,
  is_default      boolean NOT NULL DEFAULT false,
  created_at      timestamptz NOT NULL DEFAULT now(),
  updated_at      timestamptz NOT NULL DEFAULT now(),
  CHECK ((source = 'keyvault') = (secret_name IS NOT NULL)),
  CHECK ((source = 'legacy') = (credentials_enc IS NOT NULL)),
  -- Also the index of rule-9 resolution: every lookup names the owner(s).
  UNIQUE (owner_kind, owner_id, provider, source)
);

-- The destination a job delivers to, exactly as its MediaJob says
-- ({type, provider, secretName}, never a credential), so the operator's
-- sweeper re-creates a stranded job with the same destination.
ALTER TABLE jobs ADD COLUMN destination jsonb NULL;
-- The saved destination row a `saved` job was resolved to (legacy source:
-- where the operator finds the sealed credentials). No foreign key: deleting
-- a destination must leave its pending jobs failing with storage_unreachable,
-- not blocked or cascaded.
ALTER TABLE jobs ADD COLUMN destination_id uuid NULL;
-- Inline credentials, sealed; cleared by the operator when the job ends.
ALTER TABLE jobs ADD COLUMN storage_enc text NULL;
-- Download URLs of a job delivered to the user's own storage, signed by the
-- operator when the job completed and sealed (they grant read access):
-- inline credentials are gone once the job ends, so they cannot be signed later.
ALTER TABLE jobs ADD COLUMN result_urls_enc text NULL;
