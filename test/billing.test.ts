// Billing through Stripe (issue 14 item 8) across the parts that do it, on
// real Postgres and the official stripe client against the local fake of
// the Stripe API: a billed key's completed job is reported once, as the
// bytes it stored, by the operator's outbox (also when Stripe fails first
// or when no operator has Stripe settings yet), and the gateway's GET /usage
// shows the billing period and this period's usage read back from Stripe,
// or billing_error beside everything else when Stripe cannot be read.
import { expect } from 'chai';
import { pino } from 'pino';
import { BillingReader, billingSchema, stripeClient } from '@mediajobs/lib/billing';
import { loadConfig } from '@mediajobs/lib/config';
import { syncStatus } from '@mediajobs/lib/db/jobs';
import { SecretBox } from '@mediajobs/lib/secret-box';
import { createApiKey, endUserOf } from '../api-gateway/src/db/api-keys.js';
import { startTestGateway, type TestGateway } from '../api-gateway/test/support.js';
import { OutboxDispatcher } from '../operator/src/outbox.js';
import { FakeStripe } from './support/fake-stripe.js';

const GIB = 2 ** 30;
type Json = Record<string, unknown>;

describe('billing: usage reported to Stripe and shown in GET /usage', function () {
  this.timeout(60_000);
  const stripe = new FakeStripe();
  const now = Math.floor(Date.now() / 1000);
  const period = { start: now - 3 * 86400, end: now + 27 * 86400 };
  let gw: TestGateway;
  let settings: ReturnType<typeof loadConfig<typeof billingSchema>>;
  let dispatcher: OutboxDispatcher | undefined;
  let n = 0;

  before(async () => {
    const apiUrl = await stripe.start();
    settings = loadConfig(billingSchema, { STRIPE_SECRET_KEY: stripe.secretKey, STRIPE_API_URL: apiUrl, BILLING_CACHE_SECONDS: '0' });
    gw = await startTestGateway({ billing: new BillingReader(stripeClient(settings)!, settings) });
  });
  afterEach(async () => {
    await dispatcher?.stop();
    dispatcher = undefined;
    stripe.outage = false;
  });
  after(async () => {
    await gw?.stop();
    await stripe.stop();
  });

  /** The operator's outbox dispatcher, with Stripe settings or without. */
  async function startOperatorOutbox(withStripe = true): Promise<void> {
    const client = stripeClient(settings)!;
    dispatcher = new OutboxDispatcher(gw.pool, new SecretBox(SecretBox.generateSpec('billing')), pino({ level: 'silent' }), {
      timeoutMs: 2000, attempts: 5, backoffMs: 100, pollMs: 50,
      ...(withStripe && { billing: { stripe: client, meterEvent: settings.STRIPE_METER_EVENT } }),
    });
    await dispatcher.start();
  }

  async function billedKey(extra: { kind?: 'marketplace' } = {}) {
    const customer = `cus_test${++n}`;
    stripe.subscriptions.push({ customer, periodStart: period.start, periodEnd: period.end });
    const name = `billed-${n}`;
    const made = await createApiKey(gw.pool, { name, billingCustomer: customer, ...extra });
    return { ...made, name, customer };
  }
  const usage = async (key: string, headers?: Record<string, string>) => {
    const r = await gw.request('GET', '/usage', { key, ...(headers && { headers }) });
    expect(r.status).to.equal(200);
    return r.body as Json;
  };
  async function completedJob(key: string, bytes: number, headers?: Record<string, string>): Promise<string> {
    const r = await gw.request('POST', '/jobs', { key, body: { url: `https://media.example/watch?v=bill-${++n}` }, ...(headers && { headers }) });
    expect(r.status).to.equal(201);
    const id = (r.body as { job_id: string }).job_id;
    const done = { status: 'Completed', step: 'Finished', progress: 100, finishTime: new Date().toISOString(),
      result: { storageKey: `videos/${id}.mp4`, fileSize: bytes, uploadedBytes: bytes } } as const;
    await syncStatus(gw.pool, id, done, () => []);
    // The same ending mirrored again (an operator restarted mid-way): still one report.
    await syncStatus(gw.pool, id, done, () => []);
    return id;
  }
  async function reported(customer: string, count: number): Promise<void> {
    const deadline = Date.now() + 15_000;
    while (stripe.events.filter((e) => e.customer === customer).length < count) {
      if (Date.now() > deadline) throw new Error(`${customer}: ${stripe.events.length} events, wanted ${count}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  it('reports each completed job once, as its stored bytes, and GET /usage shows the period and its usage', async () => {
    const k = await billedKey();
    await completedJob(k.key, 1_234_567);
    await completedJob(k.key, 3 * GIB);
    await startOperatorOutbox();
    await reported(k.customer, 2);
    expect(stripe.events.filter((e) => e.customer === k.customer).map((e) => e.value)).to.have.members([1_234_567, 3 * GIB]);
    expect(stripe.events.every((e) => e.event_name === 'mediajobs_stored_bytes')).to.equal(true);

    const u = await usage(k.key);
    expect(u).to.deep.include({
      billing_period_start: new Date(period.start * 1000).toISOString(),
      billing_period_end: new Date(period.end * 1000).toISOString(),
    });
    expect((u.current_period_usage_gb as number) * GIB).to.equal(1_234_567 + 3 * GIB);
    // The kept counters agree with what was billed.
    expect((u.storage_usage_gb as number) * GIB).to.equal(1_234_567 + 3 * GIB);
    expect(u).to.not.have.property('billing_error');
  });

  it('a report Stripe refused at first is sent again and counted once', async () => {
    const k = await billedKey();
    stripe.outage = true;
    await completedJob(k.key, 4096);
    await startOperatorOutbox();
    // At least one attempt failed on the outage before it ends.
    const deadline = Date.now() + 10_000;
    while (!(await gw.pool.query(`SELECT 1 FROM outbox WHERE channel = 'billing' AND last_error IS NOT NULL`)).rowCount) {
      if (Date.now() > deadline) throw new Error('no failed attempt recorded');
      await new Promise((r) => setTimeout(r, 50));
    }
    stripe.outage = false;
    await reported(k.customer, 1);
    await new Promise((r) => setTimeout(r, 500));
    expect(stripe.usage(k.customer)).to.equal(4096);
  });

  it('an operator without Stripe settings leaves the reports queued for one that has them', async () => {
    const k = await billedKey();
    await completedJob(k.key, 777);
    await startOperatorOutbox(false);
    await new Promise((r) => setTimeout(r, 500));
    expect(stripe.usage(k.customer)).to.equal(0);
    await dispatcher!.stop();
    await startOperatorOutbox(true);
    await reported(k.customer, 1);
    expect(stripe.usage(k.customer)).to.equal(777);
  });

  it('keys without billing report nothing and show no billing fields', async () => {
    const made = await createApiKey(gw.pool, { name: 'unbilled' });
    const before = stripe.events.length;
    await completedJob(made.key, 1000);
    await startOperatorOutbox();
    await new Promise((r) => setTimeout(r, 500));
    expect(stripe.events.length).to.equal(before);
    expect(Object.keys(await usage(made.key)).filter((f) => f.startsWith('billing') || f.startsWith('current_period'))).to.deep.equal([]);
  });

  it('a marketplace end user\'s jobs are billed to the provider account; the end user sees no billing fields', async () => {
    const k = await billedKey({ kind: 'marketplace' });
    const user = { 'x-marketplace-user': 'buyer-1' };
    // The end user exists once seen; its job is inserted for it directly (its inline storage would be probed).
    const endUser = await endUserOf(gw.pool, k.id, 'buyer-1');
    const jobId = (await gw.pool.query<{ id: string }>(
      `INSERT INTO jobs (id, api_key_id, url, status, step, progress, options) VALUES (gen_random_uuid(), $1, 'https://media.example/x', 'Processing', 'Downloading', 0, '{}') RETURNING id`,
      [endUser.id])).rows[0]!.id;
    await syncStatus(gw.pool, jobId, { status: 'Completed', result: { storageKey: 'x.mp4', fileSize: 5000, uploadedBytes: 5000 } }, () => []);
    await startOperatorOutbox();
    await reported(k.customer, 1);
    expect(stripe.usage(k.customer)).to.equal(5000);
    const u = await usage(k.key, user);
    expect(u).to.not.have.property('billing_period_start');
    expect(u).to.not.have.property('billing_error');
  });

  it('Stripe unreachable or failing: GET /usage still answers 200 with everything else and billing_error', async () => {
    const k = await billedKey();
    await completedJob(k.key, 2048);
    stripe.outage = true;
    const u = await usage(k.key);
    expect(u.billing_error).to.be.a('string').and.match(/unavailable/);
    expect(u).to.not.have.property('billing_period_start');
    expect(u).to.deep.include({ client_name: k.name, usage_count: 1 });
    expect((u.storage_usage_gb as number) * GIB).to.equal(2048);
    // Nothing of Stripe's answer or settings leaks.
    expect(JSON.stringify(u)).to.not.include(stripe.secretKey);
  });

  it('a billed key whose customer has no active subscription is told so', async () => {
    const made = await createApiKey(gw.pool, { name: 'lapsed', billingCustomer: 'cus_lapsed' });
    expect((await usage(made.key)).billing_error).to.match(/no active subscription/);
  });
});
