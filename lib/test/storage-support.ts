// What every storage provider test asserts about errors (a StorageError,
// thrown or rejected, whose every rendering is free of secrets and hosts),
// and the helpers the provider tests share: generated streams, anonymous
// downloads, a silent server, configuration and error-mapping tables.
import { expect } from 'chai';
import { createHash, randomBytes } from 'node:crypto';
import net from 'node:net';
import { Readable } from 'node:stream';
import { inspect } from 'node:util';
import { StorageError } from '../src/storage/types.js';

/** The StorageError `p` rejects with (fails the test if it resolves or rejects with anything else). */
export async function caught(p: Promise<unknown>): Promise<StorageError> {
  try {
    await p;
  } catch (err) {
    expect(err).to.be.instanceOf(StorageError);
    return err as StorageError;
  }
  expect.fail('expected a StorageError');
}

/** The StorageError `fn` throws. */
export function thrown(fn: () => unknown): StorageError {
  try {
    fn();
  } catch (err) {
    expect(err).to.be.instanceOf(StorageError);
    return err as StorageError;
  }
  expect.fail('expected a StorageError');
}

/** No secret (or host) in the message, reason, JSON, inspection or stack, and no `cause` carrying the raw error. */
export function expectSanitised(err: StorageError, secrets: string[]): void {
  const rendered = [err.message, err.reason, JSON.stringify(err), inspect(err, { depth: 5 }), String(err.stack)].join('\n');
  for (const s of secrets) expect(rendered, 'error text leaks a secret or host').not.to.include(s);
  expect(err).not.to.have.property('cause');
}

export const KiB = 1024;
export const MiB = 1024 * KiB;

export const sha256 = (b: Buffer): string => createHash('sha256').update(b).digest('hex');

/** `total` bytes of random data as a stream of `chunk`-sized pieces (1 MiB unless told), with their sha256. */
export function generated(total: number, chunk = MiB): { stream: Readable; sha256: string } {
  const chunks: Buffer[] = [];
  for (let left = total; left > 0; left -= chunk) chunks.push(randomBytes(Math.min(chunk, left)));
  const hash = createHash('sha256');
  for (const c of chunks) hash.update(c);
  return { stream: Readable.from(chunks), sha256: hash.digest('hex') };
}

export interface Downloaded {
  status: number;
  sha256: string;
  bytes: number;
  contentType: string | null;
  body: Buffer;
  text: string;
}

/** GET `url` as anyone could, with no headers of ours. */
export async function download(url: string | URL): Promise<Downloaded> {
  const res = await fetch(url);
  const body = Buffer.from(await res.arrayBuffer());
  return { status: res.status, sha256: sha256(body), bytes: body.length, contentType: res.headers.get('content-type'), body, text: body.toString('utf8') };
}

/** What a backend serves under `key` through `presign` (a 404 is nothing there), as a client would read it. */
export async function readPresigned(presign: (key: string, seconds: number) => Promise<string>, key: string): Promise<Buffer | undefined> {
  const got = await download(await presign(key, 60));
  if (got.status === 404) return undefined;
  expect(got.status, key).to.equal(200);
  return got.body;
}

export async function readAll(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of stream) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}

/** Run `fn` against a server on 127.0.0.1 that accepts connections and never answers. */
export async function withSilentServer(fn: (port: number) => Promise<void>): Promise<void> {
  const sockets = new Set<net.Socket>();
  const silent = net.createServer((sock) => sockets.add(sock));
  await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
  try {
    await fn((silent.address() as net.AddressInfo).port);
  } finally {
    for (const s of sockets) s.destroy();
    await new Promise((resolve) => silent.close(resolve));
  }
}

/** Each configuration is refused at construction with `invalid_config` and its reason, its message free of `hidden`. */
export function expectInvalidConfig<O>(make: (overrides: Partial<O>) => unknown, bad: Array<[Partial<O>, string]>, hidden: string[] = []): void {
  for (const [overrides, reason] of bad) {
    const err = thrown(() => make(overrides));
    expect(err.code, reason).to.equal('invalid_config');
    expect(err.reason, reason).to.equal(reason);
    for (const s of hidden) expect(err.message, reason).not.to.include(s);
  }
}

/** One test per row: `map(input)` has the code and reason, and a message matching none of `leaks`. */
export function describeErrorMapping(map: (err: unknown) => StorageError, cases: Array<[string, unknown, string, string]>, leaks: RegExp): void {
  for (const [title, input, code, reason] of cases) {
    it(`${title} → ${code} (${reason})`, () => {
      const err = map(input);
      expect(err.code).to.equal(code);
      expect(err.reason).to.equal(reason);
      expect(err.message).not.to.match(leaks);
    });
  }
}
