// Fault scenario (issue 16 item 3): the gateway SIGKILLed during a burst of
// POST /jobs and started again, while clients retry as the Idempotency-Key
// draft tells them to: the same key and body after a lost answer, a 5xx or
// a 409. Asserted from outside (the answers, the jobs table, GET /usage):
// every request ends with a 201, one job per key, a replayed answer names
// the same job as the first, nothing is created twice, and the key's job
// count is exact. The gateway runs in its own process on a fixed port, as a
// pod behind its Service would.
//
// Reduced here; CHAOS_GATEWAY_POSTS (default 240) and CHAOS_GATEWAY_KILLS
// (default 2) make it the full scenario.
import { expect } from 'chai';
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { SecretBox } from '@mediajobs/lib/secret-box';
import { createApiKey } from '../../api-gateway/src/db/api-keys.js';
import { eventually } from '../../local-cluster/test/support.js';
import { freePort } from '../support/ports.js';
import { createTestDatabase, type TestDatabase } from '../support/postgres.js';
import { tsxCommand } from '../support/tsx.js';

const POSTS = Number(process.env.CHAOS_GATEWAY_POSTS ?? 240);
const KILLS = Number(process.env.CHAOS_GATEWAY_KILLS ?? 2);
const CONCURRENCY = 24;
const GATEWAY = fileURLToPath(new URL('../../api-gateway/src/main.ts', import.meta.url));
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Outcome {
  key: string;
  /** The job_id of every 201 the client got for this key (the first, then replays). */
  jobIds: string[];
  replays: number;
  /** Attempts that ended without an answer (connection refused or reset: the gateway was down or killed). */
  lost: number;
  /** Answers other than 201 (a 409 while the first attempt was in flight, a 503). */
  refused: Map<number, number>;
}

describe('fault: the gateway killed during a burst of POSTs', function () {
  this.timeout(180_000);
  let db: TestDatabase;
  let work: string;
  let gateway: ChildProcess | undefined;
  let url: string;
  let env: NodeJS.ProcessEnv;

  before(async () => {
    db = await createTestDatabase('mediajobs_chaos');
    work = mkdtempSync(join(tmpdir(), 'mj-chaos-gw-'));
    const port = await freePort();
    url = `http://127.0.0.1:${port}`;
    env = {
      ...process.env, DATABASE_URL: db.url, SECRET_KEYS: SecretBox.generateSpec('chaos'), FILE_URL_SECRET: randomBytes(16).toString('hex'),
      MANAGED_STORAGE_DIR: join(work, 'storage'), PORT: String(port), HOST: '127.0.0.1', LOG_LEVEL: 'warn', RATE_LIMIT_PER_SECOND: '1000000',
    };
  });

  after(async () => {
    gateway?.kill('SIGKILL');
    await db?.drop();
    if (work) rmSync(work, { recursive: true, force: true });
  });

  async function startGateway(): Promise<void> {
    const [node, ...args] = tsxCommand(GATEWAY);
    gateway = spawn(node!, args, { env, stdio: 'ignore' });
    await eventually(async () => (await fetch(`${url}/readyz`)).ok, 60_000, 50);
  }

  /** One client's request, retried with the same key and body until it is answered 201. */
  async function client(apiKey: string, outcome: Outcome, body: string): Promise<void> {
    for (let attempt = 0; attempt < 400; attempt++) {
      try {
        const r = await fetch(`${url}/jobs`, {
          method: 'POST', headers: { 'x-api-key': apiKey, 'content-type': 'application/json', 'idempotency-key': `"${outcome.key}"` }, body,
        });
        const answer = (await r.json()) as { job_id?: string };
        if (r.status === 201) {
          outcome.jobIds.push(answer.job_id!);
          if (r.headers.get('idempotent-replayed') === 'true') outcome.replays++;
          // Asked once more on purpose, as a client unsure of its answer would: it must be the replay.
          if (outcome.jobIds.length === 1 && Math.random() < 0.1) continue;
          return;
        }
        outcome.refused.set(r.status, (outcome.refused.get(r.status) ?? 0) + 1);
      } catch {
        outcome.lost++;
      }
      await sleep(50 + Math.random() * 100);
    }
    throw new Error(`key ${outcome.key} never got its 201`);
  }

  it('every request ends 201 with exactly one job per Idempotency-Key, replays name the same job, and the count is exact', async () => {
    await startGateway();
    const { key: apiKey, id: apiKeyId } = await createApiKey(db.pool, { name: 'chaos' });
    const outcomes: Outcome[] = Array.from({ length: POSTS }, () => ({ key: randomUUID(), jobIds: [], replays: 0, lost: 0, refused: new Map() }));
    let next = 0;
    let answered = 0;
    const clients = Array.from({ length: CONCURRENCY }, async () => {
      while (next < outcomes.length) {
        const o = outcomes[next++]!;
        await client(apiKey, o, JSON.stringify({ url: `https://media.example/watch?v=${o.key}` }));
        answered++;
      }
    });
    // Kill while the burst is at its height, each time after another share of the answers.
    const killer = (async () => {
      for (let k = 1; k <= KILLS; k++) {
        while (answered < (POSTS * k) / (KILLS + 1)) await sleep(5);
        gateway!.kill('SIGKILL');
        await new Promise((r) => gateway!.once('exit', r));
        await sleep(300); // down for a moment: new connections are refused
        await startGateway();
      }
    })();
    await Promise.all([...clients, killer]);

    const lost = outcomes.reduce((n, o) => n + o.lost, 0);
    expect(lost, 'requests cut off by the kills (else the kills hit nothing)').to.be.greaterThan(0);
    for (const o of outcomes) {
      expect(new Set(o.jobIds).size, `key ${o.key}: every 201 names one job`).to.equal(1);
      expect([...o.refused.keys()].filter((s) => s !== 409 && s !== 503), `key ${o.key}: only 409 (in flight) or 503 before the 201`).to.deep.equal([]);
    }
    const rows = await db.pool.query<{ id: string; url: string }>('SELECT id, url FROM jobs WHERE api_key_id = $1', [apiKeyId]);
    expect(rows.rowCount, 'one job per key: nothing created twice').to.equal(POSTS);
    const byId = new Map(rows.rows.map((r) => [r.id, r.url]));
    for (const o of outcomes) expect(byId.get(o.jobIds[0]!), 'the answered job is the row, with its own request').to.equal(`https://media.example/watch?v=${o.key}`);
    const usage = await fetch(`${url}/usage`, { headers: { 'x-api-key': apiKey } });
    expect(((await usage.json()) as { usage_count: number }).usage_count, 'GET /usage counts each job once').to.equal(POSTS);
  });
});
