// The secrets a test run used, searched for in the log output of every
// process it ran. A leak is reported by the secret's kind and a short
// prefix, never the secret itself: the report lands in CI logs too.

/** A secret the run used: what it is (for the report) and its text. */
export interface RunSecret {
  kind: string;
  value: string;
}

/** One process' log output, named for the report (gateway, operator, runner pod …). */
export interface LogText {
  source: string;
  text: string;
}

/** Shorter values could turn up by chance (and are no credentials of any provider this project talks to). */
const MIN_LENGTH = 8;

/** How a secret can appear in a log line: as itself, or inside a JSON string (escaped quotes, slashes, newlines). */
function forms(value: string): string[] {
  const json = JSON.stringify(value).slice(1, -1);
  return [...new Set([value, json, json.replace(/\//g, '\\/'), encodeURIComponent(value)])];
}

/** What the report shows of a secret: its kind, its first characters and its length. */
export function describeSecret(s: RunSecret): string {
  const shown = Math.min(4, Math.floor(s.value.length / 4));
  return `${s.kind} (${s.value.slice(0, shown)}…, ${s.value.length} chars)`;
}

/** Every secret found in any log, one line each: "<kind> (<prefix>…) in <source>". */
export function findLeaks(secrets: readonly RunSecret[], logs: readonly LogText[]): string[] {
  const found: string[] = [];
  for (const s of secrets) {
    if (s.value.length < MIN_LENGTH) throw new Error(`${s.kind}: a secret of ${s.value.length} characters cannot be searched for reliably`);
    const sought = forms(s.value);
    for (const log of logs) {
      if (sought.some((f) => log.text.includes(f))) found.push(`${describeSecret(s)} in ${log.source}`);
    }
  }
  return found;
}

/** Throw, naming each leak without its secret, when any log holds any secret. */
export function assertNoLeaks(secrets: readonly RunSecret[], logs: readonly LogText[]): void {
  const leaks = findLeaks(secrets, logs);
  if (leaks.length) throw new Error(`secrets found in the logs:\n  ${leaks.join('\n  ')}`);
}

/** The key material of a SECRET_KEYS spec ("kid:base64,…"), each key a secret of its own. */
export function secretKeysOf(spec: string): RunSecret[] {
  return spec.split(',').map((e) => e.trim()).filter(Boolean)
    .map((e) => ({ kind: `SECRET_KEYS key ${e.slice(0, e.indexOf(':'))}`, value: e.slice(e.indexOf(':') + 1) }));
}

/**
 * What a Netscape cookie file gives away (a platform's cookies, issue 37):
 * the whole file, and each cookie's value (its seventh field) on its own,
 * since a log line would carry a Cookie header rather than the file.
 */
export function cookieFileSecrets(kind: string, file: string): RunSecret[] {
  const values = file.split(/\r?\n/).filter((l) => l && (!l.startsWith('#') || l.startsWith('#HttpOnly_')))
    .map((l) => l.split('\t')[6]?.trim() ?? '').filter((v) => v.length >= MIN_LENGTH);
  return [{ kind: `${kind} (file)`, value: file }, ...[...new Set(values)].map((value) => ({ kind: `${kind} (value)`, value }))];
}

/**
 * The credentials of a proxy URL (a ProxyPool proxy's, from its Secret):
 * the password, and the userinfo as it stands in the URL. A user name alone
 * is no secret (providers put the session there).
 */
export function proxyUrlSecrets(kind: string, url: string): RunSecret[] {
  const u = new URL(url);
  if (!u.password) return [];
  const password = decodeURIComponent(u.password);
  return [{ kind: `${kind} password`, value: password }, { kind: `${kind} userinfo`, value: `${u.username}:${u.password}` }]
    .filter((s) => s.value.length >= MIN_LENGTH);
}
