// The loopback-only guard every mocha run loads (test/support/loopback-only.ts):
// what it stops, and that a test which tried fails the run by name.
// Every address tried here is fe80::1 without a zone, which cannot leave
// this machine even if the guard let it through.
import { spawn } from 'node:child_process';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import tls from 'node:tls';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { takeViolations } from './support/loopback-only.js';

const root = fileURLToPath(new URL('..', import.meta.url));
const OUTSIDE = 'fe80::1';

/** The error a connection attempt ends with (or 'connected'). */
function outcome(start: (done: (e?: Error) => void) => void): Promise<string> {
  return new Promise((resolve) => start((e) => resolve(e ? (e as NodeJS.ErrnoException).code ?? e.message : 'connected')));
}

describe('the loopback-only test guard', () => {
  afterEach(() => takeViolations());

  const attempts: [string, () => Promise<string>][] = [
    ['fetch', () => fetch(`http://[${OUTSIDE}]:8080/`).then(() => 'connected', (e: Error) => String((e.cause as NodeJS.ErrnoException)?.code))],
    ['http.get', () => outcome((done) => http.get(`http://[${OUTSIDE}]:8080/`, () => done()).on('error', done))],
    ['https.get', () => outcome((done) => https.get(`https://[${OUTSIDE}]:8443/`, () => done()).on('error', done))],
    ['net.connect', () => outcome((done) => net.connect(8080, OUTSIDE, () => done()).on('error', done))],
    ['tls.connect', () => outcome((done) => tls.connect({ host: OUTSIDE, port: 8443 }, () => done()).on('error', done))],
    ['a name a custom lookup resolves outside', () => outcome((done) => net.connect({
      host: 'elsewhere.test', port: 8080,
      lookup: (_h: string, _o: unknown, cb: (e: null, a: { address: string; family: number }[]) => void) => cb(null, [{ address: OUTSIDE, family: 6 }]),
    } as net.NetConnectOpts, () => done()).on('error', done))],
  ];
  for (const [how, attempt] of attempts) {
    it(`stops ${how} before it leaves, and records it`, async () => {
      const result = await attempt();
      expect(result).not.to.equal('connected');
      expect(takeViolations().join()).to.match(/fe80::1/);
    });
  }

  it('lets loopback through, by address and as localhost', async () => {
    const server = http.createServer((_req, res) => res.end('here')).listen(0, '127.0.0.1');
    await new Promise((r) => server.once('listening', r));
    try {
      const { port } = server.address() as net.AddressInfo;
      expect(await (await fetch(`http://127.0.0.1:${port}/`)).text()).to.equal('here');
      expect(await (await fetch(`http://localhost:${port}/`)).text()).to.equal('here');
      expect(takeViolations()).to.deep.equal([]);
    } finally {
      server.close();
    }
  });

  it('fails the run, naming the test, when a test tried and swallowed the error', async function () {
    this.timeout(60_000);
    const child = spawn(process.execPath, ['node_modules/mocha/bin/mocha.js', '--no-config', '--node-option', 'import=tsx',
      '--require', './test/support/loopback-only.ts', '--timeout', '20000', 'test/support/loopback-guard-fixture.ts'],
    { cwd: root, env: { ...process.env, LOOPBACK_GUARD_REPORT: '' } });
    let out = '';
    child.stdout.on('data', (d) => { out += d; });
    child.stderr.on('data', (d) => { out += d; });
    const code = await new Promise<number | null>((r) => child.on('close', r));
    expect(code, out).to.not.equal(0);
    expect(out).to.include('test "swallows a failed fetch of a link-local address" sent traffic beyond loopback (or tried to): connection to fe80::1');
  });
});
