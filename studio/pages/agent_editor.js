// agent_editor.js — one agent's whole definition as a form: what it is for, its instructions,
// the model it uses (picked from the provider's live list), what it may do (tools from presets,
// each said in plain words), when it asks first, its limits, time zone, skills, voice and bot.
// Saving writes the agent's file (GET/PATCH /api/v1/agents/NAME, POST /api/v1/agents for a new
// one): the file stays the one place an agent is defined, comments kept. A file Studio cannot
// write is answered with its text to paste. Also: duplicate and delete (asking what happens to
// the agent's files).
import { api, el, append, clear, enc, act, toast, empty, errorBox, code } from '/app.js';

const AUTONOMY = [
  ['require_approval', 'Asks before it changes anything', 'Reads and answers freely; asks you before it writes, sends or runs something. Recommended.'],
  ['trust_first', 'Acts on its own', 'Does what it judges right; still asks before anything destructive.'],
  ['supervised', 'Asks before every action', 'Nothing happens without your yes. Slow, but you see everything.'],
];
const VOICE = [['never', 'Always writes'], ['when_spoken_to', 'Speaks when spoken to'], ['always', 'Always speaks']];

/** Renders the editor for `name` (null: a new agent) into `root`. */
export async function editor(root, name) {
  const isNew = !name;
  const title = isNew ? 'New agent' : `Change ${name}`;
  const box = el('div', { 'data-editor': name || 'new' });
  append(root, el('p', null, el('a', { href: isNew ? '#/agents' : `#/agents/${enc(name)}` }, '← Back')),
    el('h1', null, title),
    el('p', { class: 'lead' }, isNew
      ? 'Say what the new agent is for and what it may do. Saving writes its file under actors/ and starts it.'
      : 'Everything this agent is, in one form. Saving writes its file (your comments in it stay) and restarts it with the change.'),
    box);
  box.append(el('p', { class: 'loading' }, 'Loading…'));
  let file, catalogue, view = null;
  try {
    catalogue = await api('/api/v1/tools');
    if (isNew) {
      const overview = await api('/api/v1/agents');
      const first = overview.agents?.find((a) => a.reachable !== false);
      file = { settings: { provider: first?.provider ?? '', model: first?.model ?? '', autonomy: 'require_approval',
        tools: catalogue.presets.find((p) => p.id === 'helper')?.tools ?? [], instructions: '' }, providers: null, writable: true };
      const some = first && await api(`/api/v1/agents/${enc(first.name)}/file`).catch(() => null);
      file.providers = some?.providers ?? (first ? { [first.provider]: '' } : {});
      file.daemon_timezone = some?.daemon_timezone;
    } else {
      file = await api(`/api/v1/agents/${enc(name)}/file`);
      view = await api(`/api/v1/agents/${enc(name)}`).catch(() => null);
    }
  } catch (error) {
    clear(box, errorBox(error.message, () => { root.replaceChildren(); editor(root, name); }));
    return;
  }
  clear(box, form(name, file, catalogue, view));
  root.dataset.loaded = 'true';
}

function section(titleText, lead, ...children) {
  return el('fieldset', { class: 'card editor-section' }, el('legend', null, titleText),
    lead && el('p', { class: 'muted small' }, lead), ...children);
}

