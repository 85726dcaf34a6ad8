// Local mode (`make run`) as a user meets it: scripts/local-mode.ts as a
// process of its own with the embedded PostgreSQL, the banner it prints, the
// API and kubectl behind it, Ctrl-C, and a restart on the same state. Each
// run has its own state directory and ports, so it never meets a developer's
// .local/ or another test's Postgres.
import { expect } from 'chai';
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { eventually, KUBECTL } from '../../local-cluster/test/support.js';
import { tsxCommand } from '../support/tsx.js';
import { freePort } from './support.js';

const run = promisify(execFile);
const SCRIPT = fileURLToPath(new URL('../../scripts/local-mode.ts', import.meta.url));
/** Closed on any test machine: the job fails at once, without network. */
const UNREACHABLE = 'http://127.0.0.1:9/x';

interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

interface LocalMode {
  proc: ChildProcess;
  output(): string;
  exited: Promise<Exit>;
}

interface Banner {
  baseUrl: string;
  devKey: string;
  kubeconfig: string;
}

/** One state directory (MEDIAJOBS_LOCAL_DIR) with its ports, kept across restarts as `make run` keeps .local/. */
interface Site {
  dir: string;
  localDir: string;
  pgDataDir: string;
  env: NodeJS.ProcessEnv;
  port: number;
}

async function makeSite(devKey: string): Promise<Site> {
  const dir = mkdtempSync(join(tmpdir(), 'mj-local-mode-'));
  // As root, embedded Postgres runs as the `postgres` user, who must be able
  // to reach its data directory inside this otherwise private (0700) dir.
  chmodSync(dir, 0o755);
  const home = join(dir, 'home');
  mkdirSync(home);
  const localDir = join(dir, 'local');
  const port = await freePort();
  const env: NodeJS.ProcessEnv = { ...process.env };
  // Whatever the shell running the tests has set must not leak into local mode's own choices.
  for (const k of ['DATABASE_URL', 'KUBECONFIG', 'PUBLIC_BASE_URL', 'SECRET_KEYS', 'FILE_URL_SECRET', 'HOST', 'LOCAL_CLUSTER_PORT']) {
    delete env[k];
  }
  Object.assign(env, {
    HOME: home,
    MEDIAJOBS_LOCAL_DIR: localDir,
    MEDIAJOBS_DEV_API_KEY: devKey,
    PORT: String(port),
    EMBEDDED_PG_PORT: String(await freePort()),
    LOG_LEVEL: process.env.LOG_LEVEL ?? 'info',
  });
  return { dir, localDir, pgDataDir: join(localDir, 'postgres'), env, port };
}

const started: LocalMode[] = [];

