// Saving a verified destination for one owner and provider: the
// credentials to the vault (a Kubernetes Secret, source `keyvault`) or, with
// the vault disabled or when asked, sealed into Postgres (`legacy`), then
// its row (store.ts). Verifying is the caller's: the configuration endpoints
// (routes/user-storage.ts) and a marketplace end user's inline storage on
// POST /jobs (routes/jobs.ts) each check before they save.
import { errFields, type Logger } from '@mediajobs/lib/logger';
import type { StorageProviderName } from '@mediajobs/lib/mediajob/types';
import type { SecretBox } from '@mediajobs/lib/secret-box';
import type pg from 'pg';
import { HttpError } from '../http-errors.js';
import { PROVIDER_FIELDS, publicConfig, type SavedVia } from './fields.js';
import { saveDestination, type SavedDestination } from './store.js';
import type { DestinationVault, Owner } from './vault.js';

export interface SaveDeps {
  pool: pg.Pool;
  logger: Logger;
  secretBox: SecretBox;
  /** The keyvault source; absent means the vault is disabled and destinations are saved `legacy`. */
  vault?: DestinationVault;
}

export interface VerifiedDestination {
  owner: Owner;
  provider: StorageProviderName;
  /** The destination document, credentials included. */
  document: Record<string, unknown>;
  /** true: the owner's default (rule 9); false: not; undefined: as it was. */
  isDefault: boolean | undefined;
  savedVia: SavedVia;
  /** Seal into Postgres even with the vault enabled (/user/bucket). */
  forceLegacy?: boolean;
}

/** The 503 when the secret store or Postgres cannot be used, naming the provider. */
export const unavailable = (provider: StorageProviderName) =>
  new HttpError(503, `${PROVIDER_FIELDS[provider].label} storage configuration is temporarily unavailable`);

/** Store a verified destination; 503 naming the provider when that fails (logged without a credential). */
export async function storeDestination(deps: SaveDeps, v: VerifiedDestination): Promise<SavedDestination> {
  const { owner, provider, document, isDefault } = v;
  const config = publicConfig(document, v.savedVia);
  try {
    if (deps.vault && !v.forceLegacy) {
      const secretName = await deps.vault.put(owner, provider, document);
      return await saveDestination(deps.pool, { owner, provider, source: 'keyvault', config, secretName, isDefault });
    }
    const credentials = deps.secretBox.sealable(JSON.stringify(document));
    return await saveDestination(deps.pool, { owner, provider, source: 'legacy', config, credentials, isDefault });
  } catch (err) {
    deps.logger.warn({ provider, owner: owner.kind, err: errFields(err) }, 'saving a storage destination failed');
    throw unavailable(provider);
  }
}
