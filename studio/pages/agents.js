// agents.js — agent cards (model, autonomy, paused, tools) with an edit form that PATCHes
// /api/v1/agents/{name}; #/agents/NAME shows one agent with its sessions; #/sessions/ID shows a
// session's transcript. Refreshes live: cards on agent_changed (a change made elsewhere — another
// tab, Telegram, a script) and on session actors starting or stopping (open sessions), the
// session list and transcripts on message and run events of that agent / chat. A card whose form
// the operator is editing keeps the form as typed; only its facts are redrawn. Below the cards,
// "Time zones": the daemon's zone and where it comes from, each agent's, and each person's with
// a field to set it (PATCH /api/v1/users/{id}/timezone; refreshed when a /timezone in a chat
// or another tab changes one, announced as audit_appended user.timezone_*).
import { api, load, el, append, enc, badge, when, empty, table, kv, act, transcriptItem, code, toast } from '/app.js';
import { editor } from './agent_editor.js';

export const events = ['agent_changed', 'actor_started', 'actor_stopped', 'message_in', 'message_out',
  'run_finished', 'audit_appended', 'config_reloaded'];

const data = (event) => event?.data || {};
const isSessionActor = (kind, event, agent) => kind.startsWith('actor_')
  && (agent ? (event?.subject ?? '').startsWith(`session:${agent}:`) : /^(agent|session):/.test(event?.subject ?? ''));

export async function render(root, ctx) {
  if (ctx.section === 'sessions' && ctx.params[0]) return sessionView(root, ctx, ctx.params[0]);
  // The editor is not redrawn by live events: it holds what the operator is typing.
  const still = () => { ctx.accept = () => false; ctx.refresh = () => {}; };
  if (ctx.params[0] === 'new') { still(); return editor(root, null); }
  if (ctx.params[1] === 'edit') { still(); return editor(root, ctx.params[0]); }
  if (ctx.params[0]) return agentView(root, ctx, ctx.params[0]);
  const box = el('div');
  const zones = el('div');
  append(root, el('div', { class: 'row spread' }, el('h1', null, 'Agents'),
    el('a', { class: 'button primary', href: '#/agents/new', 'data-action': 'new-agent' }, 'New agent')),
  el('p', { class: 'lead' }, 'Your agents: what each is for, what it may do and how people reach it. Change one here (its file is written for you), or make a new one.'),
  box, el('h2', null, 'Time zones'), zones);
  const zoneChange = (kind, event) => kind === 'audit_appended' && String(data(event).action ?? '').startsWith('user.timezone');
  ctx.accept = (kind, event) => kind === 'agent_changed' || kind === 'config_reloaded' || isSessionActor(kind, event) || zoneChange(kind, event);
  const refreshZones = (quiet, saved = false) => {
    // A field being typed in keeps its text: a live refresh redraws the table only when the
    // focus is elsewhere (after the operator's own save it always does).
    if (quiet && !saved && zones.contains(document.activeElement)) return undefined;
    return load(zones, () => api('/api/v1/timezones'), (d) => drawZones(zones, d, () => refreshZones(true, true)), { quiet });
  };
  const refresh = (quiet) => {
    refreshZones(quiet);
    let kept = new Map();
    return load(box, async () => {
      const d = await api('/api/v1/agents');
      kept = cardsIn(box); // taken just before the box is cleared, so nothing typed is lost
      return d;
    }, (d) => {
      if (!d.agents?.length) {
        append(box, empty('No agents yet. ', el('a', { href: '#/agents/new' }, 'Make the first one'), ': say what it is for and what it may do.'));
        return;
      }
      append(box, el('div', { class: 'grid agents' }, d.agents.map((a) => redrawn(a, kept.get(a.name)))));
    }, { root, quiet });
  };
  ctx.refresh = () => refresh(true);
  return refresh(false);
}

/** The daemon's and agents' zones, and a table of people with a field to set each one's zone. */
function drawZones(box, d, refresh) {
  append(box, el('div', { class: 'card', 'data-zones': 'daemon' }, kv([
    ['Daemon', [code(d.daemon?.timezone ?? 'UTC'), ' ', el('span', { class: 'muted small' }, d.daemon?.origin ?? '')]],
    ['Local time', d.daemon?.local_time ?? '—'],
    ...(d.agents || []).map((a) => [a.agent, [code(a.effective), ' ', el('span', { class: 'muted small' }, a.timezone ? 'from the agent file' : a.source)]]),
  ])));
  const people = d.people || [];
  if (!people.length) {
    append(box, empty('No Telegram users yet. People choose their zone with /timezone Europe/Berlin in the chat, or here once they are known.'));
    return;
  }
  append(box, el('p', { class: 'muted small' }, 'A person\'s zone holds for every agent they talk to; empty: the agent\'s or the daemon\'s zone.'),
    table([
      { label: 'Person', cell: (p) => el('span', null, p.name ?? '', ' ', code(String(p.user_id))) },
      { label: 'Agents', cell: (p) => (p.agents?.length ? p.agents.join(', ') : '—') },
      { label: 'Time zone', cell: (p) => zoneForm(p, refresh) },
      { label: 'Local time', cell: (p) => p.local_time ?? el('span', { class: 'muted' }, 'default') },
    ], people, (p) => ({ 'data-user': p.user_id })));
}

