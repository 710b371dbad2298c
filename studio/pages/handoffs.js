// handoffs.js — work one agent handed to another: list (owner → delegate, subtask, status,
// deadline), #/handoffs/ID with the contract and its timeline, Cancel for live ones.
// Refreshes on handoff_changed events.
import { api, load, el, append, enc, badge, when, empty, table, kv, act, json, toast } from '/app.js';

export const events = ['handoff_changed'];
const FINISHED = ['done', 'completed', 'succeeded', 'failed', 'cancelled', 'canceled', 'expired', 'rejected', 'timed_out'];
const isLive = (h) => h.status && !FINISHED.includes(String(h.status).toLowerCase());

export async function render(root, ctx) {
  if (ctx.params[0]) return detail(root, ctx, ctx.params[0]);
  const box = el('div');
  append(root, el('h1', null, 'Handoffs'), box);
  const refresh = (quiet) => load(box, () => api('/api/v1/handoffs'), (d) => list(box, d.handoffs || [], () => refresh(true)), { root, quiet });
  ctx.refresh = () => refresh(true);
  return refresh(false);
}

function cancelButton(h, after) {
  return el('button', { type: 'button', class: 'danger', 'data-action': 'cancel', onclick: async (e) => {
    e.stopPropagation();
    if (!confirm(`Cancel the handoff "${h.subtask ?? h.id}"?`)) return;
    if (await act(e.currentTarget, () => api(`/api/v1/handoffs/${enc(h.id)}/cancel`, { method: 'POST' }))) {
      toast('Handoff cancelled.');
      after();
    }
  } }, 'Cancel');
}

function list(box, items, refresh) {
  if (!items.length) {
    append(box, empty('No handoffs yet. When one agent delegates a subtask to another, it is tracked here.'));
    return;
  }
  append(box, table([
    { label: 'Handoff', cell: (h) => el('a', { href: `#/handoffs/${enc(h.id)}` }, String(h.id).slice(0, 12)) },
    { label: 'From → to', cell: (h) => `${h.owner} → ${h.delegate}` },
    { label: 'Subtask', cell: (h) => h.subtask ?? '' },
    { label: 'Status', cell: (h) => badge(h.status) },
    { label: 'Deadline', cell: (h) => when(h.deadline_ms) },
    { label: 'Updated', cell: (h) => when(h.updated_ms) },
    { label: '', cell: (h) => (isLive(h) ? cancelButton(h, refresh) : '') },
  ], items, (h) => ({ 'data-handoff': h.id, 'data-status': h.status, class: 'clickable',
    onclick: (e) => { if (!['A', 'BUTTON'].includes(e.target.tagName)) location.hash = `#/handoffs/${enc(h.id)}`; } })));
}

function detail(root, ctx, id) {
  const box = el('div');
  append(root, el('p', null, el('a', { href: '#/handoffs' }, '← All handoffs')), el('h1', null, 'Handoff'), box);
  const refresh = (quiet) => load(box, () => api(`/api/v1/handoffs/${enc(id)}`), (d) => {
    const c = d.contract || {};
    const known = ['id', 'owner', 'delegate', 'subtask', 'status', 'deadline_ms', 'created_ms', 'updated_ms', 'result', 'reason'];
    const extra = Object.fromEntries(Object.entries(c).filter(([k]) => !known.includes(k)));
    append(box, el('div', { class: 'card', 'data-handoff': c.id ?? id, 'data-status': c.status },
      kv([
        ['Id', c.id ?? id], ['From', c.owner], ['To', c.delegate], ['Subtask', c.subtask],
        ['Status', badge(c.status)], ['Deadline', c.deadline_ms != null ? when(c.deadline_ms) : null],
        ['Created', when(c.created_ms)], ['Updated', when(c.updated_ms)],
        ['Result', c.result != null ? el('span', { style: 'white-space:pre-wrap' }, typeof c.result === 'string' ? c.result : JSON.stringify(c.result, null, 2)) : null],
        ['Reason', c.reason],
      ]),
      Object.keys(extra).length > 0 && json(extra, { summary: 'more fields' }),
      isLive(c) && el('div', { class: 'row' }, cancelButton({ ...c, id }, () => refresh(true)))),
    el('h2', null, 'Timeline'));
    const timeline = d.timeline || [];
    append(box, timeline.length
      ? el('ol', { class: 'card' }, timeline.map((t) => el('li', { style: 'margin:.3rem 0' }, when(t.at_ms), ' ', badge(t.kind), ' ',
        typeof t.detail === 'string' ? t.detail : t.detail != null ? json(t.detail) : '')))
      : empty('Nothing has happened on this handoff yet.'));
  }, { root, quiet });
  ctx.refresh = () => refresh(true);
  return refresh(false);
}
