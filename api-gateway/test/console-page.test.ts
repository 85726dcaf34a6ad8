// The console's page and files as the gateway serves them (issue 38 item 2;
// the browser's view of them is test/e2e/console.test.ts): a policy whose
// only inline script is the import map, by its hash; every file the page
// names served gzipped with an ETag and a 304; nothing else under /console;
// the first load within its 150 KB budget.
import { createHash } from 'node:crypto';
import { request, type IncomingHttpHeaders } from 'node:http';
import { gunzipSync } from 'node:zlib';
import { expect } from 'chai';
import { loadGatewayConfig } from '../src/config.js';
import { startTestGateway, type TestGateway } from './support.js';

/** A GET through node:http, the path sent as written and the body as it came (fetch would decompress it and normalise the path). */
function get(base: string, path: string, headers: Record<string, string> = {}): Promise<{ status: number; headers: IncomingHttpHeaders; body: Buffer }> {
  return new Promise((resolve, reject) => {
    const req = request(`${base}${path}`, { headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks) }));
    });
    req.on('error', reject);
    req.path = path;
    req.end();
  });
}

describe('api-gateway: the console page and its files', function () {
  this.timeout(30_000);
  let gw: TestGateway;
  let html: string;
  let csp: string;

  before(async () => {
    gw = await startTestGateway();
    const page = await get(gw.url, '/');
    expect(page.status).to.equal(200);
    expect(page.headers['content-type']).to.equal('text/html; charset=utf-8');
    html = page.body.toString();
    csp = String(page.headers['content-security-policy']);
  });

  after(async () => {
    await gw?.stop();
  });

  const refs = () => [...html.matchAll(/(?:href|src)="([^"]+)"/g)].map((m) => m[1]!).filter((r) => r.startsWith('/console/'));

  it("allows no inline script but the import map, by its hash, and no other origin", () => {
    const inline = [...html.matchAll(/<script(?![^>]*\bsrc=)[^>]*>([\s\S]*?)<\/script>/g)];
    expect(inline).to.have.length(1);
    expect(inline[0]![0]).to.match(/^<script type="importmap">/);
    const hash = createHash('sha256').update(inline[0]![1]!).digest('base64');
    expect(csp.split('; ')).to.deep.equal([
      "default-src 'none'", `script-src 'self' 'sha256-${hash}'`, "style-src 'self'", "img-src 'self'", "media-src 'self' https:",
      "connect-src 'self'", "base-uri 'none'", "form-action 'none'", "frame-ancestors 'none'",
    ]);
    // The map names this origin's files only.
    const map = JSON.parse(inline[0]![1]!) as { imports: Record<string, string> };
    expect(Object.keys(map.imports).sort()).to.deep.equal(['htm', 'preact', 'preact/hooks']);
    for (const target of Object.values(map.imports)) expect(target).to.match(/^\/console\/vendor\/[a-z]+\.mjs$/);
    expect(html).to.not.match(/(?:href|src)="(?:https?:)?\/\//);
  });

  it('serves every file the page names, gzipped when asked, with an ETag that gives a 304; the first load is under 150 KB', async () => {
    const files = refs();
    expect(files).to.include.members(['/console/app.js', '/console/console.css', '/console/vendor/preact.mjs', '/console/vendor/hooks.mjs', '/console/vendor/htm.mjs']);
    let wire = (await get(gw.url, '/', { 'accept-encoding': 'gzip' })).body.length;
    for (const path of files) {
      const plain = await get(gw.url, path);
      expect(plain.status, path).to.equal(200);
      expect(plain.headers['content-type'], path).to.match(path.endsWith('.css') ? /^text\/css/ : /^text\/javascript/);
      expect(plain.headers['x-content-type-options'], path).to.equal('nosniff');
      const zipped = await get(gw.url, path, { 'accept-encoding': 'gzip, br' });
      expect(zipped.headers['content-encoding'], path).to.equal('gzip');
      expect(gunzipSync(zipped.body).equals(plain.body), path).to.equal(true);
      wire += zipped.body.length;
      const etag = String(plain.headers.etag);
      expect(etag, path).to.match(/^"[\w-]+"$/);
      const again = await get(gw.url, path, { 'if-none-match': etag });
      expect([again.status, again.body.length], path).to.deep.equal([304, 0]);
      // As a browser or a cache sends it: a list, a weak comparison (RFC 9110 13.1.2).
      const listed = await get(gw.url, path, { 'if-none-match': `"other", W/${etag}` });
      expect(listed.status, `${path}: a list naming it`).to.equal(304);
      // The gzipped body is another representation: its own validator, never the plain one's.
      const zippedTag = String(zipped.headers.etag);
      expect(zippedTag, path).to.not.equal(etag);
      const zippedAgain = await get(gw.url, path, { 'if-none-match': zippedTag, 'accept-encoding': 'gzip' });
      expect(zippedAgain.status, path).to.equal(304);
      expect((await get(gw.url, path, { 'if-none-match': zippedTag })).status, `${path}: plain asked with the gzip tag`).to.equal(200);
    }
    expect(wire).to.be.below(150 * 1024);
  });

  it('answers 404 for anything else under /console and for other methods, as JSON', async () => {
    for (const path of ['/console/', '/console/nope.js', '/console/vendor/preact.mjs.map', '/console/../package.json', '/console/vendor/%2e%2e/app.js', '/console/APP.JS']) {
      const r = await get(gw.url, path);
      expect([r.status, r.body.toString()], path).to.deep.equal([404, '{"error":"Not found"}']);
    }
    for (const [method, path] of [['POST', '/'], ['DELETE', '/console/app.js'], ['PUT', '/console/console.css']] as const) {
      const r = await gw.request(method, path, { key: null });
      expect([r.status, r.body], `${method} ${path}`).to.deep.equal([404, { error: 'Not found' }]);
    }
    const head = await fetch(`${gw.url}/console/app.js`, { method: 'HEAD' });
    expect(head.status).to.equal(200);
  });

  it('CONSOLE=off: no page and no file, / answers 404 as an API without a console does; another value is refused at start', async () => {
    const env = { DATABASE_URL: 'postgres://127.0.0.1/x', SECRET_KEYS: 'test' };
    expect(loadGatewayConfig(env).CONSOLE).to.equal('on');
    expect(loadGatewayConfig({ ...env, CONSOLE: 'off' }).CONSOLE).to.equal('off');
    expect(() => loadGatewayConfig({ ...env, CONSOLE: 'no' })).to.throw(/CONSOLE/);
    const bare = await startTestGateway({ console: false });
    try {
      for (const path of ['/', '/console/app.js']) {
        const r = await get(bare.url, path);
        expect([r.status, r.body.toString()], path).to.deep.equal([404, '{"error":"Not found"}']);
      }
    } finally {
      await bare.stop();
    }
  });
});
