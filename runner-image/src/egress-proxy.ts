// The runner's egress: every connection made for the job's source goes
// through here, so the outbound-address policy (lib/src/outbound.ts, ADR
// 0011) decides on the address actually connected to, redirects and
// manifests included. yt-dlp and ffmpeg reach the web through the job's
// egress proxy on 127.0.0.1 (lib/src/egress-proxy.ts: plain forward requests
// and CONNECT tunnels, refusals answered 403 with a reason), and so do the
// runner's own reads (egressGetOptions, egressFetch: requestThrough), so every
// request of an attempt leaves by one path: a platform's upstream session and
// source address included. Why a proxy of our own and what it refuses:
// docs/adr/0014-runner-egress-proxy.md.
//
// What is not ours: storage uploads and status patches (the destination and
// the cluster, chosen by the operator) do not pass here.
import http from 'node:http';
import https from 'node:https';
import { Readable } from 'node:stream';
import type { BoundedGetOptions } from '@mediajobs/lib/batches/http-get';
import { EgressProxy, portAllowed, refusedBy, requestThrough, type EgressAnswer, type EgressOptions } from '@mediajobs/lib/egress-proxy';
import { errFields } from '@mediajobs/lib/logger';
import { OutboundPolicy } from '@mediajobs/lib/outbound';

// The proxy itself is lib's (lib/src/egress-proxy.ts), shared with the gateway's yt-dlp runs.
export {
  DEFAULT_EGRESS_PORTS, EGRESS_REFUSED_PHRASE, EgressProxy, parsePortRanges, type EgressAnswer, type EgressOptions, type PortRanges, type Refusal,
} from '@mediajobs/lib/egress-proxy';

// The job's egress while it runs. One job per runner process, and every
// child process and fetch of the job must take it: a process-wide setting
// cannot be forgotten by one call site the way a parameter can.
let active: EgressProxy | undefined;
/** What the job's egress saw answered to forward requests (400 and up), newest last: the defence table's evidence (classify.ts). */
const answers: EgressAnswer[] = [];
const MAX_ANSWERS = 32;

/** The error answers the running (or last) job's egress proxy saw on plain-http requests; tunnels (https) are not seen. */
export function egressAnswers(): readonly EgressAnswer[] {
  return answers;
}

/** The running job's egress proxy; undefined when the runner runs without one (tests of other parts). */
export function activeEgress(): EgressProxy | undefined {
  return active;
}

/**
 * Run `fn` with an egress proxy for the job, stopped after. NO_PROXY is
 * removed from the environment the children inherit: yt-dlp (urllib) and
 * ffmpeg would connect directly to the hosts it names.
 */
export async function withEgress<T>(o: EgressOptions, fn: () => Promise<T>): Promise<T> {
  answers.length = 0;
  const proxy = await EgressProxy.start({
    ...o,
    observe: (a) => {
      if (answers.push(a) > MAX_ANSWERS) answers.shift();
      o.observe?.(a);
    },
  });
  delete process.env.no_proxy;
  delete process.env.NO_PROXY;
  active = proxy;
  try {
    return await fn();
  } finally {
    if (active === proxy) active = undefined;
    await proxy.close().catch((err: unknown) => o.logger?.warn({ err: errFields(err) }, 'egress proxy did not close cleanly'));
  }
}

/** How many redirects the runner's own reads follow (each one checked like the first request). */
const MAX_REDIRECTS = 5;

/** A policy that refuses nothing but what can never be allowed: the runner's own reads when no egress runs (tests of other parts). */
const NO_EGRESS_POLICY = new OutboundPolicy({ allowed: ['0.0.0.0/0', '::/0'] });

/**
 * The job's egress as boundedGet (lib/src/batches/http-get.ts) takes it, for
 * the runner's small reads (playlists): the same policy and ports as the
 * proxy checked before each hop, the hop sent through the proxy
 * (egressRequest), and the redirects egressFetch follows.
 */
export function egressGetOptions(): Pick<BoundedGetOptions, 'policy' | 'allowPort' | 'maxRedirects' | 'request'> {
  const egress = active;
  if (!egress) return { policy: NO_EGRESS_POLICY, maxRedirects: MAX_REDIRECTS };
  return { policy: egress.policy, allowPort: (port) => portAllowed(egress.ports, port), maxRedirects: MAX_REDIRECTS, request: egressRequest };
}

/**
 * GET `url` under the job's egress policy, for the runner's own reads that
 * stream (a format's head, a clip's byte ranges, show artwork): the host and
 * port as written checked here, then each request sent through the job's
 * egress proxy (every resolved address checked at connect time there, the
 * upstream session and source address its own), each redirect as a new
 * request. A fetch-like Response, redirects followed; rejects on network
 * errors and refusals (code ERR_OUTBOUND_REFUSED).
 */
export async function egressFetch(url: string, init: { headers?: Record<string, string>; signal?: AbortSignal } = {}): Promise<Response> {
  const egress = active;
  const policy = egress?.policy ?? NO_EGRESS_POLICY;
  let target = new URL(url);
  for (let hop = 0; hop <= MAX_REDIRECTS; hop++) {
    if (target.protocol !== 'http:' && target.protocol !== 'https:') throw new Error('only http(s) URLs are fetched');
    const port = Number(target.port || (target.protocol === 'https:' ? 443 : 80));
    const refused = egress ? egress.checkTarget(target.hostname, port) : refusedBy(policy.checkHost(target.hostname));
    if (refused) throw Object.assign(new Error(`egress refused: ${refused.reason}`), { code: 'ERR_OUTBOUND_REFUSED' });
    const res = await egressRequest(target, { headers: init.headers ?? {}, ...(init.signal ? { signal: init.signal } : {}) });
    const status = res.statusCode ?? 502;
    const location = res.headers.location;
    if (status >= 300 && status < 400 && location) {
      res.resume();
      target = new URL(location, target);
      continue;
    }
    const headers = new Headers();
    for (const [k, v] of Object.entries(res.headers)) for (const value of [v ?? []].flat()) headers.append(k, value);
    const empty = status === 204 || status === 304 || init.signal?.aborted;
    if (empty) res.resume();
    return new Response(empty ? null : (Readable.toWeb(res) as ReadableStream<Uint8Array>), { status, headers });
  }
  throw new Error('too many redirects');
}

/**
 * One GET of `target` as the job's children send theirs: through the job's
 * egress proxy (requestThrough) while one runs; straight to the site, names
 * checked as they resolve, when none does (tests of other parts).
 */
export function egressRequest(target: URL, o: { headers: Record<string, string>; signal?: AbortSignal }): Promise<http.IncomingMessage> {
  if (active) return requestThrough(active.url, target, o);
  const client = target.protocol === 'https:' ? https : http;
  return new Promise((resolve, reject) => {
    const req = client.get(target, { headers: o.headers, lookup: NO_EGRESS_POLICY.connectLookup(), agent: false, ...(o.signal ? { signal: o.signal } : {}) }, resolve);
    req.once('error', reject);
  });
}
