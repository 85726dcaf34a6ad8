// The webhook API against real Postgres, with the operator's dispatcher
// delivering to a local receiver that checks signatures with the official
// Standard Webhooks library: the signing secret (shown once, rotated), a
// job's delivery log and redelivery, and the owner checks.
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import { pino } from 'pino';
import { Webhook } from 'standardwebhooks';
import { queueEvents } from '@mediajobs/lib/db/outbox';
import { SecretBox } from '@mediajobs/lib/secret-box';
import { OutboxDispatcher } from '../../operator/src/outbox.js';
import { startTestGateway, type TestGateway } from './support.js';

interface Received { headers: IncomingHttpHeaders; body: string }

describe('api-gateway: webhook secret, delivery log and redelivery', function () {
  this.timeout(30_000);
  let gw: TestGateway;
  let receiver: Server;
  let hookUrl: string;
  let a: { id: string; key: string };
  let b: { id: string; key: string };
  const got: Received[] = [];
  /** Statuses the receiver answers, in turn; 200 once they run out. */
  const answers: number[] = [];
  const secretBox = new SecretBox(SecretBox.generateSpec('test'));
  let dispatcher: OutboxDispatcher | undefined;

  before(async () => {
    gw = await startTestGateway({ secretBox });
    a = await gw.newKey('a');
    b = await gw.newKey('b');
    receiver = createServer((req, res) => {
      let body = '';
      req.setEncoding('utf8');
      req.on('data', (c: string) => (body += c));
      req.on('end', () => {
        got.push({ headers: req.headers, body });
        const status = answers.shift() ?? 200;
        res.writeHead(status, { 'Content-Type': 'text/plain' }).end(status === 200 ? 'thanks' : 'try later');
      });
    });
    await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
    hookUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;
  });

  after(async () => {
    await dispatcher?.stop();
    receiver.closeAllConnections();
    await new Promise((r) => receiver.close(r));
    await gw?.stop();
  });

  const startDispatcher = async () => {
    dispatcher = new OutboxDispatcher(gw.pool, secretBox, pino({ level: 'silent' }), {
      timeoutMs: 2000, attempts: 3, backoffMs: 50, pollMs: 20, outbound: { allowed: ['127.0.0.0/8'] },
    });
    await dispatcher.start();
  };

  /** A job of key `a` with a webhook, and its job_failed event queued as the operator's transition would. */
  async function failedJob(): Promise<{ jobId: string; eventId: string }> {
    const created = await gw.request('POST', '/jobs', { key: a.key, body: { url: 'https://media.example/v.mp4', webhook_url: hookUrl } });
    expect(created.status).to.equal(201);
    const jobId = (created.body as { job_id: string }).job_id;
    const { webhook_url_enc: enc } = (await gw.pool.query<{ webhook_url_enc: string }>('SELECT webhook_url_enc FROM jobs WHERE id = $1', [jobId])).rows[0]!;
    const client = await gw.pool.connect();
    try {
      await queueEvents(client, jobId, enc, [{ type: 'job_failed', payload: { type: 'job_failed', job_id: jobId, status: 'failed', error: 'boom' } }]);
    } finally {
      client.release();
    }
    const eventId = (await gw.pool.query<{ event_id: string }>('SELECT event_id FROM outbox WHERE job_id = $1', [jobId])).rows[0]!.event_id;
    return { jobId, eventId };
  }

  type Log = { job_id: string; events: { event_id: string; status: string; attempts: { round: number; attempt: number; status_code: number | null; error: string | null; duration_ms: number; response_excerpt: string | null }[] }[] };
  const deliveries = async (jobId: string, key = a.key) => gw.request('GET', `/jobs/${jobId}/webhooks`, { key });
  const until = async (check: () => Promise<boolean>) => {
    const deadline = Date.now() + 10_000;
    while (!(await check())) {
      if (Date.now() > deadline) throw new Error('timed out');
      await new Promise((r) => setTimeout(r, 50));
    }
  };

  it('shows a new signing secret once: 201 the first time, 200 on rotation, GET only its dates', async () => {
    expect((await gw.request('POST', '/user/webhook-secret', { key: null })).status).to.equal(401);
    expect((await gw.request('GET', '/user/webhook-secret', { key: b.key })).body).to.deep.equal({
      configured: false, created_at: null, previous_secret_expires_at: null,
    });
    const first = await gw.request('POST', '/user/webhook-secret', { key: b.key });
    expect(first.status).to.equal(201);
    const firstBody = first.body as { secret: string; created_at: number; rotated: boolean; previous_secret_expires_at: number | null };
    expect(firstBody.secret).to.match(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(firstBody).to.include({ rotated: false, previous_secret_expires_at: null });
    expect(first.headers.get('cache-control')).to.equal('no-store');

    const shown = await gw.request('GET', '/user/webhook-secret', { key: b.key });
    expect(shown.body).to.deep.equal({ configured: true, created_at: firstBody.created_at, previous_secret_expires_at: null });

    const second = await gw.request('POST', '/user/webhook-secret', { key: b.key });
    expect(second.status).to.equal(200);
    const secondBody = second.body as typeof firstBody;
    expect(secondBody.secret).to.not.equal(firstBody.secret);
    expect(secondBody.rotated).to.equal(true);
    expect(secondBody.previous_secret_expires_at! - secondBody.created_at).to.equal(24 * 3600 * 1000);
    const after = await gw.request('GET', '/user/webhook-secret', { key: b.key });
    expect(after.text).to.not.include('whsec_');
    expect(gw.logs.text()).to.not.include(firstBody.secret.slice(6)).and.not.include(secondBody.secret.slice(6));
  });

  it('logs every attempt of a job\'s event and sends it again on request with the same webhook-id', async () => {
    const secret = ((await gw.request('POST', '/user/webhook-secret', { key: a.key })).body as { secret: string }).secret;
    const { jobId, eventId } = await failedJob();
    answers.push(500, 500);
    got.length = 0;
    await startDispatcher();
    await until(async () => ((await deliveries(jobId)).body as Log).events[0]?.status === 'delivered');

    const log = (await deliveries(jobId)).body as Log;
    expect(log.job_id).to.equal(jobId);
    expect(log.events).to.have.length(1);
    expect(log.events[0]).to.include({ event_id: eventId, type: 'job_failed', status: 'delivered', last_error: null, redeliveries: 0 });
    expect(log.events[0]!.attempts.map((x) => [x.round, x.attempt, x.status_code, x.error, x.response_excerpt])).to.deep.equal([
      [0, 1, 500, 'HTTP 500', 'try later'], [0, 2, 500, 'HTTP 500', 'try later'], [0, 3, 200, null, 'thanks'],
    ]);
    for (const x of log.events[0]!.attempts) expect(x.duration_ms).to.be.a('number').and.at.least(0);
    expect(got).to.have.length(3);
    for (const r of got) {
      expect(r.headers['webhook-id']).to.equal(eventId);
      expect(new Webhook(secret).verify(r.body, r.headers as Record<string, string>)).to.deep.include({ job_id: jobId, event_id: eventId });
    }

    const again = await gw.request('POST', `/jobs/${jobId}/webhooks/${eventId}/redeliver`, { key: a.key });
    expect(again.status).to.equal(202);
    expect(again.body).to.deep.include({ event_id: eventId, status: 'pending', redeliveries: 1 });
    await until(async () => got.length === 4);
    const redelivered = got[3]!;
    expect(redelivered.headers['webhook-id']).to.equal(eventId);
    expect(new Webhook(secret).verify(redelivered.body, redelivered.headers as Record<string, string>)).to.deep.include({ event_id: eventId });
    await until(async () => ((await deliveries(jobId)).body as Log).events[0]?.status === 'delivered');
    const attempts = ((await deliveries(jobId)).body as Log).events[0]!.attempts;
    expect(attempts.map((x) => [x.round, x.attempt, x.status_code])).to.deep.equal([[0, 1, 500], [0, 2, 500], [0, 3, 200], [1, 1, 200]]);
  });

  it('answers 404 for another key\'s job, an unknown job and an unknown event, 409 while an event is still open', async () => {
    // No dispatcher runs: the event stays queued, not delivered.
    await dispatcher?.stop();
    dispatcher = undefined;
    const { jobId, eventId } = await failedJob();
    for (const path of [`/jobs/${jobId}/webhooks`, `/jobs/${jobId}/webhooks/${eventId}/redeliver`]) {
      const method = path.endsWith('redeliver') ? 'POST' : 'GET';
      expect(await gw.request(method, path, { key: b.key })).to.deep.include({ status: 404, body: { error: 'Job not found' } });
    }
    for (const id of ['0190a4c5-0000-7000-8000-000000000000', 'not-a-uuid']) {
      expect(await deliveries(id)).to.deep.include({ status: 404, body: { error: 'Job not found' } });
    }
    for (const event of ['0190a4c5-0000-7000-8000-000000000000', 'nope']) {
      expect(await gw.request('POST', `/jobs/${jobId}/webhooks/${event}/redeliver`, { key: a.key }))
        .to.deep.include({ status: 404, body: { error: 'Webhook event not found for this job' } });
    }
    expect(await gw.request('POST', `/jobs/${jobId}/webhooks/${eventId}/redeliver`, { key: a.key }))
      .to.deep.include({ status: 409, body: { error: 'Webhook event is still being delivered' } });
    expect(((await deliveries(jobId)).body as Log).events[0]).to.include({ status: 'pending' });
  });

  it('needs an API key for every webhook path', async () => {
    for (const [method, path] of [['GET', '/jobs/x/webhooks'], ['POST', '/jobs/x/webhooks/y/redeliver'], ['GET', '/user/webhook-secret']] as const) {
      expect((await gw.request(method, path, { key: null })).status).to.equal(401);
    }
  });
});
