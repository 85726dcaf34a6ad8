// Sealed values on real Postgres: a database writer moving one to another
// row or column gets nothing opened there, and the re-seal command brings
// every sealed column to v2 under the first key, beside running writers.
import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import type pg from 'pg';
import { resealAll, type ResealCount } from '../src/db/reseal.js';
import { SEALED_COLUMNS, outboxTargetAt, sealedAt } from '../src/db/sealed-columns.js';
import { rotateWebhookSecret, signingSecrets } from '../src/db/webhook-secrets.js';
import { SecretBox, SecretBoxError, type SecretContext } from '../src/secret-box.js';
import { createTestDatabase, insertApiKey, type TestDatabase } from '../../test/support/postgres.js';
import { sealV1 } from './secret-box-support.js';

/** Every sealed value of the database with the place it opens at. */
async function everySealed(pool: pg.Pool): Promise<{ name: string; value: string; at: SecretContext }[]> {
  const all: { name: string; value: string; at: SecretContext }[] = [];
  for (const c of SEALED_COLUMNS) {
    const fields = [`${c.key}::text AS ${c.key}`, `${c.column} AS v`, ...c.fields.map((f) => `${f}::text AS ${f}`)].join(', ');
    const r = await pool.query<Record<string, string | null> & { v: string }>(`SELECT ${fields} FROM ${c.table} WHERE ${c.column} IS NOT NULL`);
    for (const row of r.rows) all.push({ name: `${c.table}.${c.column}`, value: row.v, at: c.at(row) });
  }
  return all;
}

