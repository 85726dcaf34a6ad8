// Tests talk to loopback only (127.0.0.0/8, ::1): never to a private,
// link-local or public address, not even to show that one is refused.
// Loaded by mocha before every test file (.mocharc.cjs `require`), this
// guards the test process itself: every TCP or TLS connection (net, tls,
// http, https, fetch/undici and the cloud SDKs all end in
// net.Socket.prototype.connect) and every name lookup. A connection to
// anything else is cut before it is attempted, and a lookup of a name other
// than `localhost` never reaches the resolver (on this machine a private
// address). Either one fails the test that caused it, from a root
// afterEach hook, even when the code under test swallowed the error it saw
// (as a refusal test expects one).
//
// Child processes (yt-dlp, ffmpeg, the runner) are not covered: tests of
// refusals in front of them show the child was never started.
import dns from 'node:dns';
import { appendFileSync } from 'node:fs';
import { isIP } from 'node:net';
import net from 'node:net';
import { syncBuiltinESMExports } from 'node:module';

const violations: string[] = [];

/** True for an address this machine keeps to itself. */
export function isLoopbackAddress(address: string): boolean {
  const v = isIP(address);
  if (v === 4) return address.startsWith('127.');
  if (v === 6) {
    const a = address.toLowerCase();
    return a === '::1' || a === '0:0:0:0:0:0:0:1' || /^::ffff:127\./.test(a);
  }
  return false;
}

/** Names the test process may look up: those /etc/hosts answers, and IP literals (no query is sent for them). */
function lookupAllowed(hostname: string): boolean {
  const h = hostname.replace(/^\[|\]$/g, '').toLowerCase();
  return h === 'localhost' || h === 'ip6-localhost' || isIP(h) !== 0;
}

function violation(what: string): Error {
  violations.push(what);
  return Object.assign(new Error(`loopback-only test guard: ${what}`), { code: 'ENOTFOUND' });
}

type LookupCallback = (err: NodeJS.ErrnoException | null, address?: string | dns.LookupAddress[], family?: number) => void;
type LookupFn = (hostname: string, options: unknown, callback: LookupCallback) => void;

/**
 * A lookup that checks what it resolves to. As dns.lookup (`queries`: it
 * would ask the name server) it refuses any name but localhost; a caller's
 * own lookup (a test's fake resolver) may answer any name.
 */
function guardedLookup(original: LookupFn, queries: boolean): LookupFn {
  return function lookup(this: unknown, hostname: string, options: unknown, callback?: LookupCallback) {
    const cb = (typeof options === 'function' ? options : callback) as LookupCallback;
    const opts = typeof options === 'function' ? {} : options;
    if (queries && !lookupAllowed(hostname)) {
      const err = violation(`name lookup of ${hostname}`);
      process.nextTick(() => cb(err));
      return;
    }
    original.call(this, hostname, opts, (err, address, family) => {
      if (err) return cb(err);
      const all = Array.isArray(address) ? address.map((a) => a.address) : [address as string];
      const outside = all.find((a) => !isLoopbackAddress(a));
      if (outside !== undefined) return cb(violation(`${hostname} resolved to ${outside}`));
      cb(null, address, family);
    });
  } as LookupFn;
}

interface ConnectOptions { host?: string; port?: number; path?: string | null; lookup?: LookupFn }

/** The options of a Socket#connect call in any of its forms (node passes net.connect's as one normalised array). */
function connectOptions(args: unknown[]): ConnectOptions {
  const first = Array.isArray(args[0]) ? args[0][0] : args[0];
  if (first !== null && typeof first === 'object') return first as ConnectOptions;
  if (typeof first === 'string' && Number.isNaN(Number(first))) return { path: first };
  return { host: typeof args[1] === 'string' ? args[1] : 'localhost' };
}

/**
 * Where a stopped connection goes instead: 127.0.0.1, port 1 (tcpmux, never
 * served here, and below the ephemeral range a test server's port 0 is
 * given from), so the caller sees an ordinary ECONNREFUSED on its usual path.
 */
