// GET /openapi.json and the reference page GET /docs: Swagger UI from the
// swagger-ui-dist package (its files under /docs/assets/), so the page works
// without reaching any CDN. Both open: the description of the API is no
// secret, and neither touches a key, the database or the rate limit.
import { createRequire } from 'node:module';
import { dirname } from 'node:path';
import { Router, static as serveStatic } from 'express';
import { openApiDocument } from './document.js';

const ASSETS = '/docs/assets';
/** The package's directory of built files (what its untyped absolutePath() answers). */
const SWAGGER_UI_DIR = dirname(createRequire(import.meta.url).resolve('swagger-ui-dist/package.json'));

/**
 * The page. Asset URLs are root-relative (this origin only); the initializer
 * is inline so no file of the package (its swagger-initializer.js points at
 * an example API) is needed.
 */
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
<script>
window.ui = SwaggerUIBundle({ url: '/openapi.json', dom_id: '#swagger-ui', deepLinking: true });
</script>
</body>
</html>
`;

export function openApiRouter(): Router {
  const router = Router();
  // Built once: the document depends on code only, never on a request.
  const body = JSON.stringify(openApiDocument());
  router.get('/openapi.json', (_req, res) => {
    res.type('application/json').send(body);
  });
  router.get('/docs', (_req, res) => {
    res.type('html').send(PAGE);
  });
  router.use(ASSETS, serveStatic(SWAGGER_UI_DIR, { index: false, fallthrough: true }));
  return router;
}
