// The storage configuration endpoints: POST/GET/DELETE /user/<provider> for
// s3, blob, gcs, oss and drive, and the deprecated POST/DELETE /user/bucket.
// Saving runs the spec's verification (fields, client, live upload and
// delete of verify_credentials.txt) before anything is stored; credentials
// go to the vault (a Kubernetes Secret, source `keyvault`) or, with the
// vault disabled and for /user/bucket, sealed into Postgres (`legacy`).
// Nothing here ever answers or logs a credential.
import { Router, json, type NextFunction, type Request, type RequestHandler, type Response } from 'express';
import type { Logger } from '@mediajobs/lib/logger';
import { STORAGE_PROVIDERS, type StorageProviderName } from '@mediajobs/lib/mediajob/types';
import type { SecretBox } from '@mediajobs/lib/secret-box';
import { DRIVE_REASON_TEXT, parseDestination } from '@mediajobs/lib/storage/index';
import { StorageError } from '@mediajobs/lib/storage/types';
import type pg from 'pg';
import type { Principal } from '../auth.js';
import { FieldError, PROVIDER_FIELDS, destinationDocument, publicConfig, type SavedVia } from '../destinations/fields.js';
import { isForbiddenEndpoint } from '../destinations/job-destination.js';
import { DestinationCheckError, probeDestination, verifyBucketListing, type ProviderSettings } from '../destinations/probe.js';
import { deleteDestinations, findDestinations, isOrgAdmin, saveDestination, type SavedDestination } from '../destinations/store.js';
import { VaultUnavailableError, type DestinationVault, type Owner } from '../destinations/vault.js';
import { sendError } from '../http-errors.js';

export interface UserStorageDeps {
  pool: pg.Pool;
  logger: Logger;
  secretBox: SecretBox;
  /** The keyvault source; absent means the vault is disabled and destinations are saved `legacy`. */
  vault?: DestinationVault;
  /** Budget of one live verification (probe or listing). */
  probeTimeoutMs: number;
  providerSettings?: ProviderSettings;
  /** x-api-key authentication for these routes. */
  auth: RequestHandler;
}

const BUCKET_FIELDS = ['endpoint', 'bucket', 'region', 'access_key', 'secret_key'] as const;

/** A 4xx/503 decided while handling; carried to the route's one error exit. */
class Refusal extends Error {
  constructor(readonly status: number, message: string) {
    super(message);
  }
}

const unavailable = (provider: StorageProviderName) =>
  new Refusal(503, `${PROVIDER_FIELDS[provider].label} storage configuration is temporarily unavailable`);

function principal(res: Response): Principal {
  return res.locals.principal!;
}

function requireJson(req: Request, res: Response, next: NextFunction): void {
  if (req.is('application/json')) next();
  else sendError(res, 415, 'Content-Type must be application/json');
}

function requireObject(req: Request): Record<string, unknown> {
  const b: unknown = req.body;
  if (typeof b !== 'object' || b === null || Array.isArray(b)) throw new Refusal(400, 'Request body must be a JSON object');
  return b as Record<string, unknown>;
}

/**
 * Whose destination a request manages: the key's own, or with
 * `?owner=organization` its organization's, which only an organization
 * admin key may change or read.
 */
async function ownerOf(req: Request, res: Response, pool: pg.Pool): Promise<Owner> {
  const p = principal(res);
  const q = req.query.owner;
  if (q === undefined || q === 'key') return { kind: 'api_key', id: p.apiKeyId };
  if (q !== 'organization') throw new Refusal(400, "Invalid query parameter 'owner': must be 'key' or 'organization'");
  if (!p.organizationId) throw new Refusal(400, 'This API key belongs to no organization');
  if (!(await isOrgAdmin(pool, p.apiKeyId))) {
    throw new Refusal(403, "Only an organization admin key can manage the organization's storage destinations");
  }
  return { kind: 'organization', id: p.organizationId };
}

/**
 * The spec's messages for a configuration that fails its checks. GCS has
 * its own wording for service account problems, Drive for every problem
 * before the probe; everything else is `Credential validation failed`.
 */
