// The console's entry: sign-in, the header's navigation, and the view the
// location's hash names (#/jobs, #/jobs/<id>, #/batches, #/batches/<id>,
// #/usage, #/settings). The hash never reaches the server and never holds
// the key.
import { render } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { html } from './html.js';
import { api, session, whenKeyRefused } from './api.js';
import { ErrorLine } from './ui.js';
import { JobsView } from './jobs.js';
import { JobView } from './job.js';
import { BatchesView, BatchView } from './batches.js';
import { UsageView } from './usage.js';
import { SettingsView } from './settings.js';

function route() {
  const parts = location.hash.replace(/^#\/?/, '').split('/').filter(Boolean).map(decodeURIComponent);
  return { name: parts[0] ?? 'jobs', id: parts[1] };
}

function useRoute() {
  const [r, setR] = useState(route());
  useEffect(() => {
    const on = () => setR(route());
    addEventListener('hashchange', on);
    return () => removeEventListener('hashchange', on);
  }, []);
  return r;
}

function SignIn({ onSignedIn, reason }) {
  const [error, setError] = useState(reason && new Error(reason));
  const [busy, setBusy] = useState(false);
  const submit = async (e) => {
    e.preventDefault();
    const key = new FormData(e.currentTarget).get('key').trim();
    if (!key) {
      setError(new Error('Enter an API key'));
      return;
    }
    setBusy(true);
    try {
      // GET /usage: the cheapest authenticated answer, and it names the key's client.
      const usage = await api('GET', '/usage', { key });
      session.set(key);
      onSignedIn(usage.client_name);
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  return html`<main id="main" class="signin">
    <h1>Media jobs console</h1>
    <form onSubmit=${submit} aria-describedby="key-note">
      <label for="key">API key</label>
      <input id="key" name="key" type="password" autocomplete="off" spellcheck="false" required autofocus />
      <p id="key-note" class="hint">Kept in this tab only (sessionStorage) until you sign out or close it; sent only to this service.</p>
      <button type="submit" disabled=${busy}>${busy ? 'Signing in…' : 'Sign in'}</button>
      <${ErrorLine} error=${error} />
    </form>
  </main>`;
}

const NAV = [['jobs', 'Jobs'], ['batches', 'Batches'], ['usage', 'Usage'], ['settings', 'Settings']];

function View({ r }) {
  if (r.name === 'jobs' && r.id) return html`<${JobView} id=${r.id} />`;
  if (r.name === 'batches' && r.id) return html`<${BatchView} id=${r.id} />`;
  if (r.name === 'batches') return html`<${BatchesView} />`;
  if (r.name === 'usage') return html`<${UsageView} />`;
  if (r.name === 'settings') return html`<${SettingsView} />`;
  return html`<${JobsView} />`;
}

function Console({ client, onSignOut }) {
  const r = useRoute();
  const main = useRef();
  const first = useRef(true);
  // After a navigation the view's heading takes focus, so a screen reader or a keyboard starts there.
  useEffect(() => {
    if (first.current) { first.current = false; return; }
    main.current?.querySelector('h1')?.focus();
  }, [r.name, r.id]);
  return html`<a class="skip" href="#main" onClick=${(e) => { e.preventDefault(); main.current?.querySelector('h1')?.focus(); }}>Skip to content</a>
    <header>
      <span class="brand">Media jobs</span>
      <nav aria-label="Console">
        <ul>${NAV.map(([name, label]) => html`<li><a href=${`#/${name}`} aria-current=${r.name === name ? 'page' : undefined}>${label}</a></li>`)}
          <li><a href="/docs">API reference</a></li></ul>
      </nav>
      <span class="who">${client ? html`Signed in as <strong>${client}</strong>` : null}</span>
      <button type="button" class="secondary" onClick=${onSignOut}>Sign out</button>
    </header>
    <main id="main" ref=${main}><${View} r=${r} /></main>`;
}

function App() {
  const [signedIn, setSignedIn] = useState(Boolean(session.key));
  const [client, setClient] = useState();
  const [reason, setReason] = useState();
  useEffect(() => {
    whenKeyRefused((message) => {
      session.clear();
      setReason(`Signed out: ${message}`);
      setSignedIn(false);
    });
    if (session.key) api('GET', '/usage').then((u) => setClient(u.client_name), () => {});
  }, []);
  if (!signedIn) {
    return html`<${SignIn} reason=${reason} onSignedIn=${(name) => { setClient(name); setReason(undefined); setSignedIn(true); }} />`;
  }
  return html`<${Console} client=${client} onSignOut=${() => { session.clear(); setClient(undefined); setSignedIn(false); }} />`;
}

const root = document.getElementById('app');
root.textContent = '';
render(html`<${App} />`, root);
