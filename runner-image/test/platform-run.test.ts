// What a runner takes from its MediaPlatform (platform.ts, config.ts): the
// ids and options in its environment, the proxy session and the cookie file
// from its credentials Secret; a --proxy anywhere in yt-dlp's options is
// refused at start with a message pointing at ProxyPool, never overridden.
import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import { ConfigError } from '@mediajobs/lib/config';
import { loadRunnerEnv } from '../src/config.js';
import { copyCookies, loadPlatformRun, platformYtdlpArgs, PlatformSetupError } from '../src/platform.js';

const BASE = { MEDIAJOB_SPEC: '{"url":"http://127.0.0.1/v"}' };
const COOKIES = '# Netscape HTTP Cookie File\n.video.test\tTRUE\t/\tFALSE\t2000000000\tSID\tcookie-value-5e1f0a\n';
const PROXY_URL = 'http://user-session-0a1b2c3d4e5f-1:pool-pw-91c2@127.0.0.1:3128';

function configError(env: NodeJS.ProcessEnv): string {
  try {
    loadRunnerEnv(env);
  } catch (err) {
    expect(err).to.be.instanceOf(ConfigError);
    return (err as Error).message;
  }
  throw new Error('loaded');
}

describe('runner: a platform\'s settings', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'platform-run-'));
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('refuses --proxy in YTDLP_ARGS and in the platform\'s options at start, pointing at ProxyPool', () => {
    for (const env of [{ YTDLP_ARGS: '--sleep-requests 1 --proxy http://x:3128' }, { YTDLP_ARGS: '--proxy=socks5://x' }]) {
      expect(configError({ ...BASE, ...env })).to.match(/^invalid configuration:\n {2}YTDLP_ARGS: --proxy is not allowed: .*ProxyPool/);
    }
    expect(configError({ ...BASE, RUNNER_PLATFORM: 'vp', RUNNER_PLATFORM_YTDLP_ARGS: '["--proxy","http://x"]' })).to.include('RUNNER_PLATFORM_YTDLP_ARGS: --proxy is not allowed');
  });

  it('takes the platform\'s options from the allow-list only, as a JSON array', () => {
    expect(configError({ ...BASE, RUNNER_PLATFORM_YTDLP_ARGS: '["--exec","rm -rf /"]' })).to.include('RUNNER_PLATFORM_YTDLP_ARGS: names a yt-dlp option a MediaPlatform may not set');
    expect(configError({ ...BASE, RUNNER_PLATFORM_YTDLP_ARGS: '--sleep-requests 1' })).to.include('RUNNER_PLATFORM_YTDLP_ARGS: must be JSON');
    expect(configError({ ...BASE, RUNNER_SOURCE_ADDRESS: 'eth0' })).to.include('RUNNER_SOURCE_ADDRESS: must be an IP address');
    expect(loadRunnerEnv({ ...BASE, RUNNER_PLATFORM_YTDLP_ARGS: '["--sleep-requests","1"]' }).RUNNER_PLATFORM_YTDLP_ARGS).to.deep.equal(['--sleep-requests', '1']);
  });

  it('reads the proxy session and the cookie file from the credentials Secret; yt-dlp gets a private copy after the platform\'s options', async () => {
    await writeFile(path.join(dir, 'upstream-proxy-url'), `${PROXY_URL}\n`);
    await writeFile(path.join(dir, 'cookies.txt'), COOKIES, { mode: 0o444 });
    const env = loadRunnerEnv({
      ...BASE, MEDIAJOBS_CREDENTIALS_DIR: dir, RUNNER_PLATFORM: 'video-platform', RUNNER_PROXY_POOL: 'residential', RUNNER_PROXY_ID: 'p2',
      RUNNER_COOKIE_ID: 'account-b', RUNNER_PLATFORM_YTDLP_ARGS: '["--sleep-requests","1"]', RUNNER_SOURCE_ADDRESS: '2001:db8::7',
    });
    const run = await loadPlatformRun(env);
    expect(run).to.deep.equal({
      name: 'video-platform', proxyPool: 'residential', proxyId: 'p2', cookieId: 'account-b', ytdlpArgs: ['--sleep-requests', '1'],
      upstream: PROXY_URL, cookieFile: path.join(dir, 'cookies.txt'), sourceAddress: '2001:db8::7',
    });
    const work = await mkdtemp(path.join(os.tmpdir(), 'platform-work-'));
    try {
      const copy = await copyCookies(run, work);
      expect(copy).to.equal(path.join(work, 'cookies.txt'));
      expect(await readFile(copy!, 'utf8')).to.equal(COOKIES);
      expect((await stat(copy!)).mode & 0o777).to.equal(0o600);
      expect(platformYtdlpArgs(run, copy)).to.deep.equal(['--sleep-requests', '1', '--cookies', copy]);
    } finally {
      await rm(work, { recursive: true, force: true });
    }
  });

  it('a job of no platform reads nothing, even with the keys present; a bad proxy URL is named by its key, never shown', async () => {
    await writeFile(path.join(dir, 'upstream-proxy-url'), 'ftp://user:pool-pw-91c2@127.0.0.1:21');
    expect(await loadPlatformRun(loadRunnerEnv({ ...BASE, MEDIAJOBS_CREDENTIALS_DIR: dir }))).to.equal(undefined);
    const err = await loadPlatformRun(loadRunnerEnv({ ...BASE, MEDIAJOBS_CREDENTIALS_DIR: dir, RUNNER_PLATFORM: 'vp' })).then(() => undefined, (e: Error) => e);
    expect(err).to.be.instanceOf(PlatformSetupError);
    expect(err?.message).to.equal('credentials upstream-proxy-url: must be an http, https, socks5 or socks5h URL');
    const none = await loadPlatformRun(loadRunnerEnv({ ...BASE, MEDIAJOBS_CREDENTIALS_DIR: path.join(dir, 'empty'), RUNNER_PLATFORM: 'vp', RUNNER_COOKIE_ID: 'c1' }));
    expect(none).to.deep.equal({ name: 'vp', ytdlpArgs: [] });
  });
});
