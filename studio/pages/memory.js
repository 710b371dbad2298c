// memory.js — what the agents remember: a form to add a fact (for one agent or all of them), a
// search box (words match their other forms: "plants" finds "plant"), and the list of facts, each
// with where it came from, Edit (the text changes, its origin stays, the change is audited) and
// Archive / Restore / Erase text (redact), with Delete (purge) behind a confirm(). Counts and the
// search mode are under "How search works". Only the fact list refreshes on memory_changed, and not while a fact is being
// edited, so nothing the operator types is lost. At the top, one line says how search works now (by meaning with a
// model on this computer or the provider's, or by words only) and, after a model change, how far re-reading the
// memories for it is (a progress bar fed by memory_changed); the technical detail is behind "Details".
import { api, load, el, append, enc, qs, badge, when, empty, act, toast, clear, errorBox } from '/app.js';

export const events = ['memory_changed'];

/** Memories per page of the list. */
const PAGE = 200;
const SENSITIVITY = { normal: 'Normal', personal: 'Personal', secret: 'Secret (never recalled into a chat by itself)' };
const SOURCES = { user_said: 'said in a chat', agent_saved: 'saved by the agent', imported: 'imported', recap: 'conversation summary',
  operator: 'added in Studio' };

export async function render(root, ctx) {
  const stats = el('div', { class: 'muted small', id: 'memory-stats' });
  const mode = el('div', { id: 'memory-mode', 'aria-live': 'polite' });
  const q = el('input', { id: 'memory-q', type: 'search', placeholder: 'Search memories…', 'aria-label': 'Search' });
  const owner = el('input', { id: 'memory-owner', placeholder: 'only this agent (optional)', 'aria-label': 'Only this agent' });
  const results = el('div', { id: 'memory-results' });
  const list = el('div', { id: 'memory-list' });
  const editing = new Set(); // ids of facts whose text is being edited: the list waits for them
  let lastQuery = '';
  let stale = false;
  let listSeq = 0; // a refresh whose number is no longer current draws nothing

  const fetchList = (before) => api(`/api/v1/memory${qs({ owner: owner.value.trim(), limit: PAGE, before })}`);
  // The list comes a page at a time, newest first; "Show older" appends the next page.
  const drawList = (d, older = false) => {
    if (!older || d.memories.length) drawFacts(list, d.memories || [], hooks);
    if (d.next_before == null) return;
    const more = el('div', { class: 'row', id: 'memory-more' });
    const button = el('button', { type: 'button', 'data-action': 'older', onclick: async () => {
      const older = await act(button, () => fetchList(d.next_before));
      if (!older) return;
      more.remove();
      drawList({ ...older, memories: older.memories || [] }, true);
    } }, `Show ${PAGE} older`);
    append(list, append(more, button));
  };
  const refreshList = async (quiet) => {
    if (editing.size) { stale = true; return undefined; }
    stale = false;
    const mine = ++listSeq;
    if (!quiet || !list.firstChild) return load(list, () => fetchList(), drawList, { root });
    // A quiet refresh redraws only when its answer is still wanted: an editor opened meanwhile
    // keeps its card (the list is refreshed when it closes).
    try {
      const d = await fetchList();
      if (mine !== listSeq || editing.size) return undefined;
      clear(list);
      drawList(d);
      root.setAttribute('data-loaded', 'true');
      return d;
    } catch (e) {
      if (mine === listSeq && !editing.size) clear(list, errorBox(e.message, () => refreshList(false)));
      return undefined;
    }
  };
  const search = (quiet) => {
    lastQuery = q.value.trim();
    if (!lastQuery) { clear(results); return undefined; }
    return load(results, () => api(`/api/v1/memory/search${qs({ q: lastQuery })}`), (d) => {
      const wanted = owner.value.trim();
      const hits = (d.hits || []).filter((h) => !wanted || h.memory.owner === wanted);
      append(results, el('h2', null, `Results for “${lastQuery}”`));
      if (!hits.length) append(results, empty('Nothing matched. Try fewer or different words.'));
      else append(results, hits.map((h) => factCard(h.memory, hooks, h.score)));
    }, { quiet });
  };
  const loadStats = () => api('/api/v1/memory/stats').then((s) => {
    drawMode(mode, s.embeddings || {});
    clear(stats, el('details', null, el('summary', null, 'How search works'),
      el('p', null, `${s.live ?? '?'} memories in use · ${s.archived ?? 0} archived · ${s.redacted ?? 0} redacted.`),
      el('p', null, 'Search matches words in all their forms ("plants" finds "plant" and "planting")',
        String(s.mode ?? '').startsWith('semantic') ? ' and also finds memories that mean the same thing in other words.' : '.'),
      el('p', null, `Search mode: ${s.mode ?? '?'}`)));
  }).catch(() => { clear(stats); });
  const afterChange = () => { refreshList(true); if (lastQuery) search(true); loadStats(); };
  const hooks = {
    after: afterChange,
    startEdit: (id) => { editing.add(id); listSeq++; stale = true; },
    endEdit: (id) => { editing.delete(id); if (stale) refreshList(true); },
  };

  append(root, el('h1', null, 'Memory'),
    el('p', { class: 'muted', id: 'memory-purpose' }, 'What your agents remember about you and your household. Search it, add a fact they should know, or correct one that is wrong.'),
    mode,
    addForm(afterChange),
    el('form', { class: 'row', style: 'margin:1rem 0', onsubmit: (e) => { e.preventDefault(); search(false); refreshList(true); } },
      q, owner, el('button', { type: 'submit', id: 'memory-search', class: 'primary' }, 'Search')),
    results, el('h2', null, 'All memories'), list, stats);
  ctx.refresh = () => { refreshList(true); loadStats(); };
  loadStats();
  return refreshList(false);
}

