// One GET of a document the service reads for a user (the podcast lookup
// API's answer, a show's RSS feed), bounded in every way a remote server
// could stretch it:
// - time: one wall-clock deadline over every hop and the whole body, so a
//   server trickling bytes cannot hold the request past it;
// - size: the decoded body (after gzip), checked against Content-Length
//   first and counted as it arrives;
// - redirects: at most `maxRedirects` hops, each one to an http(s) URL;
// - addresses: every hop asks the outbound-address policy (ADR 0011) before
//   any connection: its literal host with checkUrl (Node does not call
//   `lookup` for IP literals), and every address a name resolves to at
//   connect time through connectLookup, on a fresh agent so no pooled socket
//   opened by someone else is reused; its port too, when the caller limits
//   ports (the runner's egress, ADR 0014).
// Failures are typed (GetError) for the caller to turn into its own answer.
// Callers: the show resolver (show.ts) and the runner's playlist reads
// (runner-image/src/live.ts fetchText, through the job's egress: `request`).
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import type { Readable } from 'node:stream';
import { createGunzip } from 'node:zlib';
import { OutboundRefusedError, type OutboundPolicy, type RefusedCategory } from '../outbound.js';

export interface BoundedGetOptions {
  policy: OutboundPolicy;
  /** Wall-clock bound of the whole GET: every hop, headers and body. */
  timeoutMs: number;
  /** Bound of the decoded body, in bytes. */
  maxBytes: number;
  maxRedirects: number;
  /** The caller's abort (client gone); distinguished from the deadline. */
  signal?: AbortSignal;
  accept?: string;
  /**
   * More request headers (a media format's User-Agent, Referer, cookies);
   * they win over the defaults, except Accept-Encoding: the body is decoded
   * here, and only gzip is.
   */
  headers?: Readonly<Record<string, string>>;
  /** Whether a hop may connect to this port; every port when absent. */
  allowPort?: (port: number) => boolean;
  /**
   * How a hop is sent once its literal host and port passed: by default
   * straight to the site, names checked as they resolve (connectLookup). The
   * runner sends its through the job's egress proxy (requestThrough), which
   * checks them again and keeps the attempt on its upstream session.
   */
  request?: (url: URL, o: { headers: Record<string, string>; signal: AbortSignal }) => Promise<IncomingMessage>;
}

export type GetFailure =
  | { kind: 'refused'; category: RefusedCategory }
  | { kind: 'port_refused'; port: number }
  /** The URL asked for does not parse or is not http(s). */
  | { kind: 'bad_url' }
  | { kind: 'timeout' }
  | { kind: 'aborted' }
  | { kind: 'too_large' }
  | { kind: 'status'; status: number }
  | { kind: 'too_many_redirects' }
  /** A redirect without a Location, or to something other than http(s). */
  | { kind: 'bad_redirect' }
  /** A Content-Encoding other than identity or gzip. */
  | { kind: 'encoding' }
  | { kind: 'network'; code?: string };

export class GetError extends Error {
  constructor(readonly failure: GetFailure) {
    super(`GET failed: ${describeFailure(failure)}`);
    this.name = 'GetError';
  }
}

/** A short text for logs; never a URL. */
export function describeFailure(f: GetFailure): string {
  switch (f.kind) {
    case 'refused':
      return `address refused (${f.category})`;
    case 'port_refused':
      return `port ${f.port} refused`;
    case 'status':
      return `HTTP ${f.status}`;
    case 'network':
      return `network error${f.code ? ` (${f.code})` : ''}`;
    default:
      return f.kind.replaceAll('_', ' ');
  }
}

export interface GetResult {
  body: Buffer;
  /** The URL the body came from, after redirects. */
  url: string;
  contentType?: string;
}

const REDIRECTS = new Set([301, 302, 303, 307, 308]);
const USER_AGENT = 'mediajobs (podcast feed reader)';

