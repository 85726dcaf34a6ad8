// The one outbound-address policy: whether the service may contact a host
// on a user's behalf (a /metadata URL, a storage endpoint, a job's source
// URL, later webhook URLs). Callers ask it; none keeps its own list. It
// decides on literal hosts (checkUrl, checkHost), on addresses a name
// resolved to (checkAddress, checkResolved), and at connect time for
// sockets the service opens itself (connectLookup). Why a BlockList, what is
// refused and what OUTBOUND_ALLOWED_CIDRS and OUTBOUND_ALLOW_PRIVATE can
// open: docs/adr/0011.
import { promises as dns } from 'node:dns';
import { BlockList, isIP, type LookupFunction } from 'node:net';

export type RefusedCategory =
  | 'link-local' | 'metadata' | 'loopback' | 'unspecified' | 'multicast' | 'reserved' | 'private' | 'localhost-name' | 'invalid';

export type OutboundDecision = { ok: true } | { ok: false; category: RefusedCategory; address?: string };

type Family = 'ipv4' | 'ipv6';
type Range = readonly [RefusedCategory, Family, string, number];

/**
 * Never contacted, whatever the allowance says: where cloud instance
 * metadata and its credentials answer. All of link-local (169.254.169.254 on
 * AWS, GCP, Azure, ...) plus the metadata addresses that sit in ranges an
 * operator may allow: AWS's IPv6 one in fc00::/7, Alibaba's in 100.64.0.0/10.
 */
const NEVER: readonly Range[] = [
  ['link-local', 'ipv4', '169.254.0.0', 16],
  ['link-local', 'ipv6', 'fe80::', 10],
  ['metadata', 'ipv6', 'fd00:ec2::254', 128],
  ['metadata', 'ipv4', '100.100.100.200', 32],
];

/** Refused unless allowed; the first match names the category (for logs). */
const REFUSED: readonly Range[] = [
  ['loopback', 'ipv4', '127.0.0.0', 8],
  ['loopback', 'ipv6', '::1', 128],
  // "This network": Linux connects 0.0.0.0 (and ::) to the local host.
  ['unspecified', 'ipv4', '0.0.0.0', 8],
  ['unspecified', 'ipv6', '::', 128],
  ['multicast', 'ipv4', '224.0.0.0', 4],
  ['multicast', 'ipv6', 'ff00::', 8],
  // Class E and the limited broadcast address 255.255.255.255.
  ['reserved', 'ipv4', '240.0.0.0', 4],
  ['private', 'ipv4', '10.0.0.0', 8],
  ['private', 'ipv4', '172.16.0.0', 12],
  ['private', 'ipv4', '192.168.0.0', 16],
  ['private', 'ipv4', '100.64.0.0', 10], // carrier-grade NAT (RFC 6598)
  ['private', 'ipv6', 'fc00::', 7], // unique local
  ['private', 'ipv6', 'fec0::', 10], // deprecated site-local
  ['private', 'ipv6', '64:ff9b:1::', 48], // local-use NAT64 (RFC 8215): the IPv4 inside is not at a fixed place
];

/**
 * What OUTBOUND_ALLOW_PRIVATE opens: loopback and the private ranges a
 * deployment's own services sit in (RFC 1918, carrier-grade NAT, unique
 * local). Not the deprecated site-local fec0::/10, nor local-use NAT64
 * 64:ff9b:1::/48: the IPv4 address inside it is not at a fixed place, so
 * it could stand for a metadata address. The metadata addresses inside
 * these ranges stay refused (NEVER is checked first).
 */
export const PRIVATE_NETWORKS: readonly string[] = [
  '127.0.0.0/8', '::1/128', '10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16', '100.64.0.0/10', 'fc00::/7',
];

function blockList(ranges: readonly Range[]): BlockList {
  const list = new BlockList();
  for (const [, family, address, prefix] of ranges) list.addSubnet(address, prefix, family);
  return list;
}

/** One BlockList per category, in the table's order. */
function byCategory(ranges: readonly Range[]): { category: RefusedCategory; list: BlockList }[] {
  return [...new Set(ranges.map(([c]) => c))].map((category) => ({ category, list: blockList(ranges.filter(([c]) => c === category)) }));
}

