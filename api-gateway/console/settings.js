// Settings the API keeps per key: saved storage destinations
// (/user/{s3,blob,gcs,oss,drive}), chat notifications (/user/chat) and the
// webhook signing secret (/user/webhook-secret). Secrets are write-only:
// forms send them, no answer shows them again (a new signing secret is shown
// once, as the API answers it).
import { useState } from 'preact/hooks';
import { html } from './html.js';
import { api } from './api.js';
import { ErrorLine, Notice, useAction, useLoad, when } from './ui.js';

/** Each provider's fields (spec: Saved storage destination); `secret` fields are password inputs, `long` a text area. */
const PROVIDERS = {
  s3: { label: 'S3-compatible', fields: [['endpoint', 'Endpoint', 'url'], ['bucket', 'Bucket'], ['region', 'Region'], ['access_key', 'Access key'], ['secret_key', 'Secret key', 'secret'], ['folder_prefix', 'Folder prefix', 'optional'], ['base_folder', 'Base folder', 'optional']] },
  blob: { label: 'Blob', fields: [['account_name', 'Account name'], ['container', 'Container'], ['account_key', 'Account key', 'secret'], ['folder_prefix', 'Folder prefix', 'optional']] },
  gcs: { label: 'GCS', fields: [['project_id', 'Project id'], ['bucket', 'Bucket'], ['service_account_json', 'Service account JSON', 'long'], ['folder_prefix', 'Folder prefix', 'optional'], ['base_folder', 'Base folder', 'optional']] },
  oss: { label: 'OSS', fields: [['endpoint', 'Endpoint', 'url'], ['bucket', 'Bucket'], ['access_key_id', 'Access key id'], ['access_key_secret', 'Access key secret', 'secret'], ['folder_prefix', 'Folder prefix', 'optional'], ['base_folder', 'Base folder', 'optional']] },
  drive: { label: 'Drive', fields: [['service_account_json', 'Service account JSON', 'long'], ['folder_id', 'Folder id', 'optional'], ['folder_prefix', 'Folder prefix', 'optional'], ['base_folder', 'Base folder', 'optional']] },
};

function Field({ provider, name, label, kind }) {
  const id = `${provider}-${name}`;
  const required = kind !== 'optional';
  const input = kind === 'long'
    ? html`<textarea id=${id} name=${name} rows="4" required spellcheck="false"></textarea>`
    : html`<input id=${id} name=${name} type=${kind === 'secret' ? 'password' : kind === 'url' ? 'url' : 'text'} required=${required} autocomplete="off" spellcheck="false" />`;
  return html`<div class="field"><label for=${id}>${label}${required ? '' : ' (optional)'}</label>${input}</div>`;
}

function Destinations() {
  const state = useLoad((signal) => Promise.all(Object.keys(PROVIDERS).map((p) => api('GET', `/user/${p}`, { signal }).then((r) => [p, r]))), []);
  const [provider, setProvider] = useState('s3');
  const action = useAction();
  const save = (e) => {
    e.preventDefault();
    const form = e.currentTarget;
    const body = Object.fromEntries([...new FormData(form)].map(([k, v]) => [k, String(v).trim()]).filter(([, v]) => v));
    return action.run(async () => {
      const r = await api('POST', `/user/${provider}`, { body });
      form.reset();
      state.reload();
      return r.message;
    });
  };
  const remove = (p) => action.run(async () => {
    const r = await api('DELETE', `/user/${p}`);
    state.reload();
    return r.message;
  });
  return html`<section aria-labelledby="dest-title"><h2 id="dest-title">Storage destinations</h2>
    <p class="hint">Jobs without storage go to the default destination: the one marked default, else the most recently saved, else managed storage.</p>
    ${state.data ? html`<table>
      <thead><tr><th scope="col">Provider</th><th scope="col">Bucket or container</th><th scope="col">Folder</th><th scope="col">Saved</th><th scope="col"><span class="sr-only">Action</span></th></tr></thead>
      <tbody>${state.data.map(([p, d]) => html`<tr key=${p}>
        <td>${PROVIDERS[p].label}</td>
        <td>${d.configured ? d.container_or_bucket || d.folder_id || '(root)' : html`<span class="hint">not configured</span>`}</td>
        <td>${d.configured ? [d.base_folder, d.folder_prefix].filter(Boolean).join(' / ') : ''}</td>
        <td>${d.last_modified ? when(d.last_modified * 1000) : d.source ?? ''}</td>
        <td>${d.configured ? html`<button type="button" class="secondary" onClick=${() => remove(p)} aria-label=${`Remove ${PROVIDERS[p].label} destination`}>Remove</button>` : null}</td>
      </tr>`)}</tbody></table>` : html`<p aria-busy="true">Loading…</p>`}
    <form onSubmit=${save} aria-labelledby="dest-form-title">
      <h3 id="dest-form-title">Save a destination</h3>
      <div class="field"><label for="dest-provider">Provider</label>
        <select id="dest-provider" value=${provider} onChange=${(e) => setProvider(e.currentTarget.value)}>
          ${Object.entries(PROVIDERS).map(([p, d]) => html`<option value=${p}>${d.label}</option>`)}
        </select></div>
      ${PROVIDERS[provider].fields.map(([name, label, kind]) => html`<${Field} key=${`${provider}-${name}`} provider=${provider} name=${name} label=${label} kind=${kind} />`)}
      <p class="hint">The service uploads and deletes a small test object with these credentials before saving them, encrypted.</p>
      <button type="submit" disabled=${action.busy}>${action.busy ? 'Checking…' : 'Check and save'}</button>
    </form>
    <${ErrorLine} error=${action.error ?? state.error} />
    <${Notice} text=${action.done} />
  </section>`;
}

