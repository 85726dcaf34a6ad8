// GET /files/<key>: downloads from managed local storage through URLs
// signed by lib's LocalStorageProvider, with Range support, and 403 for
// expired or forged signatures.
import { mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { expect } from 'chai';
import { LocalStorageProvider, encodeKeyPath, signFileUrl } from '@mediajobs/lib/storage/managed-local';
import { startTestGateway, type TestGateway } from './support.js';

const SECRET = 'test-file-url-secret-0123456789';

describe('api-gateway: managed file downloads', function () {
  this.timeout(30_000);
  let gw: TestGateway;
  let dir: string;
  let storage: LocalStorageProvider;
  const content = Buffer.from(Array.from({ length: 1000 }, (_, i) => i % 251));

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'mj-files-'));
    gw = await startTestGateway({ files: { dir, secret: SECRET } });
    storage = new LocalStorageProvider({ dir, publicBaseUrl: gw.url, secret: SECRET });
    await storage.upload('videos/a.mp4', Readable.from([content]));
    await storage.upload('videos/my show/ép 1 (final).mp3', Readable.from([Buffer.from('audio')]));
  });

  after(async () => {
    await gw?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  const path = (url: string) => url.slice(gw.url.length);
  const get = (url: string, headers: Record<string, string> = {}, method = 'GET') => fetch(url, { method, headers });

  it('serves the whole file at a presigned URL, without an API key', async () => {
    const url = await storage.presign('videos/a.mp4', 86_400);
    const r = await get(url);
    expect(r.status).to.equal(200);
    expect(r.headers.get('accept-ranges')).to.equal('bytes');
    expect(r.headers.get('content-length')).to.equal('1000');
    expect(r.headers.get('content-type')).to.equal('video/mp4');
    expect(Buffer.from(await r.arrayBuffer()).equals(content)).to.equal(true);
  });

  it('answers byte ranges with 206', async () => {
    const url = await storage.presign('videos/a.mp4', 86_400);
    const r = await get(url, { range: 'bytes=10-19' });
    expect(r.status).to.equal(206);
    expect(r.headers.get('content-range')).to.equal('bytes 10-19/1000');
    expect(Buffer.from(await r.arrayBuffer()).equals(content.subarray(10, 20))).to.equal(true);
    const tail = await get(url, { range: 'bytes=-5' });
    expect(tail.status).to.equal(206);
    expect(Buffer.from(await tail.arrayBuffer()).equals(content.subarray(995))).to.equal(true);
  });

  it('answers an unsatisfiable range with 416', async () => {
    const r = await get(await storage.presign('videos/a.mp4', 86_400), { range: 'bytes=5000-6000' });
    expect(r.status).to.equal(416);
  });

  it('answers HEAD with the headers only', async () => {
    const r = await get(await storage.presign('videos/a.mp4', 86_400), {}, 'HEAD');
    expect(r.status).to.equal(200);
    expect(r.headers.get('content-length')).to.equal('1000');
  });

  it('serves keys with spaces and non-ASCII characters', async () => {
    const r = await get(await storage.presign('videos/my show/ép 1 (final).mp3', 86_400));
    expect(r.status).to.equal(200);
    expect(await r.text()).to.equal('audio');
  });

  const forbidden: [string, () => string, string][] = [
    ['an expired URL', () => {
      const exp = Math.floor(Date.now() / 1000) - 10;
      return `/files/videos/a.mp4?expires=${exp}&sig=${signFileUrl('videos/a.mp4', exp, SECRET)}`;
    }, 'Download URL has expired'],
    ['a signature made with another secret', () => {
      const exp = Math.floor(Date.now() / 1000) + 100;
      return `/files/videos/a.mp4?expires=${exp}&sig=${signFileUrl('videos/a.mp4', exp, 'another-secret-0123456789')}`;
    }, 'Invalid download URL signature'],
    ['a signature of another key', () => {
      const exp = Math.floor(Date.now() / 1000) + 100;
      return `/files/videos/a.mp4?expires=${exp}&sig=${signFileUrl('videos/b.mp4', exp, SECRET)}`;
    }, 'Invalid download URL signature'],
    ['an extended expiry', () => {
      const exp = Math.floor(Date.now() / 1000) + 100;
      return `/files/videos/a.mp4?expires=${exp + 1000}&sig=${signFileUrl('videos/a.mp4', exp, SECRET)}`;
    }, 'Invalid download URL signature'],
    ['no signature', () => '/files/videos/a.mp4', 'Missing download URL signature'],
    ['garbage parameters', () => '/files/videos/a.mp4?expires=soon&sig=zz', 'Invalid download URL signature'],
    ['a repeated parameter', () => '/files/videos/a.mp4?expires=1&expires=2&sig=a', 'Missing download URL signature'],
    ['a path escaping the directory', () => {
      const exp = Math.floor(Date.now() / 1000) + 100;
      return `/files/videos/..%2F..%2Fetc%2Fpasswd?expires=${exp}&sig=${signFileUrl('videos/../../etc/passwd', exp, SECRET)}`;
    }, 'Invalid download URL signature'],
  ];
  for (const [name, url, message] of forbidden) {
    it(`refuses ${name} with 403`, async () => {
      const r = await gw.request('GET', url(), { key: null });
      expect(r.status).to.equal(403);
      expect(r.body).to.deep.equal({ error: message });
    });
  }

  it('a valid URL for a file that is not there is 404', async () => {
    const exp = Math.floor(Date.now() / 1000) + 100;
    const key = 'videos/missing.mp4';
    const r = await gw.request('GET', `/files/${encodeKeyPath(key)}?expires=${exp}&sig=${signFileUrl(key, exp, SECRET)}`, { key: null });
    expect(r.status).to.equal(404);
    expect(r.body).to.deep.equal({ error: 'File not found' });
  });

  it('answers conditional requests from the file it opened: 304, 412, and a stale If-Range gets the whole file', async () => {
    const url = await storage.presign('videos/a.mp4', 86_400);
    const first = await get(url);
    const etag = first.headers.get('etag')!;
    const modified = first.headers.get('last-modified')!;
    expect(etag).to.match(/^W\/"[0-9a-f]+-[0-9a-f]+"$/);
    // fetch sends Cache-Control: no-cache with a conditional header unless told otherwise, and no-cache is never a 304.
    const revalidate = { 'cache-control': 'max-age=0' };
    expect((await get(url, { ...revalidate, 'if-none-match': etag })).status).to.equal(304);
    expect((await get(url, { ...revalidate, 'if-modified-since': modified })).status).to.equal(304);
    expect((await get(url, { 'if-none-match': etag })).status).to.equal(200);
    expect((await get(url, { 'if-match': '"other"' })).status).to.equal(412);
    expect((await get(url, { 'if-unmodified-since': 'Thu, 01 Jan 1970 00:00:00 GMT' })).status).to.equal(412);
    const fresh = await get(url, { range: 'bytes=0-9', 'if-range': etag });
    expect([fresh.status, (await fresh.arrayBuffer()).byteLength]).to.deep.equal([206, 10]);
    const stale = await get(url, { range: 'bytes=0-9', 'if-range': '"changed"' });
    expect([stale.status, (await stale.arrayBuffer()).byteLength]).to.deep.equal([200, 1000]);
    const several = await get(url, { range: 'bytes=0-1,5-6' });
    expect([several.status, (await several.arrayBuffer()).byteLength]).to.deep.equal([200, 1000]);
  });

  describe('a symlink a runner planted in the storage directory is never followed', () => {
    let outside: string;
    before(async () => {
      outside = mkdtempSync(join(tmpdir(), 'mj-outside-'));
      writeFileSync(join(outside, 'secret.txt'), 'not for download');
      await storage.upload('videos/checked.mp4', Readable.from([Buffer.from('a stored file')]));
      symlinkSync(join(outside, 'secret.txt'), join(dir, 'videos/out.mp4'));
      symlinkSync(outside, join(dir, 'videos/outdir'));
      // Inside: to a stored file whose own path passes every check, and a directory linked to a stored one.
      symlinkSync(join(dir, 'videos/checked.mp4'), join(dir, 'videos/in.mp4'));
      symlinkSync('checked.mp4', join(dir, 'videos/relative.mp4'));
      symlinkSync(join(dir, 'videos'), join(dir, 'alias'));
    });
    after(() => rmSync(outside, { recursive: true, force: true }));

    for (const [what, key] of [
      ['a link out of the directory', 'videos/out.mp4'],
      ['a path through a directory linked out of it', 'videos/outdir/secret.txt'],
      ['a link to another stored file', 'videos/in.mp4'],
      ['a relative link to another stored file', 'videos/relative.mp4'],
      ['a path through a directory linked to a stored one', 'alias/checked.mp4'],
    ] as const) {
      it(`${what}: 404, with a valid signature`, async () => {
        const r = await get(await storage.presign(key, 86_400), {});
        expect(r.status).to.equal(404);
        expect(await r.json()).to.deep.equal({ error: 'File not found' });
      });
    }

    it('the stored file itself is served', async () => {
      expect(await (await get(await storage.presign('videos/checked.mp4', 86_400))).text()).to.equal('a stored file');
    });
  });

  it('logs the path but never the signature', async () => {
    gw.logs.lines.length = 0;
    const url = await storage.presign('videos/a.mp4', 86_400);
    await get(url);
    const sig = new URL(url).searchParams.get('sig')!;
    expect(gw.logs.text()).to.include(path(url).split('?')[0]!);
    expect(gw.logs.text()).not.to.include(sig);
  });
});
