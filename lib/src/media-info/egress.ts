// The gateway's egress for the yt-dlp runs of POST /metadata, POST /is-short
// and playlist expansions (ADR 0011, "The gateway's own fetches"): one
// egress proxy per process (lib/src/egress-proxy.ts) under the gateway's
// outbound policy, which every run takes as its last --proxy, so the page,
// every redirect and every manifest yt-dlp fetches is checked on the address
// connected to. A refused address answers as a closed port does (the
// connection closes), so the client who chose the URL learns nothing about
// the network behind the gateway. MEDIA_INFO_PROXY, when set, becomes the
// proxy's upstream, each run's session passing as its proxy user name. A run
// for a MediaPlatform with a ProxyPool gets an egress of its own chained to
// the pool's proxy session instead (chained(); docs/adr/0027).
//
// What the proxy cannot see is closed around the process: NO_PROXY is left
// out of the runs' environment (urllib would connect to the hosts it names
// directly), and a sitecustomize.py first on PYTHONPATH stops urllib's FTP
// handler, which yt-dlp's 2023 releases reach on a redirect to ftp:// without
// the proxy (newer releases send ftp:// to the proxy, which refuses it).
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { EgressProxy } from '../egress-proxy.js';
import type { Logger } from '../logger.js';
import type { OutboundPolicy } from '../outbound.js';

/** What a lookup run needs of the egress (MediaInfoOptions.egress). */
export interface LookupEgress {
  /** The run's --proxy: the egress with the run's session as user name. */
  proxyUrl(session: string): string;
  /** The run's environment. */
  env(): NodeJS.ProcessEnv;
}

/** An egress of one run chained to a platform's proxy session (RunningLookupEgress.chained). */
export interface ChainedEgress {
  /** The run's --proxy. */
  proxyUrl(session: string): string;
  close(): Promise<void>;
}

export interface RunningLookupEgress extends LookupEgress {
  /**
   * An egress for one run through `upstream` (a ProxyPool proxy's URL with
   * the run's session rendered in, credentials included) instead of
   * MEDIA_INFO_PROXY: the same outbound policy, answers and secret, as the
   * runner chains its attempt's session (lib/src/egress-proxy.ts).
   */
  chained(upstream: string): Promise<ChainedEgress>;
  close(): Promise<void>;
}

export interface LookupEgressOptions {
  /** The gateway's outbound policy (OUTBOUND_ALLOWED_CIDRS, OUTBOUND_ALLOW_PRIVATE). */
  policy: OutboundPolicy;
  /** MEDIA_INFO_PROXY: an http(s) proxy the egress connects through, `{session}` per run. */
  upstream?: string;
  logger?: Logger;
}

const FTP_GUARD = `# Written by the mediajobs gateway (lib/src/media-info/egress.ts) for its yt-dlp runs:
# urllib's FTP handler connects on its own, around --proxy; nothing here is fetched over ftp.
import urllib.error
import urllib.request


def _ftp_refused(self, req):
    raise urllib.error.URLError('ftp is not fetched')


urllib.request.FTPHandler.ftp_open = _ftp_refused
`;

/** Start the gateway's egress; close it when the gateway stops. */
export async function startLookupEgress(o: LookupEgressOptions): Promise<RunningLookupEgress> {
  const guard = await mkdtemp(join(tmpdir(), 'mediajobs-ytdlp-'));
  let proxy: EgressProxy;
  const secret = randomBytes(18).toString('base64url');
  const start = (upstream: string | undefined) => EgressProxy.start({
    policy: o.policy,
    refusals: 'unreachable',
    secret,
    ...(upstream !== undefined && { upstream }),
    ...(o.logger && { logger: o.logger }),
  });
  try {
    await writeFile(join(guard, 'sitecustomize.py'), FTP_GUARD);
    proxy = await start(o.upstream);
  } catch (err) {
    await rm(guard, { recursive: true, force: true });
    throw err;
  }
  return {
    proxyUrl: (session) => proxy.urlFor(session),
    env: () => lookupEnv(process.env, guard),
    async chained(upstream) {
      const chain = await start(upstream);
      return { proxyUrl: (session) => chain.urlFor(session), close: () => chain.close() };
    },
    async close() {
      await proxy.close();
      await rm(guard, { recursive: true, force: true });
    },
  };
}

/** `env` less NO_PROXY, with `guard` first on PYTHONPATH. */
export function lookupEnv(env: NodeJS.ProcessEnv, guard: string): NodeJS.ProcessEnv {
  const { NO_PROXY: _upper, no_proxy: _lower, PYTHONPATH: path, ...rest } = env;
  return { ...rest, PYTHONPATH: path ? `${guard}${delimiter}${path}` : guard };
}
