// The watch fault mode: what load balancers, API server restarts and a busy
// etcd do to list and watch clients, on purpose and at random, so that tests
// and soaks prove a client recovers (resumes, relists) without missing or
// repeating an event. Off unless asked for: the LocalClusterOptions field
// `watchFaults`, else the environment variable LOCAL_CLUSTER_WATCH_FAULTS
// (read once, in LocalCluster.start), changed later with
// cluster.setWatchFaults(). Every random choice comes from a PRNG seeded by
// `seed` (one stream per fault kind, so turning one fault on does not change
// the draws of another), and each fault done is counted.
//
// Faults, each with its own knob:
// - drop: a watch stream ends cleanly (the chunked body's last chunk), as a
//   load balancer's idle cut or an apiserver's shutdown does.
// - reset: the TCP connection is reset (RST) between two events.
// - midEventReset: the next event line is cut part-way (half its bytes
//   written) and the connection reset: the client holds half a JSON line and
//   a connection error. Armed at the draw, done at the watch's next event.
//   (The three are rates per open watch per second, i.e. 1/rate is the mean
//   time a watch lives before that fault; checked every TICK_MS.)
// - expire: a watch from a resourceVersion older than the current one is
//   answered as too old, with the probability given: 410 Expired, either in
//   the stream as an ERROR event (200, then the Status, then the end: the
//   watch cache's answer) or as the HTTP status with the Status body (the
//   answer when the storage refuses the watch before it starts), or either
//   at random (expireAs).
// - listDelayMs (and listDelayMaxMs): every LIST is answered this many
//   milliseconds late (a uniform draw between the two when both are set);
//   the list is read when the request arrives, so writes made during the
//   delay are newer than its resourceVersion, as with a slow apiserver.
// - bookmarkMs: the bookmark interval of watches that allow bookmarks,
//   replacing bookmarkIntervalMs while set (open watches take it at once).
import { randomInt } from 'node:crypto';
import { z } from 'zod';
import { ConfigError, loadConfig } from '@mediajobs/lib/config';

export const WATCH_FAULTS_ENV = 'LOCAL_CLUSTER_WATCH_FAULTS';

/** How often open watches are given the chance of a drop, reset or mid-event reset. */
export const TICK_MS = 100;

export type ExpireForm = 'event' | 'status' | 'mixed';

export interface WatchFaults {
  /** Clean ends of a watch stream, per open watch per second. Default 0. */
  drop?: number;
  /** TCP resets of a watch connection between events, per open watch per second. Default 0. */
  reset?: number;
  /** Cuts of the next event line followed by a connection reset, per open watch per second. Default 0. */
  midEventReset?: number;
  /** Probability, 0 to 1, that a watch from an older resourceVersion than the current one gets 410 Expired. Default 0. */
  expire?: number;
  /** 'event' (default): 200 and an ERROR event; 'status': HTTP 410 with the Status; 'mixed': either, at random. */
  expireAs?: ExpireForm;
  /** Every LIST answered this many ms late (with listDelayMaxMs: at least this many). Default 0. */
  listDelayMs?: number;
  /** With listDelayMs: the delay is drawn uniformly from [listDelayMs, listDelayMaxMs]. */
  listDelayMaxMs?: number;
  /** Bookmark interval (ms) of watches that allow bookmarks while set, instead of bookmarkIntervalMs. */
  bookmarkMs?: number;
  /** Seed of the PRNG (an unsigned 32-bit integer); default a random one, readable as cluster.watchFaults.seed. */
  seed?: number;
}

/** What the fault mode has done since the cluster started (or resetWatchFaultCounts). */
export interface WatchFaultCounts {
  /** Watch streams ended cleanly by `drop`. */
  drops: number;
  /** Watch connections reset between events by `reset`. */
  resets: number;
  /** Watch connections cut in the middle of an event line by `midEventReset`. */
  midEventResets: number;
  /** Watches answered 410 Expired by `expire`, in either form. */
  expiries: number;
  /** Of those, the ones answered with the HTTP 410 status rather than an ERROR event. */
  expiriesAsStatus: number;
  /** LIST responses held back by `listDelayMs`. */
  delayedLists: number;
}

const KEYS = ['drop', 'reset', 'midEventReset', 'expire', 'expireAs', 'listDelayMs', 'listDelayMaxMs', 'bookmarkMs', 'seed'] as const;
const MAX_DELAY_MS = 10 * 60_000;

