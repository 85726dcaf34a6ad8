// Ready means ready in local mode (issue 34, item 6): started as `make run`
// starts it (scripts/local-mode.ts under tsx, its dev key generated and kept
// in the state folder's secrets.json), polled from the process's start, the
// gateway's /readyz answers 503 `{error}` until a request with the dev key is
// served, and a POST /jobs sent the moment it first answers 200 gets 201.
// The dev key is there before the gateway listens: a POST at its very first
// answer is not a 401 either. The job's URL is a closed loopback port, so
// nothing leaves the machine.
import { expect } from 'chai';
import { spawn, execFile, type ChildProcess } from 'node:child_process';
import { existsSync, lstatSync, mkdirSync, mkdtempSync, readFileSync, readlinkSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { tsxCommand } from '../support/tsx.js';
import { freePort } from './support.js';

const run = promisify(execFile);
const ROOT = fileURLToPath(new URL('../../', import.meta.url));
/** Where local mode puts the database as root (scripts/local-postgres.ts). */
const RUNTIME_ROOT = '/var/lib/mediajobs';

interface Answer {
  at: number;
  status: number;
  body: unknown;
}

describe('local mode (make run): /readyz says ready only when a request with the dev key is served', function () {
  this.timeout(180_000);
  let dir: string;
  let localDir: string;
  let proc: ChildProcess | undefined;
  let exited: Promise<number | null> | undefined;
  let output = '';

  afterEach(async () => {
    if (proc && proc.exitCode === null && proc.signalCode === null) {
      try {
        process.kill(-proc.pid!, 'SIGKILL');
      } catch { /* gone */ }
      await exited;
    }
    // A Postgres left by a failed run goes too (its command line names its data directory).
    const link = join(localDir, 'postgres');
    const dataDir = lstatSync(link, { throwIfNoEntry: false })?.isSymbolicLink() ? readlinkSync(link) : link;
    const { stdout } = await run('ps', ['-eo', 'pid=,args=']);
    for (const line of stdout.split('\n').filter((l) => l.includes(`-D ${dataDir}`))) {
      try {
        process.kill(Number(line.trim().split(/\s+/)[0]), 'SIGKILL');
      } catch { /* gone */ }
    }
    if (dataDir.startsWith(`${RUNTIME_ROOT}/`)) rmSync(dirname(dataDir), { recursive: true, force: true });
    rmSync(dir, { recursive: true, force: true });
  });

  it('polled from its start: 503 {error} until ready, then the dev key\'s POST /jobs gets 201 at once', async () => {
    dir = mkdtempSync(join(tmpdir(), 'mj-local-ready-'));
    localDir = join(dir, 'local');
    const home = join(dir, 'home');
    mkdirSync(home);
    const port = await freePort();
    const env: NodeJS.ProcessEnv = { ...process.env };
    for (const k of ['DATABASE_URL', 'KUBECONFIG', 'PUBLIC_BASE_URL', 'SECRET_KEYS', 'FILE_URL_SECRET', 'HOST', 'LOCAL_CLUSTER_PORT', 'MEDIAJOBS_DEV_API_KEY']) {
      delete env[k];
    }
    Object.assign(env, {
      HOME: home, MEDIAJOBS_LOCAL_DIR: localDir, PORT: String(port), EMBEDDED_PG_PORT: String(await freePort()), METRICS_PORT: String(await freePort()), LOG_LEVEL: process.env.LOG_LEVEL ?? 'info',
    });
    const base = `http://127.0.0.1:${port}`;
    const closed = `http://127.0.0.1:${await freePort()}/talk.mp4`;
    const devKey = () => (JSON.parse(readFileSync(join(localDir, 'secrets.json'), 'utf8')) as { devApiKey?: string }).devApiKey;
    const post = async () => {
      const res = await fetch(`${base}/jobs`, {
        method: 'POST', headers: { 'x-api-key': devKey() ?? '', 'Content-Type': 'application/json' }, body: JSON.stringify({ url: closed }),
      });
      return { status: res.status, body: await res.json() as unknown };
    };

    const [cmd, ...args] = tsxCommand(join(ROOT, 'scripts/local-mode.ts'));
    proc = spawn(cmd!, args, { cwd: ROOT, env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
    proc.stdout!.on('data', (d: Buffer) => (output += d.toString()));
    proc.stderr!.on('data', (d: Buffer) => (output += d.toString()));
    exited = new Promise((resolve) => proc!.once('exit', (code) => resolve(code)));
    const started = Date.now();

    // Tightly, from the start: every answer /readyz gives until the first 200.
    const answers: Answer[] = [];
    let firstPost: { status: number; body: unknown } | undefined;
    for (;;) {
      if (proc.exitCode !== null) throw new Error(`local mode exited before it was ready:\n${output}`);
      if (Date.now() - started > 150_000) throw new Error(`not ready after 150 s:\n${output}`);
      const res = await fetch(`${base}/readyz`).catch(() => undefined);
      if (!res) {
        await new Promise((r) => setTimeout(r, 10));
        continue;
      }
      answers.push({ at: Date.now() - started, status: res.status, body: await res.json() as unknown });
      // The gateway's very first answer: its dev key already works.
      firstPost ??= await post();
      if (res.status === 200) break;
    }
    const ready = await post();

    expect(ready, JSON.stringify(answers)).to.have.property('status', 201);
    expect(ready.body).to.have.all.keys('job_id');
    expect(firstPost, 'a POST at the gateway\'s first answer').to.have.property('status', 201);
    expect(answers.at(-1)!.body).to.deep.equal({ status: 'ready' });
    for (const a of answers.slice(0, -1)) {
      expect(a.status, JSON.stringify(a)).to.equal(503);
      expect(a.body, JSON.stringify(a)).to.have.all.keys('error');
      expect((a.body as { error: unknown }).error).to.be.a('string').and.match(/\S/);
    }
    expect(existsSync(join(localDir, 'secrets.json'))).to.equal(true);

    // Ctrl-C as a terminal sends it: everything stops in order.
    process.kill(-proc.pid!, 'SIGINT');
    expect(await exited, output).to.equal(130);
  });
});
