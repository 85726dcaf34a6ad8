// Local mode (`make run`) started as a newcomer starts it, for the tests that
// run it as a process of its own (local-mode.test.ts, terminal.test.ts): a
// site (a private folder with its state, ports and environment), the
// process in its own group with its output collected, its banner, its API,
// and the clean-up that leaves no process or Postgres behind.
import { expect } from 'chai';
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, existsSync, lstatSync, readdirSync, readFileSync, readlinkSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { eventually } from '../../local-cluster/test/support.js';
import { tsxCommand } from '../support/tsx.js';
import { freePort } from './support.js';

const run = promisify(execFile);
export const ROOT = fileURLToPath(new URL('../../', import.meta.url));
export const IS_ROOT = process.getuid?.() === 0;
/** Where local mode puts, as root, what the `postgres` user must reach (scripts/local-postgres.ts). */
export const RUNTIME_ROOT = '/var/lib/mediajobs';

export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface LocalMode {
  proc: ChildProcess;
  output(): string;
  exited: Promise<Exit>;
}

export interface Banner {
  baseUrl: string;
  devKey: string;
  kubeconfig: string;
}

/** The API server address a kubeconfig names. */
export function serverOf(kubeconfig: string): string {
  return /^\s*server:\s*(\S+)\s*$/m.exec(readFileSync(kubeconfig, 'utf8'))?.[1] ?? '';
}

/** One state directory with its ports, kept across restarts as `make run` keeps .local/. */
export interface Site {
  /** A private folder (mkdtemp makes it 0700) holding everything of this site. */
  dir: string;
  /** The checkout local mode runs from. */
  checkout: string;
  localDir: string;
  env: NodeJS.ProcessEnv;
  port: number;
}

/**
 * A site in a fresh private folder. With `privateCheckout`, the checkout is
 * in it too and state goes to its default .local/, as after `git clone …
 * ~/mediajobs && cd ~/mediajobs && make run`; otherwise this checkout runs
 * with MEDIAJOBS_LOCAL_DIR in the private folder.
 */
export async function makeSite(devKey: string, opts: { privateCheckout?: boolean } = {}): Promise<Site> {
  const dir = mkdtempSync(join(tmpdir(), 'mj-local-mode-'));
  expect(statSync(dir).mode & 0o777).to.equal(0o700);
  const home = join(dir, 'home');
  mkdirSync(home);
  const checkout = opts.privateCheckout ? await copyCheckout(join(dir, 'mediajobs')) : ROOT;
  const localDir = opts.privateCheckout ? join(checkout, '.local') : join(dir, 'local');
  const port = await freePort();
  const env: NodeJS.ProcessEnv = { ...process.env };
  // Whatever the shell running the tests has set must not leak into local mode's own choices.
  for (const k of ['DATABASE_URL', 'KUBECONFIG', 'PUBLIC_BASE_URL', 'SECRET_KEYS', 'FILE_URL_SECRET', 'HOST', 'LOCAL_CLUSTER_PORT', 'MEDIAJOBS_LOCAL_DIR']) {
    delete env[k];
  }
  Object.assign(env, {
    HOME: home,
    MEDIAJOBS_DEV_API_KEY: devKey,
    PORT: String(port),
    EMBEDDED_PG_PORT: String(await freePort()),
    METRICS_PORT: String(await freePort()),
    LOG_LEVEL: process.env.LOG_LEVEL ?? 'info',
    ...(opts.privateCheckout ? {} : { MEDIAJOBS_LOCAL_DIR: localDir }),
  });
  return { dir, checkout, localDir, env, port };
}

/**
 * This working tree (node_modules included, .git and .local not) at `to`,
 * hard-linked: a real checkout's layout in a private folder without copying
 * 500 MB. Nothing there is written in place, so the links are safe.
 */
async function copyCheckout(to: string): Promise<string> {
  mkdirSync(to);
  const entries = readdirSync(ROOT).filter((e) => e !== '.git' && e !== '.local').map((e) => join(ROOT, e));
  await run('cp', ['-al', ...entries, to]);
  return to;
}

/** The data directory of a site: <localDir>/postgres, or where that symlink points (as root, when the postgres user cannot enter localDir). */
export function dataDirOf(site: Site): string {
  const path = join(site.localDir, 'postgres');
  return lstatSync(path, { throwIfNoEntry: false })?.isSymbolicLink() ? readlinkSync(path) : path;
}

export const started: LocalMode[] = [];

/** Local mode on `site`, its output collected; `wrap` turns its argv into another's that runs it (a pseudo-terminal's). */
export function startLocalMode(site: Site, env: NodeJS.ProcessEnv = site.env, wrap: (argv: string[]) => string[] = (argv) => argv): LocalMode {
  const [cmd, ...args] = wrap(tsxCommand(join(site.checkout, 'scripts/local-mode.ts')));
  // Its own process group, so a test can send Ctrl-C the way a terminal does: to the whole group.
  const proc = spawn(cmd!, args, { cwd: site.checkout, env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  proc.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  proc.stderr!.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<Exit>((resolve) => proc.once('exit', (code, signal) => resolve({ code, signal })));
  const lm = { proc, output: () => out, exited };
  started.push(lm);
  return lm;
}
export function running(lm: LocalMode): boolean {
  return lm.proc.exitCode === null && lm.proc.signalCode === null;
}

export async function waitReady(lm: LocalMode, timeoutMs = 60_000): Promise<Banner> {
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

export async function waitExit(lm: LocalMode, timeoutMs: number): Promise<Exit> {
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
export async function postmastersOf(dataDir: string): Promise<number[]> {
  const { stdout } = await run('ps', ['-eo', 'pid=,args=']);
  return stdout.split('\n')
    .filter((l) => l.includes(`-D ${dataDir} `) || l.endsWith(`-D ${dataDir}`))
    .map((l) => Number(l.trim().split(/\s+/)[0]));
}

export async function expectNoPostgres(site: Site, lm: LocalMode): Promise<void> {
  const dataDir = dataDirOf(site);
  expect(await postmastersOf(dataDir), `postgres of ${dataDir} still running:\n${lm.output()}`).to.deep.equal([]);
  // Postgres removes its pid file only on an orderly shutdown.
  expect(existsSync(join(dataDir, 'postmaster.pid')), 'postmaster.pid left behind').to.equal(false);
}

export async function api(banner: Banner, method: string, path: string, body?: unknown): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`${banner.baseUrl}${path}`, {
    method,
    headers: { 'x-api-key': banner.devKey, ...(body !== undefined ? { 'Content-Type': 'application/json' } : {}) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: text ? (JSON.parse(text) as Record<string, unknown>) : {} };
}

export async function killGroup(lm: LocalMode): Promise<void> {
  process.kill(-lm.proc.pid!, 'SIGKILL');
  await lm.exited;
}

/** Nothing outlives a test, even a failed one: every local mode started (its whole group), then any Postgres a site left, then the sites. */
export async function cleanUp(sites: Site[]): Promise<void> {
  for (const lm of started.splice(0)) {
    if (running(lm)) await killGroup(lm).catch(() => undefined);
  }
  for (const site of sites.splice(0)) {
    const dataDir = dataDirOf(site);
    for (const pid of await postmastersOf(dataDir)) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch { /* already gone */ }
    }
    // A database placed outside the private folder goes with it (its state/<hash> folder).
    if (dataDir.startsWith(`${RUNTIME_ROOT}/`)) rmSync(dirname(dataDir), { recursive: true, force: true });
    rmSync(site.dir, { recursive: true, force: true });
  }
}
