// The headers every answer of the gateway carries (issue 35 item 7), in one
// place: app.ts sets them first on every request, server.ts's own answers
// to malformed requests carry them too, and a route that serves a document
// of another kind tightens or opens the policy for it (the /docs page,
// stored files).
import type { RequestHandler } from 'express';

/**
 * The Content-Security-Policy of an answer that is not a page: nothing may
 * load or run (a JSON body opened in a browser, an error), and no page may
 * frame it.
 */
export const NOTHING_CSP = "default-src 'none'; frame-ancestors 'none'";

/** Every answer's headers: no MIME sniffing, no Referer to where a link leads, never in a frame. */
export const SECURITY_HEADERS: Readonly<Record<string, string>> = {
  'Content-Security-Policy': NOTHING_CSP,
  'X-Content-Type-Options': 'nosniff',
  'Referrer-Policy': 'no-referrer',
  'X-Frame-Options': 'DENY',
};

/** Express middleware, first in the chain: the headers above on every answer, errors included. */
export function securityHeaders(): RequestHandler {
  return (_req, res, next) => {
    for (const [name, value] of Object.entries(SECURITY_HEADERS)) res.setHeader(name, value);
    next();
  };
}

/** The same headers as raw header lines, for answers written straight to the socket (server.ts). */
export const SECURITY_HEADER_LINES = Object.entries(SECURITY_HEADERS).map(([name, value]) => `${name}: ${value}\r\n`).join('');