const LEVELS = [['all', 'Errors and warnings'], ['errors_only', 'Errors only'], ['warnings_only', 'Warnings only']];

function Chat() {
  const state = useLoad((signal) => api('GET', '/user/chat', { signal }), []);
  const action = useAction();
  const c = state.data;
  const save = (e) => {
    e.preventDefault();
    const form = e.currentTarget;
    const f = new FormData(form);
    return action.run(async () => {
      const r = await api('POST', '/user/chat', { body: { webhook_url: String(f.get('webhook_url')).trim(), notify_level: f.get('notify_level') } });
      form.reset();
      state.reload();
      return r.message;
    });
  };
  const remove = () => action.run(async () => {
    const r = await api('DELETE', '/user/chat');
    state.reload();
    return r.message;
  });
  return html`<section aria-labelledby="chat-title"><h2 id="chat-title">Chat notifications</h2>
    <p>${c === undefined ? 'Loading…' : c.configured
      ? html`Failed jobs are posted to your chat webhook (${LEVELS.find(([l]) => l === c.notify_level)?.[1] ?? c.notify_level}), since ${when(c.updated_at ?? c.created_at)}. `
      : 'Not configured.'}
      ${c?.configured ? html`<button type="button" class="secondary" onClick=${remove}>Remove</button>` : null}</p>
    <form onSubmit=${save}>
      <div class="field"><label for="chat-url">Incoming webhook URL</label>
        <input id="chat-url" name="webhook_url" type="url" required autocomplete="off" placeholder=${c?.webhook_url_prefix ?? ''} /></div>
      <div class="field"><label for="chat-level">Notify about</label>
        <select id="chat-level" name="notify_level">${LEVELS.map(([v, l]) => html`<option value=${v}>${l}</option>`)}</select></div>
      <button type="submit" disabled=${action.busy}>Save</button>
    </form>
    <${ErrorLine} error=${action.error ?? state.error} />
    <${Notice} text=${action.done} />
  </section>`;
}

function WebhookSecret() {
  const state = useLoad((signal) => api('GET', '/user/webhook-secret', { signal }), []);
  const action = useAction();
  const [shown, setShown] = useState();
  const s = state.data;
  const rotate = () => action.run(async () => {
    const r = await api('POST', '/user/webhook-secret');
    setShown(r.secret);
    state.reload();
    return r.rotated ? `Rotated; the previous secret still signs until ${when(r.previous_secret_expires_at)}` : 'Created';
  });
  return html`<section aria-labelledby="secret-title"><h2 id="secret-title">Webhook signing secret</h2>
    <p>${s === undefined ? 'Loading…' : s.configured
      ? `Deliveries are signed (Standard Webhooks) with the secret created ${when(s.created_at)}.`
      : 'No signing secret: deliveries are not signed.'}</p>
    <button type="button" onClick=${rotate} disabled=${action.busy}>${s?.configured ? 'Rotate secret' : 'Create secret'}</button>
    ${shown ? html`<div class="field"><label for="secret-value">New secret (shown this once: store it now)</label>
      <input id="secret-value" readonly value=${shown} spellcheck="false" onFocus=${(e) => e.currentTarget.select()} /></div>` : null}
    <${ErrorLine} error=${action.error ?? state.error} />
    <${Notice} text=${action.done} />
  </section>`;
}

export function SettingsView() {
  return html`<h1 tabindex="-1">Settings</h1>
    <${Destinations} />
    <${WebhookSecret} />
    <${Chat} />`;
}
