// What the API server answers bytes that are not an HTTP/1.1 request, as
// kube-apiserver does through Go's net/http (server.go, conn.serve): a
// plain-text status line, its text again as the body, and the connection
// closed. Headers past the limit are 431; everything else that does not
// parse is 400. A read that timed out or a connection the client reset gets
// no answer at all. Node's own default differs (a bare 400 without a body,
// 408 on a timeout), and clients read either.
import type { ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';

/** kube-apiserver's limit on a request's header bytes (Go's DefaultMaxHeaderBytes, which it sets). */
export const MAX_HEADER_BYTES = 1 << 20;

const TOO_LARGE = '431 Request Header Fields Too Large';
const BAD_REQUEST = '400 Bad Request';
/** Errors net/http reads as a connection that ended rather than a request that was wrong. */
const NO_ANSWER = new Set(['ECONNRESET', 'EPIPE', 'ERR_HTTP_REQUEST_TIMEOUT', 'HPE_CLOSED_CONNECTION']);
/** net/http's rstAvoidanceDelay: how long a closed connection still reads, so that the client reads the answer before a reset. */
const RST_AVOIDANCE_MS = 500;

/** Connections whose bad request is answered (or will be once the answer before it is done). */
const answering = new WeakSet<Duplex>();

/** The server's 'clientError' handler. */
export function answerMalformedRequest(err: NodeJS.ErrnoException, socket: Duplex): void {
  // More bytes of a request already refused (the rest of oversized headers): its answer is on its way.
  if (answering.has(socket)) return;
  if (!socket.writable || NO_ANSWER.has(err.code ?? '')) {
    socket.destroy();
    return;
  }
  answering.add(socket);
  const status = err.code === 'HPE_HEADER_OVERFLOW' ? TOO_LARGE : BAD_REQUEST;
  const answer = () => {
    socket.end(`HTTP/1.1 ${status}\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n${status}`);
    // As net/http's closeWriteAndWait: a client still sending gets time to read the answer before the close resets it.
    setTimeout(() => socket.destroy(), RST_AVOIDANCE_MS).unref();
  };
  // Pipelined behind a request still being answered: net/http reads a request only once the one before is answered,
  // so that answer goes out whole first, never cut by this one.
  const inFlight = (socket as { _httpMessage?: ServerResponse })._httpMessage;
  if (!inFlight || inFlight.writableFinished) {
    answer();
    return;
  }
  inFlight.once('finish', answer);
  inFlight.once('close', () => {
    if (!inFlight.writableFinished) socket.destroy();
  });
}
