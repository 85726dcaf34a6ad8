// Local managed storage for operator tests: a directory of the test's own,
// which the operator reads back (its MANAGED_STORAGE_DIR) and the scripted
// runner writes (the document it is given), as in local mode. The operator
// takes no report of a file that is not there with an owner record naming
// the job (docs/adr/0012 "Local managed storage"), so a runner must store
// what it reports, and a test that plants a job's file stores it as the job's.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { Readable } from 'node:stream';
import { LocalStorageProvider } from '@mediajobs/lib/storage/index';
import type { ManagedStorageAccess } from '../../src/job-record.js';
import { shareWithRunners } from '../../src/managed-storage.js';

export class TestLocalStorage {
  readonly dir: string;
  /** Keys download URLs were signed for, in order. */
  readonly signed: string[] = [];

  constructor(prefix = 'mj-operator-storage-') {
    this.dir = mkdtempSync(join(tmpdir(), prefix));
    // Runner pods run as RUNNER_UID (when the tests run as root): the tree is theirs to write, as the operator makes it at start.
    shareWithRunners(this.dir);
  }

  /** The operator's setting for it. */
  get settings(): { MANAGED_STORAGE_DIR: string } {
    return { MANAGED_STORAGE_DIR: this.dir };
  }

  /**
   * What the operator is given: download URLs on files.test (each key
   * recorded in `signed`), and for runners runnerDocuments' local document
   * without the API key's folder prefix, so keys stay `videos/…`.
   */
  get access(): ManagedStorageAccess {
    return {
      presign: async (key) => {
        this.signed.push(key);
        return `http://files.test/${key}`;
      },
      destination: () => ({ provider: 'managed', managed: { MANAGED_STORAGE: 'local', MANAGED_STORAGE_DIR: resolve(this.dir) } }),
    };
  }

  /** Store `body` at `key` as the job `jobId`'s (its owner record), as its runner would; without a job id, as nobody's. */
  async store(key: string, body: string, jobId?: string): Promise<void> {
    const provider = new LocalStorageProvider({ dir: this.dir, publicBaseUrl: 'http://files.test' });
    await provider.upload(key, Readable.from([Buffer.from(body)]), { ...(jobId !== undefined && { jobId }) });
    // What this process made (folders, the file, its record) stays writable by runners.
    shareWithRunners(this.dir);
  }

  remove(): void {
    rmSync(this.dir, { recursive: true, force: true });
  }
}
