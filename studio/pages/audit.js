// audit.js — the tamper-evident audit log: chain status from /api/v1/audit/verify (green "intact"
// or red with the problem) and the entries, newest first, with "Load more". Refreshes on
// audit_appended (every writer of the log announces its rows once committed): new entries are
// added on top and the chain is checked again; rows already shown (and opened details, and pages
// loaded with "Load more") stay as they are.
import { api, load, el, append, qs, badge, when, empty, table, json, clear, errorBox, fullTime } from '/app.js';

export const events = ['audit_appended'];

const LIMIT = 100;

export async function render(root, ctx) {
  const chain = el('div', { id: 'audit-chain' });
  const box = el('div');
  append(root, el('h1', null, 'Audit log'), chain, el('h2', null, 'Entries'), box);
  const verify = (quiet) => load(chain, () => api('/api/v1/audit/verify'), (v) => append(chain, v.ok
    ? el('div', { class: 'card', 'data-chain': 'intact' }, badge('ok', 'intact'), ` The hash chain is intact (${v.entries ?? 0} entries checked).`)
    : el('div', { class: 'card', 'data-chain': 'broken', style: 'border-color:var(--bad)' }, badge('bad', 'broken'),
      ' The audit chain does not verify: ', el('strong', null, v.problem || 'unknown problem'),
      el('p', { class: 'muted small' }, 'Entries may have been edited or deleted outside clawvisor. Keep a copy of the database and investigate.'))), { quiet });
  let view = null; // { tbody, newest } once entries are drawn
  const full = (quiet) => load(box, () => api(`/api/v1/audit${qs({ limit: LIMIT })}`), (d) => { view = draw(box, d.entries || []); }, { root, quiet });
  ctx.refresh = async () => {
    verify(true);
    if (!view) return full(true);
    let entries;
    try {
      entries = (await api(`/api/v1/audit${qs({ limit: LIMIT })}`)).entries || [];
    } catch {
      return undefined; // the next event or a reload tries again; what is shown stays true
    }
    if (!view.tbody.isConnected) return undefined;
    const fresh = entries.filter((e) => e.id > view.newest);
    // More new rows than one page: there may be a gap, so draw the newest page anew.
    if (fresh.length >= LIMIT) return full(true);
    for (const e of [...fresh].reverse()) view.tbody.prepend(row(e));
    if (fresh.length) view.newest = fresh[0].id;
    return undefined;
  };
  verify(false);
  return full(false);
}

const columns = [
  { label: '#', cell: (e) => e.id },
  { label: 'When', cell: (e) => el('span', { title: fullTime(e.at_ms) }, when(e.at_ms)) },
  { label: 'Actor', cell: (e) => e.actor },
  { label: 'Action', cell: (e) => el('strong', null, e.action) },
  { label: 'Subject', cell: (e) => e.subject ?? '' },
  { label: 'Details', cell: (e) => (e.details == null ? '' : json(e.details)) },
];

const row = (e) => table(columns, [e], (x) => ({ 'data-entry': x.id })).querySelector('tbody tr');

/** Draws the entries; returns what a live refresh needs (null when the log is empty). */
function draw(box, entries) {
  if (!entries.length) { append(box, empty('The audit log is empty. Operator actions and policy decisions are recorded here.')); return null; }
  const wrap = table(columns, entries, (e) => ({ 'data-entry': e.id }));
  const tbody = wrap.querySelector('tbody');
  const more = el('div', { class: 'row', style: 'margin-top:.6rem' });
  let oldest = entries[entries.length - 1].id; // newest first, so the last one is the oldest
  let exhausted = entries.length < LIMIT;
  const showMore = () => {
    clear(more);
    if (exhausted) return;
    const button = el('button', { type: 'button', class: 'load-more', onclick: async () => {
      button.disabled = true;
      button.textContent = 'Loading…';
      try {
        const page = (await api(`/api/v1/audit${qs({ limit: LIMIT, before: oldest })}`)).entries || [];
        for (const e of page) tbody.append(row(e));
        if (page.length) oldest = page[page.length - 1].id;
        exhausted = page.length < LIMIT;
        showMore();
      } catch (err) {
        clear(more, errorBox(err.message, showMore));
      }
    } }, 'Load more');
    append(more, button);
  };
  showMore();
  append(box, wrap, more);
  return { tbody, newest: entries[0].id };
}
