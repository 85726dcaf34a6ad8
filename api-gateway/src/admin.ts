// Admin CLI: organizations and API keys, straight against Postgres:
// DATABASE_URL, or else the embedded database local mode runs for this
// checkout (found from its state folder, lib/src/local-state.ts), so next to
// `make run`, `npm run admin -- <command>` needs no settings. It never
// assumes a port: without either it refuses, and its first line on stderr
// names the database it uses. Secrets never come from the command line
// (`ps` shows it to every user): a chosen key is read from stdin or from an
// environment variable the command names.
//
//   npm run admin -- create-org --name NAME [--json]
//   npm run admin -- create-key --name NAME [--org ID] [--storage-limit-gb N]
//        [--max-resolution R] [--max-duration-seconds N] [--max-filesize-mb N] [--marketplace]
//        [--billing-customer CUS_ID] [--key-stdin | --key-env VAR] [--json]
//   npm run admin -- revoke-key --id ID
//   npm run admin -- set-org-admin --id ID [--off]
//   npm run admin -- list-keys [--json]
//   npm run admin -- cancel-job --id JOB_ID
//   npm run admin -- reseal [--batch-size N] [--json]     (SECRET_KEYS as the services have it)
//
// create-key prints the key once; only its sha256 is stored. list-keys
// shows the human prefix, never a key or a hash.
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { z } from 'zod';
import { BILLING_CUSTOMER } from '@mediajobs/lib/billing';
import { ConfigError, commonSchema, loadConfig } from '@mediajobs/lib/config';
import { findLocalDatabase, localStateDir, servedDataDirProblem, type LocalDatabase } from '@mediajobs/lib/local-state';
import { cancelJob } from '@mediajobs/lib/db/jobs';
import { resealAll, type ResealCount } from '@mediajobs/lib/db/reseal';
import { SecretBox } from '@mediajobs/lib/secret-box';
import { MAX_RESOLUTIONS } from '@mediajobs/lib/mediajob/types';
import type pg from 'pg';
import { createApiKey, createOrganization, listApiKeys, revokeApiKey } from './db/api-keys.js';
import { migrate } from './db/migrate.js';
import { createPool } from './db/pool.js';
import { setOrgAdmin } from './destinations/store.js';
import { isUuid } from './ids.js';

const USAGE = `usage: admin <command> [options]

commands:
  create-org --name NAME [--json]              create an organization; prints its id
  create-key --name NAME [--org ORG_ID]        create an API key; prints it once
             [--storage-limit-gb N] [--max-resolution R]
             [--max-duration-seconds N] [--max-filesize-mb N]
             [--marketplace]                   a provider account's key for an API marketplace:
                                               each request names its end user in a header
             [--billing-customer CUS_ID]       bill the key's usage to this Stripe customer
                                               (STRIPE_SECRET_KEY on gateway and operator)
             [--key-stdin | --key-env VAR]     store this key instead of a random one, read
                                               from standard input or from the environment
                                               variable VAR, never from the command line
                                               (idempotent: an existing key is kept)
             [--json]                          print {"id", "key", ...} for scripts
  revoke-key --id KEY_ID                       revoke a key (cached lookups expire within 10 s)
  set-org-admin --id KEY_ID [--off]            let the key manage its organization's storage
                                               destinations (?owner=organization), or stop it
  list-keys [--json]                           list keys (prefix only, never the key), their kind,
                                               and a marketplace key's end users seen
  cancel-job --id JOB_ID                       cancel any key's unfinished job: CancelledByAdmin,
                                               job_cancelled webhook; the operator stops its runner
  reseal [--batch-size N] [--json]             seal every stored secret again with the first key of
                                               SECRET_KEYS, bound to its row (key rotation: see
                                               docs/production.md); safe while the services run,
                                               and a second run finds nothing left to do

database: DATABASE_URL when set; else the Postgres that local mode (\`make run\`)
          runs for this checkout, found from its state folder (.local, or
          MEDIAJOBS_LOCAL_DIR); else none: the command is refused. The first line
          on stderr names the database used (without its password).
environment: SECRET_KEYS for reseal (the services' list, the new key first)`;

export class UsageError extends Error {}

/** Neither DATABASE_URL nor a running local mode of this checkout: nothing is guessed. */
export class NoDatabaseError extends Error {}

/** The old `--key KEY`: refused, the key not echoed. */
export const KEY_ON_COMMAND_LINE = '--key no longer takes the key on the command line, where ps shows it to every user of the machine: '
  + 'give it on standard input with --key-stdin, or name the environment variable that holds it with --key-env VAR';

/** Refuse a secret on the command line (checked before anything connects). */
export function refuseSecretsInArgv(argv: readonly string[]): void {
  if (argv.some((a) => a === '--key' || a.startsWith('--key='))) throw new UsageError(KEY_ON_COMMAND_LINE);
}