/** GET `url`, following redirects within the bounds; throws GetError. */
export async function boundedGet(url: string, opts: BoundedGetOptions): Promise<GetResult> {
  const deadline = AbortSignal.timeout(opts.timeoutMs);
  const signal = opts.signal ? AbortSignal.any([opts.signal, deadline]) : deadline;
  const why = (err: unknown): GetError => {
    if (err instanceof GetError) return err;
    if (opts.signal?.aborted) return new GetError({ kind: 'aborted' });
    if (deadline.aborted) return new GetError({ kind: 'timeout' });
    if (err instanceof OutboundRefusedError) return new GetError({ kind: 'refused', category: err.category });
    const code = (err as NodeJS.ErrnoException | undefined)?.code;
    return new GetError({ kind: 'network', ...(typeof code === 'string' && { code }) });
  };
  try {
    let current = httpUrl(url, 'bad_url');
    for (let hop = 0; ; hop++) {
      const res = await requestOnce(current, opts, signal);
      const status = res.statusCode ?? 0;
      if (REDIRECTS.has(status)) {
        res.resume();
        if (hop >= opts.maxRedirects) throw new GetError({ kind: 'too_many_redirects' });
        current = redirectTarget(current, res.headers.location);
        continue;
      }
      if (status !== 200) {
        res.resume();
        throw new GetError({ kind: 'status', status });
      }
      const contentType = res.headers['content-type'];
      return { body: await readBody(res, opts.maxBytes), url: current.href, ...(contentType !== undefined && { contentType }) };
    }
  } catch (err) {
    throw why(err);
  }
}

function redirectTarget(from: URL, location: string | undefined): URL {
  if (!location) throw new GetError({ kind: 'bad_redirect' });
  return httpUrl(location, 'bad_redirect', from);
}

/** `text` (relative to `base`) as an http(s) URL; else a GetError of `kind`. */
function httpUrl(text: string, kind: 'bad_url' | 'bad_redirect', base?: URL): URL {
  let url: URL;
  try {
    url = new URL(text, base);
  } catch {
    throw new GetError({ kind });
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new GetError({ kind });
  return url;
}

/** One request: the literal host and the port checked first, names checked as they resolve. */
function requestOnce(url: URL, opts: BoundedGetOptions, signal: AbortSignal): Promise<IncomingMessage> {
  const literal = opts.policy.checkUrl(url);
  if (!literal.ok) return Promise.reject(new GetError({ kind: 'refused', category: literal.category }));
  const https = url.protocol === 'https:';
  const port = Number(url.port || (https ? 443 : 80));
  if (opts.allowPort && !opts.allowPort(port)) return Promise.reject(new GetError({ kind: 'port_refused', port }));
  if (opts.request) return opts.request(url, { headers: requestHeaders(opts), signal });
  const request = https ? httpsRequest : httpRequest;
  return new Promise((resolve, reject) => {
    const req = request(url, { method: 'GET', agent: false, lookup: opts.policy.connectLookup(), signal, headers: requestHeaders(opts) }, resolve);
    req.once('error', reject);
    req.end();
  });
}

/** Ours, then the caller's (names compared without case), then the one the body decoding needs. */
function requestHeaders(opts: BoundedGetOptions): Record<string, string> {
  const given = Object.entries(opts.headers ?? {}).map(([name, value]) => [name.toLowerCase(), value]);
  return { 'user-agent': USER_AGENT, ...(opts.accept && { accept: opts.accept }), ...Object.fromEntries(given), 'accept-encoding': 'gzip' };
}

/** The decoded body, at most `maxBytes`; the connection is dropped as soon as it would be more. */
async function readBody(res: IncomingMessage, maxBytes: number): Promise<Buffer> {
  const encoding = (res.headers['content-encoding'] ?? 'identity').trim().toLowerCase();
  const gzip = encoding === 'gzip' || encoding === 'x-gzip';
  if (!gzip && encoding !== 'identity') {
    res.destroy();
    throw new GetError({ kind: 'encoding' });
  }
  const declared = Number(res.headers['content-length']);
  if (!gzip && Number.isFinite(declared) && declared > maxBytes) {
    res.destroy();
    throw new GetError({ kind: 'too_large' });
  }
  let body: Readable = res;
  if (gzip) {
    const gunzip = createGunzip();
    res.once('error', (err) => gunzip.destroy(err));
    body = res.pipe(gunzip);
  }
  const chunks: Buffer[] = [];
  let total = 0;
  for await (const chunk of body as AsyncIterable<Buffer>) {
    total += chunk.length;
    if (total > maxBytes) {
      res.destroy();
      body.destroy();
      throw new GetError({ kind: 'too_large' });
    }
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
}