function form(name, file, catalogue, view) {
  const s = file.settings || {};
  const isNew = !name;
  const fields = {};
  const input = (key, attrs = {}) => (fields[key] = el('input', { name: key, ...attrs }));

  // What it is
  const nameInput = isNew ? input('name', { placeholder: 'e.g. helper', required: true, pattern: '[a-z0-9_-]+', autocomplete: 'off' }) : null;
  input('description', { value: s.description ?? '', placeholder: 'e.g. Keeps the family calendar and shopping list' });
  fields.instructions = el('textarea', { name: 'instructions', rows: 12, placeholder: 'How it should behave, what it knows about you, what it should never do.' }, s.instructions ?? '');

  // Model
  const providers = Object.keys(file.providers || {});
  if (s.provider && !providers.includes(s.provider)) providers.push(s.provider);
  fields.provider = el('select', { name: 'provider', value: s.provider }, providers.map((p) => el('option', { value: p }, p)));
  const models = el('datalist', { id: `models-${name || 'new'}` });
  input('model', { value: s.model ?? '', list: models.id, placeholder: 'a model of the provider', autocomplete: 'off' });
  const modelNote = el('p', { class: 'muted small', 'data-models': '' });
  const loadModels = async () => {
    const provider = fields.provider.value;
    if (!provider) return;
    modelNote.textContent = `Asking ${provider} for its models…`;
    try {
      const answer = await api(`/api/v1/providers/${enc(provider)}/models`);
      models.replaceChildren(...(answer.models || []).map((m) => el('option', { value: m })));
      modelNote.textContent = answer.ok
        ? (answer.models?.length ? `${answer.models.length} ${answer.models.length === 1 ? "model" : "models"} from ${provider}; type to pick one.` : `${provider} answered but lists no models; type the model's name.`)
        : `${provider} did not answer: ${answer.detail}`;
    } catch (error) {
      modelNote.textContent = error.message;
    }
  };
  fields.provider.addEventListener('change', loadModels);
  loadModels();

  // Tools
  const chosen = new Set(s.tools || []);
  const boxes = new Map();
  const toolList = el('div', { class: 'tool-list' });
  const groups = [...new Set(catalogue.tools.map((t) => t.group))];
  for (const group of groups) {
    append(toolList, el('h4', null, group));
    for (const tool of catalogue.tools.filter((t) => t.group === group)) {
      const box = el('input', { type: 'checkbox', name: 'tool', value: tool.name, checked: chosen.has(tool.name) });
      boxes.set(tool.name, box);
      append(toolList, el('label', { class: 'inline tool', 'data-tool': tool.name }, box,
        el('span', null, el('strong', null, tool.summary), ' ', el('span', { class: `chip ${tool.asks ? 'warn' : ''}` }, tool.care),
          el('span', { class: 'muted small' }, ` ${tool.name}`))));
    }
  }
  const unknown = [...chosen].filter((t) => !boxes.has(t));
  const presets = el('div', { class: 'row' }, el('span', { class: 'muted small' }, 'Start from:'),
    catalogue.presets.map((p) => el('button', { type: 'button', title: p.summary, 'data-preset': p.id, onclick: () => {
      for (const [tool, box] of boxes) box.checked = p.tools.includes(tool);
      toast(`${p.name}: ${p.summary}`);
    } }, p.name)));

  // Autonomy
  const autonomy = el('div', { class: 'choices' }, AUTONOMY.map(([value, label, help]) => el('label', { class: 'inline choice' },
    el('input', { type: 'radio', name: 'autonomy', value, checked: (s.autonomy || 'require_approval') === value }),
    el('span', null, el('strong', null, label), el('br'), el('span', { class: 'muted small' }, help)))));

  // Limits, zone, voice
  input('daily_budget_usd', { type: 'number', min: 0, step: 0.5, value: s.daily_budget_usd ?? 0 });
  input('daily_token_budget', { type: 'number', min: 0, step: 1000, value: s.daily_token_budget ?? 0 });
  input('timezone', { value: s.timezone ?? '', placeholder: file.daemon_timezone ? `the daemon's: ${file.daemon_timezone}` : 'e.g. Europe/Berlin' });
  fields.voice_replies = el('select', { name: 'voice_replies', value: s.voice_replies ?? 'never' }, VOICE.map(([v, l]) => el('option', { value: v }, l)));

  // Skills (an existing agent only: they depend on its workspace)
  const skills = new Set(s.skills || []);
  const skillBoxes = new Map();
  const skillList = (view?.skills || []).map((skill) => {
    const box = el('input', { type: 'checkbox', value: skill.name, checked: skills.has(skill.name), disabled: !skill.available && !skills.has(skill.name) });
    skillBoxes.set(skill.name, box);
    return el('label', { class: 'inline' }, box, el('span', null, el('strong', null, skill.name), ' ', el('span', { class: 'muted small' }, skill.description || ''),
      skill.available ? null : el('span', { class: 'muted small' }, ` — not usable: ${skill.reason || 'see the Skills page'}`)));
  });

  // Telegram
  const telegram = s.telegram;
  const tokenEnv = input('token_env', { value: telegram?.token_env ?? '', placeholder: 'e.g. HELPER_TELEGRAM_TOKEN' });
  const allow = input('allow_users', { value: (telegram?.allow_users || []).join(', '), placeholder: 'Telegram user ids, e.g. 123456789 (empty: claim it with a code)' });
  const disconnect = el('input', { type: 'checkbox', name: 'disconnect' });

  const outcome = el('div', { class: 'outcome', role: 'status' });
  const save = el('button', { type: 'submit', class: 'primary' }, isNew ? 'Create the agent' : 'Save');
  const formNode = el('form', { class: 'editor', onsubmit: async (event) => {
    event.preventDefault();
    const body = collect();
    if (!body) return;
    outcome.replaceChildren();
    const path = isNew ? '/api/v1/agents' : `/api/v1/agents/${enc(name)}`;
    const result = await act(save, () => api(path, { method: isNew ? 'POST' : 'PATCH', body }).catch((error) => {
      if (error.status === 409 && error.body?.toml) {
        outcome.append(el('div', { class: 'card warn' }, el('p', null, error.message), el('pre', { class: 'toml' }, error.body.toml)));
        return null;
      }
      throw error;
    }));
    if (!result) return;
    toast(isNew ? `${result.name} is made and running.` : `Saved. ${result.name} runs with the change.`);
    outcome.append(el('p', { class: 'saved' }, isNew ? 'Made ✓ It is running.' : 'Saved ✓ It runs with the change now.'),
      el('details', { class: 'muted small' }, el('summary', null, 'What the daemon did'),
        el('p', null, result.reload ?? ''), el('p', null, 'File: ', code(result.file ?? ''))));
    if (isNew) location.hash = `#/agents/${enc(result.name)}`;
  } },
  !file.writable && !isNew && el('p', { class: 'field-error' }, 'Studio cannot write this agent\'s file; saving shows the text to put there yourself.'),
  section('What it is for', 'A name and one line for lists, and the instructions it follows in every conversation.',
    nameInput && el('label', null, 'Name (lowercase letters, digits, - and _)', nameInput),
    el('label', null, 'In one line', fields.description),
    el('label', null, 'Instructions', fields.instructions)),
  section('Which model it uses', 'The provider is one of the daemon\'s; the list of models is asked from it now.',
    el('div', { class: 'row' }, el('label', null, 'Provider', fields.provider), el('label', { class: 'grow' }, 'Model', fields.model, models)), modelNote),
  section('What it may do', 'Each tool in plain words, and how careful the daemon is with it.',
    presets, toolList, unknown.length && el('p', { class: 'muted small' }, 'Also in its file: ', unknown.map((t) => code(t)), ' (kept).')),
  section('When it asks you first', null, autonomy),
  section('Limits', 'It stops starting new work for the day when one is reached (0: no limit).',
    el('div', { class: 'row' }, el('label', null, 'Dollars a day', fields.daily_budget_usd), el('label', null, 'Tokens a day', fields.daily_token_budget))),
  section('Time and voice', null, el('div', { class: 'row' }, el('label', null, 'Time zone', fields.timezone), el('label', null, 'Answers', fields.voice_replies))),
  !isNew && section('Skills', 'Extra know-how it can load when a task needs it.', skillList.length ? skillList : empty('No skills are installed.')),
  section('Telegram bot', telegram ? 'Its bot, and who may talk to it.' : 'No bot yet. The setup wizard connects one with its token; or name the variable that holds it here.',
    el('div', { class: 'row' }, el('label', null, 'Token variable', tokenEnv), el('label', { class: 'grow' }, 'Who may talk to it', allow)),
    telegram && el('label', { class: 'inline' }, disconnect, 'Disconnect the bot')),
  el('div', { class: 'row' }, save, !isNew && actions(name)),
  outcome);

  /** The fields that differ from what the file says (all of them for a new agent). */
  function collect() {
    const body = {};
    const text = (key, value, old) => { if (isNew ? value !== '' : value !== (old ?? '')) body[key] = value; };
    if (isNew) {
      body.name = nameInput.value.trim();
      if (!body.name) { toast('Give the agent a name.', 'error'); return null; }
    }
    text('description', fields.description.value.trim(), s.description);
    text('instructions', fields.instructions.value, s.instructions);
    if (fields.provider.value !== s.provider || isNew) body.provider = fields.provider.value;
    text('model', fields.model.value.trim(), s.model);
    const tools = [...boxes].filter(([, box]) => box.checked).map(([tool]) => tool).concat(unknown);
    if (isNew || tools.join() !== (s.tools || []).join()) body.tools = tools;
    const level = formNode.querySelector('input[name="autonomy"]:checked')?.value;
    if (level && (isNew || level !== s.autonomy)) body.autonomy = level;
    const number = (key, old) => { const v = Number(fields[key].value || 0); if (v !== Number(old ?? 0)) body[key] = v; };
    number('daily_budget_usd', s.daily_budget_usd);
    number('daily_token_budget', s.daily_token_budget);
    text('timezone', fields.timezone.value.trim(), s.timezone);
    if (fields.voice_replies.value !== (s.voice_replies ?? 'never')) body.voice_replies = fields.voice_replies.value;
    if (!isNew) {
      const chosenSkills = [...skillBoxes].filter(([, box]) => box.checked).map(([skill]) => skill);
      if (chosenSkills.join() !== (s.skills || []).join()) body.skills = chosenSkills;
    }
    const users = allow.value.split(/[\s,]+/).filter(Boolean).map(Number);
    if (users.some((id) => !Number.isInteger(id))) { toast('"Who may talk to it": write Telegram user ids (numbers), separated by commas.', 'error'); return null; }
    if (telegram && disconnect.checked) body.telegram = null;
    else if (tokenEnv.value.trim() && (tokenEnv.value.trim() !== (telegram?.token_env ?? '') || users.join() !== (telegram?.allow_users || []).join())) {
      body.telegram = { token_env: tokenEnv.value.trim(), allow_users: users };
    }
    if (!Object.keys(body).length) { toast('Nothing changed.'); return null; }
    return body;
  }
  return formNode;
}

