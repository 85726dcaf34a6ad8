// The admin CLI run as its users run it, a process (tsx api-gateway/src/admin.ts),
// against two checkouts' local modes: two state folders, each with the
// embedded Postgres scripts/local-postgres.ts starts for `make run`, on
// ports of their own (issue 34 item 8). It uses the database of the state
// folder it is given (MEDIAJOBS_LOCAL_DIR, as local mode reads it), whatever
// EMBEDDED_PG_PORT says, names it on its first stderr line, and refuses
// when it cannot tell, a postmaster.pid left by a run that ended included.
// DATABASE_URL wins and is named without its password. A key given on the
// command line is refused; stdin and the environment are the ways in
// (issue 35 item 8).
import { spawn } from 'node:child_process';
import { chmodSync, copyFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { pino } from 'pino';
import { startLocalPostgres } from '../../scripts/local-postgres.js';
import { createTestDatabase, type TestDatabase } from '../../test/support/postgres.js';
import { freePort } from '../../test/support/ports.js';
import { tsxCommand } from '../../test/support/tsx.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const ADMIN = join(ROOT, 'api-gateway/src/admin.ts');
const KEY_ON_ARGV = 'admin: --key no longer takes the key on the command line, where ps shows it to every user of the machine: '
  + 'give it on standard input with --key-stdin, or name the environment variable that holds it with --key-env VAR';
const REFUSAL_END = 'Set DATABASE_URL, or start `make run` in this checkout\n';

interface Run { code: number | null; stdout: string; stderr: string }

/** One admin command as a process, with only the settings given (none of this shell's database settings). */
function admin(args: string[], env: Record<string, string>, input = ''): Promise<Run> {
  const base = { ...process.env };
  for (const k of ['DATABASE_URL', 'EMBEDDED_PG_PORT', 'MEDIAJOBS_LOCAL_DIR', 'SECRET_KEYS']) delete base[k];
  const [cmd, ...rest] = tsxCommand(ADMIN);
  const child = spawn(cmd!, [...rest, ...args], { cwd: ROOT, env: { ...base, ...env }, stdio: ['pipe', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  child.stdin.end(input);
  return new Promise((resolve) => child.once('close', (code) => resolve({ code, stdout, stderr })));
}

interface Checkout { dir: string; port: number; stop: () => Promise<void> }

/** A state folder with its local mode's embedded Postgres running, as `make run` leaves it. */
async function checkout(name: string): Promise<Checkout> {
  const dir = mkdtempSync(join(tmpdir(), `mj-admin-${name}-`));
  chmodSync(dir, 0o755); // as a checkout's .local is: Postgres (the `postgres` user when root) keeps its data inside
  const stops: (() => Promise<void>)[] = [];
  const port = await freePort();
  await startLocalPostgres({ localDir: dir, port, log: pino({ level: 'silent' }), checkpoint: () => undefined, stops });
  return {
    dir, port,
    async stop() {
      for (const s of stops.reverse()) await s();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

const named = (c: Checkout) => `admin: database postgres://mediajobs@127.0.0.1:${c.port}/mediajobs (from ${c.dir}: local mode's Postgres)`;
const keyNames = (r: Run) => (JSON.parse(r.stdout) as { name: string }[]).map((k) => k.name).sort();

describe('admin CLI: which database, and no secret on the command line', function () {
  this.timeout(180_000);
  let a: Checkout;
  let b: Checkout;
  const scratch: string[] = [];
  const emptyDir = () => {
    const d = mkdtempSync(join(tmpdir(), 'mj-admin-none-'));
    scratch.push(d);
    return d;
  };

  before(async () => {
    [a, b] = await Promise.all([checkout('a'), checkout('b')]);
  });

  after(async () => {
    await Promise.all([a?.stop(), b?.stop()]);
    for (const d of scratch) rmSync(d, { recursive: true, force: true });
  });

  it('uses the Postgres local mode runs for its state folder, whatever EMBEDDED_PG_PORT says, and names it first', async () => {
    const madeA = await admin(['create-key', '--name', 'key-of-a', '--json'], { MEDIAJOBS_LOCAL_DIR: a.dir });
    expect(madeA.code, madeA.stderr).to.equal(0);
    expect(madeA.stderr).to.equal(`${named(a)}\n`);
    const madeB = await admin(['create-key', '--name', 'key-of-b', '--json'], { MEDIAJOBS_LOCAL_DIR: b.dir });
    expect(madeB.code, madeB.stderr).to.equal(0);
    expect(madeB.stderr).to.equal(`${named(b)}\n`);

    const listA = await admin(['list-keys', '--json'], { MEDIAJOBS_LOCAL_DIR: a.dir });
    expect(listA.stderr).to.equal(`${named(a)}\n`);
    expect(keyNames(listA)).to.deep.equal(['key-of-a']);
    // The case: `make run` was given EMBEDDED_PG_PORT, this shell another one (here the other checkout's).
    const listB = await admin(['list-keys', '--json'], { MEDIAJOBS_LOCAL_DIR: b.dir, EMBEDDED_PG_PORT: String(a.port) });
    expect(listB.stderr).to.equal(`${named(b)}\n`);
    expect(keyNames(listB)).to.deep.equal(['key-of-b']);
  });

  it('uses DATABASE_URL when it is set, and says so without the password', async () => {
    const db: TestDatabase = await createTestDatabase('mediajobs_admin');
    try {
      const url = new URL(db.url);
      url.username = 'postgres';
      url.password = 'not-to-be-shown'; // the machine's server trusts loopback: any password does
      const r = await admin(['list-keys', '--json'], { DATABASE_URL: url.toString(), MEDIAJOBS_LOCAL_DIR: a.dir });
      expect(r.code, r.stderr).to.equal(0);
      expect(r.stderr).to.equal(`admin: database postgres://postgres@${url.host}/${db.name} (from DATABASE_URL)\n`);
      expect(keyNames(r), 'not checkout a\'s keys').to.deep.equal([]);
    } finally {
      await db.drop();
    }
  });

  it('refuses when it cannot tell: no local mode state, a stopped one, a postmaster.pid left by a run that ended', async () => {
    const none = emptyDir();
    expect(await admin(['list-keys'], { MEDIAJOBS_LOCAL_DIR: none })).to.deep.equal({
      code: 2, stdout: '',
      stderr: `admin: no database to use: DATABASE_URL is not set, and ${none} holds no embedded Postgres (no ${none}/postgres). ${REFUSAL_END}`,
    });

    const stopped = emptyDir();
    mkdirSync(join(stopped, 'postgres'));
    expect(await admin(['list-keys'], { MEDIAJOBS_LOCAL_DIR: stopped })).to.deep.equal({
      code: 2, stdout: '',
      stderr: `admin: no database to use: DATABASE_URL is not set, and the embedded Postgres of ${stopped} is not running `
        + `(no ${stopped}/postgres/postmaster.pid). ${REFUSAL_END}`,
    });

    // A killed run's postmaster.pid whose port another checkout's Postgres has now: that one is not touched.
    const stale = emptyDir();
    mkdirSync(join(stale, 'postgres'));
    copyFileSync(join(a.dir, 'postgres', 'postmaster.pid'), join(stale, 'postgres', 'postmaster.pid'));
    const r = await admin(['create-key', '--name', 'intruder'], { MEDIAJOBS_LOCAL_DIR: stale });
    const staleName = `admin: database postgres://mediajobs@127.0.0.1:${a.port}/mediajobs (from ${stale}: local mode's Postgres)`;
    expect(r).to.deep.equal({
      code: 2, stdout: '',
      stderr: `${staleName}\nadmin: port ${a.port} is another Postgres (data directory ${join(a.dir, 'postgres')}), `
        + `not the one of ${stale} (${join(stale, 'postgres')}): its postmaster.pid was left by a run that ended. ${REFUSAL_END}`,
    });
    expect(keyNames(await admin(['list-keys', '--json'], { MEDIAJOBS_LOCAL_DIR: a.dir }))).to.not.include('intruder');

    // ... or whose port nothing listens on.
    const gone = emptyDir();
    mkdirSync(join(gone, 'postgres'));
    const closed = await freePort();
    const pid = ['4242', join(gone, 'postgres'), '1700000000', String(closed), '', '127.0.0.1', '0 0', 'ready', ''].join('\n');
    writeFileSync(join(gone, 'postgres', 'postmaster.pid'), pid);
    const g = await admin(['list-keys'], { MEDIAJOBS_LOCAL_DIR: gone });
    expect(g.code).to.equal(2);
    expect(g.stderr.split('\n')[1]).to.equal(`admin: the embedded Postgres of ${gone} is not running (port ${closed}, from its postmaster.pid, `
      + `refuses connections). ${REFUSAL_END.trimEnd()}`);
  });

  it('refuses a key on the command line, before connecting anywhere, and takes it from stdin or a named variable', async () => {
    const secret = 'mj_chosen_0123456789abcdef';
    for (const form of [['--key', secret], [`--key=${secret}`]]) {
      const r = await admin(['create-key', '--name', 'dev', ...form], { MEDIAJOBS_LOCAL_DIR: a.dir });
      expect(r.code).to.equal(2);
      expect(r.stderr.split('\n')[0]).to.equal(KEY_ON_ARGV);
      expect(r.stderr, 'the key is not echoed').to.not.include(secret);
    }
    expect(keyNames(await admin(['list-keys', '--json'], { MEDIAJOBS_LOCAL_DIR: a.dir }))).to.not.include('dev');

    const fromStdin = await admin(['create-key', '--name', 'from-stdin', '--key-stdin', '--json'], { MEDIAJOBS_LOCAL_DIR: a.dir }, `${secret}-in\n`);
    expect(fromStdin.code, fromStdin.stderr).to.equal(0);
    expect(JSON.parse(fromStdin.stdout)).to.include({ key: `${secret}-in`, name: 'from-stdin', created: true });
    const fromEnv = await admin(['create-key', '--name', 'from-env', '--key-env', 'DEV_API_KEY', '--json'], { MEDIAJOBS_LOCAL_DIR: a.dir, DEV_API_KEY: `${secret}-env` });
    expect(fromEnv.code, fromEnv.stderr).to.equal(0);
    expect(JSON.parse(fromEnv.stdout)).to.include({ key: `${secret}-env`, name: 'from-env', created: true });
    // Idempotent, as --key was: the same key again is kept.
    const again = await admin(['create-key', '--name', 'from-env', '--key-env', 'DEV_API_KEY'], { MEDIAJOBS_LOCAL_DIR: a.dir, DEV_API_KEY: `${secret}-env` });
    expect(again.stdout).to.equal(`api key ${(JSON.parse(fromEnv.stdout) as { id: string }).id} already exists\n`);
    const unset = await admin(['create-key', '--name', 'x', '--key-env', 'NOT_SET_ANYWHERE'], { MEDIAJOBS_LOCAL_DIR: a.dir });
    expect(unset.code).to.equal(2);
    expect(unset.stderr.split('\n')[1]).to.equal('admin: --key-env NOT_SET_ANYWHERE: that environment variable is not set');
  });
});
