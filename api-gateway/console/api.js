// The API as the console calls it: same origin, the key in the x-api-key
// header of each request and nowhere else (never a URL, never a cookie).
// The key lives in sessionStorage: it is gone when the tab closes, and other
// tabs and origins never see it.

const KEY = 'mediajobs.apiKey';

export const session = {
  get key() { return sessionStorage.getItem(KEY); },
  set(key) { sessionStorage.setItem(KEY, key); },
  clear() { sessionStorage.removeItem(KEY); },
};

/** An error answer: its status and the body's `error` string (fields the console does not know are ignored). */
export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

/** The messages that mean the key itself is refused (spec, Authentication): the console signs out. */
const KEY_REFUSED = new Set(['Invalid API Key', 'Missing x-api-key header', 'Missing API key']);
let onKeyRefused = () => {};
export function whenKeyRefused(fn) { onKeyRefused = fn; }

/**
 * One API call: the parsed JSON body, or an ApiError with the answer's
 * `error`. `key` replaces the session's (sign-in tries a key before keeping it).
 */
export async function api(method, path, { body, key, signal } = {}) {
  const headers = { 'x-api-key': key ?? session.key ?? '' };
  if (body !== undefined) headers['content-type'] = 'application/json';
  let res;
  try {
    res = await fetch(path, {
      method, headers, signal, body: body === undefined ? undefined : JSON.stringify(body), cache: 'no-store', credentials: 'omit',
    });
  } catch (err) {
    if (err.name === 'AbortError') throw err;
    throw new ApiError(0, 'The service could not be reached');
  }
  const text = await res.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { /* a non-JSON answer (a proxy's page): its status says enough */ }
  if (!res.ok) {
    const message = data && typeof data.error === 'string' ? data.error : `The service answered ${res.status}`;
    if (res.status === 401 && key === undefined && KEY_REFUSED.has(message)) onKeyRefused(message);
    throw new ApiError(res.status, message);
  }
  return data;
}

/** An id or a value for a path segment. */
export const seg = (s) => encodeURIComponent(s);
