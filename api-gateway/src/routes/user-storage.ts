// The storage configuration endpoints: POST/GET/DELETE /user/<provider> for
// s3, blob, gcs, oss and drive, and the deprecated POST/DELETE /user/bucket.
// Saving runs the spec's verification (fields, client, live upload and
// delete of verify_credentials.txt) before anything is stored; storing
// (destinations/save.ts) puts the credentials in the vault (a Kubernetes
// Secret, source `keyvault`) or, with the vault disabled and for
// /user/bucket, seals them into Postgres (`legacy`).
// The checks are in user-storage-checks.ts; every refusal is an HttpError
// answered by the error middleware. Nothing here ever answers or logs a
// credential.
import { Router, type RequestHandler } from 'express';
import { errFields, type Logger } from '@mediajobs/lib/logger';
import { STORAGE_PROVIDERS, type StorageProviderName } from '@mediajobs/lib/mediajob/types';
import type { OutboundPolicy } from '@mediajobs/lib/outbound';
import type { SecretBox } from '@mediajobs/lib/secret-box';
import type pg from 'pg';
import { PROVIDER_FIELDS } from '../destinations/fields.js';
import type { ProviderSettings } from '../destinations/probe.js';
import { storeDestination, unavailable } from '../destinations/save.js';
import { deleteDestinations, findDestinations, type SavedDestination } from '../destinations/store.js';
import type { DestinationVault } from '../destinations/vault.js';
import { acceptJson, bodyObject } from '../json-body.js';
import { ownerOf, parseDefault, verifiedBucket, verifiedDestination } from './user-storage-checks.js';

/** Authentication is app.ts's (every /user path needs a key); these are the handlers behind it. */
export interface UserStorageDeps {
  pool: pg.Pool;
  logger: Logger;
  secretBox: SecretBox;
  /** The keyvault source; absent means the vault is disabled and destinations are saved `legacy`. */
  vault?: DestinationVault;
  /** Budget of one live verification (probe or listing): its time, and the bytes it may read. */
  probeTimeoutMs: number;
  probeMaxBytes: number;
  providerSettings?: ProviderSettings;
  /** Which storage endpoints may be contacted (OUTBOUND_ALLOWED_CIDRS). */
  outbound: OutboundPolicy;
}

const MAX_BODY_BYTES = 64 * 1024;

export function userStorageRouter(deps: UserStorageDeps): Router {
  const router = Router();
  const body = acceptJson(MAX_BODY_BYTES);
  for (const provider of STORAGE_PROVIDERS) {
    const path = `/user/${provider}`;
    router.post(path, ...body, saveProvider(deps, provider));
    router.get(path, showProvider(deps, provider));
    router.delete(path, removeProvider(deps, provider));
  }
  // Deprecated: an S3 bucket on the key record (`legacy`), verified by listing.
  router.post('/user/bucket', ...body, saveBucket(deps));
  router.delete('/user/bucket', removeBucket(deps));
  return router;
}

/** POST /user/<provider>: verify (fields, shape, live probe), then store; nothing is stored unless all passed. */
function saveProvider(deps: UserStorageDeps, provider: StorageProviderName): RequestHandler {
  const label = PROVIDER_FIELDS[provider].label;
  const container = PROVIDER_FIELDS[provider].container;
  return async (req, res) => {
    const owner = await ownerOf(req, res, deps.pool);
    const b = bodyObject(req);
    const isDefault = parseDefault(b);
    const document = await verifiedDestination(provider, b, deps.outbound, { timeoutMs: deps.probeTimeoutMs, maxBytes: deps.probeMaxBytes }, deps.providerSettings);
    const saved = await storeDestination(deps, { owner, provider, document, isDefault, savedVia: 'user_provider' });
    deps.logger.info({ provider, owner: owner.kind, source: saved.source }, 'storage destination saved');
    const prefix = typeof document.folder_prefix === 'string' ? document.folder_prefix : undefined;
    if (provider === 'drive') {
      res.json({ message: 'Drive storage configured successfully', provider, folder_id: document.folder_id ?? '', folder_prefix: prefix ?? null });
      return;
    }
    res.json({
      message: `${label} storage configured successfully`, provider, container_or_bucket: document[container],
      ...(prefix !== undefined && { folder_prefix: prefix }),
    });
  };
}