const rate = z.coerce.number({ error: 'must be a number' })
  .min(0, { error: 'must be a rate per watch per second, 0 or more' })
  .max(1000, { error: 'must be at most 1000 per watch per second' });
const ms = (min: number) => z.coerce.number({ error: 'must be a number' }).int({ error: 'must be a whole number of milliseconds' })
  .min(min, { error: `must be at least ${min} ms` }).max(MAX_DELAY_MS, { error: `must be at most ${MAX_DELAY_MS} ms` });

/** The settings, checked; numbers may come as strings (the environment). */
export const watchFaultsSchema = z.strictObject({
  drop: rate.optional(),
  reset: rate.optional(),
  midEventReset: rate.optional(),
  expire: z.coerce.number({ error: 'must be a number' }).min(0, { error: 'must be a probability from 0 to 1' })
    .max(1, { error: 'must be a probability from 0 to 1' }).optional(),
  expireAs: z.enum(['event', 'status', 'mixed'], { error: 'must be event, status or mixed' }).optional(),
  listDelayMs: ms(0).optional(),
  listDelayMaxMs: ms(0).optional(),
  bookmarkMs: ms(10).optional(),
  seed: z.coerce.number({ error: 'must be a number' }).int({ error: 'must be an integer from 0 to 4294967295' })
    .min(0, { error: 'must be an integer from 0 to 4294967295' }).max(0xffff_ffff, { error: 'must be an integer from 0 to 4294967295' }).optional(),
}, { error: (issue) => (issue.code === 'unrecognized_keys' ? `unknown setting ${issue.keys.map((k) => `"${k}"`).join(', ')} (known: ${KEYS.join(', ')})` : undefined) })
  .refine((f) => f.listDelayMaxMs === undefined || f.listDelayMaxMs >= (f.listDelayMs ?? 0), {
    error: 'must not be below listDelayMs', path: ['listDelayMaxMs'],
  });

/**
 * "drop=0.5,expire=0.1,seed=7": comma-separated key=value pairs of
 * WatchFaults. An empty value (or only spaces) is the fault mode off.
 * Issues name the key, never echo a value.
 */
const envText = z.string().transform((text, ctx) => {
  const out: Record<string, string> = {};
  for (const part of text.split(',').map((p) => p.trim()).filter(Boolean)) {
    const eq = part.indexOf('=');
    const key = eq < 0 ? part : part.slice(0, eq).trim();
    const value = eq < 0 ? '' : part.slice(eq + 1).trim();
    const known = (KEYS as readonly string[]).includes(key);
    if (!known) {
      ctx.addIssue({ code: 'custom', message: `unknown setting "${key.replace(/[^\w.-]/g, '?').slice(0, 40)}" (known: ${KEYS.join(', ')}; the form is key=value,key=value)` });
    } else if (value === '') {
      ctx.addIssue({ code: 'custom', path: [key], message: 'needs a value (key=value)' });
    } else if (key in out) {
      ctx.addIssue({ code: 'custom', path: [key], message: 'is given twice' });
    } else {
      out[key] = value;
    }
  }
  // Values stay strings: the schema coerces and checks them.
  return out as z.input<typeof watchFaultsSchema>;
}).pipe(watchFaultsSchema);

const envSchema = z.object({ [WATCH_FAULTS_ENV]: envText.optional() });

/**
 * The fault mode LOCAL_CLUSTER_WATCH_FAULTS asks for: undefined when unset or
 * empty. A bad value throws a ConfigError naming the variable and the setting.
 */
export function watchFaultsFromEnv(env: NodeJS.ProcessEnv = process.env): WatchFaults | undefined {
  const parsed = loadConfig(envSchema, env)[WATCH_FAULTS_ENV];
  return parsed && Object.keys(parsed).length ? parsed : undefined;
}

/** Settings given in code (option, setter), checked as the environment's are. */
export function checkWatchFaults(faults: WatchFaults): WatchFaults {
  const result = watchFaultsSchema.safeParse(faults);
  if (!result.success) {
    const problems = result.error.issues.map((i) => `${i.path.join('.') || '(watchFaults)'}: ${i.message}`);
    throw new ConfigError(`invalid watchFaults:\n  ${problems.join('\n  ')}`);
  }
  return result.data;
}

/** Whether the settings ask for any fault or bookmark change. */
function isOn(f: WatchFaults): boolean {
  return !!(f.drop || f.reset || f.midEventReset || f.expire || f.listDelayMs || f.listDelayMaxMs || f.bookmarkMs);
}

/** mulberry32: a small, fast PRNG with a 32-bit state; uniform in [0, 1). */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export type StreamFault = 'drop' | 'reset' | 'midEventReset';

