// The gateway's plumbing: migrations under a lock, the API key cache, the
// admin CLI, configuration, and graceful shutdown (in process and of the
// real main.ts on SIGTERM).
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { ConfigError } from '@mediajobs/lib/config';
import { SecretBox } from '@mediajobs/lib/secret-box';
import type pg from 'pg';
import { runAdmin, UsageError } from '../src/admin.js';
import { ApiKeyCache } from '../src/auth.js';
import { loadGatewayConfig } from '../src/config.js';
import { findApiKeyByHash, hashApiKey, type ApiKeyRecord } from '../src/db/api-keys.js';
import { getBatch, getBatchSql } from '@mediajobs/lib/db/batches';
import { sealedAt } from '@mediajobs/lib/db/sealed-columns';
import { GET_JOB, LIST_JOBS, LIST_JOBS_BY_STATUS, TOTAL_JOBS } from '@mediajobs/lib/db/jobs';
import { loadMigrations, migrate, migrationsApplied } from '../src/db/migrate.js';
import { createPool } from '../src/db/pool.js';
import { uuidv7 } from '../src/ids.js';
import { startGateway } from '../src/server.js';
import { captureLogger, createTestDatabase, startClusterWithCrd, type TestDatabase } from './support.js';

const here = fileURLToPath(new URL('.', import.meta.url));