const NEVER_CATEGORIES = byCategory(NEVER);
const CATEGORIES = byCategory(REFUSED);

/** Whether the network `address/prefix` lies wholly inside NEVER (an allowance that could never be honoured). */
function insideNever(address: string, prefix: number, family: Family): boolean {
  return NEVER.some((range) => {
    // An IPv6 network of mapped addresses (::ffff:a.b.c.d/n) is the IPv4 network of prefix n - 96.
    const comparable = family === 'ipv6' && range[1] === 'ipv4' ? prefix - 96 : prefix;
    return comparable >= range[3] && blockList([range]).check(address, family);
  });
}

/** Names every resolver answers with loopback (RFC 6761 for `.localhost`; Debian's /etc/hosts for the ip6- ones). */
const LOCALHOST_NAME = /^(?:localhost|localhost\.localdomain|ip6-localhost|ip6-loopback|.+\.localhost)$/;

/** Strip a zone (`fe80::1%eth0`, as dns.lookup may answer) and brackets. */
function bare(address: string): string {
  const unbracketed = address.startsWith('[') && address.endsWith(']') ? address.slice(1, -1) : address;
  const zone = unbracketed.indexOf('%');
  return (zone === -1 ? unbracketed : unbracketed.slice(0, zone)).toLowerCase();
}

/** The eight 16-bit words of a valid IPv6 address. */
function ipv6Words(address: string): number[] {
  // A trailing dotted quad (::ffff:127.0.0.1) is the last two words.
  const hex = address.replace(/(\d+)\.(\d+)\.(\d+)\.(\d+)$/, (_m, a: string, b: string, c: string, d: string) =>
    `${((Number(a) << 8) | Number(b)).toString(16)}:${((Number(c) << 8) | Number(d)).toString(16)}`);
  const [head = '', tail] = hex.split('::');
  const words = (s: string) => (s ? s.split(':').map((w) => parseInt(w, 16)) : []);
  const front = words(head);
  const back = tail === undefined ? [] : words(tail);
  return [...front, ...new Array<number>(8 - front.length - back.length).fill(0), ...back];
}

/**
 * The IPv4 address an IPv6 address stands for, where the IPv6 packet ends up
 * at that IPv4 address: mapped (::ffff:a.b.c.d), translated
 * (::ffff:0:a.b.c.d), NAT64's well-known prefix (64:ff9b::a.b.c.d) and the
 * deprecated compatible form (::a.b.c.d, but not :: or ::1).
 */
function embeddedIpv4(address: string): string | undefined {
  const w = ipv6Words(address);
  const zero = (from: number, to: number) => w.slice(from, to).every((x) => x === 0);
  const mapped = zero(0, 5) && w[5] === 0xffff;
  const translated = zero(0, 4) && w[4] === 0xffff && w[5] === 0;
  const nat64 = w[0] === 0x64 && w[1] === 0xff9b && zero(2, 6);
  const compatible = zero(0, 6) && !(w[6] === 0 && w[7]! <= 1);
  if (!mapped && !translated && !nat64 && !compatible) return undefined;
  return [w[6]! >> 8, w[6]! & 0xff, w[7]! >> 8, w[7]! & 0xff].join('.');
}

function familyOf(address: string): Family | undefined {
  const v = isIP(address);
  return v === 4 ? 'ipv4' : v === 6 ? 'ipv6' : undefined;
}

/** Addresses a name resolves to, as dns.lookup answers with `all: true`. */
export type Resolver = (hostname: string) => Promise<{ address: string; family: number }[]>;

const systemResolver: Resolver = (hostname) => dns.lookup(hostname, { all: true, verbatim: true });

export type AllowedNetworksResult = { ok: true; networks: string[] } | { ok: false; error: string };

/**
 * Comma-separated networks (`127.0.0.0/8`, `::1/128`, a bare address is one
 * host), as OUTBOUND_ALLOWED_CIDRS and the gateway's TRUSTED_PROXY_CIDRS
 * write them, each as `address/prefix`. Messages name the entry by
 * position, never echo it.
 */
