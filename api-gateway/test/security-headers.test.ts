// Headers and assets (issue 35 item 7) on the real gateway and real
// Postgres: every answer (JSON, an error, the server's own answer to a
// malformed request, a stored file, the reference page and its assets)
// says nosniff, no-referrer and never-in-a-frame; the /docs page's
// Content-Security-Policy allows no other origin and no inline script, and
// the page loads nothing it does not allow; under /docs/assets only the
// page's own files are served, not the rest of the swagger-ui-dist package.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { expect } from 'chai';
import { newRegistry } from '@mediajobs/lib/metrics';
import { LocalStorageProvider } from '@mediajobs/lib/storage/managed-local';
import { GatewayMetrics } from '../src/metrics.js';
import { rawRequest, requestBytes } from './raw-http.js';
import { startTestGateway, type TestGateway } from './support.js';

const SECRET = 'test-file-url-secret-0123456789';
const NOTHING = "default-src 'none'; frame-ancestors 'none'";

/** The headers every answer carries, as a Headers or a raw answer's lower-cased record gives them. */
function expectSecurityHeaders(get: (name: string) => string | null | undefined, what: string, csp = NOTHING): void {
  expect(get('x-content-type-options'), what).to.equal('nosniff');
  expect(get('referrer-policy'), what).to.equal('no-referrer');
  expect(get('x-frame-options'), what).to.equal('DENY');
  expect(get('content-security-policy'), what).to.equal(csp);
}

/** A policy as directive → sources. */
function directives(csp: string): Map<string, string[]> {
  return new Map(csp.split(';').map((d) => d.trim()).filter(Boolean).map((d) => {
    const [name = '', ...sources] = d.split(/\s+/);
    return [name, sources];
  }));
}

