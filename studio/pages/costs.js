// costs.js — what the agents cost: today and period totals (dollars and tokens), the models
// without a price ("unpriced": their calls count $0 but their tokens are shown and count against
// daily_token_budget), each agent's daily budgets (used today / limit), inline-SVG bar charts per
// day (cost, and tokens with the unpriced share marked; missing days drawn as zero), and tables by
// agent and by model. Refreshes on cost_recorded.
import { api, load, el, append, money, num, empty, table, badge, ago, code } from '/app.js';

export const events = ['cost_recorded'];

export async function render(root, ctx) {
  const days = el('select', { id: 'costs-days', 'aria-label': 'Period' },
    [14, 30, 90].map((n) => el('option', { value: n, selected: n === 30 }, `last ${n} days`)));
  const box = el('div');
  append(root, el('div', { class: 'row spread' }, el('h1', null, 'Costs'), days), box);
  const refresh = (quiet) => load(box, () => api(`/api/v1/costs?days=${days.value}`), (d) => draw(box, d, Number(days.value)), { root, quiet });
  days.addEventListener('change', () => refresh(false));
  ctx.refresh = () => refresh(true);
  return refresh(false);
}

const stat = (id, value, label) =>
  el('div', { class: 'card stat' }, el('span', { class: 'value', id }, value), el('span', { class: 'label' }, label));

function draw(box, d, period) {
  append(box, el('div', { class: 'grid' },
    stat('cost-today', money(d.today_usd), 'today'),
    stat('cost-total', money(d.total_usd), `last ${period} days`),
    stat('tokens-today', num(d.today_tokens), 'tokens today'),
    stat('tokens-total', num(d.total_tokens), `tokens, last ${period} days`)));

  const unpriced = d.unpriced || [];
  if (unpriced.length) {
    append(box, el('h2', null, 'Unpriced models'), el('div', { class: 'card', id: 'unpriced' },
      el('p', { class: 'small' }, 'These models have no price, so their calls count $0 and the dollar figures are incomplete. ',
        'Their tokens are counted, and count against ', code('daily_token_budget'), '.'),
      unpriced.map((m) => el('div', { class: 'unpriced-model', 'data-unpriced-model': m.model },
        el('div', null, badge('warn', 'unpriced'), ' ', el('strong', null, m.provider ? `${m.provider} / ${m.model}` : m.model),
          m.agents?.length ? el('span', { class: 'muted small' }, ` · used by ${m.agents.join(', ')}`) : null),
        el('div', { class: 'small' }, `${num(m.input_tokens)} in / ${num(m.output_tokens)} out tokens in this period`),
        el('div', { class: 'small muted' }, `To fix: ${m.fix}.`)))));
  }

  append(box, el('h2', null, 'Budgets today'));
  const budgets = d.budgets || [];
  append(box, budgets.length
    ? table([
      { label: 'Agent', cell: (b) => el('a', { href: `#/agents/${encodeURIComponent(b.agent)}` }, b.agent) },
      { label: 'Dollars', cell: (b) => used(money(b.usd.used_today), b.usd.limit, money(b.usd.limit), b.usd.used_today) },
      { label: 'Tokens', cell: (b) => used(num(b.tokens.used_today), b.tokens.limit, num(b.tokens.limit), b.tokens.used_today,
        b.unpriced_tokens_today ? `${num(b.unpriced_tokens_today)} unpriced` : null) },
    ], budgets, (b) => ({ 'data-budget-agent': b.agent }))
    : empty('No agents.'));
  append(box, el('p', { class: 'small muted' }, `Budgets reset at midnight UTC (${ago(d.resets_at_ms)}). `,
    'Set them in the agent file: ', code('daily_budget_usd'), ' and ', code('daily_token_budget'), '.'));

  append(box, el('h2', null, 'Per day'));
  const byDay = d.by_day || [];
  if (byDay.length) {
    const filled = fillDays(byDay);
    append(box,
      el('div', { class: 'card chart', id: 'chart-cost' }, el('h3', null, 'Cost'),
        chart(filled, { value: (r) => r.cost_usd || 0, fmt: money, label: 'Cost per day', zero: '$0' })),
      el('div', { class: 'card chart', id: 'chart-tokens' }, el('h3', null, 'Tokens', el('span', { class: 'legend small muted' }, ' · ',
        el('span', { class: 'swatch unpriced' }), ' unpriced')),
        chart(filled, { value: (r) => (r.input_tokens || 0) + (r.output_tokens || 0), part: (r) => r.unpriced_tokens || 0, fmt: compact, label: 'Tokens per day', zero: '0' })));
  } else {
    append(box, empty('No usage recorded in this period yet. Costs appear as soon as an agent calls a model.'));
  }
  const tokens = (r) => `${num(r.input_tokens)} / ${num(r.output_tokens)}`;
  append(box, el('h2', null, 'By agent'), d.by_agent?.length
    ? table([
      { label: 'Agent', cell: (r) => el('a', { href: `#/agents/${encodeURIComponent(r.agent)}` }, r.agent) },
      { label: 'Cost', cell: (r) => money(r.cost_usd) },
      { label: 'Tokens in / out', cell: tokens },
    ], sortByCost(d.by_agent), (r) => ({ 'data-cost-agent': r.agent }))
    : empty('No agent has used a model in this period.'));
  append(box, el('h2', null, 'By model'), d.by_model?.length
    ? table([
      { label: 'Model', cell: (r) => el('span', null, `${r.provider ? `${r.provider} / ` : ''}${r.model}`, r.unpriced ? [' ', badge('warn', 'unpriced')] : null) },
      { label: 'Cost', cell: (r) => (r.unpriced && !r.cost_usd ? el('span', { class: 'muted' }, 'unpriced') : money(r.cost_usd)) },
      { label: 'Tokens in / out', cell: tokens },
    ], sortByCost(d.by_model), (r) => ({ 'data-cost-model': r.model }))
    : empty('No model usage in this period.'));
}

