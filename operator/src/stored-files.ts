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
//
// What a runner reports is a claim (issue 35 item 1, docs/adr/0012 "What the
// operator accepts"): a key is accepted, signed, recorded or deleted only
// when its storage's record says this job stored it (the grant ledger on
// managed S3, else the object's metadata or, on local managed storage, the
// owner record beside the file, read back here), and sizes come from that
// record, never from the report.
import type * as k8s from '@kubernetes/client-node';
import { storageEndpoints } from '@mediajobs/lib/config';
import { isNotFound } from '@mediajobs/lib/kube-client';
import { errFields, type Logger } from '@mediajobs/lib/logger';
import { OutboundPolicy } from '@mediajobs/lib/outbound';
import { ReadBudget, type ReadBudgetOptions } from '@mediajobs/lib/read-budget';
import { jobIdOf, type MediaJob, type MediaJobResult, type MediaJobStatus } from '@mediajobs/lib/mediajob/types';
import { DESTINATION_DATA_KEY } from '@mediajobs/lib/saved-destinations';
import type { FinishedJob } from '@mediajobs/lib/db/jobs';
import { createProvider, type StorageProvider } from '@mediajobs/lib/storage/index';
import { StorageError, isStorageError, managedKeyPrefix, mayHaveWritten, type KeyAuthor, type ObjectInfo } from '@mediajobs/lib/storage/types';
import type { OperatorConfig } from './config.js';
import { isControlledBy } from './children.js';
import { DestinationClients } from './destination-clients.js';
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
  const managed = isManaged(mj);
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

/**
 * What a job's storage says of keys: for each key holding an object, the
 * job it names (none: it names none) and its size as stored. On managed S3
 * the upload-grant ledger (PgGrantLedger: who last completed each key);
 * elsewhere the objects themselves (objectRecord).
 */
export interface StoredRecord {
  storedBy(keys: readonly string[]): Promise<Map<string, ObjectInfo>>;
}

/** Whether the job's files went through upload grants, so the grant ledger knows them: managed storage on S3. */
export function ledgerKnows(mj: MediaJob, cfg: Pick<OperatorConfig, 'MANAGED_STORAGE'>): boolean {
  return cfg.MANAGED_STORAGE === 's3' && isManaged(mj);
}

/** Whether the job's files go to managed storage (the service's own), not a user's destination. */
function isManaged(mj: MediaJob): boolean {
  return (mj.spec.destination?.type ?? 'managed') === 'managed';
}

/**
 * Where the record of who stored the job's files is: the grant ledger
 * (managed S3), else the objects themselves: a user's destination's
 * metadata, or on local managed storage the owner record beside each file
 * (docs/adr/0012, "Local managed storage"), read with the operator's own
 * settings, never the runner's document.
 */
export function recordOf(mj: MediaJob, cfg: Pick<OperatorConfig, 'MANAGED_STORAGE'>): 'ledger' | 'objects' {
  return ledgerKnows(mj, cfg) ? 'ledger' : 'objects';
}

/**
 * A record read from the objects (StorageProvider.stat: a HEAD, Get Blob
 * Properties, files.get, an fstat and the owner record of local storage):
 * the job each object's metadata names, written by the runner at upload
 * (UploadOptions.jobId), and its size as stored.
 */
export function objectRecord(provider: StorageProvider): StoredRecord {
  return {
    async storedBy(keys) {
      if (!provider.stat) throw new StorageError('invalid_config', 'no_stat', `${provider.name}: cannot read objects back`, { provider: provider.name });
      const infos = await Promise.all(keys.map(async (k) => [k, await provider.stat!(k)] as const));
      return new Map(infos.filter((e): e is readonly [string, ObjectInfo] => e[1] !== undefined));
    },
  };
}

/**
 * A result checked against its storage's record (issue 35 items 1 and 2):
 * each of its keys must hold an object this job stored (the ledger's last
 * completion of it was this job's grant; or its metadata names this job:
 * the object belongs to the job its metadata names, whichever job's layout
 * its name fits); its sizes are the record's, never the runner's: fileSize
 * the media's, uploadedBytes the media's and its sidecars'. The same result
 * object back when the runner told the truth.
 */
export async function resultAsStored(
  record: StoredRecord, jobId: string, result: MediaJobResult,
): Promise<{ result: MediaJobResult } | { refused: string[] }> {
  const keys = resultKeys(result);
  const stored = await record.storedBy(keys);
  const refused = keys.filter((k) => stored.get(k)?.jobId !== jobId);
  if (refused.length) return { refused };
  const fileSize = stored.get(result.storageKey)!.size;
  const uploadedBytes = keys.reduce((sum, k) => sum + stored.get(k)!.size, 0);
  if (result.fileSize === fileSize && result.uploadedBytes === uploadedBytes) return { result };
  return { result: { ...result, fileSize, uploadedBytes } };
}

