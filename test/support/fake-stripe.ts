// A local fake of the Stripe API endpoints mediajobs uses (lib/src/billing.ts),
// for tests through the official `stripe` client, unchanged.
//
// What it serves, with Stripe's shapes (list objects, `{error: {type,
// message, code}}` bodies, form-encoded requests):
// - GET  /v1/subscriptions?customer=&status=active&limit=   the customer's
//   subscriptions, each with its items and their current_period_start/end
//   (where the period lives since API version 2025-03-31).
// - GET  /v1/billing/meters?status=&limit=                  the meters.
// - GET  /v1/billing/meters/{id}/event_summaries?customer=&start_time=&end_time=
//   one summary summing the customer's events for the meter's event_name
//   in [start_time, end_time); times not on a minute boundary are refused
//   (400), as Stripe documents.
// - POST /v1/billing/meter_events                           one event.
//
// What it checks, as Stripe does:
// - `Authorization: Bearer <secret key>`; another key gets 401.
// - Idempotency-Key on POSTs: the same key with the same parameters answers
//   the first answer again (`Idempotent-Replayed: true`), with other
//   parameters 400 idempotency_error.
// - A meter event's identifier is unique: a second event with one already
//   seen (without the first's idempotency key) is refused with 400.
// - A meter event's timestamp within the past 35 days and at most 5 minutes
//   ahead; its payload carries stripe_customer_id and a whole-number value.
// `outage` makes every request answer 500 api_error, as during an incident.
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface FakeSubscription {
  customer: string;
  /** Seconds since the epoch. */
  periodStart: number;
  periodEnd: number;
  status?: 'active' | 'canceled';
}

export interface FakeMeterEvent {
  event_name: string;
  identifier: string;
  timestamp: number;
  customer: string;
  value: number;
}

interface Stored {
  status: number;
  body: string;
  params: string;
}

export class FakeStripe {
  private server: http.Server | undefined;
  readonly subscriptions: FakeSubscription[] = [];
  readonly meters = [{ id: 'mtr_test_1', event_name: 'mediajobs_stored_bytes', status: 'active' }];
  /** Events accepted, in order. */
  readonly events: FakeMeterEvent[] = [];
  /** Every request received: method and path, for asserting what was (not) asked. */
  readonly requests: string[] = [];
  outage = false;
  private readonly idempotent = new Map<string, Stored>();

  constructor(readonly secretKey = 'sk_test_fake_0123456789') {}

