// runs.js — every agent run: a filterable list (agent, status) with "Load more" (next_before), and
// #/runs/ID with each step as a card (kind, name, duration, tokens, cost, collapsible detail JSON);
// decision steps are highlighted with tool / effect / risk / reason. Refreshes on run_* events.
import { api, load, el, append, enc, qs, badge, when, duration, money, num, empty, table, kv, json, errorBox, clear } from '/app.js';

export const events = ['run_started', 'run_step', 'run_finished'];
const STATUSES = ['running', 'succeeded', 'failed', 'cancelled'];

export async function render(root, ctx) {
  if (ctx.params[0]) return detail(root, ctx, ctx.params[0]);
  const filter = { agent: ctx.query.get('agent') || '', status: ctx.query.get('status') || '' };
  const agentSelect = el('select', { id: 'runs-agent', 'aria-label': 'Agent' }, el('option', { value: '' }, 'all agents'));
  const statusSelect = el('select', { id: 'runs-status', 'aria-label': 'Status', value: filter.status },
    el('option', { value: '' }, 'any status'), STATUSES.map((s) => el('option', { value: s }, s)));
  if (filter.status && !STATUSES.includes(filter.status)) statusSelect.append(el('option', { value: filter.status, selected: true }, filter.status));
  const box = el('div');
  append(root, el('h1', null, 'Runs'),
    el('div', { class: 'row', style: 'margin-bottom:.8rem' }, agentSelect, statusSelect), box);

  // The agent list is only for the filter; without it the list still works.
  api('/api/v1/agents').then((d) => {
    for (const a of d.agents || []) agentSelect.append(el('option', { value: a.name }, a.name));
    if (filter.agent && ![...agentSelect.options].some((o) => o.value === filter.agent)) agentSelect.append(el('option', { value: filter.agent }, filter.agent));
    agentSelect.value = filter.agent;
  }).catch(() => {
    if (filter.agent) { agentSelect.append(el('option', { value: filter.agent }, filter.agent)); agentSelect.value = filter.agent; }
  });

  const refresh = (quiet) => load(box, () => api(`/api/v1/runs${qs({ ...filter, limit: 50 })}`), (d) => list(box, d, filter), { root, quiet });
  for (const [select, key] of [[agentSelect, 'agent'], [statusSelect, 'status']]) {
    select.addEventListener('change', () => { filter[key] = select.value; refresh(false); });
  }
  ctx.refresh = () => refresh(true);
  return refresh(false);
}

const columns = [
  { label: 'Run', cell: (r) => el('a', { href: `#/runs/${enc(r.id)}` }, `#${r.id}`) },
  { label: 'Agent', cell: (r) => r.agent },
  { label: 'Status', cell: (r) => badge(r.status) },
  { label: 'Trigger', cell: (r) => r.trigger ?? '—' },
  { label: 'Started', cell: (r) => when(r.started_ms) },
  { label: 'Duration', cell: (r) => duration(r.duration_ms) },
  { label: 'Tokens in/out', cell: (r) => `${num(r.input_tokens)} / ${num(r.output_tokens)}` },
  { label: 'Cost', cell: (r) => (r.unpriced ? el('span', null, money(r.cost_usd), ' ', badge('warn', 'unpriced')) : money(r.cost_usd)) },
  { label: 'Outcome', cell: (r) => el('span', { class: 'small' }, truncate(r.outcome, 80), r.skills?.length ? [' ', r.skills.map((s) => el('span', { class: 'chip' }, s))] : null) },
];

const rowAttrs = (r) => ({ 'data-run': r.id, 'data-status': r.status, class: 'clickable',
  onclick: (e) => { if (e.target.tagName !== 'A') location.hash = `#/runs/${enc(r.id)}`; } });

function truncate(text, n) {
  if (text == null) return '';
  const s = typeof text === 'string' ? text : JSON.stringify(text);
  return s.length > n ? `${s.slice(0, n)}…` : s;
}

