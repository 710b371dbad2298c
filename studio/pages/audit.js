// audit.js — the tamper-evident audit log: what it is for and how to check it, the chain status
// from /api/v1/audit/verify (green "intact" or red with the problem), filters (who, what, which
// agent, when; kept in the address so a filtered view can be shared) and the matching entries,
// newest first, in plain words with the technical record on request and "Load more". Refreshes on
// audit_appended (every writer of the log announces its rows once committed): new matching
// entries are added on top and the chain is checked again; rows already shown (and opened
// details, and pages loaded with "Load more") stay as they are.
import { api, load, el, append, qs, badge, when, empty, table, json, clear, errorBox, fullTime, code, num, enc } from '/app.js';

export const events = ['audit_appended'];

const LIMIT = 100;

/** What each recorded action means, in words (unknown actions show their code). */
const PLAIN = {
  'approval.requested': 'asked for approval', 'approval.decided': 'decided an approval',
  'approval.denied': 'approval denied (nobody could answer)', 'approval.expired': 'approval expired unanswered',
  'grant.created': 'allowed an action for a while', 'grant.revoked': 'withdrew a permission',
  'grant.lapsed': 'a permission lapsed: something wrote in the workspace',
  'tool.executed': 'used a tool', 'tool.refused_secret': 'tool call refused: it carried a secret',
  'policy.rule_added': 'added a policy rule', 'policy.rule_disabled': 'turned a policy rule off',
  'agent.settings_changed': 'changed an agent’s settings',
  'config.reload': 'reloaded the configuration', 'config.reload_partial': 'reloaded part of the configuration',
  'config.reload_refused': 'configuration reload refused',
  'memory.archive': 'archived a memory', 'memory.restore': 'restored a memory', 'memory.redact': 'redacted a memory',
  'memory.purge': 'deleted a memory for good', 'memory.reclassify': 'changed a memory’s sensitivity',
  'people.claimed': 'became a bot’s owner', 'people.claim_rate_limited': 'tried too many wrong claim codes',
  'people.paired': 'approved a pairing request', 'people.pairing_denied': 'denied a pairing request',
  'people.revoked': 'revoked someone’s access', 'people.blocked': 'blocked someone', 'people.unblocked': 'unblocked someone',
  'job.created': 'created a scheduled job', 'job.paused': 'paused a scheduled job', 'job.resumed': 'resumed a scheduled job',
  'job.cancelled': 'cancelled a scheduled job',
  'user.timezone_set': 'set a time zone', 'user.timezone_cleared': 'cleared a time zone',
  'mcp.tool_called': 'called an MCP server’s tool',
};

/** The action families' names for the "What" filter. */
const FAMILIES = {
  approval: 'Approvals', grant: 'Permissions', tool: 'Tools', policy: 'Policy rules', agent: 'Agents',
  config: 'Configuration', memory: 'Memory', people: 'People', job: 'Scheduled jobs', user: 'Time zones', mcp: 'MCP servers',
};

const RANGES = [
  ['', 'Any time'], ['hour', 'Last hour', 3600e3], ['day', 'Last 24 hours', 86400e3],
  ['week', 'Last 7 days', 7 * 86400e3], ['month', 'Last 30 days', 30 * 86400e3], ['custom', 'Between…'],
];

/** "operator" → "Operator"; "agent:ada" → "agent ada"; "telegram:42" → "Telegram user 42". */
export function who(actor) {
  if (actor === 'operator') return 'Operator';
  if (actor === 'system') return 'clawvisor';
  const [kind, ...rest] = String(actor ?? '').split(':');
  const name = rest.join(':');
  if (kind === 'agent' && name) return `agent ${name}`;
  if (kind === 'telegram' && name) return `Telegram user ${name}`;
  return actor ?? '';
}

const what = (action) => PLAIN[action] || action;

