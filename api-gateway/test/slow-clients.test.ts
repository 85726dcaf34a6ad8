// Slow clients (issue 16, item 4): a client trickling its headers
// (slowloris) or its body is answered 408 with a JSON error and its
// connection closed at the server's timeouts (server.ts httpServer,
// HTTP_HEADERS_TIMEOUT_MS and HTTP_REQUEST_TIMEOUT_MS, small here), while
// everyone else is served as usual.
import net from 'node:net';
import { expect } from 'chai';
import { rawRequest, requestBytes } from './raw-http.js';
import { startTestGateway, type TestGateway } from './support.js';

const TIMEOUT = [408, { error: 'Request timeout' }];

/** One byte at a time, `delayMs` apart. */
const bytewise = (b: Buffer): Buffer[] => [...b].map((x) => Buffer.from([x]));

describe('api-gateway: slow clients', function () {
  this.timeout(60_000);
  let gw: TestGateway;
  let key: string;

  before(async () => {
    gw = await startTestGateway({ serverTimeouts: { headersTimeoutMs: 400, requestTimeoutMs: 800, keepAliveTimeoutMs: 1_000 } });
    key = (await gw.newKey('slow')).key;
  });

  after(async () => {
    await gw?.stop();
  });

  it('headers sent a byte at a time, slower than the headers timeout: 408 JSON, the connection closed', async () => {
    const request = requestBytes('GET', '/jobs', [['x-api-key', key], ['x-padding', 'p'.repeat(200)]]);
    const a = await rawRequest(gw.url, bytewise(request), { delayMs: 20 });
    expect([a.status, JSON.parse(a.body)]).to.deep.equal(TIMEOUT);
    expect(a.headers['content-type']).to.equal('application/json');
  });

  it('a body trickled slower than the request timeout: 408 JSON, the handler never ran', async () => {
    const body = Buffer.from(JSON.stringify({ url: 'https://media.example/v.mp4', pad: 'x'.repeat(300) }));
    const head = requestBytes('POST', '/jobs', [['x-api-key', key], ['content-type', 'application/json'], ['content-length', String(body.length)]]);
    const jobsBefore = (await gw.pool.query('SELECT count(*)::int AS n FROM jobs')).rows[0].n as number;
    const a = await rawRequest(gw.url, [head, ...bytewise(body)], { delayMs: 20 });
    expect([a.status, JSON.parse(a.body)]).to.deep.equal(TIMEOUT);
    expect((await gw.pool.query('SELECT count(*)::int AS n FROM jobs')).rows[0].n).to.equal(jobsBefore);
  });

  it('a declared body that never comes: 408 JSON at the request timeout', async () => {
    const head = requestBytes('POST', '/jobs', [['x-api-key', key], ['content-type', 'application/json'], ['content-length', '1000']], Buffer.from('{"url":'));
    const a = await rawRequest(gw.url, head);
    expect([a.status, JSON.parse(a.body)]).to.deep.equal(TIMEOUT);
  });

  it('while 100 slowloris connections hold on, everyone else is served, and each of them ends with its 408', async () => {
    const request = requestBytes('GET', '/healthz', [['x-padding', 'p'.repeat(100)]]);
    const slow = Array.from({ length: 100 }, () => rawRequest(gw.url, bytewise(request), { delayMs: 30 }));
    for (let i = 0; i < 5; i++) {
      const r = await gw.request('GET', '/jobs?limit=1', { key });
      expect(r.status).to.equal(200);
    }
    for (const a of await Promise.all(slow)) expect([a.status, JSON.parse(a.body)]).to.deep.equal(TIMEOUT);
    expect((await gw.request('GET', '/healthz', { key: null })).status).to.equal(200);
  });

  it('an idle keep-alive connection is closed by the server after the keep-alive timeout', async () => {
    const socket = net.connect(Number(new URL(gw.url).port), '127.0.0.1');
    const closed = new Promise<string>((resolve) => {
      let got = '';
      socket.on('data', (d: Buffer) => (got += d.toString()));
      socket.on('close', () => resolve(got));
    });
    socket.write('GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n');
    // Closed by the server, not by the client: the answer came, then nothing more was sent, then the end.
    const got = await closed;
    expect(got).to.match(/^HTTP\/1\.1 200 /);
    expect(got).to.include('Keep-Alive: timeout=1');
  });
});
