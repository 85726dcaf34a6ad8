// Bytes that are not an HTTP/1.1 request get kube-apiserver's answers (Go's
// net/http): a plain-text 400 or 431 naming itself, then the connection
// closed; headers up to Go's 1 MiB are a request like any other.
import { connect } from 'node:tls';
import { expect } from 'chai';
import { startTestCluster, type TestCluster } from './support.js';

describe('local cluster: requests that do not parse', function () {
  this.timeout(20_000);
  let tc: TestCluster;

  before(async () => {
    tc = await startTestCluster();
  });
  after(async () => tc?.stop());

  /** Sends raw bytes over TLS and reads everything until the server closes. */
  function exchange(bytes: string): Promise<string> {
    const { hostname, port } = new URL(tc.cluster.url);
    return new Promise((resolve, reject) => {
      const chunks: Buffer[] = [];
      const socket = connect({ host: hostname, port: Number(port), ca: tc.cluster.caCert, servername: hostname === '127.0.0.1' ? undefined : hostname }, () => {
        socket.write(bytes);
      });
      socket.on('data', (c: Buffer) => chunks.push(c));
      socket.on('error', reject);
      socket.on('close', () => resolve(Buffer.concat(chunks).toString('latin1')));
    });
  }

  const request = (headers: string) => `GET /version HTTP/1.1\r\nHost: ${new URL(tc.cluster.url).host}\r\nAuthorization: Bearer ${tc.cluster.token}\r\n${headers}Connection: close\r\n\r\n`;

  it('a request line that is not HTTP: 400 Bad Request in plain text, then the connection closes', async () => {
    const answer = await exchange('NOT AN HTTP REQUEST\r\n\r\n');
    const [head, body] = answer.split('\r\n\r\n');
    expect(head!.split('\r\n')).to.deep.equal(['HTTP/1.1 400 Bad Request', 'Content-Type: text/plain; charset=utf-8', 'Connection: close']);
    expect(body).to.equal('400 Bad Request');
  });

  it('a header line without a colon: the same 400', async () => {
    expect(await exchange(request('this is not a header\r\n'))).to.match(/^HTTP\/1\.1 400 Bad Request\r\n[^]*\r\n\r\n400 Bad Request$/);
  });

  it('headers of 200 KiB (past node:http\'s 16 KiB default, under Go\'s 1 MiB) are served', async () => {
    const answer = await exchange(request(`X-Padding: ${'a'.repeat(200 * 1024)}\r\n`));
    expect(answer.split('\r\n')[0]).to.equal('HTTP/1.1 200 OK');
    expect(answer).to.include('"gitVersion"');
  });

  it('bytes pipelined behind a good request: that request is answered whole first, then 400, as net/http reads one request after another', async () => {
    // A create, whose answer waits for its body to be read: the bytes after it are parsed (and refused) before it is answered.
    const body = JSON.stringify({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'pipelined' }, data: { a: 'b' } });
    const { host } = new URL(tc.cluster.url);
    const good = `POST /api/v1/namespaces/default/configmaps HTTP/1.1\r\nHost: ${host}\r\nAuthorization: Bearer ${tc.cluster.token}\r\n`
      + `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
    const answer = await exchange(`${good}NOT AN HTTP REQUEST\r\n\r\n`);
    const first = answer.indexOf('HTTP/1.1 201 Created');
    const second = answer.indexOf('HTTP/1.1 400 Bad Request');
    expect(first, answer).to.equal(0);
    expect(second, answer).to.be.greaterThan(first);
    // The first answer is intact: its declared length is exactly what precedes the 400.
    const [head, rest] = [answer.slice(0, answer.indexOf('\r\n\r\n')), answer.slice(answer.indexOf('\r\n\r\n') + 4, second)];
    const length = Number(/\r\ncontent-length: (\d+)/i.exec(head)?.[1]);
    expect(Buffer.byteLength(rest, 'latin1'), answer).to.equal(length);
    expect(JSON.parse(rest)).to.deep.include({ kind: 'ConfigMap', data: { a: 'b' } });
    expect(answer.slice(second)).to.match(/^HTTP\/1\.1 400 Bad Request\r\n[^]*\r\n\r\n400 Bad Request$/);
  });

  it('headers past 1 MiB: 431 Request Header Fields Too Large in plain text', async () => {
    const answer = await exchange(request(`X-Padding: ${'a'.repeat(1100 * 1024)}\r\n`));
    expect(answer).to.match(/^HTTP\/1\.1 431 Request Header Fields Too Large\r\n[^]*\r\n\r\n431 Request Header Fields Too Large$/);
  });
});