/** The search mode in one plain sentence, the re-reading progress after a model change, details on request. */
function drawMode(box, e) {
  const sentence = {
    local: 'Search understands meaning: a language model on this computer reads every memory (no internet, no paid service).',
    provider: 'Search understands meaning: your AI provider reads every memory.',
    full_text: 'Search finds memories by their words only: “my dentist” will not find “Dr. Weber’s practice”.',
  }[e.mode] ?? 'Search finds memories by their words.';
  const r = e.reindex;
  let progress = null;
  if (r && r.running) {
    progress = el('div', { id: 'memory-reindex', 'data-running': 'true' },
      el('p', null, `Memory is re-reading your memories for the new search model: ${r.done} of ${r.total} done. Search by meaning finds more as it goes; nothing else is needed.`),
      el('progress', { max: String(r.total || 1), value: String(r.done), 'aria-label': 'Re-reading memories', style: 'width:100%' }));
  } else if (r && r.error) {
    progress = el('div', { id: 'memory-reindex', 'data-running': 'false', class: 'field-error' },
      el('p', null, `Re-reading memories for the new search model stopped after ${r.done} of ${r.total}. It goes on by itself at the next start; the reason is under Details.`));
  } else if (r) {
    progress = el('p', { id: 'memory-reindex', 'data-running': 'false', class: 'small' },
      `All ${r.total} memories were re-read for the new search model.`);
  }
  const details = el('details', null, el('summary', null, 'Details'),
    el('p', { class: 'small' }, `Mode: ${e.mode ?? '?'}${e.model ? ` · model ${e.model}` : ''}${e.loaded == null ? '' : e.loaded ? ' · loaded now' : ' · not loaded now (it loads on the next search and leaves memory when idle)'}`),
    e.why ? el('p', { class: 'small' }, e.why) : null,
    r && r.error ? el('p', { class: 'small' }, `Why re-reading stopped: ${r.error}`) : null,
    e.mode === 'full_text' ? el('p', { class: 'small' },
      'To search by meaning without a paid service: run “clawvisor memory fetch-model all-MiniLM-L6-v2”, then set embeddings = "local" and local_model = "all-MiniLM-L6-v2" under [memory] in the config file, and restart.') : null);
  clear(box, el('div', { class: 'card', 'data-mode': e.mode ?? '' },
    el('p', { style: 'margin:0', id: 'memory-mode-line' }, sentence), progress, details));
}

/** "Add a memory": who should remember it, the text, how private it is. */
function addForm(after) {
  const owner = el('select', { id: 'memory-add-owner', name: 'owner' }, el('option', { value: 'platform' }, 'All agents'));
  const text = el('textarea', { id: 'memory-add-text', name: 'text', rows: 2, placeholder: 'e.g. Our plants are watered on Sundays.' });
  const sensitivity = el('select', { id: 'memory-add-sensitivity', name: 'sensitivity' },
    Object.entries(SENSITIVITY).map(([value, label]) => el('option', { value }, label)));
  const status = el('div', { id: 'memory-add-status', 'aria-live': 'polite' });
  const add = el('button', { id: 'memory-add', type: 'submit', class: 'primary' }, 'Remember this');
  api('/api/v1/agents').then(({ agents = [] }) => {
    append(owner, agents.map((a) => el('option', { value: a.name }, a.name)));
    owner.dataset.loaded = 'true';
  }).catch((e) => append(status, errorBox(`Could not load the agents: ${e.message}`, () => location.reload())));
  const form = el('form', { id: 'memory-add-form', class: 'card', novalidate: true, onsubmit: async (e) => {
    e.preventDefault();
    clear(status);
    if (!text.value.trim()) { append(status, el('p', { class: 'field-error' }, 'Nothing was saved: write what should be remembered first.')); return; }
    add.disabled = true;
    try {
      const fact = await api('/api/v1/memory', { method: 'POST', body: { owner: owner.value, text: text.value, sensitivity: sensitivity.value } });
      text.value = '';
      append(status, el('p', { class: 'saved', role: 'status', 'data-added': fact.id },
        `Saved. ${owner.value === 'platform' ? 'Every agent' : owner.value} will remember it.`));
      after();
    } catch (err) {
      append(status, errorBox(`Nothing was saved: ${err.message}`, () => form.requestSubmit()));
    } finally {
      add.disabled = false;
    }
  } },
  el('h2', { style: 'margin-top:0' }, 'Add a memory'),
  el('div', { class: 'form-grid' },
    el('label', { class: 'wide' }, 'What should be remembered?', text),
    el('label', null, 'Who remembers it', owner),
    el('label', null, 'How private', sensitivity),
    el('div', { class: 'wide row' }, add),
    el('div', { class: 'wide' }, status)));
  return form;
}

