// The `mediajobs` CLI run as a child process (tsx on its entry point, as the
// built bin runs it) against the whole service: what a person or a script
// sees on stdout and stderr, and the exit code of each outcome.
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { tsxCommand } from '../../../test/support/tsx.js';
import { startMediaServer, unreachableUrl, type MediaServer } from '../../../test/support/media.js';
import { startService, type Service } from '../../../test/e2e/support.js';
import { EXIT } from '../src/cli/exit-codes.js';

const MAIN = fileURLToPath(new URL('../src/cli/main.ts', import.meta.url));

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/** `mediajobs ...args` with `env` as its whole configuration (no MEDIAJOBS_* of this process leaks in). */
function mediajobs(args: string[], env: Record<string, string>): Promise<Run> {
  const [cmd, ...pre] = tsxCommand(MAIN);
  const base = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('MEDIAJOBS_'))) as Record<string, string>;
  return new Promise((resolve) => {
    execFile(cmd!, [...pre, ...args], { env: { ...base, ...env }, timeout: 150_000 }, (err, stdout, stderr) => {
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, stdout, stderr });
    });
  });
}

describe('mediajobs CLI against the running service', function () {
  this.timeout(180_000);
  let svc: Service;
  let media: MediaServer;
  let env: Record<string, string>;

  before(async () => {
    media = await startMediaServer();
    svc = await startService();
    env = { MEDIAJOBS_URL: svc.gateway.url, MEDIAJOBS_API_KEY: svc.apiKey };
  });

  after(async () => {
    await svc?.stop();
    await media?.stop();
  });

  it('submit --wait: a progress line per change on stderr, the file\'s URL on stdout, exit 0', async () => {
    const run = await mediajobs(['submit', media.mp4Url, '--wait', '--interval', '0.2'], env);
    expect(run.code, run.stderr).to.equal(EXIT.ok);
    const url = run.stdout.trim();
    expect(url).to.match(/^http:\/\/127\.0\.0\.1:\d+\/files\/\S+\.mp4\?/);
    const file = await fetch(url);
    expect(file.status).to.equal(200);
    expect(run.stderr).to.match(/^Created job [0-9a-f-]{36}$/m);
    expect(run.stderr).to.match(/^Completed\s+\[#{24}\] 100%(  \S.*)?$/m);
  });

  it('a source that fails: submit --wait exits with the Failed code and says why on stderr', async () => {
    const run = await mediajobs(['submit', await unreachableUrl(), '--wait', '--interval', '0.2'], env);
    expect(run.code, run.stderr).to.equal(EXIT.failed);
    expect(run.stdout).to.equal('');
    expect(run.stderr).to.match(/^Job [0-9a-f-]{36} ended Failed: .+$/m);
  });

  it('--json prints the API\'s answers, which parse: submit, get, ls, usage', async () => {
    const submitted = await mediajobs(['submit', media.notFoundUrl, '--json'], env);
    expect(submitted.code, submitted.stderr).to.equal(EXIT.ok);
    const { job_id: id } = JSON.parse(submitted.stdout) as { job_id: string };
    const got = JSON.parse((await mediajobs(['get', id, '--json'], env)).stdout) as { id: string; url: string };
    expect(got).to.include({ id, url: media.notFoundUrl });
    const listed = JSON.parse((await mediajobs(['ls', '--json', '--limit', '5'], env)).stdout) as { jobs: { id: string }[]; limit: number };
    expect(listed.limit).to.equal(5);
    expect(listed.jobs.map((j) => j.id)).to.include(id);
    const usage = JSON.parse((await mediajobs(['usage', '--json'], env)).stdout) as { usage_count: number };
    expect(usage.usage_count).to.be.at.least(3);
  });

  it('prints short lines for people: get, ls, cancel', async () => {
    const id = (await mediajobs(['submit', media.slowUrl(60)], env)).stdout.trim();
    expect(id).to.match(/^[0-9a-f-]{36}$/);
    const got = await mediajobs(['get', id], env);
    expect(got.stdout).to.match(new RegExp(`^Job\\s+${id}$`, 'm'));
    expect(got.stdout).to.match(/^Status\s+(Pending|Processing)$/m);
    const ls = await mediajobs(['ls', '--status', 'processing', '--limit', '100'], env);
    expect(ls.stdout.split('\n')[0]).to.match(/^ID\s+STATUS\s+STEP\s+CREATED\s+SIZE\s+URL$/);
    const cancel = await mediajobs(['cancel', id], env);
    expect(cancel).to.include({ code: EXIT.ok, stdout: `Cancelled job ${id}\n` });
    const again = await mediajobs(['wait', id], env);
    expect(again.code).to.equal(EXIT.cancelled);
  });

  it('an API error: its message and status on stderr, the API error code', async () => {
    const run = await mediajobs(['get', '00000000-0000-4000-8000-000000000000'], env);
    expect(run.code).to.equal(EXIT.api);
    expect(run.stderr).to.match(/^Error: .+ \(HTTP 404\)$/m);
    const bad = await mediajobs(['usage'], { ...env, MEDIAJOBS_API_KEY: 'mj_wrong' });
    expect(bad).to.include({ code: EXIT.api, stderr: 'Error: Invalid API Key (HTTP 401)\n' });
  });

  it('without MEDIAJOBS_API_KEY: a clear message and the usage code, nothing sent', async () => {
    const run = await mediajobs(['ls'], { MEDIAJOBS_URL: svc.gateway.url });
    expect(run.code).to.equal(EXIT.usage);
    expect(run.stderr).to.match(/^mediajobs: No API key: set MEDIAJOBS_API_KEY \(or pass --api-key\)$/m);
    expect(run.stdout).to.equal('');
  });

  it('bad arguments: the usage code with what is wrong', async () => {
    for (const [args, message] of [
      [['submit'], /submit takes URL/],
      [['frobnicate'], /Unknown command: frobnicate/],
      [['get', 'x', '--wait'], /get has no option --wait/],
      [['submit', media.mp4Url, '--video-quality', 'best'], /--video-quality takes a whole number/],
    ] as const) {
      const run = await mediajobs([...args], env);
      expect(run.code, run.stderr).to.equal(EXIT.usage);
      expect(run.stderr).to.match(message);
    }
  });

  it('webhooks: secret, rotate (printed once), and a job\'s deliveries', async () => {
    expect((await mediajobs(['webhooks', 'secret'], env)).stdout).to.match(/^No webhook signing secret/);
    const rotated = await mediajobs(['webhooks', 'rotate'], env);
    expect(rotated.stdout.split('\n')[0]).to.match(/^whsec_[A-Za-z0-9+/=]+$/);
    expect((await mediajobs(['webhooks', 'secret'], env)).stdout).to.match(/^Signing secret\s+set /);
    const id = (await mediajobs(['submit', media.notFoundUrl], env)).stdout.trim();
    const deliveries = await mediajobs(['webhooks', 'deliveries', id], env);
    expect(deliveries.stdout).to.equal(`No webhook events for job ${id}\n`);
  });
});