/** The job's row as recorded, for a result the storage cannot be asked about any more (checkedResult). */
export type RecordedResult = Pick<FinishedJob, 's3_key' | 'subtitle_key' | 'thumbnail_key' | 'file_size'>;

/**
 * A completion's result checked against the job's storage (resultAsStored):
 * the grant ledger on managed S3, else the objects, read with the
 * destination's credentials (the per-job Secret) within REMOVAL_BUDGET.
 * What the job's row recorded was checked when it was recorded, so a result
 * the storage no longer answers for (the job finished: its Secret is gone,
 * its ledger rows swept after LEDGER_KEEP_SECONDS) is accepted again when
 * it is the one recorded (`recorded`), and only then. A storage that cannot
 * be reached throws (the pass is tried again); one that refuses the read
 * (credentials revoked, bucket gone) refuses the claim.
 */
export async function checkedResult(
  d: RemovalDeps, mj: MediaJob, result: MediaJobResult, recorded: () => Promise<RecordedResult | undefined>,
): Promise<{ result: MediaJobResult } | { refused: string[] }> {
  const kind = recordOf(mj, d.cfg);
  const verdicts = stateOf(d).verdicts;
  const at = verdictKey(mj, result);
  const known = verdicts.get(at);
  if (known) return { result: asStored(result, known) };
  const checked = await readBack(d, mj, result, kind);
  if ('refused' in checked && isRecorded(await recorded(), result)) return { result };
  if (!('refused' in checked)) remember(verdicts, at, checked.result);
  return checked;
}

/**
 * Accepted results, by job uid, attempt and claimed keys: a completion is
 * checked at its status write and again as the job finishes (controller.ts
 * finish), and the second asks the storage nothing (issue 35). Only
 * acceptances are kept: a refused result is never written, so never asked
 * about again. What the storage said is final for an attempt's keys: the
 * job's runner stored them and has ended.
 */
export const MAX_VERDICTS = 1000;

function verdictKey(mj: MediaJob, result: MediaJobResult): string {
  return [mj.metadata.uid ?? jobIdOf(mj), mj.status?.attempt ?? 1, ...resultKeys(result)].join('\0');
}

function remember(verdicts: Map<string, MediaJobResult>, at: string, result: MediaJobResult): void {
  verdicts.set(at, result);
  if (verdicts.size > MAX_VERDICTS) verdicts.delete(verdicts.keys().next().value!);
}

/** `result` with the sizes the storage said (`stored`): the same object when the runner's were those. */
function asStored(result: MediaJobResult, stored: MediaJobResult): MediaJobResult {
  if (result.fileSize === stored.fileSize && result.uploadedBytes === stored.uploadedBytes) return result;
  return { ...result, fileSize: stored.fileSize, uploadedBytes: stored.uploadedBytes };
}

/** What the checks of one operator (one RemovalDeps) keep between passes: accepted results, destination clients. */
interface CheckState {
  verdicts: Map<string, MediaJobResult>;
  clients: DestinationClients;
}

const states = new WeakMap<RemovalDeps, CheckState>();

function stateOf(d: RemovalDeps): CheckState {
  let s = states.get(d);
  if (!s) {
    s = { verdicts: new Map(), clients: new DestinationClients(d.budget ?? REMOVAL_BUDGET, d.cfg.OUTBOUND_ALLOWED_CIDRS, storageEndpoints(d.cfg)) };
    states.set(d, s);
  }
  return s;
}

/** Close the destination clients the checks keep (the operator stops). */
export function closeCheckClients(d: RemovalDeps): void {
  states.get(d)?.clients.close();
}

async function readBack(
  d: RemovalDeps, mj: MediaJob, result: MediaJobResult, kind: 'ledger' | 'objects',
): Promise<{ result: MediaJobResult } | { refused: string[] }> {
  const jobId = jobIdOf(mj);
  if (kind === 'ledger') return d.ledger ? resultAsStored(d.ledger, jobId, result) : { refused: resultKeys(result) };
  try {
    if (isManaged(mj)) return await resultAsStored(objectRecord(await managedProvider(d.cfg)), jobId, result);
    const doc = await destinationDocument(d, mj);
    if (!doc) return { refused: resultKeys(result) };
    // A kept client per destination (destination-clients.ts): the HEADs reuse its connection.
    return await stateOf(d).clients.with(`${mj.metadata.namespace}/${credentialsSecretName(mj)}`, doc,
      (provider) => resultAsStored(objectRecord(provider), jobId, result));
  } catch (err) {
    if (!isStorageError(err) || err.code === 'unreachable') throw err;
    d.log.warn({ jobId, err: errFields(err) }, 'the job\'s storage refused reading its files back: the result is not accepted');
    return { refused: resultKeys(result) };
  }
}

