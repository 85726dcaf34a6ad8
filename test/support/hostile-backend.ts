// A storage backend on loopback that answers every request with an error
// body too large or too slow to read: 300 MB as fast as the client takes it,
// an endless flood, or an endless trickle. It counts what it got onto the
// wire and when each connection closed, so a test can show that a client cut
// the transfer (not merely stopped waiting for it) and how little it let in.
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

export const MiB = 1024 * 1024;

export type HostileMode =
  /** A 300 MB S3-style XML error body, as fast as the client takes it. */
  | 'huge'
  /** An error body without end, 1 MiB every 20 ms (~50 MB/s), so a client that buffers it grows steadily. */
  | 'flood'
  /** An error body without end, one byte every 50 ms. */
  | 'trickle';

interface Connection { socket: Socket; closedAt?: number; written?: number }

export class HostileBackend {
  readonly server: Server;
  private mode: HostileMode = 'huge';
  private status = 500;
  /** A HEAD is answered 200 with this job as the object's x-amz-meta-mediajobs-job (reset's `owner`). */
  private owner: string | undefined;
  private connections: Connection[] = [];
  /** When the first request since reset() arrived: a client's own start-up (loading an SDK) is not the backend's to time. */
  firstRequestAt: number | undefined;

  constructor() {
    this.server = createServer((req, res) => {
      this.firstRequestAt ??= Date.now();
      req.resume();
      if (req.method === 'HEAD' && this.owner !== undefined) {
        res.writeHead(200, { 'content-length': '1', 'x-amz-meta-mediajobs-job': this.owner }).end();
        return;
      }
      this.answer(res);
    });
    this.server.on('connection', (socket) => {
      const entry: Connection = { socket };
      this.connections.push(entry);
      socket.on('close', () => Object.assign(entry, { closedAt: Date.now(), written: socket.bytesWritten }));
    });
  }

  async start(): Promise<this> {
    await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', r));
    return this;
  }

  async stop(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise((r) => this.server.close(r));
  }

  get url(): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  /** Bytes the backend got onto the wire, over every connection (closed ones as at their close). */
  get written(): number {
    return this.connections.reduce((n, c) => n + (c.written ?? c.socket.bytesWritten), 0);
  }

  /** Resolves once every connection the clients opened is closed, with how long after `since` the last one closed (ms). */
  async allClosed(since: number, withinMs: number): Promise<number> {
    const until = Date.now() + withinMs;
    while (this.connections.some((c) => c.closedAt === undefined)) {
      if (Date.now() > until) throw new Error(`a connection is still open ${withinMs} ms after the answer`);
      await new Promise((r) => setTimeout(r, 10));
    }
    return Math.max(...this.connections.map((c) => c.closedAt! - since));
  }

  /**
   * The next requests are answered with `status` and a body per `mode`;
   * counts start again. With `owner`, a HEAD (a client reading an object's
   * metadata first) is answered as an object of that job, and only the
   * requests after it meet the hostile answer.
   */
  reset(mode: HostileMode, status = 500, owner?: string): void {
    this.mode = mode;
    this.status = status;
    this.owner = owner;
    this.connections = [];
    this.firstRequestAt = undefined;
  }

  private answer(res: ServerResponse): void {
    res.writeHead(this.status, { 'content-type': 'application/xml', 'x-amz-request-id': 'hostile' });
    res.write('<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>InternalError</Code><Message>');
    const chunk = Buffer.alloc(64 * 1024, 'x');
    let timer: NodeJS.Timeout | undefined;
    res.on('close', () => clearInterval(timer));
    if (this.mode === 'trickle') {
      timer = setInterval(() => res.write('x'), 50);
    } else if (this.mode === 'flood') {
      timer = setInterval(() => {
        for (let i = 0; i < 16; i++) res.write(chunk);
      }, 20);
    } else {
      let sent = 0;
      const pump = (): void => {
        while (sent < 300 * MiB) {
          sent += chunk.length;
          if (!res.write(chunk)) return void res.once('drain', pump);
        }
        res.end('</Message></Error>');
      };
      pump();
    }
  }
}
