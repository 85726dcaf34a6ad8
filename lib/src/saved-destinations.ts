// The contract between the gateway, which writes saved destinations into
// Kubernetes Secrets (the spec's `keyvault` source), and the operator, which
// reads them when it prepares a job's credentials. Both sides import these
// names and the namespace setting so they cannot drift apart.
import { z } from 'zod';
import type { StorageProviderName } from './mediajob/types.js';

/**
 * DESTINATIONS_NAMESPACE: where the saved-destination Secrets live. A
 * namespace of their own lets the gateway hold Secret rights there only,
 * never over the runners' credentials next to the MediaJobs (docs/
 * production.md, "Who can read which Secret"). Unset: MEDIAJOBS_NAMESPACE.
 */
export const destinationsNamespaceSchema = z.object({
  DESTINATIONS_NAMESPACE: z.string().trim().regex(/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/, 'must be a namespace name').optional(),
});

/** The namespace of the saved-destination Secrets. */
export function destinationsNamespace(cfg: { DESTINATIONS_NAMESPACE?: string | undefined; MEDIAJOBS_NAMESPACE: string }): string {
  return cfg.DESTINATIONS_NAMESPACE || cfg.MEDIAJOBS_NAMESPACE;
}

/** Who a saved destination belongs to: one API key, or every key of an organization. */
export type OwnerKind = 'api_key' | 'organization';

export const LABEL_OWNER_KIND = 'mediajobs.io/owner-kind';
export const LABEL_OWNER_ID = 'mediajobs.io/owner-id';
export const LABEL_PROVIDER = 'mediajobs.io/provider';
export const LABEL_COMPONENT = 'app.kubernetes.io/component';
export const COMPONENT_DESTINATION = 'storage-destination';

/** How OwnerKind reads in labels (kubectl get secrets -l mediajobs.io/owner-kind=api-key). */
export const OWNER_KIND_LABEL: Readonly<Record<OwnerKind, string>> = { api_key: 'api-key', organization: 'organization' };

/** The Secret's one key: the destination document the runner's destination.json is made from. */
export const DESTINATION_DATA_KEY = 'destination.json';

/**
 * `mj-dest-key-<uuid>-<provider>` / `mj-dest-org-<uuid>-<provider>`: one
 * Secret per owner and provider, so saving again replaces it in place and a
 * MediaJob's `secretName` keeps pointing at the owner's current credentials.
 */
export function destinationSecretName(kind: OwnerKind, ownerId: string, provider: StorageProviderName): string {
  return `mj-dest-${kind === 'api_key' ? 'key' : 'org'}-${ownerId.toLowerCase()}-${provider}`;
}