export async function render(root, ctx) {
  const chain = el('div', { id: 'audit-chain' });
  const box = el('div', { id: 'audit-entries' });
  const actor = el('select', { id: 'audit-actor' }, el('option', { value: '' }, 'Anyone'));
  const action = el('select', { id: 'audit-action' }, el('option', { value: '' }, 'Anything'));
  const agent = el('select', { id: 'audit-agent' }, el('option', { value: '' }, 'Any agent'));
  const range = el('select', { id: 'audit-when' }, RANGES.map(([value, label]) => el('option', { value }, label)));
  const since = el('input', { id: 'audit-since', type: 'datetime-local' });
  const until = el('input', { id: 'audit-until', type: 'datetime-local' });
  const custom = el('div', { class: 'row audit-filters', hidden: true },
    el('label', null, 'From', since), el('label', null, 'Until', until));
  const clearButton = el('button', { type: 'button', id: 'audit-clear', class: 'link' }, 'Clear filters');
  const shown = el('p', { id: 'audit-shown', class: 'muted small' });
  append(root,
    el('h1', null, 'Audit log'),
    el('p', { class: 'lead' }, 'A sealed record of who did what: approvals, tool use, permission and setting changes. ',
      'Each entry is chained to the one before, so a later edit shows: the check below (or ',
      code('clawvisor audit verify'), ' on the server) says whether the chain is intact.'),
    chain,
    el('h2', null, 'Entries'),
    el('div', { class: 'row audit-filters' },
      el('label', null, 'Who', actor), el('label', null, 'What', action),
      el('label', null, 'Agent', agent), el('label', null, 'When', range)),
    custom,
    el('div', { class: 'row spread' }, shown, clearButton),
    box);

  // Filters from the address (#/audit?actor=operator&when=day), so a filtered view can be shared.
  const initial = Object.fromEntries(ctx.query.entries());
  const known = { actors: new Set(), actions: new Set() };
  const params = () => {
    const span = RANGES.find(([value]) => value === range.value);
    const params = { actor: actor.value, action: action.value, agent: agent.value };
    if (span?.[2]) params.since_ms = Math.floor(Date.now() - span[2]);
    if (range.value === 'custom') {
      if (since.value) params.since_ms = new Date(since.value).getTime();
      if (until.value) params.until_ms = new Date(until.value).getTime();
    }
    return params;
  };
  const filtered = () => Boolean(actor.value || action.value || agent.value || range.value);
  const remember = () => history.replaceState(null, '', `#/audit${qs({ actor: actor.value, action: action.value,
    agent: agent.value, when: range.value, since: range.value === 'custom' ? since.value : '', until: range.value === 'custom' ? until.value : '' })}`);

  const verify = (quiet) => load(chain, () => api('/api/v1/audit/verify'), (v) => append(chain, v.ok
    ? el('div', { class: 'card', 'data-chain': 'intact' }, badge('ok', 'intact'), ` The chain is intact: all ${num(v.entries ?? 0)} entries are as they were written.`)
    : el('div', { class: 'card', 'data-chain': 'broken', style: 'border-color:var(--bad)' }, badge('bad', 'broken'),
      el('strong', null, ' The audit log was changed outside clawvisor, so it no longer proves what happened.'),
      el('p', { class: 'next' }, 'Keep a copy of the data directory first. Then restore it from your latest backup; or, if you know why it changed, stop the daemon and run ',
        code('clawvisor audit rekey --confirm'), ' on the server: it writes down what it found and seals the log again.'),
      el('details', null, el('summary', null, 'What the check found'),
        el('p', { class: 'small problem' }, v.problem || 'unknown problem')))), { quiet });

  let view = null; // { tbody, newest } once entries are drawn
  const full = (quiet) => load(box, () => api(`/api/v1/audit${qs({ ...params(), limit: LIMIT })}`), (d) => {
    const entries = d.entries || [];
    shown.textContent = entries.length
      ? `${filtered() ? 'Matching entries' : 'All entries'}, newest first${entries.length >= LIMIT ? ` (the first ${LIMIT}; “Load more” shows older ones)` : ''}.`
      : '';
    view = draw(box, entries, params, filtered(), clearAll);
    for (const e of entries) learn(e);
  }, { root, quiet });

  function facetOptions(select, items, label, value) {
    const keep = value ?? select.value;
    clear(select, select.firstChild, items);
    select.value = keep;
    if (select.value !== keep && keep) { // a shared link may name one the log does not hold yet
      select.append(el('option', { value: keep }, label(keep)));
      select.value = keep;
    }
  }
  async function loadFacets(values = {}) {
    let f;
    try { f = await api('/api/v1/audit/facets'); } catch { return; } // the filters keep what they have
    known.actors = new Set((f.actors || []).map((a) => a.actor));
    known.actions = new Set((f.actions || []).map((a) => a.action));
    facetOptions(actor, (f.actors || []).map((a) => el('option', { value: a.actor }, `${who(a.actor)} (${num(a.entries)})`)), who, values.actor);
    const families = {};
    for (const a of f.actions || []) (families[a.action.split('.')[0]] ||= []).push(a);
    facetOptions(action, Object.entries(families).map(([family, list]) => el('optgroup', { label: FAMILIES[family] || family },
      list.length > 1 && el('option', { value: `${family}.*` }, `Any of these (${num(list.reduce((n, a) => n + a.entries, 0))})`),
      list.map((a) => el('option', { value: a.action }, `${what(a.action)} (${num(a.entries)})`)))), what, values.action);
    facetOptions(agent, (f.agents || []).map((name) => el('option', { value: name }, name)), (name) => name, values.agent);
  }
  /** A new actor or action: the filters' lists are read again. */
  function learn(e) {
    if (view && (!known.actors.has(e.actor) || !known.actions.has(e.action))) {
      known.actors.add(e.actor);
      known.actions.add(e.action);
      loadFacets();
    }
  }

  function applyFilters() {
    custom.hidden = range.value !== 'custom';
    remember();
    view = null;
    return full(false);
  }
  function clearAll() {
    actor.value = ''; action.value = ''; agent.value = ''; range.value = ''; since.value = ''; until.value = '';
    return applyFilters();
  }
  for (const input of [actor, action, agent, range, since, until]) input.onchange = applyFilters;
  clearButton.onclick = clearAll;

  ctx.refresh = async () => {
    verify(true);
    if (!view) return full(true);
    let entries;
    try {
      entries = (await api(`/api/v1/audit${qs({ ...params(), limit: LIMIT })}`)).entries || [];
    } catch {
      return undefined; // the next event or a reload tries again; what is shown stays true
    }
    if (!view.tbody.isConnected) return undefined;
    const fresh = entries.filter((e) => e.id > view.newest);
    // More new rows than one page: there may be a gap, so draw the newest page anew.
    if (fresh.length >= LIMIT) return full(true);
    for (const e of [...fresh].reverse()) view.tbody.prepend(row(e));
    if (fresh.length) view.newest = fresh[0].id;
    for (const e of fresh) learn(e);
    return undefined;
  };

  range.value = RANGES.some(([value]) => value === initial.when) ? initial.when : '';
  since.value = initial.since || '';
  until.value = initial.until || '';
  custom.hidden = range.value !== 'custom';
  verify(false);
  await loadFacets({ actor: initial.actor || '', action: initial.action || '', agent: initial.agent || '' });
  return full(false);
}