function credentialMessage(provider: StorageProviderName, err: FieldError | StorageError | DestinationCheckError): string {
  if (provider === 'drive' && !(err instanceof DestinationCheckError && err.stage === 'probe')) {
    return err instanceof FieldError && err.serviceAccountMessage ? 'Invalid configuration: invalid service account JSON' : `Invalid configuration: ${err.reason}`;
  }
  if (err instanceof FieldError && err.serviceAccountMessage) return err.serviceAccountMessage;
  // Drive's reasons have the spec's wording (`insufficient permissions on folder`); the
  // other providers' reasons are the backend's own codes (`AuthenticationFailed`, `NoSuchBucket`).
  const reason = provider === 'drive' ? DRIVE_REASON_TEXT[err.reason] ?? err.reason : err.reason;
  return `Credential validation failed: ${reason}`;
}

/** Steps 1 and 2 of the spec's verification: fields and format, then lib's shape check. Throws Refusal. */
function checkedDocument(provider: StorageProviderName, body: Record<string, unknown>, message: (e: FieldError | StorageError) => string) {
  try {
    const document = destinationDocument(provider, body);
    if (isForbiddenEndpoint(document.endpoint)) throw new FieldError('invalid_endpoint');
    parseDestination(document);
    return document;
  } catch (err) {
    if (err instanceof FieldError || err instanceof StorageError) throw new Refusal(400, message(err));
    throw err;
  }
}

function parseDefault(body: Record<string, unknown>): boolean | undefined {
  const v = body.default;
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'boolean') throw new Refusal(400, "Invalid field 'default': must be a boolean (true or false)");
  return v;
}

