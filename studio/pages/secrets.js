// secrets.js — Keys & tokens: the API keys and bot tokens the configuration names, what uses each,
// whether it is set (from the daemon's environment or kept by Studio) and its last characters;
// a form to set or replace one (a password field: the value goes to the daemon once and is never
// shown again), and delete with an inline confirmation. Each change reloads the daemon's
// configuration, and the reload's report is shown. Refreshes on config_reloaded and on the audit
// rows of a change made elsewhere (secret.set, secret.deleted).
import { api, load, el, append, clear, enc, badge, empty, code } from '/app.js';

export const events = ['config_reloaded', 'audit_appended'];

// A reload can take a while (bots and agents restart); the route answers within 120 s.
const CHANGE_TIMEOUT_MS = 150000;

export async function render(root, ctx) {
  const box = el('div', { id: 'secrets-list' });
  const outcome = el('div', { id: 'secret-outcome', 'aria-live': 'polite' });
  const details = el('div');
  const form = setForm(outcome, () => refresh(true));
  append(root, el('h1', null, 'Keys & tokens'),
    el('p', { class: 'muted small', id: 'secrets-purpose' },
      'The API keys and Telegram bot tokens your agents need. Paste one below and the daemon keeps it and starts using it at once; ',
      'it is never shown again, only its last few characters.'),
    outcome, box, form.card, details);
  // Which row asks "Delete …?": kept across redraws (a change elsewhere redraws the table).
  const page = { form, outcome, details, confirming: null, refresh: () => refresh(true) };
  const refresh = (quiet) => load(box, () => api('/api/v1/secrets'), (d) => draw(box, d, page), { root, quiet });
  ctx.refresh = () => refresh(true);
  ctx.accept = (kind, event) => kind !== 'audit_appended' || String(event?.data?.action ?? '').startsWith('secret.');
  await refresh(false);
}

function draw(box, d, page) {
  const items = d.secrets || [];
  page.form.names(items.filter((s) => s.used).map((s) => s.name));
  for (const warning of d.warnings || []) append(box, el('p', { class: 'error', role: 'alert' }, warning));
  if (!items.length) {
    append(box, empty('Nothing in the configuration needs a key or token yet. When a model provider or a Telegram bot is added, its key appears here.'));
  } else {
    append(box, el('div', { class: 'table-wrap' }, el('table', { class: 'cards', id: 'secrets-table' },
      el('thead', null, el('tr', null, ['Name', 'Used by', 'Status', ''].map((h) => el('th', null, h)))),
      el('tbody', null, items.map((s) => row(s, page))))));
  }
  clear(page.details, el('details', { class: 'json', id: 'secrets-details' }, el('summary', null, 'Where they are kept'),
    el('p', { class: 'small' }, 'Studio keeps them in ', code(d.file), ' (readable by the daemon\'s user only). ',
      'A variable set in the daemon\'s environment wins over a value kept here. ',
      `The last 4 characters are shown only for values of ${d.ending_shown_from} characters or more. `,
      'Keys never reach answers, logs, the agents\' tools or the model, and backups leave them out unless ',
      code('clawvisor backup --include-secrets'), ' is used.')));
}

function statusCell(s) {
  const parts = [];
  if (s.set) {
    parts.push(badge('ok', s.ends_with ? `set · …${s.ends_with}` : 'set'));
    parts.push(' ', el('span', { class: 'chip', 'data-source': s.source },
      s.source === 'environment' ? 'from the environment' : 'kept by Studio'));
  } else if (s.used && s.required) {
    parts.push(badge('bad', 'not set'));
  } else if (s.used) {
    parts.push(badge('idle', 'not set · optional'));
  } else {
    parts.push(badge('idle', 'not used'));
  }
  if (s.in_environment && s.in_store) parts.push(' ', badge('warn', 'also kept by Studio'));
  return el('div', null, el('div', null, parts), el('div', { class: 'muted small secret-note' }, s.note));
}

