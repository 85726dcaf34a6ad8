// The spec's `keyvault` source: saved credentials in Kubernetes Secrets in
// DESTINATIONS_NAMESPACE (default the service's), one per owner (key or organization) and provider,
// labelled so `kubectl get secrets -l mediajobs.io/owner-id=<id>` finds them.
// The gateway only writes and deletes them; the operator reads them when it
// prepares a job (lib/src/saved-destinations.ts is the shared contract).
import * as k8s from '@kubernetes/client-node';
import { apiStatus, isAlreadyExists, isNotFound, keepAliveTransport, loadKubeConfig, makeKubeClient } from '@mediajobs/lib/kube-client';
import { errFields } from '@mediajobs/lib/logger';
import type { StorageProviderName } from '@mediajobs/lib/mediajob/types';
import {
  COMPONENT_DESTINATION, DESTINATION_DATA_KEY, LABEL_COMPONENT, LABEL_OWNER_ID, LABEL_OWNER_KIND, LABEL_PROVIDER,
  OWNER_KIND_LABEL, destinationSecretName, type OwnerKind,
} from '@mediajobs/lib/saved-destinations';

export interface Owner {
  kind: OwnerKind;
  id: string;
}

/**
 * The secret store could not be used; the endpoints answer 503 naming the
 * provider. Carries what errFields shows of the cause (the API server's
 * status and Status reason, or the socket's code), so a caller's
 * `errFields(err)` says why, and nothing of an API server's body, which may
 * echo the Secret it refused.
 */
export class VaultUnavailableError extends Error {
  readonly status: number | undefined;
  readonly code: string | undefined;
  readonly reason: string | undefined;

  constructor(cause: unknown) {
    const status = apiStatus(cause);
    super(`secret store unavailable${status ? ` (HTTP ${status})` : ''}`);
    this.name = 'VaultUnavailableError';
    const fields = errFields(cause);
    this.status = status;
    this.code = typeof fields.code === 'string' ? fields.code : undefined;
    this.reason = typeof fields.reason === 'string' ? fields.reason : undefined;
  }
}

export interface DestinationVault {
  /** Store the destination document; returns the Secret's name. Throws VaultUnavailableError. */
  put(owner: Owner, provider: StorageProviderName, document: Record<string, unknown>): Promise<string>;
  /** Delete it; deleting what is not there succeeds. Throws VaultUnavailableError. */
  remove(owner: Owner, provider: StorageProviderName): Promise<void>;
  /** The document in Secret `name`, or undefined when it is gone. Throws VaultUnavailableError. */
  read(name: string): Promise<Record<string, unknown> | undefined>;
}

export class KubeSecretVault implements DestinationVault {
  private readonly core: k8s.CoreV1Api;

  constructor(kc: k8s.KubeConfig, private readonly namespace: string, timeoutMs = 10_000) {
    this.core = makeKubeClient(kc, k8s.CoreV1Api, keepAliveTransport({ maxSockets: 8, timeoutMs }));
  }

  static fromKubeconfig(path: string | undefined, namespace: string, timeoutMs?: number): KubeSecretVault {
    return new KubeSecretVault(loadKubeConfig(path), namespace, timeoutMs);
  }

  async put(owner: Owner, provider: StorageProviderName, document: Record<string, unknown>): Promise<string> {
    const name = destinationSecretName(owner.kind, owner.id, provider);
    const body: k8s.V1Secret = {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: {
        name,
        namespace: this.namespace,
        labels: {
          'app.kubernetes.io/managed-by': 'mediajobs-api-gateway',
          [LABEL_COMPONENT]: COMPONENT_DESTINATION,
          [LABEL_OWNER_KIND]: OWNER_KIND_LABEL[owner.kind],
          [LABEL_OWNER_ID]: owner.id,
          [LABEL_PROVIDER]: provider,
        },
      },
      type: 'Opaque',
      data: { [DESTINATION_DATA_KEY]: Buffer.from(JSON.stringify(document)).toString('base64') },
    };
    try {
      await this.core.createNamespacedSecret({ namespace: this.namespace, body });
      return name;
    } catch (err) {
      if (!isAlreadyExists(err)) throw new VaultUnavailableError(err);
    }
    // Saved before: replace it whole (an unconditional update; the last save wins).
    try {
      await this.core.replaceNamespacedSecret({ name, namespace: this.namespace, body });
      return name;
    } catch (err) {
      throw new VaultUnavailableError(err);
    }
  }

  async read(name: string): Promise<Record<string, unknown> | undefined> {
    let secret: k8s.V1Secret;
    try {
      secret = await this.core.readNamespacedSecret({ name, namespace: this.namespace });
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw new VaultUnavailableError(err);
    }
    const data = secret.data?.[DESTINATION_DATA_KEY];
    if (!data) return undefined;
    try {
      const doc = JSON.parse(Buffer.from(data, 'base64').toString('utf8')) as unknown;
      return doc && typeof doc === 'object' && !Array.isArray(doc) ? (doc as Record<string, unknown>) : undefined;
    } catch {
      return undefined;
    }
  }

  async remove(owner: Owner, provider: StorageProviderName): Promise<void> {
    try {
      await this.core.deleteNamespacedSecret({ name: destinationSecretName(owner.kind, owner.id, provider), namespace: this.namespace });
    } catch (err) {
      if (!isNotFound(err)) throw new VaultUnavailableError(err);
    }
  }
}
