// Webhook delivery from the outbox table: POST JSON with a per-attempt
// timeout, a fixed number of attempts with exponential backoff, signed as
// Standard Webhooks says (webhook-id = the event's stable id, the same on
// every retry and redelivery, so receivers can drop duplicates;
// webhook-timestamp of the attempt; webhook-signature with the key's
// secrets, lib/src/webhook-signing.ts and lib/src/db/webhook-secrets.ts).
// Rows are claimed with SKIP LOCKED and a lease, so a crash mid-delivery
// means a retry later, never a lost event; Postgres NOTIFY wakes the loop at
// once. Deliveries run side by side, at most `perOrigin` to one receiver
// origin: an event of a receiver at its limit is given back unsent, so a slow
// receiver delays only its own events. Every attempt is written to the
// delivery log (lib/src/db/webhook-log.ts). The HTTP POST and the address
// policy are ./webhook-post.ts's; the outbox statements lib/src/db/outbox.ts's.
// Billing rows (a completed job's usage report) go to Stripe through its
// client (lib/src/billing.ts) with the same retries; an operator without
// Stripe settings does not claim them.
import type pg from 'pg';
import type Stripe from 'stripe';
import { reportUsage, type UsageReport } from '@mediajobs/lib/billing';
import {
  OUTBOX_CHANNEL, claimDueEvents, markDelivered, markFailed, releaseClaim, scheduleRetry, type ClaimedEvent,
} from '@mediajobs/lib/db/outbox';
import { outboxTargetAt } from '@mediajobs/lib/db/sealed-columns';
import { recordAttempt } from '@mediajobs/lib/db/webhook-log';
import { signingSecrets } from '@mediajobs/lib/db/webhook-secrets';
import { errFields, type Logger } from '@mediajobs/lib/logger';
import { OutboundPolicy, type OutboundPolicyOptions } from '@mediajobs/lib/outbound';
import { listenOn, type Listening } from '@mediajobs/lib/pg-client';
import { SecretBoxError, type SecretBox } from '@mediajobs/lib/secret-box';
import { secretKey, signedHeaders } from '@mediajobs/lib/webhook-signing';
import type { OperatorMetrics } from './metrics.js';
import { WebhookClient, type PostOutcome } from './webhook-post.js';

export interface OutboxOptions {
  timeoutMs: number;
  attempts: number;
  backoffMs: number;
  pollMs?: number;
  batch?: number;
  /** The outbound-address policy for webhook URLs (OUTBOUND_ALLOWED_CIDRS); default: no allowance. */
  outbound?: OutboundPolicyOptions;
  /** Deliveries in flight to one receiver origin (scheme, host, port); default 4. */
  perOrigin?: number;
  /** Deliveries in flight in all; default 64. */
  maxInFlight?: number;
  /** An event given back because its origin was at `perOrigin` is due again after this; default 250 ms. */
  originBusyDelayMs?: number;
  /** Where usage reports go (STRIPE_*); without it they stay queued. */
  billing?: { stripe: Stripe; meterEvent: string };
  /** Counts each attempt by channel and result, with its time. */
  metrics?: Pick<OperatorMetrics, 'delivered'>;
}

export class OutboxDispatcher {
  private timer: NodeJS.Timeout | undefined;
  private listening: Listening | undefined;
  private running = false;
  private again = false;
  private stopped = false;
  private readonly inFlight = new Set<Promise<void>>();
  private readonly perOrigin = new Map<string, number>();
  private readonly client: WebhookClient;

  constructor(private readonly pool: pg.Pool, private readonly box: SecretBox, private readonly log: Logger, private readonly opts: OutboxOptions) {
    this.client = new WebhookClient(new OutboundPolicy(opts.outbound));
  }

  async start(): Promise<void> {
    this.stopped = false;
    try {
      // A lost LISTEN connection leaves polling, which still delivers everything; the broken client is destroyed.
      this.listening = await listenOn(this.pool, OUTBOX_CHANNEL, () => this.kick(), (err) => {
        this.log.warn({ err: errFields(err) }, 'outbox LISTEN connection lost; polling only');
        this.listening = undefined;
      });
    } catch (err) {
      this.log.warn({ err: errFields(err) }, 'outbox LISTEN unavailable; polling only');
    }
    this.timer = setInterval(() => this.kick(), this.opts.pollMs ?? 1000);
    this.timer.unref();
    this.kick();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
    const listening = this.listening;
    this.listening = undefined;
    await listening?.end();
    // A pass may still be claiming (it dispatches what it claimed), then its deliveries finish.
    while (this.running) await new Promise((r) => setTimeout(r, 20));
    while (this.inFlight.size) await Promise.allSettled([...this.inFlight]);
    this.client.close();
  }