export function parseNetworks(text: string): AllowedNetworksResult {
  const networks: string[] = [];
  const entries = text.split(',').map((e) => e.trim()).filter(Boolean);
  for (const [i, entry] of entries.entries()) {
    const [address = '', prefixText, extra] = entry.split('/');
    const family = familyOf(address);
    const max = family === 'ipv4' ? 32 : 128;
    const prefix = prefixText === undefined ? max : /^\d{1,3}$/.test(prefixText) ? Number(prefixText) : NaN;
    if (!family || extra !== undefined || !(prefix >= 0 && prefix <= max)) {
      return { ok: false, error: `entry ${i + 1} is not an IPv4 or IPv6 network (address/prefix)` };
    }
    networks.push(`${address.toLowerCase()}/${prefix}`);
  }
  return { ok: true, networks };
}

/**
 * OUTBOUND_ALLOWED_CIDRS: the networks of parseNetworks; one inside
 * link-local is an error: it would never be honoured.
 */
export function parseAllowedNetworks(text: string): AllowedNetworksResult {
  const parsed = parseNetworks(text);
  if (!parsed.ok) return parsed;
  for (const [i, network] of parsed.networks.entries()) {
    const [address, prefix] = network.split('/') as [string, string];
    if (insideNever(address, Number(prefix), familyOf(address)!)) {
      return { ok: false, error: `entry ${i + 1} is link-local or a cloud metadata address, which can never be allowed` };
    }
  }
  return parsed;
}

/**
 * Whether an address is in one of `networks` (parseNetworks' form): for
 * lists of the service's own peers, such as the proxies the gateway trusts.
 * A dual-stack socket's IPv4 peer (::ffff:10.0.0.5) matches its IPv4
 * network; an unparsable address matches nothing.
 */
export function networkMatcher(networks: readonly string[]): (address: string) => boolean {
  const list = new BlockList();
  for (const network of networks) {
    const [address, prefix] = network.split('/') as [string, string];
    list.addSubnet(address, Number(prefix), familyOf(address)!);
  }
  return (ip) => {
    const address = bare(ip);
    const family = familyOf(address);
    return family !== undefined && list.check(address, family);
  };
}

export class OutboundRefusedError extends Error {
  readonly code = 'ERR_OUTBOUND_REFUSED';
  constructor(readonly category: RefusedCategory) {
    super(`outbound address refused: ${category}`);
    this.name = 'OutboundRefusedError';
  }
}

export interface OutboundPolicyOptions {
  /**
   * Networks contacted although refused by default: a service's
   * OUTBOUND_ALLOWED_CIDRS, which its config loader has joined with
   * PRIVATE_NETWORKS under OUTBOUND_ALLOW_PRIVATE. Link-local stays refused.
   */
  allowed?: readonly string[];
  /** For checkResolved and connectLookup; default dns.lookup (the system resolver, /etc/hosts included). */
  resolve?: Resolver;
}

export class OutboundPolicy {
  private readonly allowed = new BlockList();
  private readonly resolve: Resolver;

  /** Throws on a network parseAllowedNetworks refuses (the config loader reports those first). */
  constructor(options: OutboundPolicyOptions = {}) {
    const parsed = parseAllowedNetworks((options.allowed ?? []).join(','));
    if (!parsed.ok) throw new Error(`allowed networks: ${parsed.error}`);
    for (const network of parsed.networks) {
      const [address, prefix] = network.split('/') as [string, string];
      this.allowed.addSubnet(address, Number(prefix), familyOf(address)!);
    }
    this.resolve = options.resolve ?? systemResolver;
  }

  /** An IP address (a literal host, or what a name resolved to). */
  checkAddress(ip: string): OutboundDecision {
    const address = bare(ip);
    const family = familyOf(address);
    if (!family) return { ok: false, category: 'invalid' };
    // Decide on where the packet ends up: ::ffff:127.0.0.1 is 127.0.0.1.
    const v4 = family === 'ipv6' ? embeddedIpv4(address) : undefined;
    const [target, targetFamily]: [string, Family] = v4 ? [v4, 'ipv4'] : [address, family];
    const never = NEVER_CATEGORIES.find((c) => c.list.check(target, targetFamily));
    if (never) return { ok: false, category: never.category, address };
    if (this.allowed.check(target, targetFamily) || (v4 && this.allowed.check(address, 'ipv6'))) return { ok: true };
    const refused = CATEGORIES.find((c) => c.list.check(target, targetFamily));
    return refused ? { ok: false, category: refused.category, address } : { ok: true };
  }

