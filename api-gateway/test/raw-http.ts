// A raw HTTP/1.1 client for tests of hostile input: the request is written
// byte for byte (invalid UTF-8 bodies, control characters in paths and
// headers, lying Content-Length) where fetch and node:http would refuse to
// send it, and the answer is read as the server wrote it.
import net from 'node:net';

export interface RawAnswer {
  /** 0 when the server closed the connection without answering. */
  status: number;
  headers: Record<string, string>;
  body: string;
}

type HeaderValue = string | Buffer;

/** The bytes of one request with `Connection: close`; Content-Length is the body's unless `headers` names one. */
export function requestBytes(method: string, path: string | Buffer, headers: [string, HeaderValue][] = [], body?: Buffer): Buffer {
  const hasLength = headers.some(([k]) => k.toLowerCase() === 'content-length');
  const lines: Buffer[] = [Buffer.from(`${method} `), Buffer.isBuffer(path) ? path : Buffer.from(path), Buffer.from(' HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n')];
  for (const [k, v] of headers) lines.push(Buffer.from(`${k}: `), Buffer.isBuffer(v) ? v : Buffer.from(v), Buffer.from('\r\n'));
  if (body !== undefined && !hasLength) lines.push(Buffer.from(`Content-Length: ${body.length}\r\n`));
  lines.push(Buffer.from('\r\n'));
  if (body !== undefined) lines.push(body);
  return Buffer.concat(lines);
}

function dechunk(raw: Buffer): Buffer {
  const out: Buffer[] = [];
  let at = 0;
  for (;;) {
    const eol = raw.indexOf('\r\n', at);
    if (eol < 0) break;
    const size = parseInt(raw.subarray(at, eol).toString('latin1'), 16);
    if (!(size > 0)) break;
    out.push(raw.subarray(eol + 2, eol + 2 + size));
    at = eol + 2 + size + 2;
  }
  return Buffer.concat(out);
}

/** Parse what a server wrote on a connection it then closed. */
export function parseAnswer(raw: Buffer): RawAnswer {
  const end = raw.indexOf('\r\n\r\n');
  if (end < 0) return { status: 0, headers: {}, body: raw.toString('latin1') };
  const [statusLine = '', ...lines] = raw.subarray(0, end).toString('latin1').split('\r\n');
  const headers: Record<string, string> = {};
  for (const l of lines) {
    const i = l.indexOf(':');
    if (i > 0) headers[l.slice(0, i).trim().toLowerCase()] = l.slice(i + 1).trim();
  }
  let body = raw.subarray(end + 4);
  if (headers['transfer-encoding']?.toLowerCase() === 'chunked') body = dechunk(body);
  else if (headers['content-length'] !== undefined) body = body.subarray(0, Number(headers['content-length']));
  return { status: Number(/^HTTP\/1\.[01] (\d{3})/.exec(statusLine)?.[1] ?? 0), headers, body: body.toString('utf8') };
}

/**
 * Write `bytes` (or `chunks`, `delayMs` apart) to the server at `url` and
 * read until it closes the connection. A reset after the server answered
 * (it refused a body still being written) keeps the answer.
 */
export function rawRequest(url: string, bytes: Buffer | Buffer[], opts: { delayMs?: number; timeoutMs?: number } = {}): Promise<RawAnswer> {
  const { hostname, port } = new URL(url);
  const chunks = Array.isArray(bytes) ? bytes : [bytes];
  return new Promise((resolve, reject) => {
    const received: Buffer[] = [];
    const socket = net.connect(Number(port), hostname);
    let timer: NodeJS.Timeout | undefined;
    const deadline = setTimeout(() => {
      socket.destroy();
      reject(new Error(`no answer within ${opts.timeoutMs ?? 15_000} ms`));
    }, opts.timeoutMs ?? 15_000);
    const finish = () => {
      clearTimeout(deadline);
      clearTimeout(timer);
      resolve(parseAnswer(Buffer.concat(received)));
    };
    socket.on('data', (d: Buffer) => received.push(d));
    socket.on('close', finish);
    socket.on('error', () => undefined); // EPIPE/ECONNRESET after the answer: 'close' follows
    let i = 0;
    const writeNext = () => {
      if (socket.destroyed || i >= chunks.length) return;
      socket.write(chunks[i++]!);
      if (i < chunks.length) timer = setTimeout(writeNext, opts.delayMs ?? 0);
    };
    socket.once('connect', writeNext);
  });
}
