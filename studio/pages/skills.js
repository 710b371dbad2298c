// skills.js — skills the agents can use: level (bundled / installed / workspace), whether each is
// available (and why not), and one checkbox per agent that PATCHes
// /api/v1/agents/{agent}/skills/{skill} {"enabled": bool}.
import { api, load, el, append, enc, badge, empty, toast, code } from '/app.js';

export async function render(root) {
  const box = el('div');
  append(root, el('h1', null, 'Skills'), box);
  return load(box, () => api('/api/v1/skills'), (d) => draw(box, d.skills || []), { root });
}

function draw(box, skills) {
  if (!skills.length) {
    append(box, empty('No skills found. Bundled skills, installed ones and skills in the agent workspace show up here.'));
    return;
  }
  append(box, skills.map((s) => el('div', { class: 'card', 'data-skill': s.name },
    el('div', { class: 'row spread' },
      el('div', { class: 'row' }, el('h3', null, s.name), badge('idle', s.level)),
      s.available ? badge('ok', 'available') : badge('bad', 'unavailable')),
    s.description && el('p', { class: 'small' }, s.description),
    !s.available && s.reason && el('p', { class: 'field-error' }, s.reason),
    s.path && el('p', { class: 'muted small' }, code(s.path)),
    s.agents?.length
      ? el('div', { class: 'row' }, el('span', { class: 'muted small' }, 'Enabled for:'), s.agents.map((a) => toggle(s, a)))
      : el('p', { class: 'muted small' }, 'No agents configured.'))));
}

function toggle(skill, a) {
  const box = el('input', { type: 'checkbox', checked: !!a.enabled, 'data-agent': a.agent, 'data-skill-toggle': skill.name });
  const note = el('span', { class: 'small' });
  box.addEventListener('change', async () => {
    const enabled = box.checked;
    box.disabled = true;
    note.textContent = '…';
    try {
      const agent = await api(`/api/v1/agents/${enc(a.agent)}/skills/${enc(skill.name)}`, { method: 'PATCH', body: { enabled } });
      const now = agent.skills?.find((x) => x.name === skill.name);
      box.checked = now ? !!now.enabled : enabled;
      note.textContent = '✓';
      note.className = 'small saved';
      setTimeout(() => { note.textContent = ''; }, 2000);
    } catch (e) {
      box.checked = !enabled;
      note.textContent = '';
      toast(`${a.agent} / ${skill.name}: ${e.message}`, 'bad');
    } finally {
      box.disabled = false;
    }
  });
  return el('label', { class: 'inline' }, box, a.agent, note);
}