function list(box, d, filter) {
  if (!d.runs?.length) {
    append(box, empty(filter.agent || filter.status
      ? 'No runs match this filter. Try "all agents" / "any status".'
      : 'No runs yet. Send an agent a message on the Chat page, or create a schedule, and its runs appear here.'));
    return;
  }
  const wrap = table(columns, d.runs, rowAttrs);
  const tbody = wrap.querySelector('tbody');
  const more = el('div', { class: 'row', style: 'margin-top:.6rem' });
  let before = d.next_before;
  const showMore = () => {
    clear(more);
    if (before == null) return;
    const button = el('button', { type: 'button', class: 'load-more', onclick: async () => {
      button.disabled = true;
      button.textContent = 'Loading…';
      try {
        const page = await api(`/api/v1/runs${qs({ ...filter, before, limit: 50 })}`);
        for (const r of page.runs || []) tbody.append(table(columns, [r], rowAttrs).querySelector('tbody tr'));
        before = page.next_before;
        showMore();
      } catch (e) {
        clear(more, errorBox(e.message, showMore, 'Try again'));
      }
    } }, 'Load more');
    append(more, button);
  };
  showMore();
  append(box, wrap, more);
}

// ---------- one run ----------

function detail(root, ctx, id) {
  const box = el('div');
  append(root, el('p', null, el('a', { href: '#/runs' }, '← All runs')), el('h1', null, `Run #${id}`), box);
  let last = null;
  const fetchRun = async () => {
    const r = await api(`/api/v1/runs/${enc(id)}`);
    // Remember which step details are expanded before the box is redrawn.
    const open = new Set([...box.querySelectorAll('.step details[open]')].map((d) => d.closest('.step').dataset.seq));
    return { r, open };
  };
  const refresh = (quiet) => load(box, fetchRun, ({ r, open }) => { last = r; drawRun(box, r, open); }, { root, quiet });
  // Only a run still in progress changes; keep expanded steps open across refreshes.
  ctx.refresh = () => { if (!last || last.finished_ms == null) refresh(true); };
  return refresh(false);
}

function drawRun(box, r, openSeqs) {
  append(box, el('div', { class: 'card', 'data-run': r.id, 'data-status': r.status }, kv([
    ['Agent', el('a', { href: `#/agents/${enc(r.agent)}` }, r.agent)],
    ['Status', badge(r.status)], ['Trigger', r.trigger], ['Chat', r.chat],
    ['Started', when(r.started_ms)], ['Duration', duration(r.duration_ms)],
    ['Model', r.model], ['Tokens in/out', `${num(r.input_tokens)} / ${num(r.output_tokens)}`],
    ['Cost', r.unpriced ? el('span', null, money(r.cost_usd), ' ', badge('warn', 'unpriced'), el('span', { class: 'muted small' }, ' (a model without a price: tokens counted, dollars incomplete)')) : money(r.cost_usd)], ['Turns', r.turns],
    ['Skills used', r.skills?.length ? r.skills.map((s) => el('span', { class: 'chip' }, s)) : null],
    ['Outcome', r.outcome != null ? el('span', { style: 'white-space:pre-wrap' }, truncate(r.outcome, 2000)) : null],
  ])));
  append(box, el('h2', null, 'Steps'));
  const steps = r.steps || [];
  if (!steps.length) { append(box, empty('No steps recorded for this run yet.')); return; }
  append(box, steps.map((s) => step(s, openSeqs.has(String(s.seq)))));
}

function step(s, open) {
  const d = s.detail && typeof s.detail === 'object' ? s.detail : {};
  const isDecision = s.kind === 'decision';
  const effect = d.effect ?? d.decision ?? d.verdict;
  const cls = `card step${isDecision ? ' decision' : ''}${s.kind === 'error' ? ' is-error' : ''}`;
  return el('div', { class: cls, 'data-kind': s.kind, 'data-seq': s.seq },
    el('div', { class: 'step-head' },
      el('span', { class: 'muted' }, `#${s.seq}`), badge(s.kind === 'error' ? 'error' : isDecision ? 'pending' : 'idle', s.kind),
      el('span', { class: 'name' }, s.name ?? ''),
      el('span', { class: 'muted small' }, duration(s.duration_ms)),
      (s.tokens_in || s.tokens_out) ? el('span', { class: 'muted small' }, `${num(s.tokens_in)} in / ${num(s.tokens_out)} out`) : null,
      s.cost_usd ? el('span', { class: 'muted small' }, money(s.cost_usd)) : null,
      el('span', { class: 'muted small' }, when(s.created_ms))),
    isDecision && kv([
      ['Tool', d.tool ?? s.name], ['Effect', effect != null ? badge(String(effect)) : null],
      ['Risk', d.risk != null ? badge(String(d.risk)) : null], ['Reason', d.reason],
    ]),
    s.detail != null && json(s.detail, { summary: 'detail', open: open || s.kind === 'error' }));
}
