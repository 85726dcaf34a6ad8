// Files a job stored that nobody will be told of, and their removal
// (docs/adr/0018 "Files an attempt leaves"). The runner writes each file it
// stores into status.storedFiles the moment its upload completes, and each it
// deletes again out of it; a file stays the job's only if the attempt's end
// names it in the result. So every status write that drops a stored file
// from status.storedFiles without the result naming it deletes that file:
// the end of an attempt that failed (retried or not), a completion that lost
// to a cancellation, and a runner killed between its upload and its report
// all go through the one rule (orphanedFiles), applied after the write
// (controller.ts patchStatus). After, not before: an operator that dies in
// between leaves a file, never deletes one it no longer has a record of
// (another job may store under a freed key).
import type * as k8s from '@kubernetes/client-node';
import { storageEndpoints } from '@mediajobs/lib/config';
import { isNotFound } from '@mediajobs/lib/kube-client';
import { errFields, type Logger } from '@mediajobs/lib/logger';
import { OutboundPolicy } from '@mediajobs/lib/outbound';
import { ReadBudget, type ReadBudgetOptions } from '@mediajobs/lib/read-budget';
import { jobIdOf, type MediaJob, type MediaJobResult, type MediaJobStatus } from '@mediajobs/lib/mediajob/types';
import { DESTINATION_DATA_KEY } from '@mediajobs/lib/saved-destinations';
import { createProvider, type StorageProvider } from '@mediajobs/lib/storage/index';
import { managedKeyPrefix, mayHaveWritten, type KeyAuthor } from '@mediajobs/lib/storage/types';
import type { GrantLedger } from '@mediajobs/lib/storage/upload-grants';
import type { OperatorConfig } from './config.js';
import { isControlledBy } from './children.js';
import { credentialsSecretName } from './job-builder.js';

/** The keys of a result's files (the media, subtitles, thumbnail). */
export function resultKeys(result: MediaJobResult | undefined): string[] {
  return [result?.storageKey, result?.subtitleKey, result?.thumbnailKey].filter((k): k is string => !!k);
}

/**
 * The files a status write from `cur` to `desired` leaves without an owner:
 * stored (cur.storedFiles), no longer recorded as stored, and not named by
 * the desired result. Empty while an attempt runs (its status keeps
 * storedFiles) and for a completion that names everything it stored.
 */
export function orphanedFiles(cur: MediaJobStatus | undefined, desired: MediaJobStatus): string[] {
  const kept = new Set([...Object.keys(desired.storedFiles ?? {}), ...resultKeys(desired.result)]);
  return Object.keys(cur?.storedFiles ?? {}).filter((k) => !kept.has(k));
}

/**
 * The job as the author of its keys (lib mayHaveWritten): its id, filename
 * and folder, and on managed storage the layout its runner was given: the
 * folder_prefix of its managed-storage document (`managedPrefix`, by
 * default the prefix of its API key, managed-storage.ts runnerDocuments).
 * A user's destination's layout is in its Secret, not read here: only the
 * job's own part of the key is checked there (the folders before it are
 * the user's).
 */
export function keyAuthorOf(mj: MediaJob, managedPrefix: (mj: MediaJob) => string | undefined = defaultManagedPrefix): KeyAuthor {
  const managed = (mj.spec.destination?.type ?? 'managed') === 'managed';
  const prefix = managed ? managedPrefix(mj) : undefined;
  return {
    jobId: jobIdOf(mj), filename: mj.spec.filename, folder: mj.spec.folder,
    ...(managed && { layout: { ...(prefix !== undefined && { folderPrefix: prefix }), baseFolder: 'videos' } }),
  };
}

function defaultManagedPrefix(mj: MediaJob): string | undefined {
  const apiKeyId = (mj.spec.owner as { apiKeyId?: string } | undefined)?.apiKeyId;
  return apiKeyId === undefined ? undefined : managedKeyPrefix(apiKeyId);
}

/**
 * The keys of `keys` the job's runner may not have written (mayHaveWritten):
 * a report naming one is a false claim, never acted on (issue 35 item 1).
 */
export function refusedClaims(author: KeyAuthor, keys: Iterable<string>): string[] {
  return [...new Set(keys)].filter((k) => !mayHaveWritten(author, k));
}

/** The upload-grant ledger as the operator reads it: who last stored each key on managed S3, and its size as stored. */
export type StoredRecord = Pick<GrantLedger, 'storedBy'>;

/** Whether the job's files went through upload grants, so the grant ledger knows them: managed storage on S3. */
export function ledgerKnows(mj: MediaJob, cfg: Pick<OperatorConfig, 'MANAGED_STORAGE'>): boolean {
  return cfg.MANAGED_STORAGE === 's3' && (mj.spec.destination?.type ?? 'managed') === 'managed';
}

/**
 * A result checked against the grant ledger (issue 35 items 1 and 2): each
 * of its keys must be one this job's grant was the last to complete (the
 * broker stores a key only where none is, so the last completion is the
 * object there now); its sizes are the ledger's, never the runner's:
 * fileSize the media's, uploadedBytes the media's and its sidecars'. The
 * same result object back when the runner told the truth.
 */
