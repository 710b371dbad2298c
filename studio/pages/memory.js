// memory.js — what the agents remember: stats, a search box (hybrid or full-text, with scores) and
// the list of facts with Archive / Restore / Redact, and Purge behind a confirm(). Only the fact
// list refreshes on memory_changed, so the search box keeps its text.
import { api, load, el, append, enc, qs, badge, when, empty, act, toast, clear } from '/app.js';

export const events = ['memory_changed'];

export async function render(root, ctx) {
  const stats = el('p', { class: 'muted small' });
  const owner = el('input', { id: 'memory-owner', placeholder: 'owner (agent), optional', 'aria-label': 'Owner' });
  const q = el('input', { id: 'memory-q', type: 'search', placeholder: 'Search memories…', 'aria-label': 'Search' });
  const results = el('div', { id: 'memory-results' });
  const list = el('div');
  let lastQuery = '';

  const refreshList = (quiet) => load(list, () => api(`/api/v1/memory${qs({ owner: owner.value.trim(), limit: 200 })}`),
    (d) => drawFacts(list, d.memories || [], afterChange), { root, quiet });
  const search = (quiet) => {
    lastQuery = q.value.trim();
    if (!lastQuery) { clear(results); return undefined; }
    return load(results, () => api(`/api/v1/memory/search${qs({ q: lastQuery, owner: owner.value.trim() })}`), (d) => {
      append(results, el('h2', null, `Results for “${lastQuery}”`, ' ', el('span', { class: 'muted small' }, `(${d.mode ?? 'search'})`)));
      const hits = d.hits || [];
      if (!hits.length) append(results, empty('Nothing matched. Try fewer or different words.'));
      else append(results, hits.map((h) => factCard(h.memory, afterChange, h.score)));
    }, { quiet });
  };
  const loadStats = () => api('/api/v1/memory/stats').then((s) => {
    stats.textContent = `${s.live ?? '?'} live · ${s.archived ?? 0} archived · ${s.redacted ?? 0} redacted · search mode: ${s.mode ?? '?'}`;
  }).catch(() => { stats.textContent = ''; });
  function afterChange() { refreshList(true); if (lastQuery) search(true); loadStats(); }

  append(root, el('h1', null, 'Memory'), stats,
    el('form', { class: 'row', style: 'margin-bottom:1rem', onsubmit: (e) => { e.preventDefault(); search(false); refreshList(true); } },
      q, owner, el('button', { type: 'submit', class: 'primary' }, 'Search')),
    results, el('h2', null, 'All memories'), list);
  ctx.refresh = () => { refreshList(true); loadStats(); };
  loadStats();
  return refreshList(false);
}

function drawFacts(box, facts, after) {
  if (!facts.length) {
    append(box, empty('No memories yet. Agents save facts as you talk to them (for example "remember that I prefer mornings").'));
    return;
  }
  append(box, facts.map((f) => factCard(f, after)));
}

function factCard(f, after, score) {
  const op = (verb, label, cls = '') => el('button', { type: 'button', class: cls, 'data-action': verb, onclick: async (e) => {
    if (verb === 'purge' && !confirm('Purge this memory for good? It cannot be restored.')) return;
    if (await act(e.currentTarget, () => api(`/api/v1/memory/${enc(f.id)}/${verb}`, { method: 'POST' }))) {
      toast(`Memory #${f.id}: ${verb} done.`);
      after();
    }
  } }, label);
  const state = f.redacted_ms ? 'redacted' : f.archived_ms ? 'archived' : 'live';
  return el('div', { class: 'card', 'data-memory': f.id, 'data-state': state },
    el('div', { class: 'row spread' },
      el('div', { class: 'row small' }, el('strong', null, f.owner), f.class && el('span', { class: 'chip' }, f.class),
        f.sensitivity && badge(f.sensitivity === 'secret' ? 'bad' : f.sensitivity === 'personal' ? 'warn' : 'idle', f.sensitivity),
        state !== 'live' && badge('stopped', state)),
      score != null && el('span', { class: 'muted small' }, `score ${Number(score).toFixed(3)}`)),
    el('p', { style: 'white-space:pre-wrap;margin:.4rem 0' }, f.text ?? ''),
    el('div', { class: 'row spread' },
      el('span', { class: 'muted small' }, when(f.created_ms), f.source ? ` · ${f.source}` : '', f.chat ? ` · ${f.chat}` : '',
        f.run_id != null ? [' · ', el('a', { href: `#/runs/${enc(f.run_id)}` }, `run ${f.run_id}`)] : null),
      el('div', { class: 'row' },
        state === 'live' ? op('archive', 'Archive') : op('restore', 'Restore'),
        !f.redacted_ms && op('redact', 'Redact'),
        op('purge', 'Purge', 'danger'))));
}
