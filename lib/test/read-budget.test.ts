// ReadBudget on plain node:http requests to loopback: one total over every
// socket, the deadline cutting a transfer in progress, and no connection
// once the budget is spent or closed (an SDK's retry must fail at once).
import { expect } from 'chai';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { ReadBudget, ReadBudgetError } from '../src/read-budget.js';

/** GET through the budget's agent; the body's length, or the error that ended it. */
function get(budget: ReadBudget, url: string): Promise<{ bytes: number } | { error: NodeJS.ErrnoException }> {
  return new Promise((resolve) => {
    const req = http.get(url, { agent: budget.http }, (res) => {
      let bytes = 0;
      res.on('data', (c: Buffer) => (bytes += c.length));
      res.on('end', () => resolve({ bytes }));
      res.on('error', (error) => resolve({ error }));
    });
    req.on('error', (error) => resolve({ error }));
  });
}

describe('lib: ReadBudget', function () {
  this.timeout(10_000);
  let server: http.Server;
  let url: string;

  before(async () => {
    server = http.createServer((req, res) => {
      const size = Number(new URL(req.url!, 'http://x').searchParams.get('size') ?? 0);
      if (size < 0) {
        // Never ends: a byte every 20 ms.
        res.writeHead(200);
        const timer = setInterval(() => res.write('x'), 20);
        res.on('close', () => clearInterval(timer));
        return;
      }
      res.writeHead(200, { 'content-length': String(size) }).end(Buffer.alloc(size, 'y'));
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(async () => {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  });

  it('answers within the budget pass, and count against one total, headers included', async () => {
    const budget = new ReadBudget({ maxBytes: 10_000, deadlineMs: 5_000 });
    try {
      expect(await get(budget, `${url}/?size=3000`)).to.deep.equal({ bytes: 3000 });
      expect(await get(budget, `${url}/?size=3000`)).to.deep.equal({ bytes: 3000 });
      expect(budget.bytesRead).to.be.above(6000).and.below(7000);
      expect(budget.exceeded).to.equal(undefined);
      // The third answer would take the total past 10,000.
      const third = await get(budget, `${url}/?size=4000`);
      expect(third).to.have.property('error');
      expect(budget.exceeded).to.equal('bytes');
      // Spent: a retry fails before it connects.
      const retry = await get(budget, `${url}/?size=10`);
      expect((retry as { error: NodeJS.ErrnoException }).error).to.be.instanceOf(ReadBudgetError).and.include({ code: 'ERR_RESPONSE_TOO_LARGE' });
    } finally {
      budget.close();
    }
  });

  it('the deadline destroys a socket in the middle of an answer', async () => {
    const budget = new ReadBudget({ maxBytes: 1_000_000, deadlineMs: 300 });
    const started = Date.now();
    const endless = await get(budget, `${url}/?size=-1`);
    expect(Date.now() - started).to.be.within(250, 1_500);
    expect(endless).to.have.property('error');
    expect(budget.exceeded).to.equal('deadline');
    budget.close();
  });

  it('closed: no new connection, and a closed budget says it was never exceeded', async () => {
    const budget = new ReadBudget({ maxBytes: 1_000_000, deadlineMs: 5_000 });
    expect(await get(budget, `${url}/?size=10`)).to.deep.equal({ bytes: 10 });
    budget.close();
    expect(budget.exceeded).to.equal(undefined);
    const after = await get(budget, `${url}/?size=10`);
    expect((after as { error: NodeJS.ErrnoException }).error).to.be.instanceOf(ReadBudgetError);
  });
});
