// A webhook receiver is an address a user chose, and its answer is read by
// the operator: the delivery log keeps 256 bytes of it, and the read itself
// must stop there and at the attempt's deadline (issue 16, item 4). A
// hostile receiver on loopback floods an endless answer or trickles one; the
// receiver's own count shows the operator hung up.
import { expect } from 'chai';
import { OutboundPolicy } from '@mediajobs/lib/outbound';
import { HostileBackend, MiB } from '../../test/support/hostile-backend.js';
import { EXCERPT_BYTES, WebhookClient } from '../src/webhook-post.js';

describe('operator: a webhook answer is read within bounds', function () {
  this.timeout(20_000);
  const receiver = new HostileBackend();
  const client = new WebhookClient(new OutboundPolicy({ allowed: ['127.0.0.0/8'] }));
  const post = (timeoutMs: number) => client.post({ url: `${receiver.url}/hook`, headers: { 'content-type': 'application/json' }, body: '{}', timeoutMs, secrets: [] });

  before(async () => {
    await receiver.start();
  });
  after(async () => {
    client.close();
    await receiver.stop();
  });

  it('an endless answer: its status and a 256-byte excerpt, the connection closed at once, little written', async () => {
    receiver.reset('flood', 200);
    const outcome = await post(5_000);
    expect(outcome).to.include({ statusCode: 200, error: null });
    expect(Buffer.byteLength(outcome.excerpt!)).to.be.at.most(EXCERPT_BYTES);
    expect(outcome.excerpt).to.match(/^<\?xml/);
    expect(await receiver.allClosed(receiver.firstRequestAt!, 2_000)).to.be.below(2_000);
    expect(receiver.written).to.be.below(16 * MiB);
  });

  it('an answer trickling without end: timeout at the deadline, and the connection is closed then', async () => {
    receiver.reset('trickle', 200);
    const started = Date.now();
    const outcome = await post(800);
    expect(outcome).to.include({ statusCode: null, error: 'timeout' });
    expect(Date.now() - started).to.be.within(700, 2_500);
    expect(await receiver.allClosed(started, 1_500)).to.be.below(2_500);
  });
});
