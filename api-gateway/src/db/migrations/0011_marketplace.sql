-- Marketplace keys and their end users (issue 14 item 6; ADR 0015).
-- Statements: src/db/api-keys.ts.
--   direct:      a key a client uses itself (every key made before this).
--   marketplace: a provider account's key, used by an API marketplace on
--                behalf of its end users, each named by a request header.
--   end_user:    one end user of one marketplace key, created on first
--                sight: its own principal (jobs, usage, saved destinations
--                and settings are keyed by its id) with no usable key. Its
--                key_hash is 'end-user:' and a UUID, which no sha256 hex
--                equals, so no key text ever authenticates as it.
-- An end user has no organization of its own: its account's organization
-- (the parent's) sets its rate budget and admission group, but the
-- organization's saved destinations are not its own to use.
ALTER TABLE api_keys
  ADD COLUMN kind text NOT NULL DEFAULT 'direct' CHECK (kind IN ('direct', 'marketplace', 'end_user')),
  ADD COLUMN parent_id uuid NULL REFERENCES api_keys (id),
  -- The end user's id as the marketplace sends it (1-256 printable ASCII
  -- characters); never logged, never answered.
  ADD COLUMN marketplace_user text NULL,
  ADD CONSTRAINT api_keys_end_user_check CHECK (
    (kind = 'end_user') = (parent_id IS NOT NULL)
    AND (kind = 'end_user') = (marketplace_user IS NOT NULL)
    AND (kind <> 'end_user' OR organization_id IS NULL)
  ),
  -- Also the index of the end-user lookup (src/marketplace.ts, cache miss).
  ADD CONSTRAINT api_keys_parent_user_key UNIQUE (parent_id, marketplace_user);