export function userStorageRouter(deps: UserStorageDeps): Router {
  const router = Router();
  const log = deps.logger;
  const body = [requireJson, json({ limit: 64 * 1024, strict: true })];

  /** Run a handler; Refusals become their status and message, anything else a logged 500. */
  const handle = (what: string, fn: (req: Request, res: Response) => Promise<void>) => async (req: Request, res: Response) => {
    try {
      await fn(req, res);
    } catch (err) {
      if (err instanceof Refusal) return sendError(res, err.status, err.message);
      // Only the error's name and code: a driver or SDK message may quote the statement's values.
      log.error({ err: { name: (err as Error).name, code: (err as { code?: unknown }).code }, what }, 'storage configuration request failed');
      sendError(res, 500, 'Internal server error');
    }
  };

  /** Store a verified destination in the vault (or sealed, with the vault disabled). Throws Refusal(503). */
  const store = async (owner: Owner, provider: StorageProviderName, document: Record<string, unknown>, isDefault: boolean | undefined,
    savedVia: SavedVia, forceLegacy = false): Promise<SavedDestination> => {
    const config = publicConfig(document, savedVia);
    try {
      if (deps.vault && !forceLegacy) {
        const secretName = await deps.vault.put(owner, provider, document);
        return await saveDestination(deps.pool, { owner, provider, source: 'keyvault', config, secretName, isDefault });
      }
      const credentialsEnc = deps.secretBox.seal(JSON.stringify(document));
      return await saveDestination(deps.pool, { owner, provider, source: 'legacy', config, credentialsEnc, isDefault });
    } catch (err) {
      log.warn({ provider, owner: owner.kind, err: err instanceof VaultUnavailableError ? err.message : (err as Error).name }, 'saving a storage destination failed');
      throw unavailable(provider);
    }
  };

  for (const provider of STORAGE_PROVIDERS) {
    const f = PROVIDER_FIELDS[provider];
    const path = `/user/${provider}`;

    router.post(path, deps.auth, ...body, handle(`POST ${path}`, async (req, res) => {
      const owner = await ownerOf(req, res, deps.pool);
      const b = requireObject(req);
      const isDefault = parseDefault(b);
      const document = checkedDocument(provider, b, (e) => credentialMessage(provider, e));
      try {
        // Steps 2-4: build the client, upload and delete verify_credentials.txt.
        await probeDestination(document, deps.probeTimeoutMs, deps.providerSettings);
      } catch (err) {
        if (err instanceof DestinationCheckError) throw new Refusal(400, credentialMessage(provider, err));
        throw err;
      }
      const saved = await store(owner, provider, document, isDefault, 'user_provider');
      log.info({ provider, owner: owner.kind, source: saved.source }, 'storage destination saved');
      const prefix = typeof document.folder_prefix === 'string' ? document.folder_prefix : undefined;
      if (provider === 'drive') {
        res.json({ message: 'Drive storage configured successfully', provider, folder_id: document.folder_id ?? '', folder_prefix: prefix ?? null });
        return;
      }
      res.json({
        message: `${f.label} storage configured successfully`, provider, container_or_bucket: document[f.container],
        ...(prefix !== undefined && { folder_prefix: prefix }),
      });
    }));

    router.get(path, deps.auth, handle(`GET ${path}`, async (req, res) => {
      const owner = await ownerOf(req, res, deps.pool);
      let rows: SavedDestination[];
      try {
        rows = await findDestinations(deps.pool, owner, provider);
      } catch {
        throw unavailable(provider);
      }
      // keyvault first: when both exist it is the one jobs use, so the one shown.
      const d = rows[0];
      if (!d) {
        res.json({ configured: false });
        return;
      }
      res.json(describeDestination(d));
    }));

    router.delete(path, deps.auth, handle(`DELETE ${path}`, async (req, res) => {
      const owner = await ownerOf(req, res, deps.pool);
      let removed: SavedDestination[];
      try {
        // The Secret first: if it cannot be deleted, the configuration stays whole and the client retries.
        await deps.vault?.remove(owner, provider);
        removed = await deleteDestinations(deps.pool, owner, provider);
      } catch (err) {
        log.warn({ provider, owner: owner.kind, err: (err as Error).name }, 'removing a storage destination failed');
        throw unavailable(provider);
      }
      log.info({ provider, owner: owner.kind, removed: removed.length }, 'storage destination removed');
      res.json({ message: `${f.label} storage configuration removed`, provider, removed: removed.length > 0 });
    }));
  }

  // Deprecated: an S3 bucket on the key record (`legacy`), verified by listing.
  router.post('/user/bucket', deps.auth, ...body, handle('POST /user/bucket', async (req, res) => {
    const owner = await ownerOf(req, res, deps.pool);
    const b = requireObject(req);
    const only: Record<string, unknown> = {};
    for (const k of BUCKET_FIELDS) only[k] = b[k];
    const document = checkedDocument('s3', only, (e) => `Verification failed: ${e.reason}`);
    try {
      await verifyBucketListing(document, deps.probeTimeoutMs);
    } catch (err) {
      if (err instanceof DestinationCheckError) throw new Refusal(400, `Verification failed: ${err.reason}`);
      throw err;
    }
    await store(owner, 's3', document, undefined, 'user_bucket', true);
    log.info({ provider: 's3', owner: owner.kind, source: 'legacy' }, 'custom bucket saved');
    res.json({ message: 'Custom bucket configured successfully' });
  }));

  router.delete('/user/bucket', deps.auth, handle('DELETE /user/bucket', async (req, res) => {
    const owner = await ownerOf(req, res, deps.pool);
    try {
      await deleteDestinations(deps.pool, owner, 's3', 'legacy');
    } catch {
      throw unavailable('s3');
    }
    res.json({ message: 'Custom bucket removed; files already in it are untouched' });
  }));

  return router;
}

/** GET /user/<provider>: the spec's fields for the source that wins, never a credential. */
function describeDestination(d: SavedDestination): Record<string, unknown> {
  const f = PROVIDER_FIELDS[d.provider];
  const c = d.config;
  const out: Record<string, unknown> = { configured: true, provider: d.provider, container_or_bucket: c[f.container] ?? '' };
  if (typeof c.folder_prefix === 'string' && c.folder_prefix) out.folder_prefix = c.folder_prefix;
  // base_folder belongs to configurations saved through POST /user/<provider>; /user/bucket has none.
  if (c.saved_via === 'user_provider') out.base_folder = typeof c.base_folder === 'string' && c.base_folder ? c.base_folder : 'videos';
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
