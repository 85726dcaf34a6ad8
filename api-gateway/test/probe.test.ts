// The live storage probe's answer for a backend it cannot reach: whether the
// port refused, never answered or the name did not resolve, the reason is
// `unreachable`, so POST /user/* and inline storage cannot be used to map
// which hosts and ports exist behind the gateway (issue 15, item 6). And
// where it may connect: the outbound-address policy on every address the
// endpoint's name resolves to when the socket opens, so a name that
// resolves to a refused address (DNS rebinding: it passed as a name) is
// refused before a byte is sent. Those tests resolve names with the
// policy's own resolver, to loopback or to an address the policy refuses,
// which is then never contacted.
import { createServer, type Server, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import { probeDestination } from '../src/destinations/probe.js';
import { OutboundPolicy, type Resolver } from '@mediajobs/lib/outbound';
import { probeBounds, probeFailure } from './support.js';

const s3 = (endpoint: string) => ({ provider: 's3', endpoint, bucket: 'b', region: 'us-east-1', access_key: 'a', secret_key: 's' });

describe('api-gateway: what a failed storage probe says', function () {
  this.timeout(20_000);
  let silent: Server;
  /** Listening, for the endpoints the policy refuses: no test connects to it on purpose. */
  let guard: Server;
  const held: Socket[] = [];
  let guarded = 0;
  /** Connections the silent server accepted, over the whole file. */
  const accepted = () => held.length;

  before(async () => {
    // Accepts connections and never answers.
    silent = createServer((socket) => void held.push(socket));
    guard = createServer((socket) => {
      guarded++;
      held.push(socket);
    });
    await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
    await new Promise<void>((r) => guard.listen(0, '127.0.0.1', r));
  });
  after(async () => {
    for (const s of held) s.destroy();
    await new Promise((r) => silent.close(r));
    await new Promise((r) => guard.close(r));
  });

  it('a refused port and a port that never answers: the same reason, unreachable', async () => {
    const refused = await probeFailure(probeDestination(s3('http://127.0.0.1:1'), probeBounds(2_000)));
    const { port } = silent.address() as AddressInfo;
    const hung = await probeFailure(probeDestination(s3(`http://127.0.0.1:${port}`), probeBounds(300)));
    expect([refused.reason, hung.reason]).to.deep.equal(['unreachable', 'unreachable']);
    expect(refused.message).to.equal(hung.message);
  });

  describe('the endpoint\'s resolved addresses pass the outbound policy as the socket opens', () => {
    const policyResolving = (address: string): OutboundPolicy => {
      const resolve: Resolver = async () => [{ address, family: address.includes(':') ? 6 : 4 }];
      return new OutboundPolicy({ allowed: ['127.0.0.0/8'], resolve });
    };

    it('a name that resolves to an allowed address is connected to (here, loopback, which then never answers)', async () => {
      const { port } = silent.address() as AddressInfo;
      const before = accepted();
      const err = await probeFailure(probeDestination(s3(`http://storage.allowed.test:${port}`), probeBounds(500, policyResolving('127.0.0.1'))));
      expect(err.reason).to.equal('unreachable');
      expect(accepted()).to.be.above(before);
    });

    const documents = {
      s3,
      oss: (endpoint: string) => ({ provider: 'oss', endpoint, bucket: 'media', region: 'cn-hangzhou', access_key_id: 'LTAI0000', access_key_secret: 's' }),
      blob: (endpoint: string) => ({ provider: 'blob', endpoint: `${endpoint}/acct0000`, account_name: 'acct0000', container: 'media', account_key: Buffer.alloc(64, 1).toString('base64') }),
    };
    for (const [provider, document] of Object.entries(documents)) {
      it(`${provider}: an IP literal the policy refuses (loopback, under the production default) is invalid_endpoint, and no connection is made`, async () => {
        const { port } = guard.address() as AddressInfo;
        const err = await probeFailure(probeDestination(document(`http://127.0.0.1:${port}`), probeBounds(2_000, new OutboundPolicy())));
        expect(err.reason).to.equal('invalid_endpoint');
        expect(guarded).to.equal(0);
      });
      it(`${provider}: a name that resolves to the cloud metadata address is invalid_endpoint, and no connection is made`, async () => {
        const { port } = guard.address() as AddressInfo;
        const err = await probeFailure(probeDestination(document(`http://storage.rebind.test:${port}`), probeBounds(2_000, policyResolving('169.254.169.254'))));
        expect(err.reason).to.equal('invalid_endpoint');
        expect(guarded).to.equal(0);
      });
    }
  });
});
