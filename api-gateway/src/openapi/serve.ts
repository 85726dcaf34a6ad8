// GET /openapi.json and the reference page GET /docs: Swagger UI from the
// swagger-ui-dist package, so the page works without reaching any CDN. Both
// open: the description of the API is no secret, and neither touches a key,
// the database or the rate limit. Of the package only the two files the
// page loads are served (an allow-list, not the package's directory: it also
// holds a demo index.html pointing at an example API, oauth2-redirect.html
// and source maps), with the page's initializer as a file of its own, so the
// page's Content-Security-Policy allows no inline script and no other origin.
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { Router, type Request, type Response, type NextFunction } from 'express';
import { openApiDocument } from './document.js';

const ASSETS = '/docs/assets';
/** The package's directory of built files (what its untyped absolutePath() answers). */
const SWAGGER_UI_DIR = dirname(createRequire(import.meta.url).resolve('swagger-ui-dist/package.json'));

/** Our initializer: this origin's document, and no validator badge (the package's default fetches validator.swagger.io). */
const INIT = "window.ui = SwaggerUIBundle({ url: '/openapi.json', dom_id: '#swagger-ui', deepLinking: true, validatorUrl: null });\n";

/** The page's assets, by name under /docs/assets/: the package's two files, and the initializer. */
const PACKAGE_FILES = new Set(['swagger-ui.css', 'swagger-ui-bundle.js']);
const INIT_FILE = 'docs.js';

/** The page. Asset URLs are root-relative (this origin only); no inline script or style. */
const PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Media download jobs API</title>
<link rel="stylesheet" href="${ASSETS}/swagger-ui.css">
</head>
<body>
<div id="swagger-ui"></div>
<script src="${ASSETS}/swagger-ui-bundle.js"></script>
<script src="${ASSETS}/${INIT_FILE}"></script>
</body>
</html>
`;

/**
 * The page's policy: scripts, styles and fonts from this origin only, the
 * document and "Try it out" requests to this origin, images from this
 * origin or inline data (Swagger UI's icons are data: URLs in its CSS),
 * nothing framed, no frame around it, no form or base URL elsewhere.
 */
export const DOCS_CSP = [
  "default-src 'none'", "script-src 'self'", "style-src 'self'", "img-src 'self' data:", "font-src 'self'", "connect-src 'self'",
  "base-uri 'none'", "form-action 'none'", "frame-ancestors 'none'",
].join('; ');

/** GET and HEAD of the allow-listed assets; anything else under /docs/assets falls through to the 404. */
function assets(req: Request, res: Response, next: NextFunction): void {
  const name = req.path.slice(1);
  if (req.method !== 'GET' && req.method !== 'HEAD') return next();
  if (name === INIT_FILE) {
    res.type('js').send(INIT);
    return;
  }
  if (!PACKAGE_FILES.has(name)) return next();
  res.sendFile(join(SWAGGER_UI_DIR, name), (err?: Error) => {
    if (err && !res.headersSent) next(err);
  });
}

export function openApiRouter(): Router {
  const router = Router();
  // Built once: the document depends on code only, never on a request.
  const body = JSON.stringify(openApiDocument());
  router.get('/openapi.json', (_req, res) => {
    res.type('application/json').send(body);
  });
  router.get('/docs', (_req, res) => {
    res.setHeader('Content-Security-Policy', DOCS_CSP);
    res.type('html').send(PAGE);
  });
  router.use(ASSETS, assets);
  return router;
}
