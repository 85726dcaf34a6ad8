// The runner's managed storage as its destination.json gives it, which holds
// no signing key and no bucket credentials (docs/adr/0012): on local disk it
// writes the storage directory itself and signs nothing; on S3 it talks to
// the gateway named in its upload grant, with the grant's token.
import { expect } from 'chai';
import { mkdtempSync, readFileSync, rmSync, writeFileSync, writeSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { isStorageError } from '@mediajobs/lib/storage/index';
import { resolveDestination } from '../src/destination.js';

/** A credentials directory holding `doc` as destination.json. */
function credentials(doc: unknown): string {
  const dir = mkdtempSync(join(tmpdir(), 'mj-creds-'));
  writeFileSync(join(dir, 'destination.json'), JSON.stringify(doc));
  return dir;
}

async function refusal(p: Promise<unknown>): Promise<{ code: string; reason: string }> {
  try {
    await p;
  } catch (err) {
    expect(isStorageError(err), String(err)).to.equal(true);
    return err as { code: string; reason: string };
  }
  return expect.fail('expected a StorageError');
}

describe('runner: managed storage from destination.json, without signing keys or bucket credentials', () => {
  const dirs: string[] = [];
  after(() => {
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  it('local disk: stages, publishes, uploads and deletes without FILE_URL_SECRET, and refuses to sign a download URL', async () => {
    const store = mkdtempSync(join(tmpdir(), 'mj-store-'));
    dirs.push(store);
    const creds = credentials({ provider: 'managed', managed: { MANAGED_STORAGE: 'local', MANAGED_STORAGE_DIR: store } });
    dirs.push(creds);
    // The pod's env holds no managed storage settings either.
    const { provider, baseFolder } = await resolveDestination(creds, {}, {});
    expect([provider.name, baseFolder]).to.deep.equal(['managed', 'videos']);

    const staged = await provider.stage!();
    writeSync(staged.fd, 'muxed by ffmpeg');
    expect(await staged.publish('videos/staged.mp4')).to.deep.equal({ key: 'videos/staged.mp4', size: 15 });
    expect(readFileSync(join(store, 'videos/staged.mp4'), 'utf8')).to.equal('muxed by ffmpeg');
    await provider.upload('videos/sub.srt', Readable.from([Buffer.from('1\n')]));
    expect(readFileSync(join(store, 'videos/sub.srt'), 'utf8')).to.equal('1\n');
    await provider.delete('videos/staged.mp4');

    expect(await refusal(provider.presign('videos/sub.srt', 60))).to.include({ code: 'invalid_config', reason: 'no_signing_key' });
  });

  it('S3: sends the grant token to the gateway the document names, and signs nothing', async () => {
    const seen: Array<{ method?: string; url?: string; authorization?: string }> = [];
    const gateway = createServer((req, res) => {
      seen.push({ method: req.method, url: req.url, authorization: req.headers.authorization });
      req.resume();
      res.writeHead(204).end();
    });
    await new Promise<void>((resolve) => gateway.listen(0, '127.0.0.1', resolve));
    try {
      const url = `http://127.0.0.1:${(gateway.address() as AddressInfo).port}/`;
      const creds = credentials({ provider: 'managed', managed: { MANAGED_STORAGE: 's3' }, grant: { url, token: 'job-token' } });
      dirs.push(creds);
      const { provider, baseFolder } = await resolveDestination(creds, {}, {});
      expect([provider.name, baseFolder]).to.deep.equal(['managed', 'videos']);
      await provider.probe();
      await provider.delete('videos/x.mp4');
      expect(seen).to.deep.equal([
        { method: 'POST', url: '/internal/upload-grants/check', authorization: 'Bearer job-token' },
        { method: 'POST', url: '/internal/upload-grants/delete', authorization: 'Bearer job-token' },
      ]);
      expect(await refusal(provider.presign('videos/x.mp4', 60))).to.include({ code: 'invalid_config', reason: 'no_signing_key' });
    } finally {
      gateway.close();
    }
  });

  it('refuses a grant whose URL carries credentials or is no http(s) URL', async () => {
    for (const url of ['http://user:pw@gw.test', 'file:///etc/passwd', 'gateway']) {
      const creds = credentials({ provider: 'managed', grant: { url, token: 't' } });
      dirs.push(creds);
      expect(await refusal(resolveDestination(creds, {}, {})), url).to.include({ code: 'invalid_config', reason: 'invalid_grant' });
    }
  });
});
