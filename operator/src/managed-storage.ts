// Managed storage as the operator sees it: presigned download URLs for
// webhooks, and the destination document a runner gets in its per-job
// Secret. The document carries the managed storage settings themselves, so
// credentials reach the runner as a mounted file, never as env or argv.
import { resolve } from 'node:path';
import { createManagedStorage } from '@mediajobs/lib/storage/index';
import { DOWNLOAD_URL_TTL_SECONDS } from '@mediajobs/lib/storage/types';
import type { OperatorConfig } from './config.js';
import type { ManagedStorageAccess } from './controller.js';

export async function managedStorageAccess(cfg: OperatorConfig): Promise<ManagedStorageAccess> {
  const provider = await createManagedStorage(cfg);
  const settings: Record<string, string> = {
    MANAGED_STORAGE: cfg.MANAGED_STORAGE,
    MANAGED_STORAGE_DIR: resolve(cfg.MANAGED_STORAGE_DIR),
    PUBLIC_BASE_URL: cfg.PUBLIC_BASE_URL,
    MANAGED_S3_REGION: cfg.MANAGED_S3_REGION,
    MANAGED_S3_FORCE_PATH_STYLE: String(cfg.MANAGED_S3_FORCE_PATH_STYLE),
  };
  const optional = {
    FILE_URL_SECRET: cfg.FILE_URL_SECRET, MANAGED_S3_ENDPOINT: cfg.MANAGED_S3_ENDPOINT, MANAGED_S3_BUCKET: cfg.MANAGED_S3_BUCKET,
    MANAGED_S3_ACCESS_KEY: cfg.MANAGED_S3_ACCESS_KEY, MANAGED_S3_SECRET_KEY: cfg.MANAGED_S3_SECRET_KEY,
  };
  for (const [k, v] of Object.entries(optional)) if (v) settings[k] = v;
  return {
    presign: (key) => provider.presign(key, DOWNLOAD_URL_TTL_SECONDS),
    destination: () => ({ provider: 'managed', managed: settings }),
  };
}
