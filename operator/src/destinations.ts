// A job's destination as the operator resolves it: the document that goes
// into the runner's per-job Secret (destination.json), download URLs for
// files delivered to the user's own storage, and removal of inline
// credentials when the job ends.
//
// The MediaJob names only {type, provider, secretName}; credentials come
// from the saved destination's Secret (keyvault), the sealed row of a legacy
// destination, or the job's sealed inline payload. When none can be found
// the job fails with reason storage_unreachable: it is never sent to another
// destination (spec: "Job failure reasons").
import type * as k8s from '@kubernetes/client-node';
import type pg from 'pg';
import { STORAGE_ENDPOINT_VARIABLES, storageEndpoints, type StorageEndpointsConfig } from '@mediajobs/lib/config';
import { forgetInlineCredentials, inlineCredentials, legacyDestination, saveResultUrls } from '@mediajobs/lib/db/jobs';
import { sealedAt } from '@mediajobs/lib/db/sealed-columns';
import { isNotFound } from '@mediajobs/lib/kube-client';
import { GROUP, jobIdOf, type MediaJob, type MediaJobResult, type Owned } from '@mediajobs/lib/mediajob/types';
import {
  destinationsNamespace, DESTINATION_DATA_KEY, LABEL_OWNER_ID, LABEL_OWNER_KIND, OWNER_KIND_LABEL,
} from '@mediajobs/lib/saved-destinations';
import type { SecretBox, SecretContext } from '@mediajobs/lib/secret-box';
import { createProvider, type CreateProviderOptions } from '@mediajobs/lib/storage/index';
import { DOWNLOAD_URL_TTL_SECONDS } from '@mediajobs/lib/storage/types';
import type { OperatorConfig } from './config.js';
import { credentialsSecretName } from './job-builder.js';

/** The runner's wording for the same outcome (runner-image/src/classify.ts MESSAGES.storage_unreachable). */
export const STORAGE_UNREACHABLE_MESSAGE = 'The storage destination is unreachable or rejected the credentials';

/** The destination cannot be resolved: the job fails with storage_unreachable (retrying cannot help). */
export class DestinationUnresolvable extends Error {
  constructor(readonly why: string) {
    super(`destination unresolvable: ${why}`);
    this.name = 'DestinationUnresolvable';
  }
}

export interface DownloadUrls {
  s3Url?: string;
  subtitleUrl?: string;
  thumbnailUrl?: string;
}

/** The operator settings JobDestinations reads. */
export type DestinationSettings = Pick<OperatorConfig, 'FILE_URL_SECRET' | 'PUBLIC_BASE_URL' | 'MEDIAJOBS_NAMESPACE' | 'DESTINATIONS_NAMESPACE'>
  & StorageEndpointsConfig;

export class JobDestinations {
  /** Where Drive download URLs point (the gateway's /drive-files route); without FILE_URL_SECRET Drive files get no URL. */
  private readonly driveDownload: { baseUrl: string; secret: string } | undefined;
  /** GCS and Drive API and token endpoints (lib/src/config.ts storageEndpointsSchema). */
  private readonly endpoints: Pick<CreateProviderOptions, 'gcs' | 'drive'>;
  private readonly endpointEnv: Record<string, string>;
  private readonly serviceNamespace: string;
  /** Where the gateway keeps saved destinations' Secrets (DESTINATIONS_NAMESPACE). */
  private readonly vaultNamespace: string;

  constructor(
    private readonly core: k8s.CoreV1Api,
    private readonly pool: pg.Pool,
    private readonly box: SecretBox,
    private readonly managed: (jobId: string, apiKeyId: string) => Record<string, unknown>,
    settings: DestinationSettings,
  ) {
    this.driveDownload = settings.FILE_URL_SECRET ? { baseUrl: settings.PUBLIC_BASE_URL, secret: settings.FILE_URL_SECRET } : undefined;
    this.endpoints = storageEndpoints(settings);
    this.serviceNamespace = settings.MEDIAJOBS_NAMESPACE;
    this.vaultNamespace = destinationsNamespace(settings);
    this.endpointEnv = {};
    for (const name of STORAGE_ENDPOINT_VARIABLES) {
      const value = settings[name];
      if (value) this.endpointEnv[name] = value;
    }
  }

  /**
   * Env for every runner pod: the endpoint settings the operator itself
   * uses, so the runner uploads to the same GCS/Drive service the operator
   * signs URLs for and the gateway probed. In the pod's env rather than in
   * destination.json: they are not secrets, and `kubectl describe` should
   * show where a runner sends a user's files.
   */
  runnerEnv(): Record<string, string> {
    return { ...this.endpointEnv };
  }

  /** True when the job delivers to managed storage (also kubectl manifests that say nothing). */
  static isManaged(mj: MediaJob): boolean {
    return (mj.spec.destination?.type ?? 'managed') === 'managed';
  }

  /**
   * The destination.json of the job's runner. Throws DestinationUnresolvable
   * when the credentials are gone or not the job owner's; other errors
   * (API server, Postgres) are transient and retried by the caller.
   */
  async document(mj: Owned<MediaJob>): Promise<Record<string, unknown>> {
    const dest = mj.spec.destination ?? { type: 'managed' };
    if (dest.type === 'managed') return this.managed(jobIdOf(mj), mj.spec.owner.apiKeyId);
    let doc: Record<string, unknown>;
    if (dest.secretName) doc = await this.fromSecret(mj, dest.secretName);
    else if (dest.type === 'saved') doc = await this.fromLegacyRow(mj);
    else doc = await this.fromInlinePayload(mj);
    if (dest.provider && doc.provider !== dest.provider) throw new DestinationUnresolvable('provider_mismatch');
    return doc;
  }

