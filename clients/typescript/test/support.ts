// What the client's tests against the real services share: a loopback
// webhook receiver that keeps each delivery's raw body and headers (what
// verifyWebhook needs), and a loopback relay in front of the gateway that
// can lose an answer after the gateway acted on the request.
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface RawDelivery {
  headers: IncomingHttpHeaders;
  body: string;
}

export interface RawReceiver {
  url: string;
  deliveries: RawDelivery[];
  stop(): Promise<void>;
}

export async function startRawReceiver(): Promise<RawReceiver> {
  const deliveries: RawDelivery[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      deliveries.push({ headers: req.headers, body: Buffer.concat(chunks).toString('utf8') });
      res.writeHead(204).end();
    });
  });
  const url = await listen(server);
  return { url: `${url}/hooks`, deliveries, stop: () => close(server) };
}

export interface Relay {
  url: string;
  /** Every request relayed: method, path and its Idempotency-Key header. */
  seen: { method: string; path: string; idempotencyKey: string | undefined }[];
  /** Drop the answer of the next `n` requests matching: the gateway gets and answers them, the client sees its connection cut. */
  loseAnswers(n: number, match: (method: string, path: string) => boolean): void;
  stop(): Promise<void>;
}

/** A relay to `target` (the gateway) on loopback. */
export async function startRelay(target: string): Promise<Relay> {
  const seen: Relay['seen'] = [];
  let toLose = 0;
  let matcher: (method: string, path: string) => boolean = () => false;
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', async () => {
      const method = req.method!;
      const path = req.url!;
      seen.push({ method, path, idempotencyKey: req.headers['idempotency-key'] as string | undefined });
      const headers = Object.fromEntries(Object.entries(req.headers).filter(([k]) => !['host', 'connection', 'content-length'].includes(k))) as Record<string, string>;
      const body = chunks.length ? Buffer.concat(chunks) : undefined;
      const answer = await fetch(`${target}${path}`, { method, headers, ...(body && { body }) });
      const text = await answer.text();
      if (toLose > 0 && matcher(method, path)) {
        toLose--;
        req.socket.destroy();
        return;
      }
      res.writeHead(answer.status, Object.fromEntries([...answer.headers].filter(([k]) => !['content-length', 'transfer-encoding', 'connection', 'keep-alive'].includes(k))));
      res.end(text);
    });
  });
  const url = await listen(server);
  return {
    url, seen,
    loseAnswers(n, match) {
      toLose = n;
      matcher = match;
    },
    stop: () => close(server),
  };
}

async function listen(server: Server): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

function close(server: Server): Promise<void> {
  server.closeAllConnections();
  return new Promise((resolve) => server.close(() => resolve()));
}
