// runs.js — every agent run: a filterable list (agent, status) with "Load more" (next_before), a
// run whose tool calls were refused or not approved marked so beside its status; and #/runs/ID with
// each step as a card (kind, name, duration, tokens, cost, collapsible detail JSON). A decision step
// says in words what the call would do, its effect and risk, the verdict, why, and who decided (the
// API explains the recorded envelope in `step.decision`); a tool call is a collapsible card with its
// arguments and its output; the outcome is Markdown. Refreshes on run_* events.
import {
  api, load, el, append, enc, qs, badge, when, duration, money, num, empty, table, kv, json, errorBox, clear, markdown,
  markdownPreview, toolCard,
} from '/app.js';

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
    el('p', { class: 'lead' }, 'Each time an agent worked on something: what started it, how it ended and what it cost. '
      + 'Open one to see every step, and why an action was allowed or refused.'),
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
  { label: 'Status', cell: (r) => el('span', { class: 'status-cell' }, badge(r.status),
    r.refused ? badge('bad', r.refused === 1 ? '1 action not run' : `${r.refused} actions not run`) : null) },
  { label: 'Trigger', cell: (r) => r.trigger ?? '—' },
  { label: 'Started', cell: (r) => when(r.started_ms) },
  { label: 'Duration', cell: (r) => duration(r.duration_ms) },
  { label: 'Tokens in/out', cell: (r) => `${num(r.input_tokens)} / ${num(r.output_tokens)}` },
  { label: 'Cost', cell: (r) => (r.unpriced ? el('span', null, money(r.cost_usd), ' ', badge('warn', 'unpriced')) : money(r.cost_usd)) },
  { label: 'Outcome', cell: (r) => el('span', { class: 'small' }, truncate(markdownPreview(r.outcome), 80), r.skills?.length ? [' ', r.skills.map((s) => el('span', { class: 'chip' }, s))] : null) },
];

const rowAttrs = (r) => ({ 'data-run': r.id, 'data-status': r.status, 'data-refused': r.refused || 0, class: 'clickable',
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
    const open = new Set([...box.querySelectorAll('.step details.json[open]')].map((d) => d.closest('.step').dataset.seq));
    return { r, open };
  };
  const refresh = (quiet) => load(box, fetchRun, ({ r, open }) => { last = r; drawRun(box, r, open); }, { root, quiet });
  // Only a run still in progress changes; keep expanded steps open across refreshes.
  ctx.refresh = () => { if (!last || last.finished_ms == null) refresh(true); };
  return refresh(false);
}

function drawRun(box, r, openSeqs) {
  const refusedNote = r.refused ? el('p', { class: 'refused-note', 'data-refused': r.refused },
    r.refused === 1 ? 'One action in this run was not run: ' : `${r.refused} actions in this run were not run: `,
    'the policy refused it or nobody approved it. The steps below say why and who decided.') : null;
  append(box, el('div', { class: 'card', 'data-run': r.id, 'data-status': r.status, 'data-refused': r.refused || 0 }, refusedNote, kv([
    ['Agent', el('a', { href: `#/agents/${enc(r.agent)}` }, r.agent)],
    ['Status', badge(r.status)], ['Trigger', r.trigger], ['Chat', r.chat],
    ['Started', when(r.started_ms)], ['Duration', duration(r.duration_ms)],
    ['Model', r.model], ['Tokens in/out', `${num(r.input_tokens)} / ${num(r.output_tokens)}`],
    ['Cost', r.unpriced ? el('span', null, money(r.cost_usd), ' ', badge('warn', 'unpriced'), el('span', { class: 'muted small' }, ' (a model without a price: tokens counted, dollars incomplete)')) : money(r.cost_usd)], ['Turns', r.turns],
    ['Skills used', r.skills?.length ? r.skills.map((s) => el('span', { class: 'chip' }, s)) : null],
    ['Outcome', r.outcome != null ? markdown(truncate(r.outcome, 4000), 'md outcome') : null],
  ])));
  append(box, el('h2', null, 'Steps'));
  const steps = r.steps || [];
  if (!steps.length) { append(box, empty('No steps recorded for this run yet.')); return; }
  const results = new Map(steps.filter((s) => s.kind === 'tool_result').map((s) => [s.detail?.call_id, s]));
  append(box, steps.map((s) => step(s, openSeqs.has(String(s.seq)), results)));
}