const REFUSED = { host: '127.0.0.1', port: 1 };

/** `args` with their options replaced (in place for node's normalised array, whose marker only it can set). */
function redirected(args: unknown[], options: ConnectOptions): unknown[] {
  if (Array.isArray(args[0])) {
    args[0][0] = options;
    return args;
  }
  const callback = args.find((a) => typeof a === 'function');
  return callback ? [options, callback] : [options];
}

function installGuard(): void {
  const originalLookup = dns.lookup as unknown as LookupFn;
  const lookup = guardedLookup(originalLookup, true);
  (dns as unknown as { lookup: LookupFn }).lookup = lookup;
  const promisesLookup = dns.promises.lookup;
  dns.promises.lookup = (async (hostname: string, options?: dns.LookupOptions) => {
    if (!lookupAllowed(hostname)) throw violation(`name lookup of ${hostname}`);
    const r = await promisesLookup(hostname, options ?? {});
    const all = Array.isArray(r) ? r.map((a) => a.address) : [r.address];
    const outside = all.find((a) => !isLoopbackAddress(a));
    if (outside !== undefined) throw violation(`${hostname} resolved to ${outside}`);
    return r;
  }) as typeof dns.promises.lookup;
  // The resolver's own queries (dns.resolve*, Resolver) go to the configured name server, never loopback here.
  for (const target of [dns, dns.promises, dns.Resolver.prototype, dns.promises.Resolver.prototype] as unknown as Record<string, unknown>[]) {
    for (const name of Object.keys(target).concat(Object.getOwnPropertyNames(target))) {
      if (!/^resolve/.test(name) || typeof target[name] !== 'function') continue;
      target[name] = function refused(hostname: string, ...rest: unknown[]) {
        const err = violation(`DNS query (${name}) for ${hostname}`);
        const callback = rest.find((a) => typeof a === 'function') as ((e: Error) => void) | undefined;
        if (!callback) return Promise.reject(err);
        process.nextTick(() => callback(err));
      };
    }
  }
  syncBuiltinESMExports();

  const connect = net.Socket.prototype.connect as (...args: unknown[]) => net.Socket;
  net.Socket.prototype.connect = function guardedConnect(this: net.Socket, ...args: unknown[]) {
    const opts = connectOptions(args);
    const host = (opts.host ?? 'localhost').replace(/^\[|\]$/g, '');
    if (!opts.path && isIP(host) && !isLoopbackAddress(host)) {
      violation(`connection to ${host}`);
      return connect.apply(this, redirected(args, { ...opts, ...REFUSED }));
    }
    // A name is resolved by the caller's lookup (the outbound policy's, a test's fake) or by dns.lookup, both checked.
    if (!opts.path && opts.lookup && opts.lookup !== lookup) opts.lookup = guardedLookup(opts.lookup, false);
    return connect.apply(this, args);
  } as typeof net.Socket.prototype.connect;
}

installGuard();

/**
 * What happened since the last check fails the run, naming the test (a root
 * hook's failure ends the run: a test that leaves the machine is fixed
 * before anything else). With LOOPBACK_GUARD_REPORT=<file> every offender
 * is appended there instead and the run goes on, to survey a whole suite.
 */
function check(where: string): void {
  if (!violations.length) return;
  const seen = [...new Set(violations.splice(0))].join('; ');
  const report = process.env.LOOPBACK_GUARD_REPORT;
  if (report) appendFileSync(report, `${where}: ${seen}\n`);
  else throw new Error(`${where} sent traffic beyond loopback (or tried to): ${seen}`);
}

/** What was stopped since the last check, now forgotten: for the guard's own test. */
export function takeViolations(): string[] {
  return violations.splice(0);
}

type HookContext = { currentTest?: { fullTitle(): string } };

/** Mocha root hooks. */
export const mochaHooks = {
  afterEach(this: HookContext): void {
    check(`test "${this.currentTest?.fullTitle() ?? '?'}"`);
  },
  afterAll(): void {
    check('a hook of the last suite');
  },
};