/** Where runAdmin reads what must not be on the command line. */
export interface AdminInput {
  /** SECRET_KEYS, for reseal. */
  secretKeys?: string;
  /** The variables --key-env may name (main: process.env). */
  env?: Readonly<Record<string, string | undefined>>;
  /** Standard input, read to its end (--key-stdin). */
  stdin?: () => Promise<string>;
}

const GB = 1024 ** 3;
const MB = 1024 ** 2;

function positive(name: string, v: string | undefined): number | undefined {
  if (v === undefined) return undefined;
  const n = Number(v);
  if (!Number.isFinite(n) || n <= 0) throw new UsageError(`--${name} must be a positive number`);
  return n;
}

function uuidOption(name: string, v: string | undefined): string | undefined {
  if (v !== undefined && !isUuid(v)) throw new UsageError(`--${name} must be a UUID`);
  return v;
}

const OPTIONS = {
  name: { type: 'string' },
  org: { type: 'string' },
  id: { type: 'string' },
  'key-stdin': { type: 'boolean' },
  'key-env': { type: 'string' },
  'storage-limit-gb': { type: 'string' },
  'max-resolution': { type: 'string' },
  'max-duration-seconds': { type: 'string' },
  'max-filesize-mb': { type: 'string' },
  json: { type: 'boolean' },
  off: { type: 'boolean' },
  marketplace: { type: 'boolean' },
  'billing-customer': { type: 'string' },
  'batch-size': { type: 'string' },
} as const;

function parseOptions(args: string[]) {
  try {
    return parseArgs({ args, strict: true, options: OPTIONS });
  } catch (err) {
    // Unknown options and values like "-1" that parseArgs cannot place.
    throw new UsageError((err as Error).message);
  }
}

type Options = ReturnType<typeof parseOptions>['values'];

/** The key create-key is to store (--key-stdin, --key-env), or undefined for a random one. */
async function chosenKey(values: Options, input: AdminInput): Promise<string | undefined> {
  const variable = values['key-env'];
  if (values['key-stdin'] && variable !== undefined) throw new UsageError('give the key one way: --key-stdin or --key-env');
  if (values['key-stdin']) {
    if (!input.stdin) throw new UsageError('--key-stdin: no standard input to read here');
    const key = (await input.stdin()).replace(/\r?\n$/, '');
    if (!key) throw new UsageError('--key-stdin: standard input was empty');
    return key;
  }
  if (variable === undefined) return undefined;
  const key = input.env?.[variable];
  if (!key) throw new UsageError(`--key-env ${variable}: that environment variable is not set`);
  return key;
}

/** create-key: the limits checked and converted to the stored units; the key printed once. */
async function createKey(values: Options, name: string, pool: pg.Pool, out: (line: string) => void, input: AdminInput): Promise<void> {
  const maxResolution = values['max-resolution'];
  if (maxResolution !== undefined && !(MAX_RESOLUTIONS as readonly string[]).includes(maxResolution)) {
    throw new UsageError(`--max-resolution must be one of ${MAX_RESOLUTIONS.join(', ')}`);
  }
  const storageGb = positive('storage-limit-gb', values['storage-limit-gb']);
  const durationS = positive('max-duration-seconds', values['max-duration-seconds']);
  const filesizeMb = positive('max-filesize-mb', values['max-filesize-mb']);
  const key = await chosenKey(values, input);
  if (key !== undefined && key.length < 16) throw new UsageError('the key must be at least 16 characters');
  const org = uuidOption('org', values.org);
  const kind = values.marketplace ? 'marketplace' : 'direct';
  const billingCustomer = values['billing-customer'];
  if (billingCustomer !== undefined && !BILLING_CUSTOMER.test(billingCustomer)) {
    throw new UsageError('--billing-customer must be a Stripe customer id (cus_…)');
  }
  const created = await createApiKey(pool, {
    name,
    kind,
    ...(org && { organizationId: org }),
    ...(storageGb !== undefined && { storageLimitBytes: Math.round(storageGb * GB) }),
    ...(maxResolution !== undefined && { maxResolution }),
    ...(durationS !== undefined && { maxDurationSeconds: Math.round(durationS) }),
    ...(filesizeMb !== undefined && { maxFilesizeBytes: Math.round(filesizeMb * MB) }),
    ...(billingCustomer !== undefined && { billingCustomer }),
    ...(key !== undefined && { key }),
  });
  if (values.json) {
    // The key only when this call made it: an existing key's text is not known (only its hash is stored).
    out(JSON.stringify({
      id: created.id, ...(created.created && { key: created.key }), name, kind, created: created.created, organization_id: org ?? null,
      storage_limit_bytes: storageGb !== undefined ? Math.round(storageGb * GB) : null, max_resolution: maxResolution ?? null,
      max_duration_seconds: durationS !== undefined ? Math.round(durationS) : null,
      max_filesize_bytes: filesizeMb !== undefined ? Math.round(filesizeMb * MB) : null,
      billing_customer: billingCustomer ?? null,
    }));
    return;
  }
  if (!created.created) {
    out(`api key ${created.id} already exists`);
    return;
  }
  out(`api key id: ${created.id}`);
  out(`api key:    ${created.key}`);
  if (key === undefined) out('store it now: it is not shown again');
  if (kind === 'marketplace') out('a marketplace key: each request names its end user in a header (MARKETPLACE_USER_HEADER, default x-marketplace-user)');
}