  kick(): void {
    if (this.stopped) return;
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = true;
    void this.drain().finally(() => {
      this.running = false;
      if (this.again && !this.stopped) {
        this.again = false;
        this.kick();
      }
    });
  }

  /** Claim while there is room; each finished delivery kicks the loop again. */
  private async drain(): Promise<void> {
    try {
      // Stop between batches, never between claiming and dispatching: a claimed
      // row left undelivered would sit out its whole lease before a retry.
      while (!this.stopped) {
        const room = (this.opts.maxInFlight ?? 64) - this.inFlight.size;
        if (room <= 0) return;
        const rows = await this.claim(Math.min(room, this.opts.batch ?? 16));
        if (!rows.length) return;
        for (const row of rows) await this.dispatch(row);
      }
    } catch (err) {
      this.log.error({ err: errFields(err) }, 'outbox pass failed');
    }
  }

  /**
   * Due events, claimed under a lease long enough for one attempt (lib/src/db/outbox.ts claimDueEvents);
   * the signing-secret read and the log writes come on top of the POST's timeout.
   */
  private claim(batch: number): Promise<ClaimedEvent[]> {
    const channels = this.opts.billing ? ['webhook', 'chat', 'billing'] as const : ['webhook', 'chat'] as const;
    return claimDueEvents(this.pool, { batch, leaseSeconds: Math.ceil(this.opts.timeoutMs / 1000) + 30, channels });
  }

  /** Start the row's delivery, unless it is over its attempts or its receiver has enough in flight. */
  private async dispatch(row: ClaimedEvent): Promise<void> {
    // Counted when claimed, so an attempt cut short by a crash (its POST
    // perhaps sent) still counts: never more POSTs than attempts.
    if (row.attempts > this.opts.attempts) {
      await markFailed(this.pool, row.id);
      this.opts.metrics?.delivered(row.channel, 'failed');
      this.log.warn({ eventId: row.event_id, type: row.type, attempt: row.attempts - 1 }, 'webhook given up');
      return;
    }
    const target = this.target(row);
    if (target === undefined) {
      await markFailed(this.pool, row.id, 'target_unreadable');
      this.opts.metrics?.delivered(row.channel, 'failed');
      return;
    }
    // A chat service is one origin for every tenant: there each incoming webhook is its own receiver.
    const origin = row.channel === 'webhook' ? originOf(target) : target;
    const busy = this.perOrigin.get(origin) ?? 0;
    if (busy >= (this.opts.perOrigin ?? 4)) {
      await releaseClaim(this.pool, row.id, this.opts.originBusyDelayMs ?? 250);
      this.opts.metrics?.delivered(row.channel, 'deferred');
      return;
    }
    this.perOrigin.set(origin, busy + 1);
    const delivery = this.deliver(row, target)
      .catch((err: unknown) => this.log.error({ err: errFields(err), eventId: row.event_id }, 'webhook delivery failed'))
      .finally(() => {
        const left = (this.perOrigin.get(origin) ?? 1) - 1;
        if (left) this.perOrigin.set(origin, left);
        else this.perOrigin.delete(origin);
        this.inFlight.delete(delivery);
        this.kick();
      });
    this.inFlight.add(delivery);
  }

  /**
   * Where the row goes; undefined when its sealed address does not open (a
   * removed key, a damaged value, or one moved from another row: no attempt
   * will open it, and throwing would hold up the rest of the claimed batch).
   */
  private target(row: ClaimedEvent): string | undefined {
    if (row.target_enc === null) return BILLING_ORIGIN;
    try {
      return this.box.open(row.target_enc, outboxTargetAt(row));
    } catch (err) {
      if (!(err instanceof SecretBoxError)) throw err;
      this.log.warn({ eventId: row.event_id, type: row.type, err: errFields(err) }, 'webhook target cannot be opened; given up');
      return undefined;
    }
  }

