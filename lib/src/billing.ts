// Billing through Stripe (issue 14, "Billing"; docs/adr/0016): what a
// key's GET /usage shows of its billing period, and the usage each
// completed job reports, both through the official `stripe` client. The
// gateway reads (BillingReader); the operator's outbox reports (reportUsage:
// a row queued with the job's ending, lib/src/db/outbox.ts
// queueUsageReport). Usage is a Billing Meter event per job whose value is
// the bytes the job stored: whole numbers (a meter sums them exactly, where
// per-job gigabytes would be rounded), priced per GiB on the Stripe side
// (transform_quantity divide_by 1073741824). The event's identifier and
// the request's Idempotency-Key are both the outbox event id, so a retry
// after an answer that was lost is not counted twice.
import Stripe from 'stripe';
import { z } from 'zod';

/** STRIPE_* settings, shared by the gateway (reads) and the operator (reports). */
export const billingSchema = z.object({
  /** The Stripe secret key (sk_live_…, sk_test_… or a restricted rk_…); unset: no billing. */
  STRIPE_SECRET_KEY: z.string().min(1).optional(),
  /** The Stripe API's base URL; another only for a local fake in tests. */
  STRIPE_API_URL: z.string().url().default('https://api.stripe.com'),
  /** The `event_name` of the Billing Meter that sums stored bytes per customer. */
  STRIPE_METER_EVENT: z.string().regex(/^[A-Za-z0-9_.-]{1,100}$/).default('mediajobs_stored_bytes'),
  /** How long GET /usage reuses a customer's period and usage read from Stripe, seconds; 0: read every time. */
  BILLING_CACHE_SECONDS: z.coerce.number().int().min(0).default(30),
});
export type BillingSettings = z.infer<typeof billingSchema>;

/** A Stripe customer id, as the admin CLI accepts it for --billing-customer. */
export const BILLING_CUSTOMER = /^cus_[A-Za-z0-9]{1,64}$/;

/** How long one Stripe request may take (ms); GET /usage waits on it. */
const REQUEST_TIMEOUT_MS = 5_000;

/** The official client for these settings, or undefined when billing is off. */
export function stripeClient(s: BillingSettings): Stripe | undefined {
  if (!s.STRIPE_SECRET_KEY) return undefined;
  const api = new URL(s.STRIPE_API_URL);
  return new Stripe(s.STRIPE_SECRET_KEY, {
    host: api.hostname,
    port: api.port || (api.protocol === 'http:' ? 80 : 443),
    protocol: api.protocol === 'http:' ? 'http' : 'https',
    timeout: REQUEST_TIMEOUT_MS,
    // Reads are retried by the caller asking again; reports by the outbox.
    maxNetworkRetries: 0,
    telemetry: false,
    appInfo: { name: 'mediajobs' },
  });
}

/** One completed job's usage, as the outbox row holds it. */
export interface UsageReport {
  /** The outbox event id: the meter event's identifier and the request's idempotency key. */
  identifier: string;
  customer: string;
  bytes: number;
  /** When the job ended, seconds since the epoch: the usage belongs to that moment's billing period. */
  timestamp: number;
}

/** Send one usage report as a meter event; throws what the client throws (the outbox retries). */
export async function reportUsage(stripe: Stripe, eventName: string, u: UsageReport): Promise<void> {
  await stripe.billing.meterEvents.create({
    event_name: eventName,
    identifier: u.identifier,
    timestamp: u.timestamp,
    payload: { stripe_customer_id: u.customer, value: String(u.bytes) },
  }, { idempotencyKey: u.identifier });
}

/** What Stripe answered that a key's owner can act on (GET /usage shows the message); other failures are Stripe's own errors. */
export class BillingError extends Error {
  override readonly name = 'BillingError';
}

/** GET /usage's billing fields for one customer. */
export interface BillingPeriod {
  /** ISO 8601, UTC. */
  start: string;
  end: string;
  /** Bytes the meter summed for the customer from the period's start until now. */
  usageBytes: number;
}

/**
 * The customer's current billing period (its active subscription's) and
 * its metered usage so far, read from Stripe; answers are kept for
 * BILLING_CACHE_SECONDS, failures never.
 */
export class BillingReader {
  private meterId: string | undefined;
  private readonly cache = new Map<string, { at: number; period: BillingPeriod }>();

  constructor(private readonly stripe: Stripe, private readonly settings: Pick<BillingSettings, 'STRIPE_METER_EVENT' | 'BILLING_CACHE_SECONDS'>) {}

  async period(customer: string): Promise<BillingPeriod> {
    const ttlMs = this.settings.BILLING_CACHE_SECONDS * 1000;
    const kept = this.cache.get(customer);
    if (kept && Date.now() - kept.at < ttlMs) return kept.period;
    const period = await this.read(customer);
    if (ttlMs > 0) this.cache.set(customer, { at: Date.now(), period });
    return period;
  }

  private async read(customer: string): Promise<BillingPeriod> {
    const subs = await this.stripe.subscriptions.list({ customer, status: 'active', limit: 1 });
    const item = subs.data[0]?.items.data[0];
    if (!item) throw new BillingError('The billing customer has no active subscription');
    const start = item.current_period_start;
    const end = item.current_period_end;
    // Summaries take whole minutes: from the period's first minute to the end of the current one.
    const now = Math.floor(Date.now() / 1000);
    const meter = await this.meter();
    // Not awaited: the list promise is also the auto-paging iterator over every page.
    const summaries = this.stripe.billing.meters.listEventSummaries(meter, {
      customer,
      start_time: Math.floor(start / 60) * 60,
      end_time: Math.ceil((Math.min(now, end) + 1) / 60) * 60,
    });
    let usageBytes = 0;
    for await (const s of summaries) usageBytes += s.aggregated_value;
    return { start: new Date(start * 1000).toISOString(), end: new Date(end * 1000).toISOString(), usageBytes };
  }

  /** The meter whose event_name is STRIPE_METER_EVENT, found once. */
  private async meter(): Promise<string> {
    if (this.meterId) return this.meterId;
    for await (const m of this.stripe.billing.meters.list({ status: 'active', limit: 100 })) {
      if (m.event_name === this.settings.STRIPE_METER_EVENT) return (this.meterId = m.id);
    }
    throw new BillingError(`No active Stripe meter has the event name ${this.settings.STRIPE_METER_EVENT}`);
  }
}