/** reseal: every sealed column, its counts printed as each is done; fails when a value stays unreadable. */
async function reseal(values: Options, pool: pg.Pool, secretKeys: string | undefined, out: (line: string) => void): Promise<void> {
  if (!secretKeys) throw new UsageError('reseal needs SECRET_KEYS: the list the gateway and operator run with, the new key first');
  const batchSize = positive('batch-size', values['batch-size']);
  const line = (c: ResealCount) => values.json
    ? JSON.stringify(c)
    : `${`${c.table}.${c.column}`.padEnd(40)} resealed ${c.resealed}  changed meanwhile ${c.changed}  unreadable ${c.unreadable}`;
  // Opens v1 values whatever the services do: upgrading them is what it is for.
  const counts = await resealAll(pool, new SecretBox(secretKeys, { openUnbound: true }), {
    ...(batchSize !== undefined && { batchSize: Math.round(batchSize) }), onColumn: (c) => out(line(c)),
  });
  const unreadable = counts.reduce((n, c) => n + c.unreadable, 0);
  // A value changed meanwhile was written by a service sealing with the same keys; a run now would find it current.
  if (unreadable) throw new Error(`${unreadable} sealed values could not be opened with SECRET_KEYS: keep every old key until they are resolved`);
}

/** Run one command; output lines go to `out`. Exported for tests and the local-mode launcher. */
export async function runAdmin(
  argv: string[], pool: pg.Pool, out: (line: string) => void, input: AdminInput = {},
): Promise<void> {
  refuseSecretsInArgv(argv);
  const [command, ...rest] = argv;
  const { values } = parseOptions(rest);
  const need = (name: 'name' | 'id'): string => {
    const v = values[name];
    if (!v || !v.trim()) throw new UsageError(`--${name} is required`);
    return v;
  };

  switch (command) {
    case 'create-org': {
      const name = need('name');
      const { id } = await createOrganization(pool, name);
      out(values.json ? JSON.stringify({ id, name }) : `organization ${id}`);
      return;
    }
    case 'create-key':
      await createKey(values, need('name'), pool, out, input);
      return;
    case 'revoke-key': {
      const id = uuidOption('id', need('id'))!;
      if (!(await revokeApiKey(pool, id))) throw new Error(`no api key ${id}`);
      out(`api key ${id} revoked (gateways stop accepting it within their auth cache TTL, 10 s by default)`);
      return;
    }
    case 'set-org-admin': {
      const id = uuidOption('id', need('id'))!;
      const on = !values.off;
      const outcome = await setOrgAdmin(pool, id, on);
      if (outcome === 'no_such_key') throw new Error(`no api key ${id}`);
      if (outcome === 'no_organization') throw new UsageError(`api key ${id} belongs to no organization`);
      out(`api key ${id} ${on ? 'is now' : 'is no longer'} an organization admin`);
      return;
    }
    case 'list-keys': {
      const keys = await listApiKeys(pool);
      if (values.json) {
        out(JSON.stringify(keys));
        return;
      }
      out(['ID', 'NAME', 'KIND', 'PREFIX', 'ORGANIZATION', 'CREATED', 'REVOKED', 'LIMITS'].join('\t'));
      for (const k of keys) {
        const limits = [
          k.storageLimitBytes !== null && `storage=${(k.storageLimitBytes / GB).toFixed(0)}GB`,
          k.maxResolution !== null && `resolution=${k.maxResolution}`,
          k.maxDurationSeconds !== null && `duration=${k.maxDurationSeconds}s`,
          k.maxFilesizeBytes !== null && `filesize=${(k.maxFilesizeBytes / MB).toFixed(0)}MB`,
          k.billingCustomer !== null && `billing=${k.billingCustomer}`,
        ].filter(Boolean).join(',') || '-';
        const kind = k.kind === 'marketplace' ? `marketplace(${k.endUsers} users)` : k.kind;
        out([k.id, k.name, kind, `${k.keyPrefix}…`, k.organizationId ?? '-', k.createdAt.toISOString(), k.revokedAt?.toISOString() ?? '-', limits].join('\t'));
      }
      return;
    }
    case 'cancel-job': {
      const id = uuidOption('id', need('id'))!.toLowerCase();
      const r = await cancelJob(pool, id, 'CancelledByAdmin');
      if (r.outcome === 'not_found') throw new Error(`no job ${id}`);
      if (r.outcome === 'finished') throw new Error(`job ${id} is already finished (status: ${r.status})`);
      out(`job ${id} cancelled (was ${r.previous}); the operator stops its runner`);
      return;
    }
    case 'reseal':
      await reseal(values, pool, input.secretKeys, out);
      return;
    default:
      throw new UsageError(command ? `unknown command ${command}` : 'no command given');
  }
}