const EFFECT_WORDS = { read_only: 'only reads', write: 'changes something', destructive: 'can destroy something' };
const RISK_WORDS = { L0: 'L0 · harmless', L1: 'L1 · low', L2: 'L2 · needs approval', L3: 'L3 · blocked' };
const VERDICT_WORDS = { allow: 'allowed', require_approval: 'asked a person', deny: 'refused' };
const VERDICT_TONES = { allow: 'ok', require_approval: 'warn', deny: 'bad' };

function step(s, open, results) {
  const d = s.detail && typeof s.detail === 'object' ? s.detail : {};
  const isDecision = s.kind === 'decision';
  const x = s.decision || {};
  const refused = isDecision && (x.verdict === 'deny' || String(x.approval?.status ?? '').startsWith('denied'));
  const cls = `card step${isDecision ? ' decision' : ''}${refused ? ' is-refused' : ''}${s.kind === 'error' ? ' is-error' : ''}`;
  let body = null;
  if (isDecision) {
    body = [
      x.summary && el('p', { class: 'step-summary' }, `${x.summary}.`),
      kv([
        ['Exactly', x.action ? el('code', null, x.action) : null],
        ['Effect', x.effect ? EFFECT_WORDS[x.effect] ?? x.effect : null],
        ['Risk', x.risk ? badge(x.risk === 'L3' ? 'bad' : x.risk === 'L2' ? 'warn' : 'idle', RISK_WORDS[x.risk] ?? x.risk) : null],
        ['Verdict', x.verdict ? badge(VERDICT_TONES[x.verdict] ?? 'idle', VERDICT_WORDS[x.verdict] ?? x.verdict) : null],
        ['Reason', x.reason],
        ['Decided by', x.decided_by],
        ['Outcome', x.outcome],
      ]),
    ];
  } else if (s.kind === 'tool_call') {
    const result = results.get(d.call_id);
    const card = toolCard({ name: s.name ?? 'tool', args: d.arguments, status: 'started' });
    if (result) card.answer(result.output ?? result.detail?.summary ?? '', result.detail?.is_error === true);
    body = card;
  } else if (s.kind === 'tool_result') {
    body = el('p', { class: 'muted small' }, d.is_error ? 'Answered with an error' : 'Answered',
      d.chars != null ? ` (${num(d.chars)} characters)` : '', ': open the call above to read it.');
  }
  const headBadge = s.kind === 'error' ? 'error' : refused ? 'bad' : isDecision ? 'pending' : 'idle';
  return el('div', { class: cls, 'data-kind': s.kind, 'data-seq': s.seq, 'data-verdict': x.verdict ?? null },
    el('div', { class: 'step-head' },
      el('span', { class: 'muted' }, `#${s.seq}`), badge(headBadge, refused ? 'refused' : s.kind),
      el('span', { class: 'name' }, s.name ?? ''),
      el('span', { class: 'muted small' }, duration(s.duration_ms)),
      (s.tokens_in || s.tokens_out) ? el('span', { class: 'muted small' }, `${num(s.tokens_in)} in / ${num(s.tokens_out)} out`) : null,
      s.cost_usd ? el('span', { class: 'muted small' }, money(s.cost_usd)) : null,
      el('span', { class: 'muted small' }, when(s.created_ms))),
    body,
    s.detail != null && json(s.detail, { summary: 'technical detail', open: open || s.kind === 'error' }));
}
