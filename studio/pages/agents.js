// agents.js — agent cards (model, autonomy, paused, tools) with an edit form that PATCHes
// /api/v1/agents/{name}; #/agents/NAME shows one agent with its sessions; #/sessions/ID shows a
// session's transcript. No live refresh (nothing here changes without the operator).
import { api, load, el, append, enc, badge, when, empty, table, kv, act, transcriptItem, code, toast } from '/app.js';

export async function render(root, ctx) {
  if (ctx.section === 'sessions' && ctx.params[0]) return sessionView(root, ctx.params[0]);
  if (ctx.params[0]) return agentView(root, ctx.params[0]);
  const box = el('div');
  append(root, el('h1', null, 'Agents'), box);
  return load(box, () => api('/api/v1/agents'), (d) => {
    if (!d.agents?.length) {
      append(box, empty('No agents yet. Add an agent file under actors/ (for example actors/assistant.toml) and restart the daemon.'));
      return;
    }
    append(box, el('div', { class: 'grid' }, d.agents.map((a) => agentCard(a))));
  }, { root });
}

/** A card with the agent's settings and an edit form; replaces itself with the saved result. */
function agentCard(a, saved = null) {
  // The daemon's autonomy modes (most free first). A value the UI does not know is kept as an
  // option, so saving never changes it silently.
  const levels = ['trust_first', 'require_approval', 'supervised'];
  if (a.autonomy && !levels.includes(a.autonomy)) levels.push(a.autonomy);
  const autonomy = el('select', { name: 'autonomy', value: a.autonomy }, levels.map((v) => el('option', { value: v }, v)));
  const model = el('input', { name: 'model', value: a.model ?? '', placeholder: 'model id' });
  const paused = el('input', { type: 'checkbox', name: 'paused', checked: !!a.paused });
  const save = el('button', { type: 'submit', class: 'primary' }, 'Save');
  const card = el('div', { class: 'card', 'data-agent': a.name },
    el('div', { class: 'row spread' }, el('h3', null, a.name),
      a.paused ? badge('paused') : badge('active')),
    a.description && el('p', { class: 'muted small' }, a.description),
    kv([
      ['Model', [a.provider ? `${a.provider} / ` : '', a.model ?? '—']],
      ['Autonomy', badge(a.autonomy === 'trust_first' ? 'warn' : 'idle', a.autonomy)],
      ['Tools', a.tools?.length ? a.tools.map((t) => el('span', { class: 'chip' }, t)) : 'none'],
      ['Sessions', `${a.sessions_open ?? 0} open`],
      ['Telegram', a.telegram ? 'yes' : 'no'],
      ['Skills', a.skills ? `${a.skills.filter((s) => s.enabled).length} enabled` : null],
    ]),
    el('form', { class: 'row', onsubmit: async (e) => {
      e.preventDefault();
      // Send only what changed.
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
    save),
    saved && el('p', { class: 'saved', role: 'status' },
      `Saved ✓ autonomy ${saved.autonomy}, model ${saved.model}, ${saved.paused ? 'paused' : 'running'}.`),
    el('div', { class: 'row small' },
      el('a', { href: `#/agents/${enc(a.name)}` }, 'Sessions →'),
      el('a', { href: `#/chat/${enc(a.name)}` }, 'Chat →'),
      el('a', { href: `#/runs?agent=${enc(a.name)}` }, 'Runs →')));
  return card;
}

function agentView(root, name) {
  const box = el('div');
  append(root, el('p', null, el('a', { href: '#/agents' }, '← All agents')), el('h1', null, name), box);
  return load(box, async () => {
    const agent = await api(`/api/v1/agents/${enc(name)}`);
    if (!agent.sessions) agent.sessions = (await api(`/api/v1/sessions?agent=${enc(name)}`)).sessions || [];
    return agent;
  }, (a) => {
    append(box, agentCard(a), el('h2', null, 'Sessions'));
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
  }, { root });
}

function sessionView(root, id) {
  const box = el('div');
  append(root, el('p', null, el('a', { href: '#/agents' }, '← Agents')), el('h1', null, `Session #${id}`), box);
  return load(box, () => api(`/api/v1/sessions/${enc(id)}`), (s) => {
    append(box, el('div', { class: 'card' }, kv([
      ['Agent', el('a', { href: `#/agents/${enc(s.agent)}` }, s.agent)],
      ['Chat', code(s.chat)], ['Status', badge(s.status)],
      ['Started', when(s.created_ms)], ['Last activity', when(s.updated_ms)],
    ])));
    const events = s.events || [];
    append(box, events.length
      ? el('div', { class: 'chat-log' }, events.map((ev) => transcriptItem(ev)))
      : empty('This session has no messages yet.'));
  }, { root });
}
