// Small pieces every view shares: formatting, the status badge, a progress
// bar, an error line, and the hooks that load and poll the API.
import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import { html } from './html.js';

/** Statuses after which a job never changes again. */
export const TERMINAL = new Set(['Completed', 'Failed', 'Warning', 'Skipped', 'Cancelled', 'CancelledByAdmin']);

/** How often a view with work in progress asks again (the spec advises 2 to 5 s). */
export const POLL_MS = 3000;

export function bytes(n) {
  if (n === null || n === undefined) return '—';
  const units = ['B', 'KB', 'MB', 'GB', 'TB'];
  let v = n;
  let u = 0;
  while (v >= 1024 && u < units.length - 1) { v /= 1024; u++; }
  return `${u === 0 ? v : v.toFixed(v < 10 ? 1 : 0)} ${units[u]}`;
}

export function when(ms) {
  if (ms === null || ms === undefined) return '—';
  return new Date(ms).toLocaleString();
}

export function duration(seconds) {
  if (seconds === null || seconds === undefined || !Number.isFinite(seconds)) return '—';
  const s = Math.round(seconds);
  const m = Math.floor(s / 60);
  return m > 0 ? `${m} min ${s % 60} s` : `${s} s`;
}

export function StatusBadge({ status }) {
  return html`<span class=${`badge badge-${String(status).toLowerCase()}`}>${status}</span>`;
}

export function Progress({ value, label }) {
  const v = Math.max(0, Math.min(100, Number(value) || 0));
  return html`<span class="progress"><progress max="100" value=${v} aria-label=${label}></progress> <span>${v}%</span></span>`;
}

/** An error said out loud (role=alert): only the answer's `error` string. */
export function ErrorLine({ error }) {
  if (!error) return null;
  return html`<p class="error" role="alert">${error.message ?? String(error)}</p>`;
}

/** A one-line outcome of an action, announced politely. */
export function Notice({ text }) {
  return html`<p class="notice" role="status">${text ?? ''}</p>`;
}

/**
 * Loads `load(signal)` now, whenever `deps` change, and again every
 * POLL_MS while `again(data)` says so and the tab is visible. Answers
 * {data, error, reload}.
 */
export function useLoad(load, deps, again = () => false) {
  const [state, setState] = useState({ data: undefined, error: undefined });
  const tick = useRef(0);
  const [nonce, setNonce] = useState(0);
  const reload = useCallback(() => setNonce((n) => n + 1), []);
  useEffect(() => {
    const ctl = new AbortController();
    const run = ++tick.current;
    let timer;
    const go = async () => {
      try {
        const data = await load(ctl.signal);
        if (run !== tick.current) return;
        setState({ data, error: undefined });
        if (again(data)) timer = setTimeout(wait, POLL_MS);
      } catch (error) {
        if (error.name === 'AbortError' || run !== tick.current) return;
        setState((s) => ({ data: s.data, error }));
        // Asked again only when asking again can change the answer: the service unreachable, busy or
        // failing (0, 408, 429, 5xx); a 404 or a refused request stays as it is until the person acts.
        if (transient(error)) timer = setTimeout(wait, POLL_MS * 2);
      }
    };
    // A hidden tab does not poll; it catches up when shown again.
    const wait = () => {
      if (document.visibilityState === 'visible') go();
      else document.addEventListener('visibilitychange', go, { once: true, signal: ctl.signal });
    };
    go();
    return () => { ctl.abort(); clearTimeout(timer); };
  }, [...deps, nonce]);
  return { ...state, reload };
}

/** An error worth asking again about: no answer, a timeout, a rate limit or a server-side failure. */
const transient = (error) => error.status === undefined || error.status === 0 || error.status === 408 || error.status === 429 || error.status >= 500;

/** An action's state: run(fn) awaits fn, keeps its error or its outcome text. */
export function useAction() {
  const [state, setState] = useState({ busy: false, error: undefined, done: undefined });
  const run = useCallback(async (fn) => {
    setState({ busy: true, error: undefined, done: undefined });
    try {
      const done = await fn();
      setState({ busy: false, error: undefined, done });
      return true;
    } catch (error) {
      setState({ busy: false, error, done: undefined });
      return false;
    }
  }, []);
  return { ...state, run };
}

/** Runs `fn` over `items` with at most `n` at a time (a batch's episodes: not hundreds of requests at once). */
export async function limited(items, n, fn) {
  const out = new Array(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i], i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(n, items.length) }, worker));
  return out;
}
