// lib/src/billing.ts through the official stripe client against the local
// fake of the Stripe API (test/support/fake-stripe.ts).
import { expect } from 'chai';
import { BillingReader, billingSchema, reportUsage, stripeClient } from '../src/billing.js';
import { loadConfig } from '../src/config.js';
import { FakeStripe } from '../../test/support/fake-stripe.js';

/** The error a promise fails with; fails the test when it does not. */
async function failure(p: Promise<unknown>): Promise<Error> {
  const outcome = await p.then(() => undefined, (e: unknown) => e);
  if (!(outcome instanceof Error)) throw new Error('expected a failure');
  return outcome;
}

describe('billing (Stripe through its official client)', () => {
  const fake = new FakeStripe();
  let apiUrl: string;
  const settings = (extra: Record<string, string> = {}) => loadConfig(billingSchema, {
    STRIPE_SECRET_KEY: fake.secretKey, STRIPE_API_URL: apiUrl, BILLING_CACHE_SECONDS: '0', ...extra,
  });
  const now = Math.floor(Date.now() / 1000);

  before(async () => {
    apiUrl = await fake.start();
    fake.subscriptions.push({ customer: 'cus_A', periodStart: now - 86400, periodEnd: now + 29 * 86400 });
  });
  after(() => fake.stop());
  beforeEach(() => {
    fake.events.length = 0;
    fake.outage = false;
  });

  it('is off without a secret key', () => {
    expect(stripeClient(loadConfig(billingSchema, {}))).to.equal(undefined);
  });

  it('reports a job\'s bytes as one meter event, and a retry of it is not counted again', async () => {
    const stripe = stripeClient(settings())!;
    const report = { identifier: 'b7a3e0c2-0000-5000-8000-000000000001', customer: 'cus_A', bytes: 123_456_789, timestamp: now - 10 };
    await reportUsage(stripe, 'mediajobs_stored_bytes', report);
    // The outbox sends again when the first answer was lost: same identifier, same idempotency key.
    await reportUsage(stripe, 'mediajobs_stored_bytes', report);
    expect(fake.events).to.have.length(1);
    expect(fake.events[0]).to.deep.include({ customer: 'cus_A', value: 123_456_789, identifier: report.identifier, timestamp: now - 10 });
  });

  it('reads the billing period of the active subscription and the metered bytes since its start', async () => {
    const stripe = stripeClient(settings())!;
    await reportUsage(stripe, 'mediajobs_stored_bytes', { identifier: 'e1', customer: 'cus_A', bytes: 1000, timestamp: now - 3600 });
    await reportUsage(stripe, 'mediajobs_stored_bytes', { identifier: 'e2', customer: 'cus_A', bytes: 2 ** 30, timestamp: now - 5 });
    // Before the period: not this period's usage.
    await reportUsage(stripe, 'mediajobs_stored_bytes', { identifier: 'e3', customer: 'cus_A', bytes: 7, timestamp: now - 2 * 86400 });
    await reportUsage(stripe, 'mediajobs_stored_bytes', { identifier: 'e4', customer: 'cus_B', bytes: 99, timestamp: now - 5 });
    const p = await new BillingReader(stripe, settings()).period('cus_A');
    expect(p).to.deep.equal({
      start: new Date((now - 86400) * 1000).toISOString(),
      end: new Date((now + 29 * 86400) * 1000).toISOString(),
      usageBytes: 2 ** 30 + 1000,
    });
  });

  it('says why when the customer has no active subscription or the meter does not exist', async () => {
    const stripe = stripeClient(settings())!;
    expect((await failure(new BillingReader(stripe, settings()).period('cus_nobody'))).message).to.match(/no active subscription/i);
    const other = settings({ STRIPE_METER_EVENT: 'not_a_meter' });
    expect((await failure(new BillingReader(stripe, other).period('cus_A'))).message).to.match(/no active Stripe meter.*not_a_meter/i);
  });

  it('keeps an answer for BILLING_CACHE_SECONDS and never keeps a failure', async () => {
    const s = settings({ BILLING_CACHE_SECONDS: '60' });
    const reader = new BillingReader(stripeClient(s)!, s);
    fake.outage = true;
    await failure(reader.period('cus_A'));
    fake.outage = false;
    const first = await reader.period('cus_A');
    fake.outage = true;
    expect(await reader.period('cus_A')).to.deep.equal(first);
  });

  it('fails on a wrong secret key, a Stripe outage or an unreachable API instead of answering nothing', async () => {
    const wrong = settings({ STRIPE_SECRET_KEY: 'sk_test_wrong' });
    expect((await failure(new BillingReader(stripeClient(wrong)!, wrong).period('cus_A'))).message).to.match(/Invalid API Key/);
    fake.outage = true;
    const outage = await failure(reportUsage(stripeClient(settings())!, 'mediajobs_stored_bytes', { identifier: 'x', customer: 'cus_A', bytes: 1, timestamp: now }));
    expect(outage.message).to.match(/unknown error/);
    const unreachable = settings({ STRIPE_API_URL: 'http://127.0.0.1:1' });
    await failure(new BillingReader(stripeClient(unreachable)!, unreachable).period('cus_A'));
  });
});
