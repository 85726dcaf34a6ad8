// Managed storage as the operator sees it: presigned download URLs for
// webhooks, and the destination document a runner gets in its per-job
// Secret. A runner runs yt-dlp and ffmpeg on untrusted input, so that
// document carries what one job's uploads need and nothing that signs or
// opens anything else (docs/adr/0012-runner-upload-grants.md): on local
// disk, the directory without FILE_URL_SECRET; on S3, an upload grant (the
// gateway's address and a token for this job only) instead of the bucket's
// keys. Both name the job's API key's part of managed storage
// (managedKeyPrefix), where all of its keys go.
import { chmodSync, lchownSync, lstatSync, mkdirSync, readdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { createManagedStorage } from '@mediajobs/lib/storage/index';
import { DOWNLOAD_URL_TTL_SECONDS, managedKeyPrefix } from '@mediajobs/lib/storage/types';
import { UploadGrantKeys } from '@mediajobs/lib/storage/upload-grants';
import type { OperatorConfig } from './config.js';
import { RUNNER_UID } from './job-builder.js';
import type { ManagedStorageAccess } from './job-record.js';

/**
 * A grant outlives the runner Job's active deadline by this much: the
 * Secret is written just before the Job, and the deadline counts from the
 * Job's start. The gateway also refuses a job whose row is terminal, so a
 * grant stops working when its job ends, whatever its expiry.
 */
export const GRANT_MARGIN_SECONDS = 3600;

type Settings = Pick<OperatorConfig,
  'MANAGED_STORAGE' | 'MANAGED_STORAGE_DIR' | 'PUBLIC_BASE_URL' | 'UPLOAD_GRANT_URL' | 'JOB_ACTIVE_DEADLINE_SECONDS' | 'SECRET_KEYS'>;

export async function managedStorageAccess(cfg: OperatorConfig): Promise<ManagedStorageAccess> {
  const provider = await createManagedStorage(cfg);
  if (cfg.MANAGED_STORAGE === 'local') shareWithRunners(resolve(cfg.MANAGED_STORAGE_DIR));
  return {
    presign: (key) => provider.presign(key, DOWNLOAD_URL_TTL_SECONDS),
    destination: runnerDocuments(cfg),
  };
}

/**
 * The managed-storage document of a job's runner, by job id and the id of
 * the API key that owns the job (spec.owner.apiKeyId): its keys go under
 * that key's prefix (`folder_prefix`), which on S3 the grant's token names
 * too, so the gateway takes no other. Without a key id, the layout of keys
 * without a prefix. Checks at start what minting needs (SECRET_KEYS with S3).
 */
export function runnerDocuments(cfg: Settings, now: () => number = Date.now): (jobId: string, apiKeyId?: string) => Record<string, unknown> {
  const prefixOf = (apiKeyId: string | undefined) => (apiKeyId === undefined ? undefined : managedKeyPrefix(apiKeyId));
  if (cfg.MANAGED_STORAGE === 'local') {
    // The runner writes the directory itself (stage(): ffmpeg's stdout is the stored file); it signs no URL.
    const managed = { MANAGED_STORAGE: 'local', MANAGED_STORAGE_DIR: resolve(cfg.MANAGED_STORAGE_DIR) };
    return (_jobId, apiKeyId) => ({ provider: 'managed', managed, ...folderPrefix(prefixOf(apiKeyId)) });
  }
  if (!cfg.SECRET_KEYS) throw new Error('SECRET_KEYS is required: upload grants for managed storage on S3 are signed with it');
  const keys = new UploadGrantKeys(cfg.SECRET_KEYS);
  const url = cfg.UPLOAD_GRANT_URL ?? cfg.PUBLIC_BASE_URL;
  return (jobId, apiKeyId) => {
    const expiresAt = Math.floor(now() / 1000) + cfg.JOB_ACTIVE_DEADLINE_SECONDS + GRANT_MARGIN_SECONDS;
    const prefix = prefixOf(apiKeyId);
    return { provider: 'managed', managed: { MANAGED_STORAGE: 's3' }, ...folderPrefix(prefix), grant: { url, token: keys.mint(jobId, expiresAt, prefix) } };
  };
}

const folderPrefix = (prefix: string | undefined) => (prefix === undefined ? {} : { folder_prefix: prefix });

/**
 * On local disk the runner writes the managed directory itself, as its pod's
 * user (uid and fsGroup RUNNER_UID), not as the operator: give the tree the
 * ownership a kubelet gives a volume of a pod with that fsGroup (group
 * RUNNER_UID, group read-write, directories setgid so new entries keep the
 * group). Only root can, and only root needs to: otherwise every process
 * runs as the same user. The cost is one walk at start, of local mode's files.
 * A directory not there yet (a first start) is made, as the runners would.
 */
export function shareWithRunners(dir: string, isRoot = process.getuid?.() === 0): void {
  if (!isRoot) return;
  mkdirSync(dir, { recursive: true, mode: 0o750 });
  const walk = (p: string): void => {
    const st = lstatSync(p);
    if (st.isSymbolicLink()) return;
    if (st.isDirectory()) for (const name of readdirSync(p)) walk(join(p, name));
    lchownSync(p, -1, RUNNER_UID);
    chmodSync(p, (st.mode & 0o7777) | (st.isDirectory() ? 0o2770 : 0o660));
  };
  walk(dir);
}