export async function resultAsStored(
  ledger: StoredRecord, jobId: string, result: MediaJobResult,
): Promise<{ result: MediaJobResult } | { refused: string[] }> {
  const keys = resultKeys(result);
  const stored = await ledger.storedBy(keys);
  const refused = keys.filter((k) => stored.get(k)?.jobId !== jobId);
  if (refused.length) return { refused };
  const fileSize = stored.get(result.storageKey)!.size;
  const uploadedBytes = keys.reduce((sum, k) => sum + stored.get(k)!.size, 0);
  if (result.fileSize === fileSize && result.uploadedBytes === uploadedBytes) return { result };
  return { result: { ...result, fileSize, uploadedBytes } };
}

/** What a runner claimed and was refused, for the caller to record (a Warning Event, the counter). */
export type OnRefusedClaims = (mj: MediaJob, keys: string[], where: string) => void;

/**
 * What removing a job's files may read from the job's own destination, an
 * address its user chose: a delete is answered with a few hundred bytes,
 * and the reconcile that awaits it must not hang on a backend that
 * trickles, nor hold a huge error body (lib/src/read-budget.ts).
 */
export const REMOVAL_BUDGET: ReadBudgetOptions = { maxBytes: 256 * 1024, deadlineMs: 60_000 };

export interface RemovalDeps {
  core: k8s.CoreV1Api;
  cfg: OperatorConfig;
  log: Logger;
  budget?: ReadBudgetOptions;
  /** Told of keys left alone because the job's runner may not have written them. */
  onRefused?: OnRefusedClaims;
  /** The job as the author of its keys, as its runner was given its layout (keyAuthorOf by default). */
  authorOf?: (mj: MediaJob) => KeyAuthor;
  /** On managed S3, the grant ledger: a key this job's grant did not store last is never deleted. */
  ledger?: StoredRecord;
}

/**
 * Delete `keys` where the job stored them, managed storage or the job's own
 * destination (credentials from its per-job Secret, which exists until the
 * job is finished), within REMOVAL_BUDGET. `why` says in the log whose files
 * they were. Failures are logged, never thrown: the job's outcome stands
 * either way, and a file left is the lesser harm.
 */
export async function removeFiles(d: RemovalDeps, mj: MediaJob, claimed: string[], why: string): Promise<void> {
  if (!claimed.length) return;
  const jobId = jobIdOf(mj);
  // A key the runner reported but may not have written is another's file: never deleted, the rest still are.
  const refused = refusedClaims((d.authorOf ?? keyAuthorOf)(mj), claimed);
  if (d.ledger && ledgerKnows(mj, d.cfg)) {
    // On managed S3 the ledger says who stored what: a key of this job's layout another grant stored (or none did) is not this job's either.
    const open = claimed.filter((k) => !refused.includes(k));
    const stored = await d.ledger.storedBy(open).catch((err: unknown) => {
      d.log.warn({ jobId, err: errFields(err) }, 'could not read the upload-grant ledger: the files are left in place');
      return new Map<string, { jobId: string }>();
    });
    refused.push(...open.filter((k) => stored.get(k)?.jobId !== jobId));
  }
  if (refused.length) {
    d.log.warn({ jobId, refused: refused.length, why }, 'the runner reported files it may not have written: left in place');
    d.onRefused?.(mj, refused, 'its report');
  }
  const keys = claimed.filter((k) => !refused.includes(k));
  if (!keys.length) return;
  // The user's endpoint is contacted under the outbound-address policy, as at its probe: checked as each socket opens.
  const budget = new ReadBudget({ ...(d.budget ?? REMOVAL_BUDGET), policy: new OutboundPolicy({ allowed: d.cfg.OUTBOUND_ALLOWED_CIDRS }) });
  let provider: StorageProvider | undefined;
  try {
    provider = await providerOf(d, mj, budget);
    if (!provider) {
      d.log.warn({ jobId, files: keys.length, why }, 'files to remove, but the job\'s destination is gone: left in place');
      return;
    }
    for (const key of keys) await provider.delete(key);
    d.log.info({ jobId, files: keys.length, why }, 'files nobody will be told of removed');
  } catch (err) {
    d.log.error({
      jobId, why, err: errFields(err), ...(budget.exceeded && { cut: budget.exceeded }), ...(budget.refused && { refused: budget.refused }),
    }, 'could not remove files nobody will be told of');
  } finally {
    (provider as { destroy?: () => void } | undefined)?.destroy?.();
    budget.close();
  }
}

async function providerOf(d: { core: k8s.CoreV1Api; cfg: OperatorConfig }, mj: MediaJob, budget: ReadBudget): Promise<StorageProvider | undefined> {
  if ((mj.spec.destination?.type ?? 'managed') === 'managed') {
    // Built as a runner's is (it only deletes here, signs nothing): from the operator's own managed-storage settings.
    const env = Object.fromEntries(Object.entries(d.cfg)
      .filter(([k, v]) => (k.startsWith('MANAGED_') || k === 'PUBLIC_BASE_URL') && v !== undefined && typeof v !== 'object')
      .map(([k, v]) => [k, String(v)]));
    return createProvider({ provider: 'managed' }, { env });
  }
  let secret: k8s.V1Secret;
  try {
    secret = await d.core.readNamespacedSecret({ name: credentialsSecretName(mj), namespace: mj.metadata.namespace! });
  } catch (err) {
    if (isNotFound(err)) return undefined;
    throw err;
  }
  const data = secret.data?.[DESTINATION_DATA_KEY];
  if (!data || !isControlledBy(secret, mj)) return undefined;
  return createProvider(JSON.parse(Buffer.from(data, 'base64').toString('utf8')), { ...storageEndpoints(d.cfg), agents: budget });
}