function zoneForm(p, refresh) {
  const input = el('input', { name: 'timezone', value: p.timezone ?? '', placeholder: 'e.g. Europe/Berlin', size: 20, 'aria-label': `Time zone of ${p.name ?? p.user_id}` });
  const save = el('button', { type: 'submit' }, 'Save');
  return el('form', { class: 'row', onsubmit: async (e) => {
    e.preventDefault();
    const done = await act(save, () => api(`/api/v1/users/${enc(p.user_id)}/timezone`, { method: 'PATCH', body: { timezone: input.value.trim() } }));
    if (done) { toast(done.timezone ? `Time zone of ${p.name ?? p.user_id}: ${done.timezone}.` : `Time zone of ${p.name ?? p.user_id} cleared.`); refresh(); }
  } }, input, save);
}

function cardsIn(box) {
  return new Map([...box.querySelectorAll('.card[data-agent]')].map((card) => [card.dataset.agent, card]));
}

/** Is the operator working in this card's form (changed something, or the focus is in it)? */
function editing(card) {
  const form = card?.querySelector('form');
  return !!form && (form.dataset.dirty === 'true' || form.contains(document.activeElement));
}

/** The card for `a`: the old one with fresh facts while it is being edited, else a new one. */
function redrawn(a, old) {
  if (old && a.reachable !== false && editing(old)) {
    old.querySelector('.facts')?.replaceWith(facts(a));
    return old;
  }
  // Keep the "Saved ✓" line while it still describes what the agent has.
  const saved = old?.savedSettings;
  const still = saved && saved.autonomy === a.autonomy && saved.model === a.model && saved.paused === a.paused;
  return agentCard(a, still ? saved : null);
}

function facts(a) {
  return el('div', { class: 'facts' },
    el('div', { class: 'row spread' }, el('h3', null, a.name),
      a.paused ? badge('paused') : badge('active')),
    a.description && el('p', { class: 'muted small' }, a.description),
    a.not_in_file?.length ? el('p', { class: 'field-error', 'data-not-in-file': '' },
      'Runs with settings its file does not say (kept in the database by an earlier version): ',
      a.not_in_file.map((d, i) => [i ? '; ' : '', `${d.key} ${d.running} (the file says ${d.file})`]),
      '. The daemon could not write its file: make the file writable for it and restart, and they move into the file.') : null,
    kv([
      ['Model', [a.provider ? `${a.provider} / ` : '', a.model ?? '—']],
      ['Autonomy', el('span', { 'data-field': 'autonomy' }, badge(a.autonomy === 'trust_first' ? 'warn' : 'idle', a.autonomy))],
      ['Tools', a.tools?.length ? a.tools.map((t) => el('span', { class: 'chip' }, t)) : 'none'],
      ['Sessions', `${a.sessions_open ?? 0} open`],
      ['Telegram', a.telegram ? 'yes' : 'no'],
      ['Skills', a.skills ? el('a', { href: '#/skills' }, `${a.skills.filter((s) => s.usable ?? s.enabled).length} in use`) : null],
    ]));
}

function links(name) {
  return el('div', { class: 'row small' },
    el('a', { href: `#/agents/${enc(name)}/edit`, 'data-action': 'edit' }, 'Change everything →'),
    el('a', { href: `#/agents/${enc(name)}` }, 'Sessions →'),
    el('a', { href: `#/chat/${enc(name)}` }, 'Chat →'),
    el('a', { href: `#/runs?agent=${enc(name)}` }, 'Runs →'));
}

