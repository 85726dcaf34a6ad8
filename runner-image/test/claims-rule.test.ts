// The runner and the operator share one rule for the keys a job writes
// (lib mayHaveWritten): every key uploadJobFile and uploadSidecar try, the
// taken-key fallbacks included, is one the operator accepts as the job's,
// so a lawful report is never refused (issue 35 item 1).
import { expect } from 'chai';
import { Readable } from 'node:stream';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { managedKeyPrefix, mayHaveWritten, StorageError, type StorageProvider } from '@mediajobs/lib/storage/types';
import { uploadJobFile, type ResolvedDestination } from '../src/destination.js';
import { uploadSidecar } from '../src/sidecars.js';

const JOB = '3f2b8c1e-7d4a-4e9b-9a51-0c6d2e8f1a7b';

/** A provider where every key is taken: it records each key tried. */
function takenEverywhere(tried: string[]): StorageProvider {
  return {
    name: 'managed',
    probe: async () => undefined,
    presign: async () => 'http://x',
    delete: async () => undefined,
    upload: async (key: string, body: Readable) => {
      tried.push(key);
      body.on('error', () => undefined);
      body.destroy();
      throw new StorageError('conflict', 'exists', 'taken');
    },
  } as unknown as StorageProvider;
}

describe('runner: the keys it tries are the keys the operator accepts as the job\'s (mayHaveWritten)', () => {
  for (const [what, filename, folder] of [['a filename', 'My talk: part 1', 'shows/x'], ['no filename', undefined, undefined]] as const) {
    it(`media and sidecars, every taken-key fallback, ${what}`, async () => {
      const prefix = managedKeyPrefix('key-1');
      const tried: string[] = [];
      const dest: ResolvedDestination = { provider: takenEverywhere(tried), folderPrefix: prefix, baseFolder: 'videos' };
      const r = await uploadJobFile(dest, { open: () => Readable.from([Buffer.from('x')]), ext: 'mp4', contentType: 'video/mp4', jobId: JOB, filename, folder });
      expect(r.ok).to.equal(false);
      expect(tried).to.have.length(3);
      const media = [...tried];
      const dir = mkdtempSync(join(tmpdir(), 'mj-claims-rule-'));
      try {
        for (const [ext, lang] of [['vtt', 'en-US'], ['jpg', undefined]] as const) {
          const path = join(dir, `s.${ext}`);
          writeFileSync(path, 'x');
          for (const mediaKey of media) await uploadSidecar(dest, mediaKey, { path, ext, ...(lang && { lang }) } as Parameters<typeof uploadSidecar>[2], JOB);
        }
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
      expect(tried).to.have.length(3 + 3 * 2 * 2);
      const author = { jobId: JOB, filename, folder, layout: { folderPrefix: prefix, baseFolder: 'videos' } };
      for (const key of tried) expect(mayHaveWritten(author, key), key).to.equal(true);
      // Another job of the same name may not claim them, save the untaken first key (the rule is by name).
      const other = { ...author, jobId: '9a0d7c55-1b2e-4f3a-8c4d-5e6f7a8b9c0d' };
      expect(tried.filter((k) => mayHaveWritten(other, k)).length).to.be.lessThan(tried.length);
      for (const key of tried.filter((k) => k.includes(JOB.slice(0, 8)))) expect(mayHaveWritten(other, key), key).to.equal(false);
    });
  }
});