function startLocalMode(site: Site): LocalMode {
  const [cmd, ...args] = tsxCommand(SCRIPT);
  // Its own process group, so a test can send Ctrl-C the way a terminal does: to the whole group.
  const proc = spawn(cmd!, args, { cwd: site.dir, env: site.env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  proc.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  proc.stderr!.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<Exit>((resolve) => proc.once('exit', (code, signal) => resolve({ code, signal })));
  const lm = { proc, output: () => out, exited };
  started.push(lm);
  return lm;
}

function running(lm: LocalMode): boolean {
  return lm.proc.exitCode === null && lm.proc.signalCode === null;
}

async function waitReady(lm: LocalMode, timeoutMs = 60_000): Promise<Banner> {
  // The banner is one write, so its last field marks it complete.
  const complete = /kubeconfig:\s+\S+/;
  await eventually(() => complete.test(lm.output()) || !running(lm), timeoutMs, 50);
  if (!complete.test(lm.output())) throw new Error(`local mode exited before it was ready:\n${lm.output()}`);
  const field = (re: RegExp) => re.exec(lm.output())?.[1] ?? '';
  return {
    baseUrl: field(/base URL:\s+(\S+)/),
    devKey: field(/dev API key:\s+(\S+)/),
    kubeconfig: field(/kubeconfig:\s+(\S+)/),
  };
}

async function waitExit(lm: LocalMode, timeoutMs: number): Promise<Exit> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`local mode still running ${timeoutMs} ms after the signal:\n${lm.output()}`)), timeoutMs);
  });
  try {
    return await Promise.race([lm.exited, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** Postmasters serving `dataDir` (their command line names it; backends retitle themselves and die with them). */
async function postmastersOf(dataDir: string): Promise<number[]> {
  const { stdout } = await run('ps', ['-eo', 'pid=,args=']);
  return stdout.split('\n')
    .filter((l) => l.includes(`-D ${dataDir} `) || l.endsWith(`-D ${dataDir}`))
    .map((l) => Number(l.trim().split(/\s+/)[0]));
}

async function expectNoPostgres(site: Site, lm: LocalMode): Promise<void> {
  expect(await postmastersOf(site.pgDataDir), `postgres of ${site.pgDataDir} still running:\n${lm.output()}`).to.deep.equal([]);
  // Postgres removes its pid file only on an orderly shutdown.
  expect(existsSync(join(site.pgDataDir, 'postmaster.pid')), 'postmaster.pid left behind').to.equal(false);
}

async function api(banner: Banner, method: string, path: string, body?: unknown): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`${banner.baseUrl}${path}`, {
    method,
    headers: { 'x-api-key': banner.devKey, ...(body !== undefined ? { 'Content-Type': 'application/json' } : {}) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: text ? (JSON.parse(text) as Record<string, unknown>) : {} };
}

function listedIds(r: { body: Record<string, unknown> }): string[] {
  return (r.body.jobs as { id: string }[]).map((j) => j.id);
}

describe('local mode (make run)', function () {
  this.timeout(90_000);
  const sites: Site[] = [];

  afterEach(async () => {
    // Nothing outlives a test, even a failed one: local mode's whole group, then any Postgres it left.
    for (const lm of started.splice(0)) {
      if (running(lm)) {
        try {
          process.kill(-lm.proc.pid!, 'SIGKILL');
        } catch { /* already gone */ }
        await lm.exited;
      }
    }
    for (const site of sites.splice(0)) {
      for (const pid of await postmastersOf(site.pgDataDir)) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch { /* already gone */ }
      }
      rmSync(site.dir, { recursive: true, force: true });
    }
  });

  it('prints its URL, dev key and kubeconfig, serves jobs, stops on Ctrl-C and keeps jobs and keys across a restart', async () => {
    const devKey = `mj_dev_${randomBytes(12).toString('hex')}`;
    const site = await makeSite(devKey);
    sites.push(site);

    const first = startLocalMode(site);
    const banner = await waitReady(first);
    expect(banner).to.deep.equal({ baseUrl: `http://127.0.0.1:${site.port}`, devKey, kubeconfig: join(site.localDir, 'kubeconfig') });
    expect(existsSync(banner.kubeconfig), 'kubeconfig file').to.equal(true);

    const health = await fetch(`${banner.baseUrl}/healthz`);
    expect(health.status).to.equal(200);

    const created = await api(banner, 'POST', '/jobs', { url: UNREACHABLE });
    expect(created.status, JSON.stringify(created.body)).to.equal(201);
    const id = created.body.job_id as string;
    expect(id).to.be.a('string');
    const listed = await api(banner, 'GET', '/jobs');
    expect(listed.status).to.equal(200);
    expect(listedIds(listed)).to.include(id);

    const kubectlEnv = { ...process.env, HOME: site.env.HOME, KUBECONFIG: banner.kubeconfig };
    const mediajobs = await eventually(async () => {
      const { stdout } = await run(KUBECTL, ['get', 'mediajobs', '--no-headers'], { env: kubectlEnv, timeout: 30_000 });
      return stdout.includes(id) ? stdout : undefined;
    }, 15_000, 200);
    expect(mediajobs).to.include(id);

    // Ctrl-C in a terminal signals the whole foreground process group, not only local mode.
    process.kill(-first.proc.pid!, 'SIGINT');
    expect(await waitExit(first, 30_000), first.output()).to.deep.equal({ code: 130, signal: null });
    await expectNoPostgres(site, first);
    // Stopped in order: Postgres last, so nothing lost its database while stopping.
    expect(first.output()).to.not.match(/stop failed|terminating connection|unhandled|uncaught/i);

    const second = startLocalMode(site);
    const again = await waitReady(second);
    expect(again.devKey).to.equal(devKey);
    const relisted = await api(again, 'GET', '/jobs');
    expect(relisted.status, 'the dev key still works').to.equal(200);
    expect(listedIds(relisted)).to.include(id);
    const job = await api(again, 'GET', `/jobs/${id}`);
    expect(job.status).to.equal(200);
    expect(job.body.url).to.equal(UNREACHABLE);

    // A signal to local mode alone (kill <pid>): Postgres must be stopped by local mode itself.
    process.kill(second.proc.pid!, 'SIGTERM');
    expect(await waitExit(second, 30_000), second.output()).to.deep.equal({ code: 143, signal: null });
    await expectNoPostgres(site, second);
  });

  it('stops the embedded Postgres it is still starting when SIGINT arrives before it is ready', async () => {
    const site = await makeSite(`mj_dev_${randomBytes(12).toString('hex')}`);
    sites.push(site);
    const lm = startLocalMode(site);
    // The pid file appears once the postmaster runs, well before local mode is ready.
    await eventually(() => existsSync(join(site.pgDataDir, 'postmaster.pid')) || !running(lm), 60_000, 10);
    expect(running(lm), `exited early:\n${lm.output()}`).to.equal(true);
    // Only local mode gets the signal: nothing else would stop this Postgres.
    process.kill(lm.proc.pid!, 'SIGINT');
    expect(await waitExit(lm, 30_000), lm.output()).to.deep.equal({ code: 130, signal: null });
    expect(lm.output()).to.not.include('mediajobs is running locally');
    expect(lm.output()).to.not.match(/unhandled|uncaught/i);
    await expectNoPostgres(site, lm);
  });

  it('exits 143 on SIGTERM while its first start is still initialising, and starts normally afterwards', async () => {
    const devKey = `mj_dev_${randomBytes(12).toString('hex')}`;
    const site = await makeSite(devKey);
    sites.push(site);
    const lm = startLocalMode(site);
    // The state directory is made first thing once the signal handlers are in place; the data directory comes next.
    await eventually(() => existsSync(site.localDir) || !running(lm), 60_000, 5);
    process.kill(lm.proc.pid!, 'SIGTERM');
    expect(await waitExit(lm, 30_000), lm.output()).to.deep.equal({ code: 143, signal: null });
    expect(lm.output()).to.not.include('mediajobs is running locally');
    expect(lm.output()).to.not.match(/unhandled|uncaught/i);
    await expectNoPostgres(site, lm);

    const next = startLocalMode(site);
    const banner = await waitReady(next);
    expect(banner.devKey).to.equal(devKey);
    expect((await api(banner, 'GET', '/jobs')).status).to.equal(200);
    process.kill(next.proc.pid!, 'SIGINT');
    expect(await waitExit(next, 30_000), next.output()).to.deep.equal({ code: 130, signal: null });
    await expectNoPostgres(site, next);
  });
});
