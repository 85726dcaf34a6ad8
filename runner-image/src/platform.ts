// What an attempt gets from its MediaPlatform (issue 37): the proxy session
// its egress proxy chains to, the cookie file yt-dlp sends, the platform's
// yt-dlp options and the source address the egress connects from. The
// operator decides all of it (which platform, proxy and cookie file); this
// module only reads what it handed over: ids and options in the
// environment (config.ts), the secrets in the job's credentials Secret:
//   upstream-proxy-url  the proxy session's URL, credentials included
//   cookies.txt         the chosen Netscape cookie file
// Neither secret is ever logged, reported or put in an error message; the
// cookie file is copied to the job's work directory (the pod's writable
// tmp, removed with it), since yt-dlp writes its cookie file back and the
// Secret's mount is read-only.
import { copyFile, chmod, readFile } from 'node:fs/promises';
import path from 'node:path';
import type { RunnerEnv } from './config.js';

/** The keys of the job's credentials Secret the operator adds for a platform. */
export const UPSTREAM_PROXY_KEY = 'upstream-proxy-url';
export const COOKIES_KEY = 'cookies.txt';

const UPSTREAM_SCHEMES = new Set(['http:', 'https:', 'socks5:', 'socks5h:']);

export interface PlatformRun {
  name: string;
  proxyPool?: string;
  proxyId?: string;
  cookieId?: string;
  /** The platform's yt-dlp options (after YTDLP_ARGS). */
  ytdlpArgs: string[];
  /** The proxy session's URL with its credentials: the egress proxy's upstream. */
  upstream?: string;
  /** The cookie file as mounted (read-only); copyCookies gives yt-dlp a copy. */
  cookieFile?: string;
  sourceAddress?: string;
}

/** A platform's secret that cannot be used; the message names the key, never its value. */
export class PlatformSetupError extends Error {
  override readonly name = 'PlatformSetupError';
}

/** The attempt's platform, or undefined for a job of none (nothing of this module applies then). */
export async function loadPlatformRun(env: RunnerEnv): Promise<PlatformRun | undefined> {
  if (!env.RUNNER_PLATFORM) return undefined;
  const dir = env.MEDIAJOBS_CREDENTIALS_DIR;
  const upstream = (await readOptional(path.join(dir, UPSTREAM_PROXY_KEY)))?.trim();
  if (upstream !== undefined && !(URL.canParse(upstream) && UPSTREAM_SCHEMES.has(new URL(upstream).protocol))) {
    throw new PlatformSetupError(`credentials ${UPSTREAM_PROXY_KEY}: must be an http, https, socks5 or socks5h URL`);
  }
  const cookieFile = path.join(dir, COOKIES_KEY);
  const hasCookies = (await readOptional(cookieFile)) !== undefined;
  return {
    name: env.RUNNER_PLATFORM,
    ...(env.RUNNER_PROXY_POOL ? { proxyPool: env.RUNNER_PROXY_POOL } : {}),
    ...(env.RUNNER_PROXY_ID ? { proxyId: env.RUNNER_PROXY_ID } : {}),
    ...(env.RUNNER_COOKIE_ID && hasCookies ? { cookieId: env.RUNNER_COOKIE_ID } : {}),
    ytdlpArgs: env.RUNNER_PLATFORM_YTDLP_ARGS ?? [],
    ...(upstream ? { upstream } : {}),
    ...(hasCookies ? { cookieFile } : {}),
    ...(env.RUNNER_SOURCE_ADDRESS ? { sourceAddress: env.RUNNER_SOURCE_ADDRESS } : {}),
  };
}

/** Copy the cookie file into the work directory (owner-only), for yt-dlp's --cookies; undefined when there is none. */
export async function copyCookies(run: PlatformRun | undefined, workDir: string): Promise<string | undefined> {
  if (!run?.cookieFile) return undefined;
  const copy = path.join(workDir, COOKIES_KEY);
  await copyFile(run.cookieFile, copy);
  await chmod(copy, 0o600);
  return copy;
}

/**
 * The yt-dlp options a platform adds after the deployment's: its own, then
 * the runner's (the cookie copy). The proxy stays the egress's, which
 * chains to the platform's proxy session; the source address is the
 * egress's too (yt-dlp's --source-address would bind its connection to the
 * egress on 127.0.0.1, not the one that leaves the pod).
 */
export function platformYtdlpArgs(run: PlatformRun | undefined, cookieCopy: string | undefined): string[] {
  return [...(run?.ytdlpArgs ?? []), ...(cookieCopy ? ['--cookies', cookieCopy] : [])];
}

async function readOptional(file: string): Promise<string | undefined> {
  try {
    return await readFile(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw new PlatformSetupError(`credentials ${path.basename(file)}: cannot be read`);
  }
}