/** Duplicate and delete, each asking what it needs. */
function actions(name) {
  const copy = el('button', { type: 'button', 'data-action': 'duplicate', onclick: async () => {
    const other = prompt(`A new agent with ${name}'s settings (without its bot). Its name:`, `${name}-2`);
    if (!other) return;
    const made = await act(copy, () => api(`/api/v1/agents/${enc(name)}/duplicate`, { method: 'POST', body: { name: other.trim() } }));
    if (made) { toast(`${made.name} is made and running.`); location.hash = `#/agents/${enc(made.name)}/edit`; }
  } }, 'Duplicate');
  const remove = el('button', { type: 'button', class: 'danger', 'data-action': 'delete', onclick: () => {
    const dialog = el('div', { class: 'card warn', 'data-confirm': 'delete' },
      el('p', null, `Delete ${name}? Its file is removed and it stops. Its conversations, runs and the audit log stay.`),
      el('label', { class: 'inline' }, el('input', { type: 'radio', name: 'data', value: 'keep', checked: true }), 'Keep its workspace (its files)'),
      el('label', { class: 'inline' }, el('input', { type: 'radio', name: 'data', value: 'remove' }), 'Remove its workspace too'),
      el('div', { class: 'row' },
        el('button', { type: 'button', class: 'danger', 'data-action': 'confirm-delete', onclick: async (event) => {
          const data = dialog.querySelector('input[name="data"]:checked').value;
          const done = await act(event.currentTarget, () => api(`/api/v1/agents/${enc(name)}?data=${data}`, { method: 'DELETE' }));
          if (done) { toast(`${name} is deleted.`); location.hash = '#/agents'; }
        } }, 'Delete'),
        el('button', { type: 'button', onclick: () => dialog.remove() }, 'Cancel')));
    remove.closest('form').append(dialog);
  } }, 'Delete…');
  return [copy, remove];
}