/** "used / limit" with a meter, or "used (no limit)". */
function used(usedText, limit, limitText, value, extra) {
  const note = extra ? el('span', { class: 'small muted' }, ` (${extra})`) : null;
  if (limit == null) return el('span', null, usedText, el('span', { class: 'muted small' }, ' · no limit'), note);
  const over = value >= limit;
  return el('span', { class: 'budget' },
    el('meter', { min: 0, max: limit, value: Math.min(value, limit), low: limit * 0.6, high: limit * 0.9, optimum: 0 }),
    ' ', usedText, ' / ', limitText, note, over ? [' ', badge('bad', 'used up')] : null);
}

const compact = (n) => (n >= 1e6 ? `${(n / 1e6).toFixed(1)}M` : n >= 1e3 ? `${(n / 1e3).toFixed(1)}k` : String(Math.round(n)));

const sortByCost = (rows) => [...rows].sort((a, b) => (b.cost_usd ?? 0) - (a.cost_usd ?? 0)
  || ((b.input_tokens + b.output_tokens) - (a.input_tokens + a.output_tokens)));

/** Sorted days from the first to the last reported one, with zero rows for the gaps. */
function fillDays(rows) {
  const byKey = new Map(rows.map((r) => [r.day, r]));
  const keys = [...byKey.keys()].sort();
  const parse = (k) => Date.UTC(+k.slice(0, 4), +k.slice(5, 7) - 1, +k.slice(8, 10));
  const first = parse(keys[0]);
  const last = parse(keys[keys.length - 1]);
  if (Number.isNaN(first) || Number.isNaN(last) || last - first > 400 * 86400e3) return keys.map((k) => byKey.get(k));
  const out = [];
  for (let t = first; t <= last; t += 86400e3) {
    const key = new Date(t).toISOString().slice(0, 10);
    out.push(byKey.get(key) || { day: key, cost_usd: 0, input_tokens: 0, output_tokens: 0, unpriced_tokens: 0 });
  }
  return out;
}

const SVG = 'http://www.w3.org/2000/svg';
function svg(tag, attrs, ...children) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, String(v));
  for (const c of children.flat()) if (c != null) node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return node;
}

/** Bars per day of `value(row)`; `part(row)`, when given, is drawn over the bottom of its bar. */
function chart(days, { value, part, fmt, label, zero }) {
  const W = 720, H = 200, left = 48, bottom = 22, top = 10;
  const max = Math.max(...days.map(value), 0.0001);
  const slot = (W - left) / days.length;
  const barW = Math.max(2, Math.min(28, slot * 0.7));
  const height = (v) => (H - top - bottom) * (v / max);
  const labelEvery = Math.ceil(days.length / 8);
  return svg('svg', { viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label': label },
    svg('line', { x1: left, x2: W, y1: H - bottom, y2: H - bottom, stroke: '#d5dae0' }),
    svg('line', { x1: left, x2: W, y1: top, y2: top, stroke: '#eef0f2' }),
    svg('text', { x: left - 6, y: top + 4, 'text-anchor': 'end' }, fmt(max)),
    svg('text', { x: left - 6, y: H - bottom, 'text-anchor': 'end' }, zero),
    days.map((d, i) => {
      const x = left + i * slot + (slot - barW) / 2;
      const v = value(d);
      const h = Math.max(v > 0 ? 1 : 0, height(v));
      const p = part ? Math.min(h, height(part(d))) : 0;
      const title = `${d.day}: ${money(d.cost_usd)} · ${num(d.input_tokens)} in / ${num(d.output_tokens)} out tokens`
        + (d.unpriced_tokens ? ` (${num(d.unpriced_tokens)} unpriced)` : '');
      return svg('g', { 'data-day': d.day },
        svg('rect', { class: 'bar', x, y: H - bottom - h, width: barW, height: h, rx: 2 }, svg('title', null, title)),
        p > 0 ? svg('rect', { class: 'bar unpriced', x, y: H - bottom - p, width: barW, height: p, rx: 2 }, svg('title', null, title)) : null,
        i % labelEvery === 0 || i === days.length - 1
          ? svg('text', { x: x + barW / 2, y: H - 6, 'text-anchor': 'middle' }, d.day.slice(5)) : null);
    }));
}
