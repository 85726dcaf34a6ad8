// The live storage probe's answer for a backend it cannot reach: whether the
// port refused, never answered or the name did not resolve, the reason is
// `unreachable`, so POST /user/* and inline storage cannot be used to map
// which hosts and ports exist behind the gateway (issue 15, item 6).
import { createServer, type Server, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import { probeDestination } from '../src/destinations/probe.js';
import { probeFailure } from './support.js';

const s3 = (endpoint: string) => ({ provider: 's3', endpoint, bucket: 'b', region: 'us-east-1', access_key: 'a', secret_key: 's' });

describe('api-gateway: what a failed storage probe says', function () {
  this.timeout(20_000);
  let silent: Server;
  const held: Socket[] = [];

  before(async () => {
    // Accepts connections and never answers.
    silent = createServer((socket) => void held.push(socket));
    await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
  });
  after(async () => {
    for (const s of held) s.destroy();
    await new Promise((r) => silent.close(r));
  });

  it('a refused port and a port that never answers: the same reason, unreachable', async () => {
    const refused = await probeFailure(probeDestination(s3('http://127.0.0.1:1'), 2_000));
    const { port } = silent.address() as AddressInfo;
    const hung = await probeFailure(probeDestination(s3(`http://127.0.0.1:${port}`), 300));
    expect([refused.reason, hung.reason]).to.deep.equal(['unreachable', 'unreachable']);
    expect(refused.message).to.equal(hung.message);
  });
});
