// Where local mode (`make run`, scripts/local-mode.ts) keeps a checkout's
// state, and how another program of that checkout (the admin CLI) finds the
// embedded Postgres running on it, never by assuming a port. Postgres
// records where it listens itself: while it runs, its data directory
// (<state>/postgres, or the folder that symlink points to:
// scripts/local-postgres.ts) holds postmaster.pid, whose fourth line is its
// port. A postmaster.pid that a killed run left behind can name a port
// another server has now, so a connection counts only once that server says
// it serves this data directory (servedDataDirProblem). Local mode writes
// nothing for this; starting and stopping that Postgres is
// scripts/local-postgres.ts's job.
import { readFileSync, realpathSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type pg from 'pg';
import { localDatabaseUrl } from './local-database.js';

/** The state folder of the checkout at `checkoutRoot`: MEDIAJOBS_LOCAL_DIR, else <checkoutRoot>/.local, as local mode has it. */
export function localStateDir(checkoutRoot: string, env: Readonly<Record<string, string | undefined>> = process.env): string {
  return resolve(env.MEDIAJOBS_LOCAL_DIR ?? join(checkoutRoot, '.local'));
}

/** The embedded Postgres running on a state folder. */
export interface LocalDatabase {
  stateDir: string;
  /** Its data directory, symlinks resolved. */
  dataDir: string;
  port: number;
  url: string;
}

export type LocalDatabaseLookup = { found: LocalDatabase } | { missing: string };

/** postmaster.pid's lines are PostgreSQL's LOCK_FILE_LINE_*: 1 pid, 2 data directory, 3 start time, 4 port. */
const PORT_LINE = 3;

/** The embedded Postgres running on `stateDir`, from its postmaster.pid; `missing` says why there is none. */
export function findLocalDatabase(stateDir: string): LocalDatabaseLookup {
  const link = join(stateDir, 'postgres');
  let dataDir: string;
  try {
    dataDir = realpathSync(link);
  } catch {
    return { missing: `${stateDir} holds no embedded Postgres (no ${link})` };
  }
  const pidFile = join(dataDir, 'postmaster.pid');
  let text: string;
  try {
    text = readFileSync(pidFile, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return { missing: `the embedded Postgres of ${stateDir} is not running (no ${pidFile})` };
    return { missing: `${pidFile} cannot be read (${code ?? String(err)}): run as the user who runs make run` };
  }
  const port = Number(text.split('\n')[PORT_LINE]);
  if (!Number.isInteger(port) || port < 1 || port > 65535) return { missing: `${pidFile} names no port (a Postgres still starting?)` };
  return { found: { stateDir, dataDir, port, url: localDatabaseUrl(port) } };
}

/**
 * Undefined when the server behind `pool` serves `db`'s data directory;
 * else what it is instead. Local mode's user is the superuser initdb made,
 * which may read data_directory.
 */
export async function servedDataDirProblem(pool: pg.Pool, db: LocalDatabase): Promise<string | undefined> {
  const r = await pool.query<{ data_directory: string }>('SHOW data_directory');
  const served = r.rows[0]?.data_directory ?? '';
  let real = served;
  try {
    real = realpathSync(served);
  } catch { /* another machine's or a vanished path: compared as given */ }
  if (real === db.dataDir) return undefined;
  return `port ${db.port} is another Postgres (data directory ${served}), not the one of ${db.stateDir} (${db.dataDir}): `
    + 'its postmaster.pid was left by a run that ended';
}
