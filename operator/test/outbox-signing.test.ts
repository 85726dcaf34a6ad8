// Signed webhook deliveries from the outbox on Postgres, checked by a local
// receiver with the official Standard Webhooks library: the key's secret and
// its rotation, the delivery log, the outbound-address policy at connect
// time, and one slow receiver not holding up the others.
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import { pino } from 'pino';
import { Webhook, WebhookVerificationError } from 'standardwebhooks';
import { attemptsOf } from '@mediajobs/lib/db/webhook-log';
import { rotateWebhookSecret } from '@mediajobs/lib/db/webhook-secrets';
import type { OutboundPolicyOptions } from '@mediajobs/lib/outbound';
import { SecretBox } from '@mediajobs/lib/secret-box';
import { sealedAt } from '@mediajobs/lib/db/sealed-columns';
import { OutboxDispatcher } from '../src/outbox.js';
import { createTestDatabase, type TestDatabase } from '../../test/support/postgres.js';
import { eventually } from '../../local-cluster/test/support.js';

interface Received { eventId: string; headers: IncomingHttpHeaders; body: string }

/** A receiver on loopback that records every POST and lets the test decide each answer. */
async function receiver(): Promise<{
  url: string; got: Received[]; answer: (r: Received, res: ServerResponse) => void; server: Server; close(): Promise<void>;
}> {
  const self = {
    url: '', got: [] as Received[], server: undefined as unknown as Server,
    answer: (_r: Received, res: ServerResponse) => void res.writeHead(204).end(),
    close: async () => {
      self.server.closeAllConnections();
      await new Promise((r) => self.server.close(r));
    },
  };
  self.server = createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (c: string) => (body += c));
    req.on('end', () => {
      const r = { eventId: String(req.headers['webhook-id']), headers: req.headers, body };
      self.got.push(r);
      self.answer(r, res);
    });
  });
  await new Promise<void>((r) => self.server.listen(0, '127.0.0.1', r));
  self.url = `http://127.0.0.1:${(self.server.address() as AddressInfo).port}/hook`;
  return self;
}

/** The official library's check of one received delivery. */
const verify = (secret: string, r: Received) => new Webhook(secret).verify(r.body, r.headers as Record<string, string>);

