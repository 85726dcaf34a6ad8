// Fault scenario (issue 16 item 3): the gateway SIGKILLed during a burst of
// POST /jobs and started again, while clients retry as the Idempotency-Key
// draft tells them to: the same key and body after a lost answer, a 5xx or
// a 409. Judged from outside (the answers, the jobs table, GET /usage):
// every request ends with a 201, one job per key with its own request,
// every 201 and replay of a key names the same job, and the key's job count
// is exact. The gateway runs in its own process on a fixed port, as a pod
// behind its Service would; no operator (acceptance is the commit, ADR 0017).
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
import { createTestDatabase } from '../support/postgres.js';
import { tsxCommand } from '../support/tsx.js';

const GATEWAY = fileURLToPath(new URL('../../api-gateway/src/main.ts', import.meta.url));
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export interface GatewayKillOptions {
  posts: number;
  kills: number;
  concurrency: number;
}

export interface GatewayKillRun {
  /** Rules broken, one line each; empty when the scenario held. */
  breaches: string[];
  /** Attempts cut off without an answer (connection refused or reset). */
  lost: number;
  /** 201s that were replays (Idempotent-Replayed: true). */
  replays: number;
  /** Answers other than 201 before a key's 201, by status. */
  refused: Record<number, number>;
  /** Kill to the gateway ready again, each (ms). */
  msDown: number[];
  msTotal: number;
}

interface Outcome {
  key: string;
  jobIds: string[];
  replays: number;
  lost: number;
  refused: Map<number, number>;
}

export async function runGatewayKills(o: GatewayKillOptions): Promise<GatewayKillRun> {
  const db = await createTestDatabase('mediajobs_chaos');
  const work = mkdtempSync(join(tmpdir(), 'mj-chaos-gw-'));
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const env = {
    ...process.env, DATABASE_URL: db.url, SECRET_KEYS: SecretBox.generateSpec('chaos'), FILE_URL_SECRET: randomBytes(16).toString('hex'),
    MANAGED_STORAGE_DIR: join(work, 'storage'), PORT: String(port), HOST: '127.0.0.1', LOG_LEVEL: 'warn', RATE_LIMIT_PER_SECOND: '1000000',
  };
  let gateway: ChildProcess | undefined;
  const startGateway = async () => {
    const [node, ...args] = tsxCommand(GATEWAY);
    gateway = spawn(node!, args, { env, stdio: 'ignore' });
    await eventually(async () => (await fetch(`${url}/readyz`)).ok, 60_000, 50);
  };

  try {
    await startGateway();
    const { key: apiKey, id: apiKeyId } = await createApiKey(db.pool, { name: 'chaos' });
    const outcomes: Outcome[] = Array.from({ length: o.posts }, () => ({ key: randomUUID(), jobIds: [], replays: 0, lost: 0, refused: new Map() }));
    const bodyOf = (x: Outcome) => JSON.stringify({ url: `https://media.example/watch?v=${x.key}` });
    let next = 0;
    let answered = 0;
    const t0 = Date.now();
    const clients = Array.from({ length: o.concurrency }, async () => {
      while (next < outcomes.length) {
        const x = outcomes[next++]!;
        await client(url, apiKey, x, bodyOf(x));
        answered++;
      }
    });
    // Kill while the burst is at its height, each time after another share of the answers.
    const msDown: number[] = [];
    const killer = (async () => {
      for (let k = 1; k <= o.kills; k++) {
        while (answered < (o.posts * k) / (o.kills + 1)) await sleep(5);
        const killedAt = Date.now();
        gateway!.kill('SIGKILL');
        await new Promise((r) => gateway!.once('exit', r));
        await sleep(300); // down for a moment: new connections are refused
        await startGateway();
        msDown.push(Date.now() - killedAt);
      }
    })();
    await Promise.all([...clients, killer]);
    const msTotal = Date.now() - t0;

    const found: string[] = [];
    const rows = await db.pool.query<{ id: string; url: string }>('SELECT id, url FROM jobs WHERE api_key_id = $1', [apiKeyId]);
    const byId = new Map(rows.rows.map((r) => [r.id, r.url]));
    if (rows.rowCount !== o.posts) found.push(`${rows.rowCount} job rows for ${o.posts} keys: something was created twice or lost`);
    for (const x of outcomes) {
      if (new Set(x.jobIds).size !== 1) found.push(`key ${x.key}: its 201s named ${JSON.stringify(x.jobIds)}`);
      else if (byId.get(x.jobIds[0]!) !== `https://media.example/watch?v=${x.key}`) found.push(`key ${x.key}: job ${x.jobIds[0]} is not its request's row`);
      const odd = [...x.refused.keys()].filter((s) => s !== 409 && s !== 503);
      if (odd.length) found.push(`key ${x.key}: answered ${odd.join(', ')} before its 201`);
    }
    const usage = (await (await fetch(`${url}/usage`, { headers: { 'x-api-key': apiKey } })).json()) as { usage_count: number };
    if (usage.usage_count !== o.posts) found.push(`GET /usage usage_count ${usage.usage_count}, ${o.posts} jobs created`);
    const lost = outcomes.reduce((n, x) => n + x.lost, 0);
    if (o.kills > 0 && lost === 0) found.push('the kills cut off no request: the scenario tested nothing');
    const refused: Record<number, number> = {};
    for (const x of outcomes) for (const [s, n] of x.refused) refused[s] = (refused[s] ?? 0) + n;
    return { breaches: found, lost, replays: outcomes.reduce((n, x) => n + x.replays, 0), refused, msDown, msTotal };
  } finally {
    gateway?.kill('SIGKILL');
    await db.drop();
    rmSync(work, { recursive: true, force: true });
  }
}

/** One client's request, retried with the same key and body until it is answered 201; asked once more now and then, as an unsure client would. */
async function client(url: string, apiKey: string, x: Outcome, body: string): Promise<void> {
  for (let attempt = 0; attempt < 400; attempt++) {
    try {
      const r = await fetch(`${url}/jobs`, {
        method: 'POST', headers: { 'x-api-key': apiKey, 'content-type': 'application/json', 'idempotency-key': `"${x.key}"` }, body,
      });
      const answer = (await r.json()) as { job_id?: string };
      if (r.status === 201) {
        x.jobIds.push(answer.job_id!);
        if (r.headers.get('idempotent-replayed') === 'true') x.replays++;
        if (x.jobIds.length === 1 && Math.random() < 0.1) continue;
        return;
      }
      x.refused.set(r.status, (x.refused.get(r.status) ?? 0) + 1);
    } catch {
      x.lost++;
    }
    await sleep(50 + Math.random() * 100);
  }
  throw new Error(`key ${x.key} never got its 201`);
}
