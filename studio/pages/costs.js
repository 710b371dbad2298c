// costs.js — what the agents cost: today and period totals, an inline-SVG bar chart per day
// (missing days drawn as zero), and tables by agent and by model. Refreshes on cost_recorded.
import { api, load, el, append, money, num, empty, table } from '/app.js';

export const events = ['cost_recorded'];

export async function render(root, ctx) {
  const days = el('select', { id: 'costs-days', 'aria-label': 'Period' },
    [7, 30, 90].map((n) => el('option', { value: n, selected: n === 30 }, `last ${n} days`)));
  const box = el('div');
  append(root, el('div', { class: 'row spread' }, el('h1', null, 'Costs'), days), box);
  const refresh = (quiet) => load(box, () => api(`/api/v1/costs?days=${days.value}`), (d) => draw(box, d, Number(days.value)), { root, quiet });
  days.addEventListener('change', () => refresh(false));
  ctx.refresh = () => refresh(true);
  return refresh(false);
}

function draw(box, d, period) {
  append(box, el('div', { class: 'grid' },
    el('div', { class: 'card stat' }, el('span', { class: 'value', id: 'cost-today' }, money(d.today_usd)), el('span', { class: 'label' }, 'today')),
    el('div', { class: 'card stat' }, el('span', { class: 'value', id: 'cost-total' }, money(d.total_usd)), el('span', { class: 'label' }, `last ${period} days`))));
  append(box, el('h2', null, 'Per day'));
  const byDay = d.by_day || [];
  append(box, byDay.length ? el('div', { class: 'card chart' }, chart(fillDays(byDay))) : empty('No spending recorded in this period yet. Costs appear as soon as an agent calls a model.'));
  const tokens = (r) => `${num(r.input_tokens)} / ${num(r.output_tokens)}`;
  append(box, el('h2', null, 'By agent'), d.by_agent?.length
    ? table([
      { label: 'Agent', cell: (r) => el('a', { href: `#/agents/${encodeURIComponent(r.agent)}` }, r.agent) },
      { label: 'Cost', cell: (r) => money(r.cost_usd) },
      { label: 'Tokens in / out', cell: tokens },
    ], sortByCost(d.by_agent), (r) => ({ 'data-cost-agent': r.agent }))
    : empty('No agent has spent anything in this period.'));
  append(box, el('h2', null, 'By model'), d.by_model?.length
    ? table([
      { label: 'Model', cell: (r) => `${r.provider ? `${r.provider} / ` : ''}${r.model}` },
      { label: 'Cost', cell: (r) => money(r.cost_usd) },
      { label: 'Tokens in / out', cell: tokens },
    ], sortByCost(d.by_model), (r) => ({ 'data-cost-model': r.model }))
    : empty('No model usage in this period.'));
}

const sortByCost = (rows) => [...rows].sort((a, b) => (b.cost_usd ?? 0) - (a.cost_usd ?? 0));

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
    out.push(byKey.get(key) || { day: key, cost_usd: 0, input_tokens: 0, output_tokens: 0 });
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

function chart(days) {
  const W = 720, H = 200, left = 48, bottom = 22, top = 10;
  const max = Math.max(...days.map((d) => d.cost_usd || 0), 0.0001);
  const slot = (W - left) / days.length;
  const barW = Math.max(2, Math.min(28, slot * 0.7));
  const y = (v) => top + (H - top - bottom) * (1 - v / max);
  const labelEvery = Math.ceil(days.length / 8);
  return svg('svg', { viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label': 'Cost per day' },
    svg('line', { x1: left, x2: W, y1: H - bottom, y2: H - bottom, stroke: '#d5dae0' }),
    svg('line', { x1: left, x2: W, y1: top, y2: top, stroke: '#eef0f2' }),
    svg('text', { x: left - 6, y: top + 4, 'text-anchor': 'end' }, money(max)),
    svg('text', { x: left - 6, y: H - bottom, 'text-anchor': 'end' }, '$0'),
    days.map((d, i) => {
      const x = left + i * slot + (slot - barW) / 2;
      const h = Math.max(d.cost_usd > 0 ? 1 : 0, H - bottom - y(d.cost_usd || 0));
      return svg('g', { 'data-day': d.day },
        svg('rect', { class: 'bar', x, y: H - bottom - h, width: barW, height: h, rx: 2 },
          svg('title', null, `${d.day}: ${money(d.cost_usd)} · ${num(d.input_tokens)} in / ${num(d.output_tokens)} out tokens`)),
        i % labelEvery === 0 || i === days.length - 1
          ? svg('text', { x: x + barW / 2, y: H - 6, 'text-anchor': 'middle' }, d.day.slice(5)) : null);
    }));
}