/** The checkout this file is in: its local mode's state folder is the one to look in. */
const CHECKOUT = fileURLToPath(new URL('../../', import.meta.url));

/** The database to use, and the line that names it. */
export interface ChosenDatabase {
  url: string;
  /** The first line on stderr: which database, and why that one. */
  named: string;
  /** Set when it is local mode's: the server is checked to be that one before anything else. */
  local?: LocalDatabase;
}

/** DATABASE_URL when set, else the running local mode of `checkout` (its state folder); never a guess. */
export function chooseDatabase(env: Readonly<Record<string, string | undefined>>, checkout = CHECKOUT): ChosenDatabase {
  if (env.DATABASE_URL) return { url: env.DATABASE_URL, named: `admin: database ${shownUrl(env.DATABASE_URL)} (from DATABASE_URL)` };
  const stateDir = localStateDir(checkout, env);
  const lookup = findLocalDatabase(stateDir);
  if ('missing' in lookup) {
    throw new NoDatabaseError(`no database to use: DATABASE_URL is not set, and ${lookup.missing}. `
      + 'Set DATABASE_URL, or start `make run` in this checkout');
  }
  const db = lookup.found;
  return { url: db.url, named: `admin: database ${shownUrl(db.url)} (from ${stateDir}: local mode's Postgres)`, local: db };
}

/** A database URL without its password (in the userinfo or a query parameter); a string that is no URL is not shown. */
export function shownUrl(url: string): string {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return '(not shown: DATABASE_URL is not a URL)';
  }
  u.password = '';
  for (const name of [...u.searchParams.keys()]) if (/password/i.test(name)) u.searchParams.delete(name);
  return u.toString();
}

/** Make sure a local database is the one its state folder named: connected, and serving that data directory. */
async function checkLocal(pool: pg.Pool, db: LocalDatabase): Promise<void> {
  let problem: string | undefined;
  try {
    problem = await servedDataDirProblem(pool, db);
  } catch (err) {
    const e = err as { code?: unknown; message?: string };
    problem = e.code === 'ECONNREFUSED'
      ? `the embedded Postgres of ${db.stateDir} is not running (port ${db.port}, from its postmaster.pid, refuses connections)`
      : `port ${db.port}, from the postmaster.pid of ${db.stateDir}, is not its embedded Postgres (${e.message ?? String(err)})`;
  }
  if (problem) throw new NoDatabaseError(`${problem}. Set DATABASE_URL, or start \`make run\` in this checkout`);
}

async function readStdin(): Promise<string> {
  if (process.stdin.isTTY) process.stderr.write('admin: type the key, then Enter and Ctrl-D\n');
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

async function main(): Promise<number> {
  const argv = process.argv.slice(2);
  if (argv.length === 0 || argv[0] === '--help' || argv[0] === 'help') {
    process.stdout.write(`${USAGE}\n`);
    return argv.length === 0 ? 2 : 0;
  }
  refuseSecretsInArgv(argv);
  const { SECRET_KEYS } = loadConfig(z.object({ SECRET_KEYS: commonSchema.shape.SECRET_KEYS }));
  const chosen = chooseDatabase(process.env);
  process.stderr.write(`${chosen.named}\n`);
  const pool = createPool(chosen.url, 2);
  try {
    // Before the migrations: another checkout's database is not touched at all.
    if (chosen.local) await checkLocal(pool, chosen.local);
    await migrate(pool);
    await runAdmin(argv, pool, (line) => process.stdout.write(`${line}\n`), {
      ...(SECRET_KEYS && { secretKeys: SECRET_KEYS }), env: process.env, stdin: readStdin,
    });
    return 0;
  } finally {
    await pool.end();
  }
}

// Only when run as a program, not when imported by tests.
if (process.argv[1] && fileURLToPath(import.meta.url) === resolve(process.argv[1])) {
  main().then((code) => process.exit(code), (err: unknown) => {
    const usage = err instanceof UsageError;
    process.stderr.write(`admin: ${(err as Error).message}\n${usage ? `\n${USAGE}\n` : ''}`);
    process.exit(usage || err instanceof ConfigError || err instanceof NoDatabaseError ? 2 : 1);
  });
}