describe('api-gateway: security headers and the reference page\'s assets', function () {
  this.timeout(30_000);
  let gw: TestGateway;
  let dir: string;
  let storage: LocalStorageProvider;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'mj-headers-'));
    gw = await startTestGateway({ files: { dir, secret: SECRET }, metrics: new GatewayMetrics(newRegistry()) });
    storage = new LocalStorageProvider({ dir, publicBaseUrl: gw.url, secret: SECRET });
    await storage.upload('videos/page.html', Readable.from([Buffer.from('<script>alert(document.domain)</script>')]));
  });

  after(async () => {
    await gw?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('a JSON answer: /healthz, /openapi.json and GET /jobs with a key', async () => {
    for (const path of ['/healthz', '/openapi.json']) {
      const r = await gw.request('GET', path, { key: null });
      expect(r.status, path).to.equal(200);
      expectSecurityHeaders((n) => r.headers.get(n), path);
    }
    const jobs = await gw.request('GET', '/jobs');
    expect(jobs.status).to.equal(200);
    expectSecurityHeaders((n) => jobs.headers.get(n), 'GET /jobs');
  });

  it('an error answer: 401, 404, a 400 of a bad body, and the 400 the server writes itself for malformed HTTP', async () => {
    const unauthorized = await gw.request('GET', '/jobs', { key: null });
    expect([unauthorized.status, unauthorized.body]).to.deep.equal([401, { error: 'Missing x-api-key header' }]);
    expectSecurityHeaders((n) => unauthorized.headers.get(n), '401');
    const missing = await gw.request('GET', '/nothing-here', { key: null });
    expect(missing.status).to.equal(404);
    expectSecurityHeaders((n) => missing.headers.get(n), '404');
    const bad = await gw.request('POST', '/jobs', { raw: '{"url":', headers: { 'content-type': 'application/json' } });
    expect([bad.status, bad.body]).to.deep.equal([400, { error: 'Invalid JSON body' }]);
    expectSecurityHeaders((n) => bad.headers.get(n), '400');
    const raw = await rawRequest(gw.url, Buffer.from('GET / HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n'));
    expect([raw.status, JSON.parse(raw.body)]).to.deep.equal([400, { error: 'Bad request' }]);
    expectSecurityHeaders((n) => raw.headers[n], 'malformed request');
    const expectation = await rawRequest(gw.url, requestBytes('POST', '/jobs', [['Expect', 'something-else']], Buffer.from('{}')));
    expect(expectation.status).to.equal(417);
    expectSecurityHeaders((n) => expectation.headers[n], '417');
  });

  it('/docs: a strict policy with no other origin and no inline script, and the page loads only what it allows', async () => {
    const page = await gw.request('GET', '/docs', { key: null });
    expect(page.status).to.equal(200);
    expect(page.headers.get('content-type')).to.match(/^text\/html/);
    const csp = page.headers.get('content-security-policy')!;
    expectSecurityHeaders((n) => page.headers.get(n), '/docs', csp);
    const policy = directives(csp);
    expect(policy.get('default-src')).to.deep.equal(["'none'"]);
    expect(policy.get('frame-ancestors')).to.deep.equal(["'none'"]);
    expect(policy.get('script-src')).to.deep.equal(["'self'"]);
    expect(policy.get('style-src')).to.deep.equal(["'self'"]);
    expect(policy.get('base-uri')).to.deep.equal(["'none'"]);
    for (const [name, sources] of policy) {
      for (const source of sources) expect(["'self'", "'none'", 'data:'], `${name} ${source}`).to.include(source);
    }
    // No inline script or style, and no event handler attribute: everything the page runs is a file the policy allows.
    const scripts = [...page.text.matchAll(/<script\b([^>]*)>([\s\S]*?)<\/script>/g)];
    expect(scripts).to.have.length(2);
    for (const [, attributes, body] of scripts) {
      expect(attributes).to.match(/\bsrc="/);
      expect(body!.trim()).to.equal('');
    }
    expect(page.text).to.not.match(/<style\b|\sstyle=|\son\w+=/i);
    const refs = [...page.text.matchAll(/(?:src|href)="([^"]*)"/g)].map((m) => m[1]!);
    expect(refs).to.deep.equal(['/docs/assets/swagger-ui.css', '/docs/assets/swagger-ui-bundle.js', '/docs/assets/docs.js']);
    for (const ref of refs) {
      const asset = await fetch(new URL(ref, gw.url));
      expect(asset.status, ref).to.equal(200);
      expect(asset.headers.get('content-type'), ref).to.match(ref.endsWith('.css') ? /^text\/css/ : /^(text|application)\/javascript/);
      expectSecurityHeaders((n) => asset.headers.get(n), ref);
      const text = await asset.text();
      if (ref.endsWith('docs.js')) {
        // The initializer: this origin's document, and no validator badge (fetched from validator.swagger.io by default).
        expect(text).to.include("url: '/openapi.json'").and.include('validatorUrl: null');
        expect(text).to.not.match(/https?:\/\//);
      }
    }
  });

  it('/docs/assets serves the page\'s files only: the package\'s demo page, OAuth2 redirect, initializer, maps and the rest are 404', async () => {
    for (const name of [
      'index.html', 'oauth2-redirect.html', 'oauth2-redirect.js', 'swagger-initializer.js', 'swagger-ui-bundle.js.map', 'swagger-ui.css.map',
      'swagger-ui.js', 'swagger-ui.js.map', 'swagger-ui-standalone-preset.js', 'index.css', 'favicon-32x32.png', 'package.json', 'LICENSE', '',
      '%2e%2e/package.json', 'swagger-ui.css/', 'SWAGGER-UI.CSS',
    ]) {
      const r = await gw.request('GET', `/docs/assets/${name}`, { key: null });
      expect([name, r.status, r.body]).to.deep.equal([name, 404, { error: 'Not found' }]);
      expectSecurityHeaders((n) => r.headers.get(n), name);
    }
    const head = await fetch(`${gw.url}/docs/assets/swagger-ui-bundle.js`, { method: 'HEAD' });
    expect(head.status).to.equal(200);
    expect((await fetch(`${gw.url}/docs/assets/swagger-ui-bundle.js`, { method: 'POST' })).status).to.equal(404);
  });

  it('/files: a stored HTML file is served sandboxed, runs nothing and is never sniffed', async () => {
    const r = await fetch(await storage.presign('videos/page.html', 3600));
    expect(r.status).to.equal(200);
    expect(r.headers.get('content-type')).to.match(/^text\/html/);
    expectSecurityHeaders((n) => r.headers.get(n), '/files', `${NOTHING}; sandbox`);
    const range = await fetch(await storage.presign('videos/page.html', 3600), { headers: { range: 'bytes=0-3' } });
    expect(range.status).to.equal(206);
    expectSecurityHeaders((n) => range.headers.get(n), '/files 206', `${NOTHING}; sandbox`);
    const missing = await fetch(await storage.presign('videos/gone.html', 3600));
    expect(missing.status).to.equal(404);
    expectSecurityHeaders((n) => missing.headers.get(n), '/files 404');
  });

  it('/metrics: 404 on the API port, 200 on the metrics port', async () => {
    const api = await gw.request('GET', '/metrics', { key: null });
    expect([api.status, api.body]).to.deep.equal([404, { error: 'Not found' }]);
    const metrics = await fetch(`${gw.metricsUrl!}/metrics`);
    expect(metrics.status).to.equal(200);
    expect(metrics.headers.get('x-content-type-options')).to.equal('nosniff');
  });
});