function row(s, page) {
  const actions = el('div', { class: 'row secret-actions' });
  const showButtons = () => clear(actions,
    s.in_environment ? null : el('button', { type: 'button', 'data-action': 'set', class: s.set || !s.required ? '' : 'primary',
      onclick: () => page.form.choose(s.name) }, s.set ? 'Replace' : 'Set'),
    s.in_store ? el('button', { type: 'button', class: 'danger', 'data-action': 'delete',
      onclick: () => confirmDelete() }, 'Delete') : null);
  const keep = () => { page.confirming = null; showButtons(); };
  const confirmDelete = () => { page.confirming = s.name; clear(actions, el('div', { class: 'confirm', 'data-confirm': s.name },
    el('p', { class: 'small', style: 'margin:0 0 .3rem' }, `Delete ${s.name}?`,
      s.used && !s.in_environment ? ` ${usedText(s)} will stop working until it is set again.` : ''),
    el('div', { class: 'row' },
      el('button', { type: 'button', class: 'danger', 'data-action': 'confirm-delete', onclick: async (e) => {
        e.currentTarget.disabled = true;
        const result = await change(page.outcome, () => api(`/api/v1/secrets/${enc(s.name)}`, { method: 'DELETE', timeoutMs: CHANGE_TIMEOUT_MS }));
        page.confirming = null;
        if (result) page.refresh(); else showButtons();
      } }, 'Delete'),
      el('button', { type: 'button', 'data-action': 'keep', onclick: keep }, 'Keep it')))); };
  if (page.confirming === s.name && s.in_store) confirmDelete(); else showButtons();
  return el('tr', { 'data-secret': s.name, 'data-set': String(s.set), 'data-source': s.source ?? '' },
    el('td', { 'data-label': 'Name' }, code(s.name)),
    el('td', { 'data-label': 'Used by' }, s.used_by?.length
      ? el('div', { class: 'uses' }, s.used_by.map((u) => el('div', null, u.text,
        u.applies_at_reload ? null : el('span', { class: 'muted small' }, ' (a new value applies after a restart)'))))
      : el('span', { class: 'muted' }, 'nothing uses it')),
    el('td', { 'data-label': 'Status' }, statusCell(s)),
    el('td', { 'data-label': '' }, actions));
}

const usedText = (s) => (s.used_by || []).map((u) => u.text).join(', ').replace(/^./, (c) => c.toUpperCase());

/** Runs a change, shows its outcome (the daemon's sentence and the reload's report). */
async function change(outcome, run) {
  clear(outcome, el('p', { class: 'loading', role: 'status' }, 'Saving and reloading the configuration…'));
  try {
    const result = await run();
    const ok = result.reload == null || result.reload.ok === true;
    clear(outcome, el('div', { class: ok ? 'hint' : 'error', role: ok ? 'status' : 'alert', 'data-outcome': ok ? 'ok' : 'reload-failed' },
      el('p', { style: 'margin:0' }, el('strong', null, result.message)),
      result.reload?.summary ? el('details', { class: 'json' }, el('summary', null, 'What the reload did'),
        el('p', { class: 'small', style: 'margin:.3rem 0 0' }, result.reload.summary)) : null));
    return result;
  } catch (e) {
    clear(outcome, el('div', { class: 'error', role: 'alert', 'data-outcome': 'refused' },
      // The API names the field ("`value`: …"); the form shows which one by itself.
      el('p', { style: 'margin:0' }, `Nothing was changed: ${e.message.replace(/^`\w+`: /, '')}`)));
    return undefined;
  }
}

function setForm(outcome, refreshed) {
  const name = el('input', { id: 'secret-name', name: 'name', required: true, list: 'secret-names', autocomplete: 'off',
    spellcheck: 'false', placeholder: 'e.g. OPENAI_API_KEY' });
  const names = el('datalist', { id: 'secret-names' });
  const value = el('input', { id: 'secret-value', name: 'value', type: 'password', required: true, autocomplete: 'new-password',
    spellcheck: 'false', placeholder: 'paste the key or token' });
  const save = el('button', { id: 'secret-save', type: 'submit', class: 'primary' }, 'Save');
  const form = el('form', { id: 'secret-form', class: 'form-grid', autocomplete: 'off' },
    el('label', null, 'Name', name, names),
    el('label', null, 'Key or token', value),
    el('div', { class: 'wide row' }, save,
      el('span', { class: 'muted small' }, 'Saving replaces any value kept under that name, then reloads the configuration.')));
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    save.disabled = true;
    try {
      const result = await change(outcome, () => api(`/api/v1/secrets/${enc(name.value.trim())}`,
        { method: 'PUT', body: { value: value.value }, timeoutMs: CHANGE_TIMEOUT_MS }));
      if (result) { value.value = ''; refreshed(); }
    } finally {
      save.disabled = false;
    }
  });
  const card = el('div', { class: 'card', id: 'secret-form-card', style: 'margin-top:1rem' }, el('h2', { style: 'margin-top:0' }, 'Set or replace a key'), form);
  return {
    card,
    names: (list) => clear(names, list.map((n) => el('option', { value: n }))),
    choose: (chosen) => {
      name.value = chosen;
      value.value = '';
      card.scrollIntoView?.({ block: 'nearest' });
      value.focus();
    },
  };
}