describe('operator: signed webhooks, delivery log and address policy', function () {
  this.timeout(30_000);
  let db: TestDatabase;
  let hooks: Awaited<ReturnType<typeof receiver>>;
  const box = new SecretBox(SecretBox.generateSpec('t1'));
  const dispatchers: OutboxDispatcher[] = [];

  before(async () => {
    db = await createTestDatabase('mediajobs_outbox_signing');
    hooks = await receiver();
  });

  afterEach(async () => {
    for (const d of dispatchers.splice(0)) await d.stop();
    hooks.got.length = 0;
    hooks.answer = (_r, res) => void res.writeHead(204).end();
  });

  after(async () => {
    await hooks.close();
    await db.drop();
  });

  /** A job of the key with one queued event to `url`; returns the event id. */
  async function event(apiKeyId: string, url: string): Promise<string> {
    const jobId = randomUUID();
    const eventId = randomUUID();
    await db.pool.query(
      `INSERT INTO jobs (id, api_key_id, url, status, step, progress, options, webhook_url_enc)
       VALUES ($1, $2, 'https://media.test/v', 'Failed', 'Finished', 0, '{}', $3)`, [jobId, apiKeyId, box.seal(url, sealedAt.jobWebhook(jobId))]);
    await db.pool.query(
      `INSERT INTO outbox (event_id, job_id, type, target_enc, payload) VALUES ($1, $2, 'job_failed', $3, $4)`,
      [eventId, jobId, box.seal(url, sealedAt.jobWebhook(jobId)), { type: 'job_failed', job_id: jobId, event_id: eventId, error: 'x'.repeat(900) }]);
    return eventId;
  }

  const outcome = async (eventId: string) =>
    (await db.pool.query<{ id: string; attempts: number; delivered_at: Date | null; failed_at: Date | null; last_error: string | null }>(
      'SELECT id::text, attempts, delivered_at, failed_at, last_error FROM outbox WHERE event_id = $1', [eventId])).rows[0]!;

  const start = async (opts: { outbound?: OutboundPolicyOptions; perOrigin?: number; attempts?: number; timeoutMs?: number } = {}) => {
    const d = new OutboxDispatcher(db.pool, box, pino({ level: 'silent' }), {
      timeoutMs: opts.timeoutMs ?? 2000, attempts: opts.attempts ?? 3, backoffMs: 50, pollMs: 20,
      outbound: opts.outbound ?? { allowed: ['127.0.0.0/8'] }, ...(opts.perOrigin && { perOrigin: opts.perOrigin }),
    });
    dispatchers.push(d);
    await d.start();
  };

  const delivered = (eventId: string) => eventually(async () => (await outcome(eventId)).delivered_at !== null, 10_000);

  it('signs every delivery with the key\'s secret; after a rotation both verify for 24 hours, then only the new one', async () => {
    const key = randomUUID();
    const first = (await rotateWebhookSecret(db.pool, box, key)).secret;
    expect(first).to.match(/^whsec_[A-Za-z0-9+/]+=*$/);
    await start();

    const e1 = await event(key, hooks.url);
    await delivered(e1);
    const r1 = hooks.got.find((r) => r.eventId === e1)!;
    expect(verify(first, r1)).to.deep.include({ event_id: e1, type: 'job_failed' });
    expect(r1.headers['x-mediajobs-event-id'], 'the deprecated header still comes').to.equal(e1);
    expect(Number(r1.headers['webhook-timestamp'])).to.be.within(Math.floor(Date.now() / 1000) - 10, Math.floor(Date.now() / 1000));

    const second = (await rotateWebhookSecret(db.pool, box, key)).secret;
    const e2 = await event(key, hooks.url);
    await delivered(e2);
    const r2 = hooks.got.find((r) => r.eventId === e2)!;
    expect(String(r2.headers['webhook-signature']).split(' ')).to.have.length(2);
    expect(verify(second, r2)).to.deep.include({ event_id: e2 });
    expect(verify(first, r2), 'a receiver not yet updated still verifies').to.deep.include({ event_id: e2 });

    await db.pool.query(`UPDATE webhook_secrets SET rotated_at = now() - interval '24 hours 1 minute' WHERE api_key_id = $1`, [key]);
    const e3 = await event(key, hooks.url);
    await delivered(e3);
    const r3 = hooks.got.find((r) => r.eventId === e3)!;
    expect(verify(second, r3)).to.deep.include({ event_id: e3 });
    expect(() => verify(first, r3)).to.throw(WebhookVerificationError, 'No matching signature');
  });

  it('signs a key\'s first delivery with a secret made for it, which a reveal replaces without an overlap', async () => {
    const key = randomUUID();
    await start();
    const e1 = await event(key, hooks.url);
    await delivered(e1);
    const r1 = hooks.got.find((r) => r.eventId === e1)!;
    expect(String(r1.headers['webhook-signature'])).to.match(/^v1,[A-Za-z0-9+/]+=*$/);
    const revealed = (await rotateWebhookSecret(db.pool, box, key)).secret;
    expect(() => verify(revealed, r1)).to.throw(WebhookVerificationError);
    const e2 = await event(key, hooks.url);
    await delivered(e2);
    const r2 = hooks.got.find((r) => r.eventId === e2)!;
    expect(String(r2.headers['webhook-signature']).split(' '), 'the unrevealed secret is not kept').to.have.length(1);
    expect(verify(revealed, r2)).to.deep.include({ event_id: e2 });
  });

  it('logs each attempt of a receiver that fails twice then answers: status, duration and a short redacted excerpt', async () => {
    const key = randomUUID();
    const secret = (await rotateWebhookSecret(db.pool, box, key)).secret;
    let n = 0;
    hooks.answer = (r, res) => {
      n += 1;
      if (n <= 2) {
        // An answer echoing secrets: the log must not keep them, nor more than 256 bytes.
        res.writeHead(503, { 'Content-Type': 'text/plain' })
          .end(`busy ${secret} see ${hooks.url}?token=abc123 Bearer eyJhbGciOi.x ${'z'.repeat(600)}`);
      } else {
        res.writeHead(200).end('ok');
      }
      void r;
    };
    await start();
    const id = await event(key, hooks.url);
    await delivered(id);
    const row = await outcome(id);
    expect(row).to.include({ attempts: 3, last_error: null });
    const mine = hooks.got.filter((r) => r.eventId === id);
    expect(mine).to.have.length(3);
    for (const r of mine) expect(verify(secret, r)).to.deep.include({ event_id: id });

    const log = await attemptsOf(db.pool, [row.id]);
    expect(log.map((a) => [a.round, a.attempt, a.statusCode, a.error])).to.deep.equal([
      [0, 1, 503, 'HTTP 503'], [0, 2, 503, 'HTTP 503'], [0, 3, 200, null],
    ]);
    expect(log[2]!.responseExcerpt).to.equal('ok');
    for (const a of log.slice(0, 2)) {
      expect(a.durationMs).to.be.a('number').and.at.least(0).and.below(2000);
      expect(Buffer.byteLength(a.responseExcerpt!)).to.be.at.most(256);
      expect(a.responseExcerpt).to.match(/^busy /);
      for (const leak of [secret, secret.slice(6), hooks.url, 'abc123', 'eyJhbGciOi']) expect(a.responseExcerpt).to.not.include(leak);
    }
  });

  it('refuses a webhook whose name resolves to a refused address at connect time, and a link-local literal, without connecting', async () => {
    const key = randomUUID();
    const port = new URL(hooks.url).port;
    // A fake resolver: the loopback guard fails the test if anything is contacted but loopback.
    const answers: Record<string, string> = { 'hooks.example.test': '10.1.2.3', 'loopback.example.test': '127.0.0.1' };
    const outbound = { allowed: ['127.0.0.0/8'], resolve: async (h: string) => [{ address: answers[h] ?? '192.0.2.1', family: 4 }] };
    await start({ outbound, attempts: 1 });
    const refused = await event(key, `http://hooks.example.test:${port}/hook`);
    const linkLocal = await event(key, `http://[fe80::1]:${port}/hook`);
    const allowed = await event(key, `http://loopback.example.test:${port}/hook`);
    await delivered(allowed);
    await eventually(async () => (await outcome(refused)).failed_at !== null && (await outcome(linkLocal)).failed_at !== null, 10_000);
    for (const id of [refused, linkLocal]) {
      const row = await outcome(id);
      expect(row.last_error).to.equal('address_refused');
      expect((await attemptsOf(db.pool, [row.id])).map((a) => [a.statusCode, a.error])).to.deep.equal([[null, 'address_refused']]);
    }
    expect(hooks.got.map((r) => r.eventId)).to.deep.equal([allowed]);
  });

  it('keeps one slow receiver from delaying another receiver\'s events, with at most perOrigin in flight to it', async () => {
    const slow = await receiver();
    const releases: (() => void)[] = [];
    let inFlight = 0;
    let most = 0;
    slow.answer = (_r, res) => {
      inFlight += 1;
      most = Math.max(most, inFlight);
      releases.push(() => {
        inFlight -= 1;
        res.writeHead(204).end();
      });
    };
    try {
      const key = randomUUID();
      const slowEvents: string[] = [];
      for (let i = 0; i < 6; i += 1) slowEvents.push(await event(key, slow.url));
      const fast = await event(key, hooks.url);
      await start({ perOrigin: 2, timeoutMs: 10_000 });
      await delivered(fast);
      // The fast receiver's event went through while the slow one held what it had; its second request may still be on its way.
      await eventually(() => releases.length === 2, 10_000);
      expect(releases.length, 'the slow receiver still holds its first two').to.equal(2);
      while (slow.got.length < 6 || releases.length) {
        releases.shift()?.();
        await new Promise((r) => setTimeout(r, 20));
      }
      for (const id of slowEvents) await delivered(id);
      expect(most).to.equal(2);
      // Events given back while their receiver was busy were not counted as attempts.
      for (const id of slowEvents) expect((await outcome(id)).attempts).to.equal(1);
      expect(slow.got.map((r) => r.eventId).sort()).to.deep.equal([...slowEvents].sort());
    } finally {
      for (const release of releases) release();
      await slow.close();
    }
  });
});