/** A card with the agent's settings and an edit form; replaces itself with the saved result. */
function agentCard(a, saved = null) {
  if (a.reachable === false) {
    return el('div', { class: 'card', 'data-agent': a.name, 'data-reachable': 'false' },
      el('div', { class: 'row spread' }, el('h3', null, a.name), badge('down', 'not answering')),
      el('p', { class: 'field-error' }, a.reason || 'This agent is not answering right now.'),
      el('p', { class: 'muted small' }, 'Its settings show again once it is back; the supervision tree on the ',
        el('a', { href: '#/overview' }, 'Overview'), ' shows whether it is restarting.'),
      links(a.name));
  }
  // The daemon's autonomy modes (most free first). A value the UI does not know is kept as an
  // option, so saving never changes it silently.
  const levels = ['trust_first', 'require_approval', 'supervised'];
  if (a.autonomy && !levels.includes(a.autonomy)) levels.push(a.autonomy);
  const autonomy = el('select', { name: 'autonomy', value: a.autonomy }, levels.map((v) => el('option', { value: v }, v)));
  const model = el('input', { name: 'model', value: a.model ?? '', placeholder: 'model id' });
  const paused = el('input', { type: 'checkbox', name: 'paused', checked: !!a.paused });
  const save = el('button', { type: 'submit', class: 'primary' }, 'Save');
  const form = el('form', { class: 'row', onsubmit: async (e) => {
    e.preventDefault();
    // Send only what changed since the form was drawn.
    const body = {};
    if (autonomy.value !== a.autonomy) body.autonomy = autonomy.value;
    if (model.value.trim() && model.value.trim() !== a.model) body.model = model.value.trim();
    if (paused.checked !== !!a.paused) body.paused = paused.checked;
    if (!Object.keys(body).length) { toast('Nothing changed.'); return; }
    const updated = await act(save, () => api(`/api/v1/agents/${enc(a.name)}`, { method: 'PATCH', body }));
    if (updated) card.replaceWith(agentCard({ ...a, ...updated }, updated));
  } },
  el('label', null, 'Autonomy', autonomy),
  el('label', null, 'Model', model),
  el('label', { class: 'inline' }, paused, 'Paused'),
  save);
  const dirty = () => { form.dataset.dirty = 'true'; };
  form.addEventListener('input', dirty);
  form.addEventListener('change', dirty);
  const card = el('div', { class: 'card', 'data-agent': a.name },
    facts(a),
    form,
    saved && el('p', { class: 'saved', role: 'status' },
      `Saved ✓ autonomy ${saved.autonomy}, model ${saved.model}, ${saved.paused ? 'paused' : 'running'}.`),
    links(a.name));
  card.savedSettings = saved;
  return card;
}

function agentView(root, ctx, name) {
  const cardSlot = el('div');
  const box = el('div');
  append(root, el('p', null, el('a', { href: '#/agents' }, '← All agents')), el('h1', null, name), cardSlot,
    el('h2', null, 'Sessions'), box);
  ctx.accept = (kind, event) => (kind === 'agent_changed' ? data(event).agent === name
    : kind.startsWith('actor_') ? isSessionActor(kind, event, name) : data(event).agent === name);
  const refresh = (quiet) => {
    let kept;
    return load(box, async () => {
      const agent = await api(`/api/v1/agents/${enc(name)}`);
      if (!agent.sessions) agent.sessions = (await api(`/api/v1/sessions?agent=${enc(name)}`)).sessions || [];
      kept = cardSlot.querySelector('.card[data-agent]');
      return agent;
    }, (a) => {
      cardSlot.replaceChildren(redrawn(a, kept));
      if (!a.sessions.length) {
        append(box, empty('No conversations yet. Start one on the ', el('a', { href: `#/chat/${enc(name)}` }, 'Chat page'), '.'));
        return;
      }
      const sessions = [...a.sessions].sort((x, y) => (y.updated_ms ?? 0) - (x.updated_ms ?? 0));
      append(box, table([
        { label: 'Session', cell: (s) => el('a', { href: `#/sessions/${enc(s.id)}` }, `#${s.id}`) },
        { label: 'Chat', cell: (s) => code(s.chat) },
        { label: 'Status', cell: (s) => badge(s.status) },
        { label: 'Started', cell: (s) => when(s.created_ms) },
        { label: 'Last activity', cell: (s) => when(s.updated_ms) },
      ], sessions, (s) => ({ 'data-session': s.id, class: 'clickable', onclick: (e) => {
        if (e.target.tagName !== 'A') location.hash = `#/sessions/${enc(s.id)}`;
      } })));
    }, { root, quiet });
  };
  ctx.refresh = () => refresh(true);
  return refresh(false);
}

function sessionView(root, ctx, id) {
  const box = el('div');
  append(root, el('p', null, el('a', { href: '#/agents' }, '← Agents')), el('h1', null, `Session #${id}`), box);
  let shown = null; // { agent, chat } once loaded
  ctx.accept = (kind, event) => !shown || (kind !== 'agent_changed' && !kind.startsWith('actor_')
    && data(event).agent === shown.agent && data(event).chat === shown.chat);
  const refresh = (quiet) => load(box, () => api(`/api/v1/sessions/${enc(id)}`), (s) => {
    shown = { agent: s.agent, chat: s.chat };
    append(box, el('div', { class: 'card' }, kv([
      ['Agent', el('a', { href: `#/agents/${enc(s.agent)}` }, s.agent)],
      ['Chat', code(s.chat)], ['Status', badge(s.status)],
      ['Started', when(s.created_ms)], ['Last activity', when(s.updated_ms)],
    ])));
    const items = s.events || [];
    append(box, items.length
      ? el('div', { class: 'chat-log' }, items.map((ev) => transcriptItem(ev)))
      : empty('This session has no messages yet.'));
  }, { root, quiet });
  ctx.refresh = () => refresh(true);
  return refresh(false);
}
