// audit.js — the tamper-evident audit log: chain status from /api/v1/audit/verify (green "intact"
// or red with the problem) and the entries, newest first, with "Load more".
import { api, load, el, append, qs, badge, when, empty, table, json, clear, errorBox, fullTime } from '/app.js';

const LIMIT = 100;

export async function render(root) {
  const chain = el('div', { id: 'audit-chain' });
  const box = el('div');
  append(root, el('h1', null, 'Audit log'), chain, el('h2', null, 'Entries'), box);
  load(chain, () => api('/api/v1/audit/verify'), (v) => append(chain, v.ok
    ? el('div', { class: 'card', 'data-chain': 'intact' }, badge('ok', 'intact'), ` The hash chain is intact (${v.entries ?? 0} entries checked).`)
    : el('div', { class: 'card', 'data-chain': 'broken', style: 'border-color:var(--bad)' }, badge('bad', 'broken'),
      ' The audit chain does not verify: ', el('strong', null, v.problem || 'unknown problem'),
      el('p', { class: 'muted small' }, 'Entries may have been edited or deleted outside clawvisor. Keep a copy of the database and investigate.'))));
  return load(box, () => api(`/api/v1/audit${qs({ limit: LIMIT })}`), (d) => draw(box, d.entries || []), { root });
}

const columns = [
  { label: '#', cell: (e) => e.id },
  { label: 'When', cell: (e) => el('span', { title: fullTime(e.at_ms) }, when(e.at_ms)) },
  { label: 'Actor', cell: (e) => e.actor },
  { label: 'Action', cell: (e) => el('strong', null, e.action) },
  { label: 'Subject', cell: (e) => e.subject ?? '' },
  { label: 'Details', cell: (e) => (e.details == null ? '' : json(e.details)) },
];

function draw(box, entries) {
  if (!entries.length) { append(box, empty('The audit log is empty. Operator actions and policy decisions are recorded here.')); return; }
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
        for (const e of page) tbody.append(table(columns, [e], (x) => ({ 'data-entry': x.id })).querySelector('tbody tr'));
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
}