/** GET /user/<provider>: the destination jobs would use, never a credential. */
function showProvider(deps: UserStorageDeps, provider: StorageProviderName): RequestHandler {
  return async (req, res) => {
    const owner = await ownerOf(req, res, deps.pool);
    let rows: SavedDestination[];
    try {
      rows = await findDestinations(deps.pool, owner, provider);
    } catch (err) {
      deps.logger.warn({ provider, owner: owner.kind, err: errFields(err) }, 'reading a storage destination failed');
      throw unavailable(provider);
    }
    // keyvault first: when both exist it is the one jobs use, so the one shown.
    const d = rows[0];
    res.json(d ? describeDestination(d) : { configured: false });
  };
}

/** DELETE /user/<provider>: both sources, the Secret first; deleting nothing is not an error. */
function removeProvider(deps: UserStorageDeps, provider: StorageProviderName): RequestHandler {
  const label = PROVIDER_FIELDS[provider].label;
  return async (req, res) => {
    const owner = await ownerOf(req, res, deps.pool);
    let removed: SavedDestination[];
    try {
      // The Secret first: if it cannot be deleted, the configuration stays whole and the client retries.
      await deps.vault?.remove(owner, provider);
      removed = await deleteDestinations(deps.pool, owner, provider);
    } catch (err) {
      deps.logger.warn({ provider, owner: owner.kind, err: errFields(err) }, 'removing a storage destination failed');
      throw unavailable(provider);
    }
    deps.logger.info({ provider, owner: owner.kind, removed: removed.length }, 'storage destination removed');
    res.json({ message: `${label} storage configuration removed`, provider, removed: removed.length > 0 });
  };
}

/** POST /user/bucket (deprecated): the five S3 fields, verified by listing, always stored sealed (`legacy`). */
function saveBucket(deps: UserStorageDeps): RequestHandler {
  return async (req, res) => {
    const owner = await ownerOf(req, res, deps.pool);
    const document = await verifiedBucket(bodyObject(req), deps.outbound, { timeoutMs: deps.probeTimeoutMs, maxBytes: deps.probeMaxBytes });
    await storeDestination(deps, { owner, provider: 's3', document, isDefault: undefined, savedVia: 'user_bucket', forceLegacy: true });
    deps.logger.info({ provider: 's3', owner: owner.kind, source: 'legacy' }, 'custom bucket saved');
    res.json({ message: 'Custom bucket configured successfully' });
  };
}

/** DELETE /user/bucket (deprecated): only the `legacy` s3 configuration, what POST /user/bucket made. */
function removeBucket(deps: UserStorageDeps): RequestHandler {
  return async (req, res) => {
    const owner = await ownerOf(req, res, deps.pool);
    try {
      await deleteDestinations(deps.pool, owner, 's3', 'legacy');
    } catch (err) {
      deps.logger.warn({ provider: 's3', owner: owner.kind, err: errFields(err) }, 'removing a custom bucket failed');
      throw unavailable('s3');
    }
    res.json({ message: 'Custom bucket removed; files already in it are untouched' });
  };
}

/** GET /user/<provider>: the spec's fields for the source that wins, never a credential. */
function describeDestination(d: SavedDestination): Record<string, unknown> {
  const f = PROVIDER_FIELDS[d.provider];
  const c = d.config;
  const out: Record<string, unknown> = { configured: true, provider: d.provider, container_or_bucket: c[f.container] ?? '' };
  if (typeof c.folder_prefix === 'string' && c.folder_prefix) out.folder_prefix = c.folder_prefix;
  // base_folder belongs to configurations saved through POST /user/<provider> or a marketplace job's storage; /user/bucket has none.
  if (c.saved_via === 'user_provider' || c.saved_via === 'marketplace_job') out.base_folder = typeof c.base_folder === 'string' && c.base_folder ? c.base_folder : 'videos';
  if (d.source === 'legacy') {
    if (typeof c.endpoint === 'string') out.endpoint = c.endpoint;
    if (typeof c.region === 'string') out.region = c.region;
    if (typeof c.access_key_masked === 'string') out.access_key_masked = c.access_key_masked;
  } else {
    out.last_modified = Math.floor(d.updatedAt.getTime() / 1000);
  }
  out.source = d.source;
  return out;
}
