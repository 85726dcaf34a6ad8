// Admin CLI: organizations and API keys, straight against Postgres:
// DATABASE_URL, or local mode's embedded database when it is not set (so
// next to `make run`, `npm run admin -- <command>` needs no settings).
//
//   npm run admin -- create-org --name NAME [--json]
//   npm run admin -- create-key --name NAME [--org ID] [--storage-limit-gb N]
//        [--max-resolution R] [--max-duration-seconds N] [--max-filesize-mb N] [--marketplace]
//        [--billing-customer CUS_ID] [--key KEY] [--json]
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
import { LOCAL_PG_DEFAULT_PORT, localDatabaseUrl } from '@mediajobs/lib/local-database';
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
             [--key KEY]                       store this key instead of a random one
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

environment: DATABASE_URL (default: local mode's database, which \`make run\` starts;
             its port is EMBEDDED_PG_PORT, default ${LOCAL_PG_DEFAULT_PORT});
             SECRET_KEYS for reseal (the services' list, the new key first)`;

export class UsageError extends Error {}

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
  key: { type: 'string' },
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

/** create-key: the limits checked and converted to the stored units; the key printed once. */
async function createKey(values: Options, name: string, pool: pg.Pool, out: (line: string) => void): Promise<void> {
  const maxResolution = values['max-resolution'];
  if (maxResolution !== undefined && !(MAX_RESOLUTIONS as readonly string[]).includes(maxResolution)) {
    throw new UsageError(`--max-resolution must be one of ${MAX_RESOLUTIONS.join(', ')}`);
  }
  const storageGb = positive('storage-limit-gb', values['storage-limit-gb']);
  const durationS = positive('max-duration-seconds', values['max-duration-seconds']);
  const filesizeMb = positive('max-filesize-mb', values['max-filesize-mb']);
  if (values.key !== undefined && values.key.length < 16) throw new UsageError('--key must be at least 16 characters');
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
    ...(values.key !== undefined && { key: values.key }),
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
  if (values.key === undefined) out('store it now: it is not shown again');
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
  argv: string[], pool: pg.Pool, out: (line: string) => void, env: { secretKeys?: string } = {},
): Promise<void> {
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
      await createKey(values, need('name'), pool, out);
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
      await reseal(values, pool, env.secretKeys, out);
      return;
    default:
      throw new UsageError(command ? `unknown command ${command}` : 'no command given');
  }
}

async function main(): Promise<number> {
  const argv = process.argv.slice(2);
  if (argv.length === 0 || argv[0] === '--help' || argv[0] === 'help') {
    process.stdout.write(`${USAGE}\n`);
    return argv.length === 0 ? 2 : 0;
  }
  const { DATABASE_URL, EMBEDDED_PG_PORT, SECRET_KEYS } = loadConfig(z.object({
    DATABASE_URL: z.string().min(1).optional(),
    EMBEDDED_PG_PORT: z.coerce.number().int().min(1).max(65535).default(LOCAL_PG_DEFAULT_PORT),
    SECRET_KEYS: commonSchema.shape.SECRET_KEYS,
  }));
  const pool = createPool(DATABASE_URL ?? localDatabaseUrl(EMBEDDED_PG_PORT), 2);
  try {
    await migrate(pool).catch((err: unknown) => {
      if (DATABASE_URL === undefined && (err as { code?: unknown }).code === 'ECONNREFUSED') {
        throw new Error(`local mode's database is not running on 127.0.0.1:${EMBEDDED_PG_PORT}: start it with \`make run\`, or set DATABASE_URL`);
      }
      throw err;
    });
    await runAdmin(argv, pool, (line) => process.stdout.write(`${line}\n`), { ...(SECRET_KEYS && { secretKeys: SECRET_KEYS }) });
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
    process.exit(usage || err instanceof ConfigError ? 2 : 1);
  });
}