  /**
   * A URL's host as written (WHATWG already turned 0x7f.1 and 2130706433 into
   * 127.0.0.1). A name other than localhost passes: only its resolved
   * addresses can tell (checkResolved, connectLookup). A URL without a host
   * contacts nothing; an unparsable one is refused.
   */
  checkUrl(url: string | URL): OutboundDecision {
    let parsed: URL;
    try {
      parsed = typeof url === 'string' ? new URL(url) : url;
    } catch {
      return { ok: false, category: 'invalid' };
    }
    return parsed.hostname ? this.checkHost(parsed.hostname) : { ok: true };
  }

  /** A host name or IP literal, as URL.hostname gives it (IPv6 in brackets or not). */
  checkHost(hostname: string): OutboundDecision {
    const host = bare(hostname).replace(/\.$/, '');
    if (familyOf(host)) return this.checkAddress(host);
    if (LOCALHOST_NAME.test(host)) {
      // A localhost name is loopback in both families; it passes only where both are allowed.
      return this.checkAddress('127.0.0.1').ok && this.checkAddress('::1').ok ? { ok: true } : { ok: false, category: 'localhost-name' };
    }
    return { ok: true };
  }

  /**
   * The host and every address it resolves to now: for a caller that opens
   * the connection later itself. The answer can change before it connects
   * (DNS rebinding); a socket the service opens should use connectLookup.
   * Resolution errors are the caller's, as on connect.
   */
  async checkResolved(hostname: string): Promise<OutboundDecision> {
    const literal = this.checkHost(hostname);
    const host = bare(hostname);
    if (!literal.ok || familyOf(host)) return literal;
    for (const { address } of await this.resolve(host)) {
      const decision = this.checkAddress(address);
      if (!decision.ok) return decision;
    }
    return { ok: true };
  }

  /**
   * A `lookup` for http(s).Agent or net.connect that resolves, checks every
   * address and fails the connection with OutboundRefusedError before any
   * byte is sent: the addresses checked are the ones connected to, so a
   * name that changes its answer after an earlier check gains nothing.
   * Node skips lookup for IP literals: check those with checkUrl.
   */
  connectLookup(): LookupFunction {
    return (hostname, options, callback) => {
      const wanted = options.family === 4 || options.family === 'IPv4' ? 4 : options.family === 6 || options.family === 'IPv6' ? 6 : 0;
      const done = callback as (err: NodeJS.ErrnoException | null, address: string | { address: string; family: number }[], family?: number) => void;
      this.resolve(hostname).then((all) => {
        const addresses = wanted ? all.filter((a) => a.family === wanted) : all;
        const name = this.checkHost(hostname);
        const refused = name.ok ? addresses.map((a) => this.checkAddress(a.address)).find((d) => !d.ok) : name;
        if (refused && !refused.ok) return done(new OutboundRefusedError(refused.category), '', 0);
        if (!addresses.length) return done(Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' }), '', 0);
        if (options.all) return done(null, addresses);
        done(null, addresses[0]!.address, addresses[0]!.family);
      }, (err: NodeJS.ErrnoException) => done(err, '', 0));
    };
  }
}

/** No allowance: what production contacts for users unless OUTBOUND_ALLOWED_CIDRS or OUTBOUND_ALLOW_PRIVATE says more. */
export const DEFAULT_OUTBOUND_POLICY = new OutboundPolicy();

/**
 * The 400 message for a URL field the service may not contact for a user
 * (POST /jobs `url` and `webhook_url`, /metadata `url`, the chat address);
 * undefined when it may be contacted. User info (`user:pass@`) is refused:
 * it would be stored, logged and echoed with the URL. For the address, one
 * wording for every category: a client learns that the address is not
 * reachable for it, not which of our ranges it hit.
 */
export function urlFieldError(policy: OutboundPolicy, field: string, url: string | URL): string | undefined {
  const parsed = typeof url === 'string' && URL.canParse(url) ? new URL(url) : url;
  if (parsed instanceof URL && (parsed.username || parsed.password)) return `Invalid field '${field}': must not contain user credentials`;
  return policy.checkUrl(parsed).ok ? undefined : `Invalid field '${field}': local and link-local addresses are not allowed`;
}
