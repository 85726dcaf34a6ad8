// http(s) agents for an SDK client that talks to an address a user chose
// (a storage endpoint): with a policy, every connection passes the
// outbound-address policy (outbound.ts, ADR 0011) as it opens, a name on
// every address it resolves to then (so a name that answers differently
// after an earlier check gains nothing), an IP literal, for which Node skips
// `lookup`, on itself. A refused one fails with OutboundRefusedError
// (ERR_OUTBOUND_REFUSED) before a byte is sent. Used by the gateway's
// probes and the operator's removals (inside a ReadBudget, which also
// watches each socket) and by the runner's uploads.
import http from 'node:http';
import https from 'node:https';
import type { LookupFunction } from 'node:net';
import type { Duplex } from 'node:stream';
import { OutboundRefusedError, type OutboundPolicy, type RefusedCategory } from './outbound.js';

/** The http(s) agents a client is built with; what SDK options take (`httpAgent`, `agent`, a request's `agent`). */
export interface BoundedAgents {
  http: http.Agent;
  https: https.Agent;
}

export interface CheckedAgentOptions {
  /** The addresses connections may go to; absent: any (the caller bounds only what is read). */
  policy?: OutboundPolicy | undefined;
  /** Told of each refusal, with its category. */
  onRefused?: (category: RefusedCategory) => void;
  /** Each socket as it is created; what it returns is used (a ReadBudget counts its bytes). */
  onSocket?: (socket: Duplex) => Duplex;
  /** Asked before each connection: an error fails it before anything is opened (a spent ReadBudget). */
  refuseNew?: () => Error | undefined;
}

type Created = (err: Error | null, stream: Duplex) => void;

/** Keep-alive agents (requests share connections, as the SDKs' default agents let them) under `options`. */
export function checkedAgents(options: CheckedAgentOptions = {}): BoundedAgents {
  const { policy, onRefused, onSocket = (s: Duplex) => s, refuseNew } = options;
  const refusal = (host: unknown): Error | undefined => {
    const spent = refuseNew?.();
    if (spent) return spent;
    if (!policy || typeof host !== 'string') return undefined;
    // The host as written: an IP literal (which `lookup` never sees) or a localhost name; other names pass to lookup.
    const decision = policy.checkHost(host);
    if (decision.ok) return undefined;
    onRefused?.(decision.category);
    return new OutboundRefusedError(decision.category);
  };
  /** A connection as an agent asks for it: refused before anything is opened, or opened and handed to onSocket. */
  const open = <O extends { host?: string | null }>(create: (opts: O, cb?: Created) => Duplex | null | undefined, opts: O, cb?: Created) => {
    const refused = refusal(opts.host);
    if (refused) return void cb?.(refused, undefined as never);
    const socket = create(opts, cb);
    return socket ? onSocket(socket) : socket;
  };
  const agentOptions = { keepAlive: true, ...(policy && { lookup: noting(policy.connectLookup(), onRefused) }) };
  return {
    http: new (class extends http.Agent {
      override createConnection(opts: http.ClientRequestArgs, cb?: Created) {
        return open((o, c) => super.createConnection(o, c), opts, cb);
      }
    })(agentOptions),
    https: new (class extends https.Agent {
      override createConnection(opts: https.RequestOptions, cb?: Created) {
        return open((o, c) => super.createConnection(o, c), opts, cb);
      }
    })(agentOptions),
  };
}

/** The policy's connect-time lookup, telling `onRefused` of a refusal. */
function noting(lookup: LookupFunction, onRefused: CheckedAgentOptions['onRefused']): LookupFunction {
  if (!onRefused) return lookup;
  return (hostname, options, callback) => lookup(hostname, options, ((err: NodeJS.ErrnoException | null, ...rest: unknown[]) => {
    if (err instanceof OutboundRefusedError) onRefused(err.category);
    (callback as (...args: unknown[]) => void)(err, ...rest);
  }) as typeof callback);
}
