// The web console (issue 38 item 2; docs/console.md): GET / is its page, and
// /console/ its files: the page's own ES modules and stylesheet
// (api-gateway/console/) and, under /console/vendor/, Preact, its hooks and
// htm from their npm packages. No build step: the browser loads the modules
// as they are, the bare names `preact`, `preact/hooks` and `htm` resolved by
// the page's import map. Every file is read once at start-up, kept in memory
// with its gzip form and a content hash as its ETag (the whole console is a
// few tens of kilobytes); anything not in that list falls through to the 404.
// All of it is open, as /docs is: the page holds no data, and every request
// it makes to the API carries the key the person typed (x-api-key).
import { createHash } from 'node:crypto';
import { readFileSync, readdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, extname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';
import { Router, type Request, type Response, type NextFunction } from 'express';

/** The page's own files: api-gateway/console, beside src/ in development and beside dist/ in the image. */
const CONSOLE_DIR = fileURLToPath(new URL('../../console/', import.meta.url));
const PREFIX = '/console';
const VENDOR = `${PREFIX}/vendor`;

const resolve = createRequire(import.meta.url).resolve;

/**
 * The packages' browser ES modules, by the name the page loads them under,
 * and the bare specifier each answers. Preact's exports name its ES modules;
 * htm's name its CommonJS build for require, beside which its ES module lies.
 */
const VENDOR_FILES: readonly { name: string; file: string; specifier: string }[] = [
  { name: 'preact.mjs', file: resolve('preact'), specifier: 'preact' },
  { name: 'hooks.mjs', file: resolve('preact/hooks'), specifier: 'preact/hooks' },
  { name: 'htm.mjs', file: join(dirname(resolve('htm')), 'htm.module.js'), specifier: 'htm' },
];

const TYPES: Readonly<Record<string, string>> = { '.js': 'text/javascript; charset=utf-8', '.mjs': 'text/javascript; charset=utf-8', '.css': 'text/css; charset=utf-8' };

interface Asset {
  type: string;
  body: Buffer;
  gzip: Buffer;
  etag: string;
}

function asset(type: string, body: Buffer): Asset {
  return { type, body, gzip: gzipSync(body, { level: 9 }), etag: `"${createHash('sha256').update(body).digest('base64url').slice(0, 27)}"` };
}

/** The import map, as the page holds it inline; its hash is the only inline script the policy allows. */
const IMPORT_MAP = JSON.stringify({ imports: Object.fromEntries(VENDOR_FILES.map((v) => [v.specifier, `${VENDOR}/${v.name}`])) });
const IMPORT_MAP_HASH = `'sha256-${createHash('sha256').update(IMPORT_MAP).digest('base64')}'`;

/**
 * The console page's policy: scripts from this origin and the one inline
 * import map (by its hash, never 'unsafe-inline'), styles and images from
 * this origin (charts are inline SVG elements, not images), API calls to
 * this origin only. Media: this origin (local managed storage) and any
 * https origin, since a delivered file is played from wherever it was
 * stored (the key's own buckets are not known when the page is served); a
 * media element runs no code, and connect-src keeps scripts from reading
 * anything elsewhere. No frame, no form posted elsewhere, no base URL.
 */
export const CONSOLE_CSP = [
  "default-src 'none'", `script-src 'self' ${IMPORT_MAP_HASH}`, "style-src 'self'", "img-src 'self'", "media-src 'self' https:",
  "connect-src 'self'", "base-uri 'none'", "form-action 'none'", "frame-ancestors 'none'",
].join('; ');

/** Every file of the console, by its URL path. */
function loadAssets(): Map<string, Asset> {
  const files = new Map<string, Asset>();
  for (const name of readdirSync(CONSOLE_DIR).sort()) {
    const type = TYPES[extname(name)];
    if (type) files.set(`${PREFIX}/${name}`, asset(type, readFileSync(join(CONSOLE_DIR, name))));
  }
  for (const v of VENDOR_FILES) files.set(`${VENDOR}/${v.name}`, asset(TYPES['.mjs']!, readFileSync(v.file)));
  return files;
}

/**
 * The page: the import map, every module preloaded (the browser fetches
 * them at once instead of one import after another), the entry module.
 * Nothing inline but the map; the page says what it needs when scripts do
 * not run.
 */
function page(modules: readonly string[]): string {
  const preload = modules.map((m) => `<link rel="modulepreload" href="${m}">`).join('\n');
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Media jobs console</title>
<link rel="stylesheet" href="${PREFIX}/console.css">
<script type="importmap">${IMPORT_MAP}</script>
${preload}
<script type="module" src="${PREFIX}/app.js"></script>
</head>
<body>
<div id="app"><main><h1>Media jobs console</h1><noscript><p>The console needs JavaScript. The API reference is at <a href="/docs">/docs</a>.</p></noscript></main></div>
</body>
</html>
`;
}

/** The body, gzipped when the client takes gzip; 304 when its copy is current. */
function send(req: Request, res: Response, a: Asset): void {
  const gzip = /\bgzip\b/.test(req.headers['accept-encoding'] ?? '');
  // Each coding is a representation of its own, with a strong validator of its own (RFC 9110 8.8.3).
  res.setHeader('ETag', gzip ? `${a.etag.slice(0, -1)}-gz"` : a.etag);
  // Revalidated on every load (a 304 is a few bytes), so a new gateway's console is never mixed with an old cached module.
  res.setHeader('Cache-Control', 'no-cache');
  res.setHeader('Vary', 'Accept-Encoding');
  res.type(a.type);
  // Express's freshness check (the `fresh` package): If-None-Match lists, weak validators and `*` as RFC 9110 13.1.2 reads them.
  if (req.fresh) {
    res.status(304).end();
    return;
  }
  if (gzip) res.setHeader('Content-Encoding', 'gzip');
  res.send(gzip ? a.gzip : a.body);
}

export function consoleRouter(): Router {
  const files = loadAssets();
  const modules = [...files.keys()].filter((p) => p.endsWith('.js') || p.endsWith('.mjs'));
  const html = asset('text/html; charset=utf-8', Buffer.from(page(modules)));
  const router = Router();
  router.get('/', (req, res) => {
    res.setHeader('Content-Security-Policy', CONSOLE_CSP);
    send(req, res, html);
  });
  router.use(PREFIX, (req: Request, res: Response, next: NextFunction) => {
    const a = req.method === 'GET' || req.method === 'HEAD' ? files.get(`${PREFIX}${req.path}`) : undefined;
    if (!a) return next();
    send(req, res, a);
  });
  return router;
}