  async start(): Promise<string> {
    this.server = http.createServer((req, res) => {
      let body = '';
      req.setEncoding('utf8');
      req.on('data', (c: string) => (body += c));
      req.on('end', () => this.handle(req, body, res));
    });
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  async stop(): Promise<void> {
    this.server?.closeAllConnections();
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }

  /** The sum of a customer's accepted event values. */
  usage(customer: string): number {
    return this.events.filter((e) => e.customer === customer).reduce((s, e) => s + e.value, 0);
  }

  private handle(req: http.IncomingMessage, body: string, res: http.ServerResponse): void {
    const url = new URL(req.url ?? '/', 'http://stripe.invalid');
    this.requests.push(`${req.method} ${url.pathname}`);
    const send = (status: number, payload: unknown) => {
      res.writeHead(status, { 'Content-Type': 'application/json', 'Request-Id': `req_${this.requests.length}` });
      res.end(JSON.stringify(payload));
    };
    if (this.outage) return send(500, stripeError('api_error', 'An unknown error occurred'));
    if (req.headers.authorization !== `Bearer ${this.secretKey}`) {
      return send(401, stripeError('invalid_request_error', 'Invalid API Key provided: sk_****'));
    }
    if (req.method === 'GET') return this.get(url, send);
    if (req.method === 'POST' && url.pathname === '/v1/billing/meter_events') {
      const key = req.headers['idempotency-key'];
      const stored = typeof key === 'string' ? this.idempotent.get(key) : undefined;
      if (stored) {
        if (stored.params !== body) {
          return send(400, stripeError('idempotency_error', 'Keys for idempotent requests can only be used with the same parameters they were first used with.'));
        }
        res.writeHead(stored.status, { 'Content-Type': 'application/json', 'Idempotent-Replayed': 'true' });
        return void res.end(stored.body);
      }
      const [status, payload] = this.createEvent(new URLSearchParams(body));
      if (typeof key === 'string' && status < 500) this.idempotent.set(key, { status, body: JSON.stringify(payload), params: body });
      return send(status, payload);
    }
    send(404, stripeError('invalid_request_error', `Unrecognized request URL (${req.method}: ${url.pathname}).`));
  }

  private get(url: URL, send: (status: number, payload: unknown) => void): void {
    const q = url.searchParams;
    if (url.pathname === '/v1/subscriptions') {
      const subs = this.subscriptions.filter((s) => s.customer === q.get('customer') && (s.status ?? 'active') === (q.get('status') ?? 'active'));
      return send(200, list(url.pathname, subs.slice(0, Number(q.get('limit') ?? 10)).map((s, i) => subscriptionObject(s, i))));
    }
    if (url.pathname === '/v1/billing/meters') {
      return send(200, list(url.pathname, this.meters.filter((m) => !q.get('status') || m.status === q.get('status'))
        .map((m) => ({ object: 'billing.meter', ...m }))));
    }
    const summary = /^\/v1\/billing\/meters\/([^/]+)\/event_summaries$/.exec(url.pathname);
    if (summary) {
      const meter = this.meters.find((m) => m.id === summary[1]);
      if (!meter) return send(404, stripeError('invalid_request_error', `No such billing meter: '${summary[1]}'`, 'resource_missing'));
      const customer = q.get('customer');
      const start = Number(q.get('start_time'));
      const end = Number(q.get('end_time'));
      if (!customer || !Number.isInteger(start) || !Number.isInteger(end)) {
        return send(400, stripeError('invalid_request_error', 'Missing required param: customer, start_time or end_time.', 'parameter_missing'));
      }
      if (start % 60 || end % 60) {
        return send(400, stripeError('invalid_request_error', 'start_time and end_time must be aligned with minute boundaries.', 'parameter_invalid_integer'));
      }
      const value = this.events.filter((e) => e.customer === customer && e.event_name === meter.event_name && e.timestamp >= start && e.timestamp < end)
        .reduce((s, e) => s + e.value, 0);
      return send(200, list(url.pathname, [{
        id: `mtrusm_${start}`, object: 'billing.meter_event_summary', aggregated_value: value, start_time: start, end_time: end, livemode: false, meter: meter.id,
      }]));
    }
    send(404, stripeError('invalid_request_error', `Unrecognized request URL (GET: ${url.pathname}).`));
  }

  private createEvent(p: URLSearchParams): [number, unknown] {
    const eventName = p.get('event_name');
    const customer = p.get('payload[stripe_customer_id]');
    const value = p.get('payload[value]');
    const identifier = p.get('identifier') ?? `gen_${this.events.length + 1}`;
    const now = Math.floor(Date.now() / 1000);
    const timestamp = Number(p.get('timestamp') ?? now);
    if (!eventName) return [400, stripeError('invalid_request_error', 'Missing required param: event_name.', 'parameter_missing')];
    if (!customer || value === null || !/^\d+$/.test(value)) {
      return [400, stripeError('invalid_request_error', 'The payload must contain stripe_customer_id and a numeric value.', 'parameter_invalid_string')];
    }
    if (!Number.isInteger(timestamp) || timestamp < now - 35 * 86400 || timestamp > now + 300) {
      return [400, stripeError('invalid_request_error', 'The timestamp must be within the past 35 calendar days or up to 5 minutes in the future.', 'timestamp_out_of_range')];
    }
    if (this.events.some((e) => e.identifier === identifier)) {
      return [400, stripeError('invalid_request_error', `An event already exists with identifier ${identifier}.`, 'resource_already_exists')];
    }
    const event = { event_name: eventName, identifier, timestamp, customer, value: Number(value) };
    this.events.push(event);
    return [200, {
      object: 'billing.meter_event', created: now, event_name: eventName, identifier, livemode: false, timestamp,
      payload: { stripe_customer_id: customer, value },
    }];
  }
}

function stripeError(type: string, message: string, code?: string) {
  return { error: { type, message, ...(code && { code }) } };
}

function list(url: string, data: unknown[]) {
  return { object: 'list', data, has_more: false, url };
}

function subscriptionObject(s: FakeSubscription, i: number) {
  const id = `sub_test_${i + 1}`;
  return {
    id, object: 'subscription', customer: s.customer, status: s.status ?? 'active',
    items: list(`/v1/subscription_items?subscription=${id}`, [{
      id: `si_test_${i + 1}`, object: 'subscription_item', subscription: id,
      current_period_start: s.periodStart, current_period_end: s.periodEnd,
    }]),
  };
}