  private async deliver(row: ClaimedEvent, target: string): Promise<void> {
    const attempt = row.attempts;
    const attemptedAt = new Date();
    const outcome = await this.post(row, target);
    await recordAttempt(this.pool, {
      outboxId: row.id, round: row.redeliveries, attempt, attemptedAt, durationMs: outcome.durationMs,
      statusCode: outcome.statusCode, error: outcome.error, responseExcerpt: outcome.excerpt,
    });
    const { error } = outcome;
    const fields = { eventId: row.event_id, type: row.type, attempt, ...(error && { error }) };
    const seconds = outcome.durationMs / 1000;
    if (!error) {
      await markDelivered(this.pool, row.id);
      this.opts.metrics?.delivered(row.channel, 'delivered', seconds);
      this.log.info(fields, 'webhook delivered');
      return;
    }
    if (attempt >= this.opts.attempts) {
      await markFailed(this.pool, row.id, error);
      this.opts.metrics?.delivered(row.channel, 'failed', seconds);
      this.log.warn(fields, 'webhook given up');
      return;
    }
    const delayMs = this.opts.backoffMs * 2 ** (attempt - 1);
    await scheduleRetry(this.pool, row.id, error, delayMs);
    this.opts.metrics?.delivered(row.channel, 'retry', seconds);
    this.log.info({ ...fields, retryInMs: delayMs }, 'webhook attempt failed');
  }

  /** One signed POST; the timestamp is this attempt's, the secrets the key's now (both during a rotation's overlap). */
  private async post(row: ClaimedEvent, target: string): Promise<PostOutcome> {
    if (row.channel === 'chat') return this.postChat(row, target);
    if (row.channel === 'billing') return this.reportUsage(row);
    const secrets = row.api_key_id ? await signingSecrets(this.pool, this.box, row.api_key_id) : [];
    const body = JSON.stringify(row.payload);
    const signed = signedHeaders(secrets.map(secretKey), row.event_id, Math.floor(Date.now() / 1000), body);
    return this.client.post({
      url: target,
      body,
      timeoutMs: this.opts.timeoutMs,
      secrets: [target, ...secrets],
      headers: {
        'Content-Type': 'application/json',
        'User-Agent': 'mediajobs-webhooks/1',
        ...signed,
        // Deprecated: webhook-id carries the same id (api-gateway/README.md, Webhooks).
        'X-Mediajobs-Event-Id': row.event_id,
        'X-Mediajobs-Event-Type': row.type,
      },
    });
  }

  /** A usage report, through the Stripe client; its answer or error, shaped as a POST's for the delivery log and retries. */
  private async reportUsage(row: ClaimedEvent): Promise<PostOutcome> {
    const started = Date.now();
    const billing = this.opts.billing!;
    try {
      await reportUsage(billing.stripe, billing.meterEvent, row.payload as unknown as UsageReport);
      return { statusCode: 200, error: null, excerpt: null, durationMs: Date.now() - started };
    } catch (err) {
      const e = err as { statusCode?: number; type?: string; message?: string };
      const statusCode = typeof e.statusCode === 'number' ? e.statusCode : null;
      return {
        statusCode,
        error: statusCode ? `HTTP ${statusCode}` : e.type ?? 'stripe_error',
        excerpt: (e.message ?? '').slice(0, 200) || null,
        durationMs: Date.now() - started,
      };
    }
  }

  /** A chat notification: the chat service's JSON as it is, unsigned (the chat service reads no signature). */
  private postChat(row: ClaimedEvent, target: string): Promise<PostOutcome> {
    return this.client.post({
      url: target,
      body: JSON.stringify(row.payload),
      timeoutMs: this.opts.timeoutMs,
      secrets: [target],
      headers: { 'Content-Type': 'application/json', 'User-Agent': 'mediajobs-webhooks/1' },
    });
  }
}

/** The per-origin slot of usage reports: Stripe, one receiver for every customer. */
const BILLING_ORIGIN = 'billing:stripe';

/** The receiver a URL names, for the per-origin limit; an unparsable one is its own (its POST fails as invalid_url). */
function originOf(target: string): string {
  try {
    return new URL(target).origin;
  } catch {
    return 'invalid';
  }
}
