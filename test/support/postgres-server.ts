// A PostgreSQL server of the tests' own (the machine's postgresql package:
// initdb and postgres from /usr/lib/postgresql/<version>/bin) on a free
// loopback port, that a test can stop and start again on the same port and
// data, as an outage or a restart would. The machine's shared server (the
// one createTestDatabase uses) is never touched. As root the server runs as
// the `postgres` user, which Postgres requires.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chownSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { freePort } from './ports.js';

export interface PostgresServer {
  /** The `postgres` database as the `postgres` superuser (trust authentication). */
  url: string;
  port: number;
  /** Shut down (fast: open sessions are ended, as `pg_ctl stop -m fast` does) and resolve once it exited; safe twice. */
  stop(): Promise<void>;
  /** Again on the same port and data, after stop(); resolves once it accepts connections. */
  start(): Promise<void>;
  /** Stop and delete its data. */
  remove(): Promise<void>;
}

const LOOKUP_ROOT = '/usr/lib/postgresql';

/** The newest installed server's bin directory. */
function binDir(): string {
  const versions = readdirSync(LOOKUP_ROOT).filter((v) => /^\d+$/.test(v)).sort((a, b) => Number(b) - Number(a));
  if (!versions.length) throw new Error(`no PostgreSQL server under ${LOOKUP_ROOT} (apt-get install postgresql)`);
  return join(LOOKUP_ROOT, versions[0]!, 'bin');
}

/** Who runs the server: the `postgres` user when we are root (Postgres refuses root), else ourselves. */
function serverIds(): { uid: number; gid: number } | undefined {
  if (process.getuid?.() !== 0) return undefined;
  const id = (flag: string) => Number(spawnSync('id', [flag, 'postgres'], { encoding: 'utf8' }).stdout.trim());
  return { uid: id('-u'), gid: id('-g') };
}

export async function startPostgresServer(): Promise<PostgresServer> {
  const bin = binDir();
  const ids = serverIds();
  const dir = mkdtempSync(join(tmpdir(), 'mj-pg-'));
  if (ids) chownSync(dir, ids.uid, ids.gid);
  const data = join(dir, 'data');
  const init = spawnSync(join(bin, 'initdb'), ['-D', data, '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--no-sync'], {
    encoding: 'utf8', ...ids, cwd: dir,
  });
  if (init.status !== 0) throw new Error(`initdb failed: ${init.stderr.slice(-2000)}`);
  const port = await freePort();
  let proc: ChildProcess | undefined;

  const server: PostgresServer = {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    port,
    async start() {
      const args = ['-D', data, '-p', String(port), '-k', dir, '-c', 'listen_addresses=127.0.0.1', '-c', 'fsync=off', '-c', 'max_connections=50'];
      const p = spawn(join(bin, 'postgres'), args, { stdio: ['ignore', 'ignore', 'pipe'], cwd: dir, ...ids });
      servers.add(p);
      p.once('exit', () => servers.delete(p));
      proc = p;
      let log = '';
      p.stderr!.on('data', (d: Buffer) => (log = (log + d.toString()).slice(-4000)));
      for (let i = 0; ; i++) {
        if (p.exitCode !== null) throw new Error(`postgres exited (${p.exitCode}) before it was ready:\n${log}`);
        const c = new pg.Client({ connectionString: server.url });
        try {
          await c.connect();
          await c.end();
          return;
        } catch (err) {
          await c.end().catch(() => undefined);
          if (i > 200) throw new Error(`postgres did not accept connections in 20 s: ${(err as Error).message}\n${log}`);
          await new Promise((r) => setTimeout(r, 100));
        }
      }
    },
    async stop() {
      const p = proc;
      if (!p || p.exitCode !== null || p.signalCode !== null) return;
      const exited = new Promise((r) => p.once('exit', r));
      p.kill('SIGINT'); // fast shutdown: sessions are terminated, as in a restart
      await exited;
    },
    async remove() {
      await server.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
  await server.start();
  return server;
}

const servers = new Set<ChildProcess>();
// Mocha runs with --exit: no server outlives its run.
process.once('exit', () => {
  for (const p of servers) p.kill('SIGQUIT');
});
