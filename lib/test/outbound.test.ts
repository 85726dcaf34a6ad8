// The outbound-address policy: which hosts the service contacts for a user,
// as literal URLs, as resolved addresses and at connect time. Pure decisions;
// the only traffic is to a server on 127.0.0.1 (connect-time hook) and
// resolution goes through an injected resolver.
import { createServer, get, Agent, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import { loadConfig, outboundSchema, ConfigError, withOutboundAllowance } from '../src/config.js';
import {
  DEFAULT_OUTBOUND_POLICY, OutboundPolicy, OutboundRefusedError, PRIVATE_NETWORKS, networkMatcher, parseAllowedNetworks, parseNetworks, urlFieldError,
  type Resolver,
} from '../src/outbound.js';

/** What each URL's host is, for the policy without an allowance. */
const REFUSED_URLS: [string, string][] = [
  // loopback, also as WHATWG writes other spellings of it
  ['http://127.0.0.1/video.mp4', 'loopback'],
  ['http://127.1.2.3/', 'loopback'],
  ['http://2130706433/', 'loopback'],
  ['http://0x7f.1/', 'loopback'],
  ['http://[::1]/', 'loopback'],
  // link-local: cloud instance metadata
  ['http://169.254.169.254/latest/meta-data/', 'link-local'],
  ['http://169.254.1.1/', 'link-local'],
  ['http://[fe80::1]/', 'link-local'],
  ['http://[febf:ffff::1]/', 'link-local'],
  // metadata addresses inside allowable ranges
  ['http://[fd00:ec2::254]/latest/meta-data/', 'metadata'],
  ['http://100.100.100.200/latest/meta-data/', 'metadata'],
  // unspecified ("this network")
  ['http://0.0.0.0/', 'unspecified'],
  ['http://0.1.2.3/', 'unspecified'],
  ['http://[::]/', 'unspecified'],
  // multicast, reserved, broadcast
  ['http://224.0.0.1/', 'multicast'],
  ['http://239.255.255.250:1900/', 'multicast'],
  ['http://[ff02::1]/', 'multicast'],
  ['http://240.0.0.1/', 'reserved'],
  ['http://255.255.255.255/', 'reserved'],
  // private ranges
  ['https://10.1.2.3/internal.mp4', 'private'],
  ['http://172.16.0.1/', 'private'],
  ['http://172.31.255.254/', 'private'],
  ['http://192.168.1.1/', 'private'],
  ['http://100.64.0.1/', 'private'],
  ['http://100.127.255.254/', 'private'],
  ['http://[fc00::1]/', 'private'],
  ['http://[fd12:3456::1]/', 'private'],
  ['http://[64:ff9b:1::a00:1]/', 'private'],
  // IPv4 inside IPv6: mapped, translated, NAT64, compatible
  ['http://[::ffff:127.0.0.1]/', 'loopback'],
  ['http://[::ffff:7f00:1]/', 'loopback'],
  ['http://[::ffff:a9fe:a9fe]/', 'link-local'],
  ['http://[::ffff:169.254.169.254]/', 'link-local'],
  ['http://[::ffff:0:7f00:1]/', 'loopback'],
  ['http://[64:ff9b::7f00:1]/', 'loopback'],
  ['http://[64:ff9b::169.254.169.254]/', 'link-local'],
  ['http://[64:ff9b::a00:1]/', 'private'],
  ['http://[::127.0.0.1]/', 'loopback'],
  ['http://[::ffff:10.0.0.1]/', 'private'],
  // names that are loopback by definition
  ['http://localhost:8080/', 'localhost-name'],
  ['http://LOCALHOST./', 'localhost-name'],
  ['http://api.localhost/', 'localhost-name'],
  ['http://localhost.localdomain/', 'localhost-name'],
  ['http://ip6-localhost/', 'localhost-name'],
];

/** Public-looking hosts (documentation ranges, names): contacted. */
const PASSING_URLS = [
  'https://192.0.2.10/clip.mp4',
  'http://198.51.100.7:8080/v.mp4',
  'https://203.0.113.5/',
  'http://[2001:db8::1]/v.mp4',
  'http://[::ffff:198.51.100.7]/',
  'http://[64:ff9b::c633:6407]/', // NAT64 of 198.51.100.7
  'http://172.32.0.1/', // just past 172.16.0.0/12
  'http://100.128.0.1/', // just past 100.64.0.0/10
  'http://169.255.0.1/',
  'https://media.example/path/clip.mp4',
  'https://notlocalhost.example/',
  'https://localhost.example/',
];

const fixedResolver = (answers: Record<string, string[]>): Resolver => async (hostname) => {
  const addresses = answers[hostname];
  if (!addresses) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' });
  return addresses.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
};

describe('outbound-address policy', () => {
  describe('literal hosts, no allowance (production default)', () => {
    for (const [url, category] of REFUSED_URLS) {
      it(`refuses ${url} (${category})`, () => {
        const d = DEFAULT_OUTBOUND_POLICY.checkUrl(url);
        expect(d.ok, url).to.equal(false);
        expect(d.ok ? undefined : d.category).to.equal(category);
      });
    }
    for (const url of PASSING_URLS) {
      it(`contacts ${url}`, () => {
        expect(DEFAULT_OUTBOUND_POLICY.checkUrl(url)).to.deep.equal({ ok: true });
      });
    }
    it('a URL without a host contacts nothing; an unparsable one is refused', () => {
      expect(DEFAULT_OUTBOUND_POLICY.checkUrl('ytsearch:cats')).to.deep.equal({ ok: true });
      expect(DEFAULT_OUTBOUND_POLICY.checkUrl('not a url')).to.deep.equal({ ok: false, category: 'invalid' });
    });
    it('gives the field\'s 400 message, one wording for every category', () => {
      expect(urlFieldError(DEFAULT_OUTBOUND_POLICY, 'url', 'http://10.0.0.1/')).to.equal("Invalid field 'url': local and link-local addresses are not allowed");
      expect(urlFieldError(DEFAULT_OUTBOUND_POLICY, 'webhook_url', 'http://[::1]/hook')).to.equal("Invalid field 'webhook_url': local and link-local addresses are not allowed");
      expect(urlFieldError(DEFAULT_OUTBOUND_POLICY, 'url', 'https://198.51.100.7/')).to.equal(undefined);
    });
  });

  describe('resolved addresses', () => {
    const cases: [string, OutboundPolicy, boolean, string?][] = [
      ['127.0.0.1', DEFAULT_OUTBOUND_POLICY, false, 'loopback'],
      ['::ffff:127.0.0.1', DEFAULT_OUTBOUND_POLICY, false, 'loopback'],
      ['fe80::1%eth0', DEFAULT_OUTBOUND_POLICY, false, 'link-local'],
      ['64:ff9b::a9fe:a9fe', DEFAULT_OUTBOUND_POLICY, false, 'link-local'],
      ['10.0.0.5', DEFAULT_OUTBOUND_POLICY, false, 'private'],
      ['198.51.100.7', DEFAULT_OUTBOUND_POLICY, true],
      ['2001:db8::7', DEFAULT_OUTBOUND_POLICY, true],
      ['media.example', DEFAULT_OUTBOUND_POLICY, false, 'invalid'],
    ];
    for (const [address, policy, ok, category] of cases) {
      it(`${address} → ${ok ? 'contacted' : category}`, () => {
        const d = policy.checkAddress(address);
        expect(d.ok ? true : d.category).to.equal(ok ? true : category);
      });
    }
    it('a name passes only if every address it resolves to does', async () => {
      const policy = new OutboundPolicy({
        resolve: fixedResolver({
          'media.example': ['198.51.100.7', '2001:db8::7'],
          'rebind.example': ['198.51.100.7', '127.0.0.1'],
          'metadata.example': ['169.254.169.254'],
          'v6only.example': ['fd00::1'],
        }),
      });
      expect(await policy.checkResolved('media.example')).to.deep.equal({ ok: true });
      expect(await policy.checkResolved('rebind.example')).to.deep.equal({ ok: false, category: 'loopback', address: '127.0.0.1' });
      expect(await policy.checkResolved('metadata.example')).to.deep.equal({ ok: false, category: 'link-local', address: '169.254.169.254' });
      expect(await policy.checkResolved('v6only.example')).to.deep.equal({ ok: false, category: 'private', address: 'fd00::1' });
      expect(await policy.checkResolved('[::1]')).to.deep.equal({ ok: false, category: 'loopback', address: '::1' });
      expect(await policy.checkResolved('localhost')).to.deep.equal({ ok: false, category: 'localhost-name' });
    });
    it('resolves with the system resolver by default (localhost is loopback)', async () => {
      const allowed = new OutboundPolicy({ allowed: ['127.0.0.0/8', '::1/128'] });
      expect(await allowed.checkResolved('localhost')).to.deep.equal({ ok: true });
    });
    it('leaves resolution errors to the caller', async () => {
      const policy = new OutboundPolicy({ resolve: fixedResolver({}) });
      let error: unknown;
      await policy.checkResolved('nowhere.example').catch((e: unknown) => (error = e));
      expect((error as { code?: string }).code).to.equal('ENOTFOUND');
    });
  });

  describe('the allowance (OUTBOUND_ALLOWED_CIDRS)', () => {
    const emulators = new OutboundPolicy({ allowed: ['127.0.0.0/8', '::1/128'] });
    const cases: [string, OutboundPolicy, boolean][] = [
      ['http://127.0.0.1:4569/', emulators, true],
      ['http://[::1]:10000/', emulators, true],
      ['http://[::ffff:127.0.0.1]/', emulators, true],
      ['http://[64:ff9b::7f00:1]/', emulators, true],
      ['http://localhost:4569/', emulators, true],
      ['http://10.0.0.1/', emulators, false],
      ['http://169.254.169.254/', emulators, false],
      // localhost stands for both loopback addresses: one of them is not enough
      ['http://localhost/', new OutboundPolicy({ allowed: ['127.0.0.0/8'] }), false],
      ['http://10.20.30.40/', new OutboundPolicy({ allowed: ['10.20.0.0/16'] }), true],
      ['http://10.21.0.1/', new OutboundPolicy({ allowed: ['10.20.0.0/16'] }), false],
      ['http://[fd00:1::5]/', new OutboundPolicy({ allowed: ['fd00:1::/64'] }), true],
      ['http://192.168.0.9/', new OutboundPolicy({ allowed: ['192.168.0.9'] }), true],
      // everything allowed: still never link-local or a metadata address, in any spelling
      ['http://192.168.0.9/', new OutboundPolicy({ allowed: ['0.0.0.0/0', '::/0'] }), true],
      ['http://169.254.169.254/', new OutboundPolicy({ allowed: ['0.0.0.0/0', '::/0'] }), false],
      ['http://[::ffff:a9fe:a9fe]/', new OutboundPolicy({ allowed: ['0.0.0.0/0', '::/0'] }), false],
      ['http://[64:ff9b::a9fe:a9fe]/', new OutboundPolicy({ allowed: ['0.0.0.0/0', '::/0', '64:ff9b::/96'] }), false],
      ['http://[fe80::1]/', new OutboundPolicy({ allowed: ['0.0.0.0/0', '::/0'] }), false],
      ['http://[fd00:ec2::254]/', new OutboundPolicy({ allowed: ['fc00::/7'] }), false],
      ['http://100.100.100.200/', new OutboundPolicy({ allowed: ['100.64.0.0/10'] }), false],
    ];
    for (const [url, policy, ok] of cases) {
      it(`${url} ${ok ? 'contacted' : 'refused'}`, () => {
        expect(policy.checkUrl(url).ok).to.equal(ok);
      });
    }

    it('is read from the environment, comma-separated, empty by default', () => {
      expect(loadConfig(outboundSchema, {})).to.deep.equal({ OUTBOUND_ALLOWED_CIDRS: [], OUTBOUND_ALLOW_PRIVATE: false });
      expect(loadConfig(outboundSchema, { OUTBOUND_ALLOWED_CIDRS: ' 127.0.0.0/8, ::1/128 ,,10.0.0.7' }))
        .to.deep.equal({ OUTBOUND_ALLOWED_CIDRS: ['127.0.0.0/8', '::1/128', '10.0.0.7/32'], OUTBOUND_ALLOW_PRIVATE: false });
    });
    const badValues: [string, RegExp][] = [
      ['127.0.0.0/33', /OUTBOUND_ALLOWED_CIDRS: entry 1 is not an IPv4 or IPv6 network/],
      ['127.0.0.0/8,not-a-network', /OUTBOUND_ALLOWED_CIDRS: entry 2 is not an IPv4 or IPv6 network/],
      ['10.0.0.0/8/1', /entry 1 is not/],
      ['::1/-1', /entry 1 is not/],
      ['169.254.0.0/16', /OUTBOUND_ALLOWED_CIDRS: entry 1 is link-local or a cloud metadata address, which can never be allowed/],
      ['127.0.0.0/8,169.254.169.254', /entry 2 is link-local/],
      ['fe80::/64', /entry 1 is link-local/],
      ['::ffff:169.254.0.0/112', /entry 1 is link-local/],
      ['100.100.100.200/32', /entry 1 is link-local or a cloud metadata address/],
    ];
    for (const [value, message] of badValues) {
      it(`stops the start on ${value}, naming the entry but not echoing it`, () => {
        let error: unknown;
        try {
          loadConfig(outboundSchema, { OUTBOUND_ALLOWED_CIDRS: value });
        } catch (e) {
          error = e;
        }
        expect(error).to.be.instanceOf(ConfigError);
        expect((error as Error).message).to.match(message);
        if (value.length > 6) expect((error as Error).message).not.to.include(value);
      });
    }
    it('accepts networks that only contain link-local (which stays refused)', () => {
      expect(parseAllowedNetworks('0.0.0.0/0,::/0,169.0.0.0/8')).to.deep.equal({ ok: true, networks: ['0.0.0.0/0', '::/0', '169.0.0.0/8'] });
      expect(() => new OutboundPolicy({ allowed: ['169.254.169.254/32'] })).to.throw(/can never be allowed/);
    });
  });

  describe('parseNetworks and networkMatcher (lists of the service\'s own peers: the gateway\'s trusted proxies)', () => {
    it('parses networks without the outbound refusals: link-local is a network like any other here', () => {
      expect(parseNetworks(' 10.42.0.0/16 ,FD00::/8,169.254.1.1')).to.deep.equal({ ok: true, networks: ['10.42.0.0/16', 'fd00::/8', '169.254.1.1/32'] });
      expect(parseNetworks('10.0.0.0/8,proxy.internal')).to.deep.equal({ ok: false, error: 'entry 2 is not an IPv4 or IPv6 network (address/prefix)' });
    });

    it('matches an address in a network, a dual-stack socket\'s mapped IPv4 peer too, and nothing unparsable', () => {
      const trusted = networkMatcher(['10.42.0.0/16', 'fd00:42::/64', '127.0.0.2/32']);
      for (const yes of ['10.42.3.4', '::ffff:10.42.3.4', 'fd00:42::7', '[fd00:42::7]', '127.0.0.2']) expect(trusted(yes), yes).to.equal(true);
      for (const no of ['10.43.0.1', '127.0.0.1', '::ffff:127.0.0.1', 'fd00:43::1', '', 'proxy.internal']) expect(trusted(no), no).to.equal(false);
      expect(networkMatcher([])('10.42.3.4')).to.equal(false);
    });
  });

  describe('OUTBOUND_ALLOW_PRIVATE, on resolved addresses', () => {
    /** The policy a service builds from this environment (its loader joins the two settings); media.example resolves to `address`. */
    const policyOf = (env: Record<string, string>, address = '198.51.100.7') => new OutboundPolicy({
      allowed: withOutboundAllowance(loadConfig(outboundSchema, env)).OUTBOUND_ALLOWED_CIDRS,
      resolve: fixedResolver({ 'media.example': [address] }),
    });
    const PRIVATE = { OUTBOUND_ALLOW_PRIVATE: 'true' };
    // [resolved address, environment, true (contacted) or the category refused]
    const cases: [string, Record<string, string>, true | string][] = [
      // off (the production default): loopback and private refused
      ['127.0.0.1', {}, 'loopback'],
      ['10.0.0.5', {}, 'private'],
      ['fd12:3456::1', { OUTBOUND_ALLOW_PRIVATE: 'false' }, 'private'],
      // on: loopback, RFC 1918, carrier-grade NAT and unique local, in any spelling
      ['127.0.0.1', PRIVATE, true],
      ['127.5.6.7', PRIVATE, true],
      ['::1', PRIVATE, true],
      ['10.0.0.5', PRIVATE, true],
      ['172.16.0.1', PRIVATE, true],
      ['172.31.255.254', PRIVATE, true],
      ['192.168.1.1', PRIVATE, true],
      ['100.64.0.1', PRIVATE, true],
      ['100.127.255.254', PRIVATE, true],
      ['fc00::1', PRIVATE, true],
      ['fd12:3456::1', PRIVATE, true],
      ['::ffff:10.0.0.5', PRIVATE, true],
      ['64:ff9b::a00:5', PRIVATE, true],
      ['198.51.100.7', PRIVATE, true],
      // on: link-local and metadata refused always, whatever the spelling
      ['169.254.169.254', PRIVATE, 'link-local'],
      ['fe80::1', PRIVATE, 'link-local'],
      ['::ffff:169.254.169.254', PRIVATE, 'link-local'],
      ['64:ff9b::a9fe:a9fe', PRIVATE, 'link-local'],
      ['fd00:ec2::254', PRIVATE, 'metadata'],
      ['100.100.100.200', PRIVATE, 'metadata'],
      // on: what is neither loopback nor private stays refused
      ['0.0.0.0', PRIVATE, 'unspecified'],
      ['224.0.0.1', PRIVATE, 'multicast'],
      ['240.0.0.1', PRIVATE, 'reserved'],
      ['fec0::1', PRIVATE, 'private'],
      ['64:ff9b:1::a00:5', PRIVATE, 'private'],
      ['172.32.0.1', PRIVATE, true],
      // combined with OUTBOUND_ALLOWED_CIDRS: each opens its own
      ['10.20.0.5', { OUTBOUND_ALLOWED_CIDRS: '10.20.0.0/16' }, true],
      ['10.21.0.5', { OUTBOUND_ALLOWED_CIDRS: '10.20.0.0/16' }, 'private'],
      ['fec0::1', { ...PRIVATE, OUTBOUND_ALLOWED_CIDRS: 'fec0::/10' }, true],
      ['192.168.1.1', { ...PRIVATE, OUTBOUND_ALLOWED_CIDRS: 'fec0::/10' }, true],
    ];
    for (const [address, env, expected] of cases) {
      it(`${address} with ${JSON.stringify(env)} → ${expected === true ? 'contacted' : expected}`, async () => {
        const d = await policyOf(env, address).checkResolved('media.example');
        expect(d.ok ? true : d.category).to.equal(expected);
      });
    }
    it('lets a localhost name through, as both loopback addresses are open', () => {
      expect(policyOf(PRIVATE).checkUrl('http://localhost:4569/')).to.deep.equal({ ok: true });
      expect(policyOf({}).checkUrl('http://localhost:4569/')).to.deep.include({ ok: false });
    });
    it('is a boolean, false by default, joined with the listed networks without repeats', () => {
      expect(withOutboundAllowance(loadConfig(outboundSchema, { OUTBOUND_ALLOW_PRIVATE: 'true', OUTBOUND_ALLOWED_CIDRS: '10.0.0.0/8,203.0.113.0/24' })))
        .to.deep.equal({ OUTBOUND_ALLOW_PRIVATE: true, OUTBOUND_ALLOWED_CIDRS: ['10.0.0.0/8', '203.0.113.0/24', ...PRIVATE_NETWORKS.filter((n) => n !== '10.0.0.0/8')] });
      expect(withOutboundAllowance(loadConfig(outboundSchema, { OUTBOUND_ALLOWED_CIDRS: '10.0.0.0/8' })))
        .to.deep.equal({ OUTBOUND_ALLOW_PRIVATE: false, OUTBOUND_ALLOWED_CIDRS: ['10.0.0.0/8'] });
      let error: unknown;
      try {
        loadConfig(outboundSchema, { OUTBOUND_ALLOW_PRIVATE: 'sometimes' });
      } catch (e) {
        error = e;
      }
      expect(error).to.be.instanceOf(ConfigError);
      expect((error as Error).message).to.match(/OUTBOUND_ALLOW_PRIVATE/).and.not.include('sometimes');
    });
  });

  describe('connect-time lookup (http.Agent)', () => {
    let server: Server;
    let port: number;
    before(async () => {
      server = createServer((_req, res) => res.end('reached'));
      await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
      port = (server.address() as AddressInfo).port;
    });
    after(() => new Promise<void>((r) => server.close(() => r())));

    const fetchVia = (policy: OutboundPolicy, host: string) => new Promise<string>((resolve, reject) => {
      const agent = new Agent({ lookup: policy.connectLookup() });
      get({ host, port, path: '/', agent }, (res) => {
        let body = '';
        res.on('data', (c: Buffer) => (body += c.toString()));
        res.on('end', () => resolve(body));
      }).on('error', reject).on('close', () => agent.destroy());
    });

    it('refuses before connecting when the name resolves to a refused address', async () => {
      // A name that passed an earlier check and now answers with loopback (DNS rebinding).
      const policy = new OutboundPolicy({ resolve: fixedResolver({ 'media.example': ['127.0.0.1'] }) });
      let error: unknown;
      await fetchVia(policy, 'media.example').catch((e: unknown) => (error = e));
      expect(error).to.be.instanceOf(OutboundRefusedError);
      expect(error).to.include({ code: 'ERR_OUTBOUND_REFUSED', category: 'loopback' });
    });
    it('refuses a localhost name without an allowance', async () => {
      let error: unknown;
      await fetchVia(new OutboundPolicy(), 'localhost').catch((e: unknown) => (error = e));
      expect(error).to.include({ category: 'localhost-name' });
    });
    it('connects where the allowance opens the address', async () => {
      const policy = new OutboundPolicy({ allowed: ['127.0.0.0/8'], resolve: fixedResolver({ 'media.example': ['127.0.0.1'] }) });
      expect(await fetchVia(policy, 'media.example')).to.equal('reached');
    });
  });
});