describe('lib: sealed values bound to their place, and the re-seal command (real PostgreSQL)', function () {
  this.timeout(60_000);
  let db: TestDatabase;
  let pool: pg.Pool;
  const oldSpec = SecretBox.generateSpec('old');
  /** The reseal command's box: it opens v1 values, as admin.ts builds it. */
  const oldBox = new SecretBox(oldSpec, { openUnbound: true });

  before(async () => {
    db = await createTestDatabase('mediajobs_reseal');
    pool = db.pool;
  });
  after(async () => db?.drop());
  beforeEach(async () => pool.query('TRUNCATE jobs, batches, outbox, chat_settings, webhook_secrets, storage_destinations CASCADE'));

  async function job(box: SecretBox | 'v1', plain: { webhook?: string; storage?: string; urls?: string }): Promise<string> {
    const key = await insertApiKey(pool);
    const id = randomUUID();
    const seal = (p: string | undefined, at: SecretContext) => (p === undefined ? null : box === 'v1' ? sealV1(oldSpec, p) : box.seal(p, at));
    await pool.query(
      `INSERT INTO jobs (id, api_key_id, url, status, step, progress, options, webhook_url_enc, storage_enc, result_urls_enc)
       VALUES ($1, $2, 'https://media.test/v', 'Pending', 'Queued', 0, '{}', $3, $4, $5)`,
      [id, key, seal(plain.webhook, sealedAt.jobWebhook(id)), seal(plain.storage, sealedAt.jobStorage(id)), seal(plain.urls, sealedAt.jobResultUrls(id))]);
    return id;
  }
  const column = async (id: string, col: string) =>
    (await pool.query<{ v: string }>(`SELECT ${col} AS v FROM jobs WHERE id = $1`, [id])).rows[0]!.v;

  it('knows every sealed column of the schema (each *_enc column is in SEALED_COLUMNS)', async () => {
    const r = await pool.query<{ c: string }>(
      `SELECT table_name || '.' || column_name AS c FROM information_schema.columns
        WHERE table_schema = 'public' AND column_name LIKE '%\\_enc' ORDER BY 1`);
    expect(r.rows.map((x) => x.c)).to.have.members(SEALED_COLUMNS.map((c) => `${c.table}.${c.column}`));
  });

  describe('a database writer moving a sealed value', () => {
    it('to another job row: it does not open there', async () => {
      const a = await job(oldBox, { webhook: 'https://hooks.example/a' });
      const b = await job(oldBox, { webhook: 'https://hooks.example/b' });
      await pool.query('UPDATE jobs SET webhook_url_enc = (SELECT webhook_url_enc FROM jobs WHERE id = $1) WHERE id = $2', [a, b]);
      const moved = await column(b, 'webhook_url_enc');
      expect(() => oldBox.open(moved, sealedAt.jobWebhook(b))).to.throw(SecretBoxError, /wrong place or tampered/);
    });

    it('to another column of the same row: inline credentials read as a webhook address do not open', async () => {
      const a = await job(oldBox, { webhook: 'https://hooks.example/a', storage: '{"secret_key":"s3cr3t"}' });
      await pool.query('UPDATE jobs SET webhook_url_enc = storage_enc WHERE id = $1', [a]);
      const moved = await column(a, 'webhook_url_enc');
      expect(() => oldBox.open(moved, sealedAt.jobWebhook(a))).to.throw(SecretBoxError);
    });

    it("to another key's signing secret: deliveries of that key fail instead of signing with it", async () => {
      const [k1, k2] = [randomUUID(), randomUUID()];
      await rotateWebhookSecret(pool, oldBox, k1);
      await rotateWebhookSecret(pool, oldBox, k2);
      await pool.query('UPDATE webhook_secrets SET secret_enc = (SELECT secret_enc FROM webhook_secrets WHERE api_key_id = $1) WHERE api_key_id = $2', [k1, k2]);
      expect((await signingSecrets(pool, oldBox, k1)).length).to.equal(1);
      const err = await signingSecrets(pool, oldBox, k2).catch((e: unknown) => e);
      expect(err).to.be.instanceOf(SecretBoxError);
      // Its owner rotates past it: the value that does not open is dropped, not kept for the overlap.
      const { secret, info } = await rotateWebhookSecret(pool, oldBox, k2);
      expect(info.rotatedAt).to.equal(null);
      expect(await signingSecrets(pool, oldBox, k2)).to.deep.equal([secret]);
    });

    it('from a job into an outbox row of another job: the dispatcher cannot open it', async () => {
      const a = await job(oldBox, { webhook: 'https://hooks.example/a' });
      const b = await job(oldBox, { webhook: 'https://hooks.example/b' });
      const r = await pool.query<{ id: string }>(
        `INSERT INTO outbox (event_id, job_id, type, target_enc, payload) SELECT $1, $2, 'job_failed', webhook_url_enc, '{}' FROM jobs WHERE id = $3 RETURNING id`,
        [randomUUID(), b, a]);
      const row = (await pool.query('SELECT id::text, job_id::text, batch_id::text, chat_key_id::text, target_enc FROM outbox WHERE id = $1', [r.rows[0]!.id])).rows[0];
      expect(() => oldBox.open(row.target_enc, outboxTargetAt(row))).to.throw(SecretBoxError);
    });
  });

  /** Rows in every sealed column: v1 values from before places were bound, and v2 values under the old key. */
  async function seedEverywhere(): Promise<Map<string, string>> {
    const plain = new Map<string, string>();
    const v1Job = await job('v1', { webhook: 'https://hooks.example/v1', storage: '{"k":"v1-creds"}', urls: '{"s3Url":"v1"}' });
    const v2Job = await job(oldBox, { webhook: 'https://hooks.example/v2', storage: '{"k":"v2-creds"}', urls: '{"s3Url":"v2"}' });
    const key = await insertApiKey(pool);
    const batchId = randomUUID();
    await pool.query(
      `INSERT INTO batches (id, api_key_id, kind, show_url, status, total_episodes, webhook_url_enc, episode_jobs)
       VALUES ($1, $2, 'show', 'https://podcasts.test/show', 'processing', 1, $3, ARRAY[$4::uuid])`,
      [batchId, key, sealV1(oldSpec, 'https://hooks.example/batch'), v1Job]);
    await pool.query(`INSERT INTO chat_settings (api_key_id, webhook_url_enc, notify_level) VALUES ($1, $2, 'all')`,
      [key, oldBox.seal('https://chat.example/services/x', sealedAt.chatWebhook(key))]);
    await pool.query(`INSERT INTO webhook_secrets (api_key_id, secret_enc, revealed, previous_secret_enc, rotated_at) VALUES ($1, $2, true, $3, now())`,
      [key, sealV1(oldSpec, 'whsec_current'), sealV1(oldSpec, 'whsec_previous')]);
    await pool.query(`INSERT INTO storage_destinations (owner_kind, owner_id, provider, source, config, credentials_enc)
       VALUES ('api_key', $1, 's3', 'legacy', '{}', $2)`, [key, sealV1(oldSpec, '{"secret_key":"saved"}')]);
    const outbox = (jobId: string | null, batch: string | null, chatKey: string | null, target: string, channel = 'webhook') => pool.query(
      `INSERT INTO outbox (event_id, job_id, batch_id, chat_key_id, type, target_enc, payload, channel) VALUES ($1, $2, $3, $4, 't', $5, '{}', $6)`,
      [randomUUID(), jobId, batch, chatKey, target, channel]);
    await outbox(v1Job, null, null, sealV1(oldSpec, 'https://hooks.example/v1'));
    await outbox(v2Job, null, null, oldBox.seal('https://hooks.example/v2', sealedAt.jobWebhook(v2Job)));
    await outbox(null, batchId, null, sealV1(oldSpec, 'https://hooks.example/batch'));
    await outbox(null, null, key, oldBox.seal('https://chat.example/services/x', sealedAt.chatWebhook(key)), 'chat');
    // A chat row queued before chat_key_id: a v1 value, bound to its own outbox row once re-sealed.
    await outbox(null, null, null, sealV1(oldSpec, 'https://chat.example/services/legacy'), 'chat');
    for (const s of await everySealed(pool)) plain.set(`${s.name}:${s.at.row}`, oldBox.open(s.value, s.at));
    return plain;
  }

  const totals = (counts: ResealCount[]) => counts.reduce((t, c) => ({
    resealed: t.resealed + c.resealed, changed: t.changed + c.changed, unreadable: t.unreadable + c.unreadable,
  }), { resealed: 0, changed: 0, unreadable: 0 });

  it('re-seals every sealed column with a new first key: all of it opens with the new key alone, at its place; a second run does nothing', async () => {
    const plain = await seedEverywhere();
    expect(plain.size).to.equal(16);
    const newSpec = SecretBox.generateSpec('new');
    const rotating = new SecretBox(`${newSpec},${oldSpec}`, { openUnbound: true });
    const first = await resealAll(pool, rotating, { batchSize: 2 });
    expect(first.map((c) => `${c.table}.${c.column}`)).to.deep.equal(SEALED_COLUMNS.map((c) => `${c.table}.${c.column}`));
    expect(totals(first)).to.deep.equal({ resealed: 16, changed: 0, unreadable: 0 });
    expect(first.find((c) => c.table === 'outbox')).to.deep.include({ resealed: 5 });

    const onlyNew = new SecretBox(newSpec);
    const after = await everySealed(pool);
    expect(after.length).to.equal(16);
    for (const s of after) {
      expect(s.value, s.name).to.match(/^v2\.new\./);
      expect(onlyNew.open(s.value, s.at), s.name).to.equal(plain.get(`${s.name}:${s.at.row}`));
    }
    expect(await signingSecrets(pool, onlyNew, (await pool.query('SELECT api_key_id::text AS k FROM webhook_secrets')).rows[0].k))
      .to.deep.equal(['whsec_current', 'whsec_previous']);

    const second = await resealAll(pool, rotating, { batchSize: 2 });
    expect(totals(second)).to.deep.equal({ resealed: 0, changed: 0, unreadable: 0 });
    expect((await everySealed(pool)).map((s) => s.value)).to.deep.equal(after.map((s) => s.value));
  });

  it('upgrades v1 values under the current key too (no key change): they are bound to their place afterwards', async () => {
    const id = await job('v1', { webhook: 'https://hooks.example/v1' });
    const other = await job(oldBox, { webhook: 'https://hooks.example/other' });
    const v1 = await column(id, 'webhook_url_enc');
    expect(oldBox.open(v1, sealedAt.jobWebhook(other)), 'a v1 value opens anywhere').to.equal('https://hooks.example/v1');
    const service = new SecretBox(oldSpec); // as the gateway and operator run by default
    expect(() => service.open(v1, sealedAt.jobWebhook(id)), 'a service refuses it').to.throw(SecretBoxError, /unbound/);
    expect(totals(await resealAll(pool, oldBox))).to.deep.equal({ resealed: 1, changed: 0, unreadable: 0 });
    const upgraded = await column(id, 'webhook_url_enc');
    expect(upgraded).to.match(/^v2\.old\./);
    expect(service.open(upgraded, sealedAt.jobWebhook(id)), 'and opens it once resealed').to.equal('https://hooks.example/v1');
    expect(() => oldBox.open(upgraded, sealedAt.jobWebhook(other))).to.throw(SecretBoxError);
  });

  it('counts a value no key opens as unreadable, leaves it, and goes on', async () => {
    const stray = await job(new SecretBox(SecretBox.generateSpec('gone')), { webhook: 'https://hooks.example/gone' });
    const fine = await job('v1', { webhook: 'https://hooks.example/fine' });
    const counts = await resealAll(pool, oldBox, { only: ['jobs.webhook_url_enc'] });
    expect(counts).to.deep.equal([{ table: 'jobs', column: 'webhook_url_enc', resealed: 1, changed: 0, unreadable: 1 }]);
    expect(await column(stray, 'webhook_url_enc')).to.match(/^v2\.gone\./);
    expect(await column(fine, 'webhook_url_enc')).to.match(/^v2\.old\./);
  });

  it('keeps a value a service wrote between the re-seal\'s read and its write', async () => {
    const ids = [await job('v1', { webhook: 'https://hooks.example/1' }), await job('v1', { webhook: 'https://hooks.example/2' })];
    const newBox = new SecretBox(`${SecretBox.generateSpec('new')},${oldSpec}`, { openUnbound: true });
    const concurrent = newBox.seal('https://hooks.example/changed', sealedAt.jobWebhook(ids[1]!));
    // The pool the command uses, with a service's write landing just before the command's first UPDATE.
    let raced = false;
    const racing = {
      query: async (...args: Parameters<pg.Pool['query']>) => {
        if (!raced && typeof args[0] === 'string' && args[0].startsWith('UPDATE jobs')) {
          raced = true;
          await pool.query('UPDATE jobs SET webhook_url_enc = $2 WHERE id = $1', [ids[1], concurrent]);
        }
        return (pool.query as (...a: unknown[]) => Promise<pg.QueryResult>)(...args);
      },
    } as unknown as pg.Pool;
    const counts = await resealAll(racing, newBox, { only: ['jobs.webhook_url_enc'] });
    expect(raced).to.equal(true);
    expect(counts[0]).to.deep.include({ resealed: 1, changed: 1, unreadable: 0 });
    expect(await column(ids[1]!, 'webhook_url_enc')).to.equal(concurrent);
    expect(newBox.open(await column(ids[0]!, 'webhook_url_enc'), sealedAt.jobWebhook(ids[0]!))).to.equal('https://hooks.example/1');
  });

  it('loses no write of services running beside it (jobs inserted and signing secrets rotated meanwhile)', async () => {
    for (let i = 0; i < 60; i++) await job('v1', { webhook: `https://hooks.example/${i}` });
    const keys = Array.from({ length: 5 }, () => randomUUID());
    for (const k of keys) await rotateWebhookSecret(pool, oldBox, k);
    const newSpec = SecretBox.generateSpec('new');
    const rotating = new SecretBox(`${newSpec},${oldSpec}`, { openUnbound: true });
    let stop = false;
    const latest = new Map<string, string>();
    const writers = (async () => {
      for (let n = 0; !stop; n++) {
        const k = keys[n % keys.length]!;
        latest.set(k, (await rotateWebhookSecret(pool, rotating, k)).secret);
        await job(rotating, { webhook: `https://hooks.example/new/${n}` });
      }
    })();
    await resealAll(pool, rotating, { batchSize: 7 });
    stop = true;
    await writers;
    await resealAll(pool, rotating); // what was written with a v1 process meanwhile; here nothing
    const onlyNew = new SecretBox(newSpec);
    for (const s of await everySealed(pool)) expect(() => onlyNew.open(s.value, s.at), s.name).not.to.throw();
    for (const k of keys) expect((await signingSecrets(pool, onlyNew, k))[0]).to.equal(latest.get(k));
  });
});