const SUBJECTS = { job: 'scheduled job', memory: 'memory', grant: 'permission', rule: 'policy rule' };

/** The subject in words, linked when it is a run (the record keeps the exact text). */
function about(e) {
  const subject = e.subject ?? '';
  const run = /^run:(\d+)$/.exec(subject);
  if (run) return el('a', { href: `#/runs/${enc(run[1])}` }, `run ${run[1]}`);
  if (subject === 'config') return 'the configuration';
  const [kind, ...rest] = subject.split(':');
  if (kind === 'agent' || kind === 'telegram') return who(subject);
  if (SUBJECTS[kind] && rest.length) return `${SUBJECTS[kind]} ${rest.join(':')}`;
  return subject;
}

const columns = [
  { label: 'When', cell: (e) => el('span', { title: fullTime(e.at_ms) }, when(e.at_ms)) },
  { label: 'Who', cell: (e) => el('span', { title: e.actor }, who(e.actor)) },
  { label: 'What', cell: (e) => el('strong', { class: 'audit-action', title: e.action }, what(e.action)) },
  { label: 'About', cell: about },
  { label: 'Record', cell: (e) => json({ entry: e.id, action: e.action, actor: e.actor, subject: e.subject, details: e.details ?? null, hash: e.hash }, { summary: `#${e.id}` }) },
];

const row = (e) => table(columns, [e], (x) => ({ 'data-entry': x.id, 'data-action': x.action })).querySelector('tbody tr');

/** Draws the entries; returns what a live refresh needs (null when nothing matched). */
function draw(box, entries, params, filtered, clearAll) {
  if (!entries.length) {
    append(box, filtered
      ? empty('No entry matches these filters. ', el('button', { type: 'button', class: 'link', onclick: clearAll }, 'Clear the filters'), ' to see every entry.')
      : empty('The audit log is empty. Operator actions and policy decisions are recorded here.'));
    return null;
  }
  const wrap = table(columns, entries, (e) => ({ 'data-entry': e.id, 'data-action': e.action }));
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
        const page = (await api(`/api/v1/audit${qs({ ...params(), limit: LIMIT, before: oldest })}`)).entries || [];
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