function drawFacts(box, facts, hooks) {
  if (!facts.length) {
    append(box, empty('No memories yet. Add one above, or tell an agent "remember that I prefer mornings".'));
    return;
  }
  append(box, facts.map((f) => factCard(f, hooks)));
}

/** Where a memory came from, in words: who saved it, in which run, and who last edited it. */
function origin(f) {
  return el('span', { class: 'muted small' },
    `${f.owner === 'platform' ? 'all agents' : f.owner} · ${SOURCES[f.source] ?? f.source} `, when(f.created_ms),
    f.run_id != null ? [' · ', el('a', { href: `#/runs/${enc(f.run_id)}` }, 'see the run')] : null,
    f.edited_ms != null ? [' · edited ', when(f.edited_ms)] : null);
}

function factCard(f, hooks, score = null) {
  const op = (verb, label, cls = '', title = null) => el('button', { type: 'button', class: cls, 'data-action': verb, title, onclick: async (e) => {
    if (verb === 'purge' && !confirm('Delete this memory for good? It cannot be restored.')) return;
    if (await act(e.currentTarget, () => api(`/api/v1/memory/${enc(f.id)}/${verb}`, { method: 'POST' }))) {
      toast({ archive: 'Archived: agents no longer recall it (Restore brings it back).', restore: 'Restored: agents recall it again.',
        redact: 'Redacted: its text is gone for good.', purge: 'Deleted for good.' }[verb]);
      hooks.after();
    }
  } }, label);
  const state = f.redacted_ms ? 'redacted' : f.archived_ms ? 'archived' : 'live';
  const text = el('p', { class: 'memory-text', style: 'white-space:pre-wrap;margin:.4rem 0' }, f.text ?? '');
  const body = el('div', null, text);
  const card = el('div', { class: 'card', 'data-memory': f.id, 'data-state': state,
    title: score != null ? `search score ${Number(score).toFixed(3)}` : null },
    (state !== 'live' || (f.sensitivity && f.sensitivity !== 'normal')) && el('div', { class: 'row small' },
      f.sensitivity && f.sensitivity !== 'normal' && badge(f.sensitivity === 'secret' ? 'bad' : 'warn', f.sensitivity),
      state !== 'live' && badge('stopped', state)),
    body);
  const buttons = el('div', { class: 'row' },
    !f.redacted_ms && el('button', { type: 'button', 'data-action': 'edit', onclick: () => edit() }, 'Edit'),
    state === 'live' ? op('archive', 'Archive', '', 'Agents stop recalling it; Restore brings it back.')
      : !f.redacted_ms && op('restore', 'Restore', '', 'Agents recall it again.'),
    !f.redacted_ms && op('redact', 'Erase text', '', 'Replaces the text for good; the entry stays, marked redacted.'),
    op('purge', 'Delete', 'danger', 'Removes the memory for good.'));
  append(card, el('div', { class: 'row spread' }, origin(f), buttons));

  function edit() {
    hooks.startEdit(f.id);
    const input = el('textarea', { name: 'text', rows: 3, 'aria-label': 'New text', value: f.text ?? '' });
    const status = el('div', { 'aria-live': 'polite' });
    const close = () => { clear(body, text); buttons.hidden = false; hooks.endEdit(f.id); };
    const save = el('button', { type: 'submit', class: 'primary', 'data-action': 'save' }, 'Save');
    buttons.hidden = true;
    clear(body, el('form', { class: 'memory-edit', onsubmit: async (e) => {
      e.preventDefault();
      clear(status);
      save.disabled = true;
      try {
        const updated = await api(`/api/v1/memory/${enc(f.id)}`, { method: 'PATCH', body: { text: input.value } });
        toast('Saved: the memory now says what you wrote. Its origin is kept and the change is in the audit log.');
        Object.assign(f, updated);
        text.textContent = updated.text;
        close();
        hooks.after();
      } catch (err) {
        append(status, el('p', { class: 'field-error' }, `Nothing was changed: ${err.message}`));
      } finally {
        save.disabled = false;
      }
    } }, input, el('div', { class: 'row', style: 'margin-top:.4rem' }, save,
      el('button', { type: 'button', 'data-action': 'cancel', onclick: close }, 'Cancel')), status));
    input.focus();
  }
  return card;
}