  /** A saved destination's Secret; one labelled as some owner's destination must be this job's key's or its organization's. */
  private async fromSecret(mj: Owned<MediaJob>, name: string): Promise<Record<string, unknown>> {
    let secret: k8s.V1Secret;
    try {
      secret = await this.core.readNamespacedSecret({ name, namespace: this.secretNamespace(mj) });
    } catch (err) {
      if (isNotFound(err)) throw new DestinationUnresolvable('secret_not_found');
      throw err;
    }
    // Another job's credentials (the Secret the operator made for its runner) are never a destination: a
    // manifest naming one would have its runner deliver with another owner's credentials.
    if (secret.metadata?.ownerReferences?.some((o) => o.kind === 'MediaJob' && o.apiVersion.startsWith(`${GROUP}/`))) {
      throw new DestinationUnresolvable('another_jobs_credentials');
    }
    const kind = secret.metadata?.labels?.[LABEL_OWNER_KIND];
    if (kind !== undefined) await this.checkOwner(mj, kind, secret.metadata?.labels?.[LABEL_OWNER_ID]);
    const data = secret.data?.[DESTINATION_DATA_KEY];
    if (!data) throw new DestinationUnresolvable('secret_without_destination');
    return parseDocument(Buffer.from(data, 'base64').toString('utf8'));
  }

  /**
   * Where a destination's Secret is read: the saved destinations of the
   * service's namespace (the gateway's jobs) are in the vault's namespace;
   * a MediaJob elsewhere names a Secret of its own namespace.
   */
  private secretNamespace(mj: MediaJob): string {
    const ns = mj.metadata.namespace!;
    return ns === this.serviceNamespace ? this.vaultNamespace : ns;
  }

  private async checkOwner(mj: Owned<MediaJob>, kindLabel: string, ownerId: string | undefined): Promise<void> {
    const keyId = mj.spec.owner.apiKeyId;
    if (kindLabel === OWNER_KIND_LABEL.api_key && ownerId === keyId) return;
    if (kindLabel === OWNER_KIND_LABEL.organization && ownerId) {
      const r = await this.pool.query<{ organization_id: string | null }>('SELECT organization_id FROM api_keys WHERE id = $1', [keyId]);
      if (r.rows[0]?.organization_id === ownerId) return;
    }
    throw new DestinationUnresolvable('not_the_owners_destination');
  }

  /** A legacy saved destination: the row the gateway resolved the job to, credentials sealed in Postgres. */
  private async fromLegacyRow(mj: Owned<MediaJob>): Promise<Record<string, unknown>> {
    const row = await legacyDestination(this.pool, jobIdOf(mj));
    if (!row) throw new DestinationUnresolvable('saved_destination_not_found');
    await this.checkOwner(mj, OWNER_KIND_LABEL[row.owner_kind], row.owner_id);
    return parseDocument(this.open(row.credentials_enc, sealedAt.destinationCredentials(row)));
  }

  private async fromInlinePayload(mj: MediaJob): Promise<Record<string, unknown>> {
    const jobId = jobIdOf(mj);
    const sealed = await inlineCredentials(this.pool, jobId);
    if (!sealed) throw new DestinationUnresolvable('inline_credentials_not_found');
    return parseDocument(this.open(sealed, sealedAt.jobStorage(jobId)));
  }

  private open(sealed: string, at: SecretContext): string {
    try {
      return this.box.open(sealed, at);
    } catch {
      // A retired key id, a damaged value or one moved from another row: no retry will open it.
      throw new DestinationUnresolvable('credentials_cannot_be_opened');
    }
  }

  /**
   * Download URLs (24 h) of a completed job on the user's own storage,
   * signed with the credentials the runner used (its per-job Secret, which
   * still exists until the job is finished), and sealed into the row for
   * GET /jobs/{id}: inline credentials are deleted right after.
   */
  async presignOwn(mj: MediaJob, result: MediaJobResult | undefined): Promise<DownloadUrls> {
    if (!result) return {};
    let secret: k8s.V1Secret;
    try {
      secret = await this.core.readNamespacedSecret({ name: credentialsSecretName(mj), namespace: mj.metadata.namespace! });
    } catch (err) {
      if (isNotFound(err)) return {};
      throw err;
    }
    const data = secret.data?.[DESTINATION_DATA_KEY];
    if (!data) return {};
    // Drive has no presigned URLs: its URLs are the gateway's, signed for this job (lib/src/storage/README.md).
    const provider = await createProvider(parseDocument(Buffer.from(data, 'base64').toString('utf8')), {
      ...this.endpoints,
      ...(this.driveDownload && { drive: { ...this.endpoints.drive, download: { ...this.driveDownload, ref: jobIdOf(mj) } } }),
    });
    const sign = async (key: string | undefined) => (key ? provider.presign(key, DOWNLOAD_URL_TTL_SECONDS) : undefined);
    try {
      const urls: DownloadUrls = {
        s3Url: await sign(result.storageKey), subtitleUrl: await sign(result.subtitleKey), thumbnailUrl: await sign(result.thumbnailKey),
      };
      await saveResultUrls(this.pool, jobIdOf(mj), this.box.sealable(JSON.stringify(urls)));
      return urls;
    } finally {
      (provider as { destroy?: () => void }).destroy?.();
    }
  }

  /** The job ended: its inline credentials go (the per-job Secret is deleted by the caller). */
  async forgetInline(mj: MediaJob): Promise<void> {
    await forgetInlineCredentials(this.pool, jobIdOf(mj));
  }
}

function parseDocument(text: string): Record<string, unknown> {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch {
    throw new DestinationUnresolvable('destination_not_json');
  }
  if (typeof doc !== 'object' || doc === null || Array.isArray(doc)) throw new DestinationUnresolvable('destination_not_an_object');
  return doc as Record<string, unknown>;
}