/** Whether the row recorded exactly this result's files and size. */
function isRecorded(row: RecordedResult | undefined, result: MediaJobResult): boolean {
  return !!row && row.s3_key === result.storageKey && (row.subtitle_key ?? undefined) === result.subtitleKey
    && (row.thumbnail_key ?? undefined) === result.thumbnailKey && row.file_size !== null && Number(row.file_size) === result.fileSize;
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
  /** On managed S3, the grant ledger: a key this job's grant did not store last is never deleted. Elsewhere each object's metadata says. */
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
  const open = claimed.filter((k) => !refused.includes(k));
  const budget = readBudget(d);
  let provider: StorageProvider | undefined;
  try {
    provider = open.length ? await providerOf(d, mj, budget) : undefined;
    if (open.length && !provider) d.log.warn({ jobId, files: open.length, why }, 'files to remove, but the job\'s destination is gone: left in place');
    const keys = provider ? await ownKeys(d, mj, provider, open, refused) : [];
    if (refused.length) {
      d.log.warn({ jobId, refused: refused.length, why }, 'the runner reported files it may not have written: left in place');
      d.onRefused?.(mj, refused, 'its report');
    }
    if (!keys.length) return;
    for (const key of keys) await provider!.delete(key);
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

/**
 * The keys of `open` whose object this job stored, by its storage's record
 * (the grant ledger on managed S3, else each object's metadata): only those
 * are deleted. A key another job stored, or no job did, is added to
 * `refused`; a key that holds nothing has nothing to delete.
 */
async function ownKeys(d: RemovalDeps, mj: MediaJob, provider: StorageProvider, open: string[], refused: string[]): Promise<string[]> {
  const jobId = jobIdOf(mj);
  const kind = recordOf(mj, d.cfg);
  const viaLedger = kind === 'ledger';
  if (viaLedger && !d.ledger) return [];
  const record = viaLedger ? d.ledger! : objectRecord(provider);
  // A record that cannot be read throws: removeFiles logs it (with what the read budget cut) and leaves every file.
  const stored = await record.storedBy(open);
  // The ledger knows no key it did not complete: such a key is another's object (or none), never this job's.
  refused.push(...open.filter((k) => stored.get(k)?.jobId !== jobId && (viaLedger || stored.has(k))));
  return open.filter((k) => stored.get(k)?.jobId === jobId);
}

/** What reading a job's own destination may cost (REMOVAL_BUDGET), its endpoint contacted under the outbound-address policy, checked as each socket opens. */
function readBudget(d: Pick<RemovalDeps, 'budget' | 'cfg'>): ReadBudget {
  return new ReadBudget({ ...(d.budget ?? REMOVAL_BUDGET), policy: new OutboundPolicy({ allowed: d.cfg.OUTBOUND_ALLOWED_CIDRS }) });
}

/** Managed storage built as a runner's is (it only reads back and deletes here, signs nothing): from the operator's own settings. */
function managedProvider(cfg: OperatorConfig): Promise<StorageProvider> {
  const env = Object.fromEntries(Object.entries(cfg)
    .filter(([k, v]) => (k.startsWith('MANAGED_') || k === 'PUBLIC_BASE_URL') && v !== undefined && typeof v !== 'object')
    .map(([k, v]) => [k, String(v)]));
  return createProvider({ provider: 'managed' }, { env });
}

async function providerOf(d: { core: k8s.CoreV1Api; cfg: OperatorConfig }, mj: MediaJob, budget: ReadBudget): Promise<StorageProvider | undefined> {
  if (isManaged(mj)) return managedProvider(d.cfg);
  const doc = await destinationDocument(d, mj);
  return doc === undefined ? undefined : createProvider(doc, { ...storageEndpoints(d.cfg), agents: budget });
}

/** The destination document of the job's per-job Secret; undefined when it is gone or not the job's. */
async function destinationDocument(d: { core: k8s.CoreV1Api }, mj: MediaJob): Promise<unknown> {
  let secret: k8s.V1Secret;
  try {
    secret = await d.core.readNamespacedSecret({ name: credentialsSecretName(mj), namespace: mj.metadata.namespace! });
  } catch (err) {
    if (isNotFound(err)) return undefined;
    throw err;
  }
  const data = secret.data?.[DESTINATION_DATA_KEY];
  if (!data || !isControlledBy(secret, mj)) return undefined;
  return JSON.parse(Buffer.from(data, 'base64').toString('utf8')) as unknown;
}