describe('api-gateway: platform', function () {
  this.timeout(60_000);
  let db: TestDatabase;
  let pool: pg.Pool;

  before(async () => {
    db = await createTestDatabase();
    pool = createPool(db.url, 10);
  });
  after(async () => {
    await pool?.end();
    await db?.drop();
  });

  describe('migrations', () => {
    it('apply once even when several replicas start at the same time', async () => {
      const pools = Array.from({ length: 4 }, () => createPool(db.url, 2));
      try {
        const results = await Promise.all(pools.map((p) => migrate(p)));
        const all = loadMigrations().map((m) => m.version);
        expect(results.flat().sort()).to.deep.equal(all);
        expect(await migrate(pool)).to.deep.equal([]);
        expect(await migrationsApplied(pool)).to.equal(true);
        const recorded = await pool.query('SELECT version FROM schema_migrations ORDER BY version');
        expect(recorded.rows.map((r) => r.version)).to.deep.equal(all);
      } finally {
        await Promise.all(pools.map((p) => p.end()));
      }
    });

    it('a failing migration leaves nothing behind and is reported', async () => {
      const bad = [...loadMigrations(), { version: '9999_broken', sql: 'CREATE TABLE half_done (x int); SELECT nope_function();' }];
      let error: Error | undefined;
      await migrate(pool, bad).catch((e: Error) => (error = e));
      expect(error?.message).to.match(/^migration 9999_broken failed/);
      const t = await pool.query("SELECT to_regclass('half_done') AS t");
      expect(t.rows[0].t).to.equal(null);
      expect(await migrationsApplied(pool, bad)).to.equal(false);
    });

    it('0004 gives batches recorded before it their episode job ids, in episode order', async () => {
      const old = await createTestDatabase('mediajobs_0004');
      const p = createPool(old.url, 2);
      try {
        await migrate(p, loadMigrations().filter((m) => m.version < '0004'));
        const key = '00000000-0000-7000-8000-000000000001';
        const batch = '00000000-0000-4000-8000-0000000000b1';
        await p.query(`INSERT INTO batches (id, api_key_id, kind, show_url, status, total_episodes)
          VALUES ($1, $2, 'show', 'https://podcasts.test/id1', 'paused', 3)`, [batch, key]);
        // Inserted out of order: the order is batch_index's, not the rows'.
        const ids = ['00000000-0000-4000-8000-0000000000e3', '00000000-0000-4000-8000-0000000000e1', '00000000-0000-4000-8000-0000000000e2'];
        for (const [i, index] of [[0, 2], [1, 0], [2, 1]] as const) {
          await p.query(`INSERT INTO jobs (id, api_key_id, url, status, options, batch_id, batch_index)
            VALUES ($1, $2, 'u', 'Pending', '{}', $3, $4)`, [ids[i], key, batch, index]);
        }
        expect(await migrate(p, loadMigrations().filter((m) => m.version < '0005'))).to.deep.equal(['0004_batch_episode_ids']);
        const b = await getBatch(p, batch);
        expect(b?.episode_jobs).to.deep.equal([ids[1], ids[2], ids[0]]);
      } finally {
        await p.end();
        await old.drop();
      }
    });

    it('the hot-path statements walk their indexes, never sort or scan the table', async () => {
      await migrate(pool);
      // Enough rows, spread over keys and statuses, for the planner to choose as it would in production.
      await pool.query(`INSERT INTO jobs (id, api_key_id, url, status, options)
        SELECT gen_random_uuid(), ('00000000-0000-7000-8000-' || lpad((g % 50)::text, 12, '0'))::uuid, 'u',
               (ARRAY['Pending','Completed','Failed'])[1 + g % 3], '{}'
          FROM generate_series(1, 20000) g`);
      await pool.query('ANALYZE jobs');
      const client = await pool.connect();
      try {
        // Generic plans: what a prepared statement runs after its first executions.
        await client.query('SET plan_cache_mode = force_generic_plan');
        const plan = async (name: string, sql: string, args: string) => {
          await client.query(`PREPARE ${name} AS ${sql}`);
          return (await client.query(`EXPLAIN EXECUTE ${name}(${args})`)).rows.map((r) => r['QUERY PLAN']).join('\n');
        };
        const key = "'00000000-0000-7000-8000-000000000007'";
        const cases: [string, string, string, string][] = [
          ['get_job', GET_JOB, `'${uuidv7()}', ${key}`, 'jobs_pkey'],
          ['list_jobs', LIST_JOBS, `${key}, 100, 0`, 'jobs_key_created_idx'],
          ['list_jobs_status', LIST_JOBS_BY_STATUS, `${key}, 100, 0, 'Failed'`, 'jobs_key_status_created_idx'],
          ['total_jobs', TOTAL_JOBS, key, 'job_counters_pkey'],
        ];
        for (const [name, sql, args, index] of cases) {
          const p = await plan(name, sql, args);
          expect(p, name).to.include(index);
          // job_counters has at most 16 rows per key; any index access is fine there.
          if (name !== 'total_jobs') expect(p, name).not.to.match(/Sort|Seq Scan|Bitmap/);
        }
        // GET /batch/{id}: the batch row alone, its episode ids with it; never the jobs table.
        const batch = await plan('get_batch', getBatchSql(), `'${uuidv7()}'`);
        expect(batch).to.include('batches_pkey').and.not.to.match(/\bjobs\b|Seq Scan|Sort/);
        const auth = await plan('auth', 'SELECT id FROM api_keys WHERE key_hash = $1', "'x'");
        expect(auth).to.include('api_keys_key_hash_key');
        const endUser = await plan('end_user', 'SELECT id FROM api_keys WHERE parent_id = $1 AND marketplace_user = $2', `'${uuidv7()}', 'u'`);
        expect(endUser).to.include('api_keys_parent_user_key');
      } finally {
        client.release(true);
        await pool.query('TRUNCATE jobs');
      }
    });
  });

  describe('API key cache', () => {
    const record = (id: string, revoked = false): ApiKeyRecord => ({
      id, name: 'platform', organizationId: null, revoked, storageLimitBytes: null, maxResolution: null, maxDurationSeconds: null, maxFilesizeBytes: null,
    });

    it('serves repeated lookups from memory until the TTL passes', async () => {
      let now = 0;
      let calls = 0;
      let revoked = false;
      const cache = new ApiKeyCache(async () => (calls++, record('k', revoked)), 10_000, 100, () => now);
      expect((await cache.get('h'))!.revoked).to.equal(false);
      revoked = true;
      now = 9_999;
      expect((await cache.get('h'))!.revoked).to.equal(false);
      expect(calls).to.equal(1);
      now = 10_000;
      expect((await cache.get('h'))!.revoked).to.equal(true);
      expect(calls).to.equal(2);
    });

    it('shares one lookup among concurrent misses and does not cache failures', async () => {
      let calls = 0;
      let fail = true;
      const cache = new ApiKeyCache(async () => {
        calls++;
        await new Promise((r) => setTimeout(r, 20));
        if (fail) throw new Error('db down');
        return record('k');
      });
      const results = await Promise.allSettled([cache.get('h'), cache.get('h'), cache.get('h')]);
      expect(results.every((r) => r.status === 'rejected')).to.equal(true);
      expect(calls).to.equal(1);
      fail = false;
      expect((await cache.get('h'))!.id).to.equal('k');
      expect(calls).to.equal(2);
    });

    it('caches unknown keys too, and stays within its size bound', async () => {
      let calls = 0;
      const cache = new ApiKeyCache(async () => (calls++, undefined), 10_000, 50);
      for (let i = 0; i < 200; i++) await cache.get(`h${i}`);
      expect(cache.size).to.equal(50);
      await cache.get('h199');
      expect(calls).to.equal(200);
    });
  });

  describe('admin CLI', () => {
    const run = async (...argv: string[]) => {
      const out: string[] = [];
      await runAdmin(argv, pool, (l) => out.push(l), { env: { DEV_KEY: 'dev-key-0123456789', SHORT_KEY: 'short' }, stdin: async () => 'stdin-key-0123456789\n' });
      return out;
    };

    it('creates an organization and a key with limits, printing the key once', async () => {
      const [orgLine] = await run('create-org', '--name', 'Acme');
      const orgId = /^organization (\S+)$/.exec(orgLine!)![1]!;
      const out = await run('create-key', '--name', 'trial', '--org', orgId, '--storage-limit-gb', '1024', '--max-resolution', '1080',
        '--max-duration-seconds', '3600', '--max-filesize-mb', '500', '--billing-customer', 'cus_Acme42');
      const id = /^api key id: (\S+)$/.exec(out[0]!)![1]!;
      const key = /^api key: +(\S+)$/.exec(out[1]!)![1]!;
      expect(key).to.match(/^mj_[A-Za-z0-9_-]{43}$/);
      const rec = (await findApiKeyByHash(pool, hashApiKey(key)))!;
      expect(rec).to.deep.equal({
        id, name: 'trial', organizationId: orgId, revoked: false, kind: 'direct', storageLimitBytes: 1024 * 1024 ** 3, maxResolution: '1080',
        maxDurationSeconds: 3600, maxFilesizeBytes: 500 * 1024 ** 2, billingCustomer: 'cus_Acme42',
      });
      const stored = await pool.query('SELECT key_hash, key_prefix FROM api_keys WHERE id = $1', [id]);
      expect(stored.rows[0]).to.deep.equal({ key_hash: hashApiKey(key), key_prefix: key.slice(0, 8) });

      const listing = (await run('list-keys')).join('\n');
      expect(listing).to.include(id).and.include(`${key.slice(0, 8)}…`).and.include('storage=1024GB').and.include('billing=cus_Acme42');
      expect(listing).not.to.include(key).and.not.to.include(hashApiKey(key));
      const json = (await run('list-keys', '--json')).join('\n');
      expect(json).not.to.include(key).and.not.to.include(hashApiKey(key));

      expect((await run('revoke-key', '--id', id))[0]).to.include('revoked');
      expect((await findApiKeyByHash(pool, hashApiKey(key)))!.revoked).to.equal(true);
    });

    it('reseals every sealed column with the first key of SECRET_KEYS, printing counts per table and column', async () => {
      const spec = SecretBox.generateSpec('r1');
      const apiKeyId = uuidv7();
      await pool.query(`INSERT INTO chat_settings (api_key_id, webhook_url_enc, notify_level) VALUES ($1, $2, 'all')`,
        [apiKeyId, new SecretBox(spec).seal('https://chat.example/services/r', sealedAt.chatWebhook(apiKeyId))]);
      const reseal = async (keys: string) => {
        const out: string[] = [];
        await runAdmin(['reseal', '--batch-size', '10'], pool, (l) => out.push(l), { secretKeys: keys });
        return out;
      };
      const first = await reseal(`${SecretBox.generateSpec('r2')},${spec}`);
      expect(first.find((l) => l.startsWith('chat_settings.webhook_url_enc'))).to.match(/resealed 1 {2}changed meanwhile 0 {2}unreadable 0$/);
      expect(first.map((l) => l.split(' ')[0])).to.include.members(['jobs.webhook_url_enc', 'jobs.storage_enc', 'outbox.target_enc']);
      const stored = (await pool.query('SELECT webhook_url_enc FROM chat_settings WHERE api_key_id = $1', [apiKeyId])).rows[0].webhook_url_enc as string;
      expect(stored).to.match(/^v2\.r2\./);
      expect(first.join('\n')).not.to.include('chat.example');
    });

    it('stores a given key idempotently (a fixed dev key), from the environment or stdin', async () => {
      const first = await run('create-key', '--name', 'dev', '--key-env', 'DEV_KEY');
      const second = await run('create-key', '--name', 'dev', '--key-env', 'DEV_KEY');
      const id = /^api key id: (\S+)$/.exec(first[0]!)![1]!;
      expect(first[1]).to.equal('api key:    dev-key-0123456789');
      expect(second).to.deep.equal([`api key ${id} already exists`]);
      const piped = await run('create-key', '--name', 'piped', '--key-stdin');
      expect(piped[1], 'the trailing newline is not part of it').to.equal('api key:    stdin-key-0123456789');
    });

    const usage: string[][] = [
      [], ['nope'], ['create-key'], ['create-org'], ['revoke-key'], ['revoke-key', '--id', 'x'],
      ['create-key', '--name', 'a', '--max-resolution', '4k'], ['create-key', '--name', 'a', '--storage-limit-gb', '-1'],
      ['create-key', '--name', 'a', '--org', 'not-a-uuid'], ['create-key', '--name', 'a', '--key-env', 'SHORT_KEY'],
      ['create-key', '--name', 'a', '--key', 'dev-key-0123456789'], ['create-key', '--name', 'a', '--key=dev-key-0123456789'],
      ['create-key', '--name', 'a', '--key-env', 'UNSET_KEY'], ['create-key', '--name', 'a', '--key-env', 'DEV_KEY', '--key-stdin'],
      ['create-key', '--name', 'a', '--billing-customer', 'acct_123'], ['create-key', '--name', 'a', '--billing-customer', 'cus_'],
      ['reseal'],
    ];
    for (const argv of usage) {
      it(`refuses ${JSON.stringify(argv)} with a usage error`, async () => {
        let err: unknown;
        await run(...argv).catch((e: unknown) => (err = e));
        expect(err).to.be.instanceOf(UsageError);
      });
    }
  });

  describe('configuration', () => {
    it('has the documented defaults', () => {
      const c = loadGatewayConfig({ DATABASE_URL: 'postgres://x/y', SECRET_KEYS: 'a:b' });
      expect(c).to.include({ PORT: 8080, MEDIAJOBS_NAMESPACE: 'default', PG_POOL_MAX: 20, AUTH_CACHE_TTL_MS: 10_000, MANAGED_STORAGE: 'local' });
    });
    it('names every missing or bad variable', () => {
      expect(() => loadGatewayConfig({ PORT: 'abc' })).to.throw(ConfigError, /DATABASE_URL[\s\S]*PORT|PORT[\s\S]*DATABASE_URL/);
    });
  });

  describe('graceful shutdown', () => {
    const env = (dir: string) => ({
      DATABASE_URL: db.url, SECRET_KEYS: SecretBox.generateSpec('t'), FILE_URL_SECRET: 'file-url-secret-0123456789',
      MANAGED_STORAGE_DIR: dir, PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info', SHUTDOWN_TIMEOUT_MS: '5000',
    });

    it('finishes in-flight requests, refuses new connections, then closes the pool', async () => {
      const dir = mkdtempSync(join(tmpdir(), 'mj-gw-'));
      const logs = captureLogger();
      const gw = await startGateway(loadGatewayConfig(env(dir)), { logger: logs.logger });
      // A slow insert, for this URL only: the POST /jobs below is inside its handler, its statement running, for a second.
      const url = `https://m.example/v?shutdown=${uuidv7()}`;
      await pool.query(`CREATE FUNCTION shutdown_slow() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN IF NEW.url = '${url}' THEN PERFORM pg_sleep(1); END IF; RETURN NEW; END $$`);
      await pool.query('CREATE TRIGGER shutdown_slow BEFORE INSERT ON jobs FOR EACH ROW EXECUTE FUNCTION shutdown_slow()');
      try {
        const [{ key }] = [await (await import('../src/db/api-keys.js')).createApiKey(gw.pool, { name: 'sd' })];
        const inflight = fetch(`${gw.url}/jobs`, {
          method: 'POST', headers: { 'x-api-key': key, 'content-type': 'application/json' }, body: JSON.stringify({ url }),
        });
        // In flight: the gateway's insert is sleeping in Postgres.
        const deadline = Date.now() + 10_000;
        while (Number((await pool.query(
          "SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event = 'PgSleep'")).rows[0].n) !== 1) {
          if (Date.now() > deadline) throw new Error('the POST /jobs insert never started');
          await new Promise((r) => setTimeout(r, 20));
        }
        const closing = gw.close();
        const res = await inflight;
        expect(res.status).to.equal(201);
        const { job_id: id } = (await res.json()) as { job_id: string };
        expect((await pool.query('SELECT status FROM jobs WHERE id = $1 AND url = $2', [id, url])).rows).to.deep.equal([{ status: 'Pending' }]);
        await closing;
        let refused = false;
        await fetch(`${gw.url}/healthz`).catch(() => (refused = true));
        expect(refused).to.equal(true);
        expect((gw.pool as pg.Pool & { ending: boolean }).ending).to.equal(true);
        expect(logs.text()).to.include('api-gateway stopped');
      } finally {
        await gw.close();
        await pool.query('DROP TRIGGER IF EXISTS shutdown_slow ON jobs; DROP FUNCTION IF EXISTS shutdown_slow()');
        rmSync(dir, { recursive: true, force: true });
      }
    });

    it('main.ts serves, and exits 0 on SIGTERM', async () => {
      const dir = mkdtempSync(join(tmpdir(), 'mj-gw-'));
      const tc = await startClusterWithCrd();
      const child = spawn(process.execPath, ['--import', 'tsx', join(here, '../src/main.ts')], {
        env: { ...process.env, ...env(dir), KUBECONFIG: tc.cluster.kubeconfigPath }, stdio: ['ignore', 'pipe', 'pipe'],
      });
      let out = '';
      child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
      child.stderr!.on('data', (d: Buffer) => (out += d.toString()));
      const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
      try {
        const deadline = Date.now() + 20_000;
        let url: string | undefined;
        while (!url) {
          url = /"url":"(http:[^"]+)","namespace"/.exec(out)?.[1];
          if (Date.now() > deadline) throw new Error(`gateway did not start:\n${out}`);
          await new Promise((r) => setTimeout(r, 50));
        }
        expect((await fetch(`${url}/readyz`)).status).to.equal(200);
        child.kill('SIGTERM');
        expect(await exited).to.equal(0);
        expect(out).to.include('api-gateway stopped');
      } finally {
        if (child.exitCode === null) child.kill('SIGKILL');
        await tc.stop();
        rmSync(dir, { recursive: true, force: true });
      }
    });
  });
});