/** The fault mode's settings, random streams and counters; WatchHub and the LIST handler ask it what to do. */
export class WatchFaultMode {
  private current: (WatchFaults & { seed: number }) | undefined;
  private streamRandom: () => number = Math.random;
  private expireRandom: () => number = Math.random;
  private listRandom: () => number = Math.random;
  private counts: WatchFaultCounts = emptyCounts();

  constructor(faults?: WatchFaults) {
    this.set(faults);
  }

  /** Replace the settings (undefined or {}: off). The PRNG restarts from the seed (a new random one if none is given). */
  set(faults: WatchFaults | undefined): void {
    const checked = faults === undefined ? undefined : checkWatchFaults(faults);
    if (!checked || !isOn(checked)) {
      this.current = undefined;
      return;
    }
    const seed = checked.seed ?? randomInt(0, 0xffff_ffff);
    this.current = { ...checked, seed };
    // One stream per purpose, so that one fault's draws do not shift another's.
    this.streamRandom = prng(seed);
    this.expireRandom = prng(seed ^ 0x5bd1e995);
    this.listRandom = prng(seed ^ 0x27d4eb2f);
  }

  /** The settings in force (with the seed in use), or undefined when off. */
  get settings(): Readonly<WatchFaults & { seed: number }> | undefined {
    return this.current && { ...this.current };
  }

  get counters(): WatchFaultCounts {
    return { ...this.counts };
  }

  resetCounts(): void {
    this.counts = emptyCounts();
  }

  /** Whether open watches need the periodic fault draw. */
  get streamFaultsOn(): boolean {
    const f = this.current;
    return !!f && !!(f.drop || f.reset || f.midEventReset);
  }

  /** The bookmark interval to use now. */
  bookmarkIntervalMs(base: number): number {
    return this.current?.bookmarkMs ?? base;
  }

  /** One open watch's draw for one tick of TICK_MS: the fault to do to it, if any. */
  drawStreamFault(): StreamFault | undefined {
    const f = this.current;
    if (!f) return undefined;
    const rates: [StreamFault, number][] = [['drop', f.drop ?? 0], ['reset', f.reset ?? 0], ['midEventReset', f.midEventReset ?? 0]];
    const total = rates.reduce((s, [, r]) => s + r, 0);
    if (total <= 0) return undefined;
    // A Poisson process of rate `total`: at least one event within the tick with probability 1 - e^(-total·dt).
    if (this.streamRandom() >= 1 - Math.exp(-total * (TICK_MS / 1000))) return undefined;
    let pick = this.streamRandom() * total;
    for (const [kind, r] of rates) {
      if (pick < r) return kind;
      pick -= r;
    }
    return rates.filter(([, r]) => r > 0).pop()![0];
  }

  /**
   * Whether (and how) to answer a watch from `requested` as expired, the
   * current resourceVersion being `current`. Only older numeric versions
   * qualify: a client resuming from the newest version is never turned away.
   */
  drawExpiry(requested: string | undefined, current: number): 'event' | 'status' | undefined {
    const f = this.current;
    if (!f?.expire || requested === undefined || requested === '' || requested === '0') return undefined;
    const rv = Number(requested);
    if (!Number.isInteger(rv) || rv >= current) return undefined;
    if (this.expireRandom() >= f.expire) return undefined;
    const form = f.expireAs === 'mixed' ? (this.expireRandom() < 0.5 ? 'event' : 'status') : (f.expireAs ?? 'event');
    this.counts.expiries++;
    if (form === 'status') this.counts.expiriesAsStatus++;
    return form;
  }

  /** How long to hold back the LIST being answered (0: not at all); counted when above 0. */
  listDelayMs(): number {
    const f = this.current;
    if (!f) return 0;
    const min = f.listDelayMs ?? 0;
    const max = f.listDelayMaxMs ?? min;
    const delay = max > min ? min + Math.floor(this.listRandom() * (max - min + 1)) : min;
    if (delay > 0) this.counts.delayedLists++;
    return delay;
  }

  /** A stream fault was carried out. */
  record(kind: StreamFault): void {
    if (kind === 'drop') this.counts.drops++;
    else if (kind === 'reset') this.counts.resets++;
    else this.counts.midEventResets++;
  }
}

function emptyCounts(): WatchFaultCounts {
  return { drops: 0, resets: 0, midEventResets: 0, expiries: 0, expiriesAsStatus: 0, delayedLists: 0 };
}
