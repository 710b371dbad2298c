// skills.js — the skills catalogue: each skill's level (bundled / installed / workspace), whether
// its SKILL.md is valid (and what to fix when not), what it needs (tools, MCP servers, variables,
// programs), its risk hint, the agents it is limited to and front-matter keys clawvisor keeps but
// does not use; then one row per agent: a checkbox that PATCHes
// /api/v1/agents/{agent}/skills/{skill} {"enabled": bool}, whether the agent's runs load it, and
// why it cannot when it cannot (the checkbox is then disabled, the reason beside it).
// Refreshes on agent_changed (a toggle made elsewhere); never while a toggle of this page is saving.
import { api, load, el, append, enc, badge, empty, toast, code, kv } from '/app.js';

export const events = ['agent_changed'];

export async function render(root, ctx) {
  const box = el('div');
  append(root, el('h1', null, 'Skills'), box);
  const recent = new Map(); // "skill/agent" → when this page saved it (for the ✓)
  let saving = 0;
  let deferred = false;
  const refresh = (quiet) => {
    if (saving) { deferred = true; return undefined; }
    return load(box, () => api('/api/v1/skills'), (d) => draw(box, d, hooks), { root, quiet });
  };
  const hooks = {
    recent,
    started() { saving += 1; },
    finished() {
      saving -= 1;
      if (!saving && deferred) { deferred = false; refresh(true); }
    },
  };
  // A change of autonomy, model or pause does not change skills.
  ctx.accept = (kind, event) => event?.data?.change !== 'settings';
  ctx.refresh = () => refresh(true);
  return refresh(false);
}

function draw(box, d, hooks) {
  for (const u of d.unreachable || []) {
    append(box, el('div', { class: 'hint', 'data-unreachable': u.agent }, el('strong', null, `${u.agent}: `), u.reason));
  }
  const skills = d.skills || [];
  if (!skills.length) {
    append(box, empty('No skills found. Put a skill folder with a SKILL.md in skills/ beside the config (bundled), in <data dir>/skills (installed) or in an agent\'s workspace skills/ folder; ',
      code('clawvisor skills validate <folder>'), ' says what to fix.'));
    return;
  }
  append(box, skills.map((s) => skillCard(s, hooks)));
}

function status(s) {
  if (s.valid === false) return badge('bad', 'invalid');
  return s.available ? badge('ok', 'valid') : badge('warn', 'valid, unavailable');
}

function list(items, render = (x) => el('span', { class: 'chip' }, x)) {
  return items?.length ? items.map(render) : null;
}

function skillCard(s, hooks) {
  const requires = s.requires || {};
  const unknown = Object.entries(s.unknown_keys || {});
  return el('div', { class: 'card', 'data-skill': s.name, 'data-valid': String(s.valid !== false) },
    el('div', { class: 'row spread' },
      el('div', { class: 'row' }, el('h3', null, s.name), badge('idle', s.level)),
      status(s)),
    s.description && el('p', { class: 'small' }, s.description),
    s.valid === false && el('p', { class: 'field-error', 'data-skill-error': '' },
      'SKILL.md does not load: ', s.error || 'unknown problem', '. Fix it, then check with ', code('clawvisor skills validate'), '.'),
    kv([
      ['Needs tools', list(s.tools)],
      ['Needs MCP servers', list(s.mcp)],
      ['Needs variables', list(requires.env)],
      ['Needs programs', list(requires.bins)],
      ['Risk hint', s.risk ? el('span', null, badge(s.risk === 'high' ? 'bad' : s.risk === 'medium' ? 'warn' : 'idle', s.risk),
        ' ', el('span', { class: 'muted small' }, s.risk === 'high' ? 'every call asks' : s.risk === 'medium' ? 'writes ask' : 'no change')) : null],
      ['Limited to', list(s.limited_to)],
      ['Other keys', unknown.length ? el('span', { 'data-unknown-keys': '' }, unknown.map(([key, value]) =>
        el('span', { class: 'chip', title: 'kept and shown, not used by clawvisor' }, code(`${key}: ${value}`)))) : null],
      ['Files', s.files?.length ? `${s.files.length} besides SKILL.md` : null],
      ['Folder', s.path ? code(s.path) : null],
    ]),
    s.agents?.length
      ? el('div', { class: 'skill-agents' }, s.agents.map((a) => agentRow(s, a, hooks)))
      : el('p', { class: 'muted small' }, 'No agents configured.'));
}

function agentState(a) {
  if (a.reachable === false) return badge('down', 'not answering');
  if (a.usable) return badge('ok', 'in use');
  if (a.enabled) return badge('bad', 'enabled, cannot load');
  return a.available ? badge('idle', 'off') : badge('warn', 'unavailable');
}

/** One agent's row: checkbox, name, state, and why not when it cannot use the skill. */
function agentRow(skill, a, hooks) {
  const key = `${skill.name}/${a.agent}`;
  // Turning on needs an available skill; turning off is always allowed.
  const locked = a.reachable === false || (!a.enabled && !a.available);
  const box = el('input', { type: 'checkbox', checked: !!a.enabled, disabled: locked, 'data-agent': a.agent,
    'data-skill-toggle': skill.name, 'aria-label': `${skill.name} for ${a.agent}` });
  const justSaved = Date.now() - (hooks.recent.get(key) ?? 0) < 3000;
  const note = el('span', { class: justSaved ? 'small saved' : 'small' }, justSaved ? '✓' : '');
  box.addEventListener('change', async () => {
    const enabled = box.checked;
    box.disabled = true;
    note.textContent = '…';
    hooks.started();
    try {
      const agent = await api(`/api/v1/agents/${enc(a.agent)}/skills/${enc(skill.name)}`, { method: 'PATCH', body: { enabled } });
      const now = agent.skills?.find((x) => x.name === skill.name);
      box.checked = now ? !!now.enabled : enabled;
      hooks.recent.set(key, Date.now());
      note.textContent = '✓';
      note.className = 'small saved';
      setTimeout(() => { note.textContent = ''; }, 2000);
    } catch (e) {
      box.checked = !enabled;
      note.textContent = '';
      toast(`${a.agent} / ${skill.name}: ${e.message}`, 'bad');
    } finally {
      box.disabled = !box.checked && !a.available;
      hooks.finished();
    }
  });
  return el('div', { class: 'skill-agent row', 'data-skill-agent': a.agent, 'data-usable': String(!!a.usable) },
    el('label', { class: 'inline' }, box, el('a', { href: `#/agents/${enc(a.agent)}` }, a.agent)),
    agentState(a), note,
    a.reason && !a.usable && el('span', { class: 'field-error skill-reason' }, a.reason),
    a.shadowed && el('span', { class: 'muted small', 'data-shadowed': '' }, `workspace copy not used — ${a.shadowed}`));
}
