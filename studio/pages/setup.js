// setup.js — the first setup, three steps that make an agent you can talk to from your phone:
// 1. a model to think with (the provider checked with its key before anything is saved; the key
//    kept in the daemon's store, the provider written into the config file), 2. the agent (its
//    instructions, what it may do from a preset, the model picked from the provider's live list),
//    3. its Telegram bot (the token checked with Telegram, kept, the agent's file pointed at it,
//    then the claim link and its QR code until the owner has claimed the bot).
// State from GET /api/v1/setup and /api/v1/people; every step uses the routes the other pages
// use. Each step is saved as it is done, so the page can be left and opened again.
import { api, el, append, clear, enc, act, toast, errorBox, code } from '/app.js';

export const events = ['config_reloaded', 'people_changed', 'bot_status', 'agent_changed'];

// Saving reloads the daemon (bots and agents restart); its routes answer within 120 s.
const SAVE_TIMEOUT_MS = 150000;

const KINDS = [
  ['openai', 'OpenAI, or a service that works like it', 'https://api.openai.com/v1'],
  ['anthropic', 'Anthropic (Claude)', 'https://api.anthropic.com'],
  ['gemini', 'Google Gemini', 'https://generativelanguage.googleapis.com/v1beta'],
  ['ollama', 'A model on this machine (Ollama, LM Studio…), no key', 'http://127.0.0.1:11434/v1'],
];
const DEFAULT_INSTRUCTIONS = `You are a friendly, concise personal assistant running on your user's home server.
Answer plainly. When a task needs a tool, use it; when an action could change or delete
something, say what you are about to do. Never invent facts about the user.
`;

/** What the operator did on this page and the daemon does not keep: the checked provider's models, the bot's name. */
const memo = { models: null, checked: null, username: null };
/** The setup's state as last read (the forms are built once; their handlers read this). */
let latest = null;

export async function render(root, ctx) {
  const box = el('div', { id: 'setup-steps' });
  append(root, el('h1', null, 'Set up'),
    el('p', { class: 'lead' }, 'Three steps make an agent you can talk to from your phone: a model for it to think with, ',
      'the agent itself, and its Telegram bot. Each step is saved when you finish it, so you can stop and come back.'),
    box);
  // Redraws keep a form being filled in: only the step summaries and the claim are redrawn.
  const page = { steps: null };
  const refresh = async (quiet) => {
    try {
      const [setup, people, tools] = await Promise.all([api('/api/v1/setup'), api('/api/v1/people'), page.tools ?? api('/api/v1/tools')]);
      page.tools = tools;
      draw(box, page, setup, people, () => refresh(true));
      root.dataset.loaded = 'true';
    } catch (error) {
      if (!quiet) clear(box, errorBox(error.message, () => refresh(false)));
    }
  };
  ctx.refresh = () => refresh(true);
  await refresh(false);
}

function draw(box, page, setup, people, refresh) {
  latest = setup;
  const claim = people.agents?.find((a) => a.agent === setup.agent?.name)?.claim ?? null;
  const done = {
    provider: !!setup.provider?.key_set && !!setup.agent && setup.agent.provider === setup.provider.name,
    agent: !!setup.agent && !setup.needed,
    bot: claim?.state === 'claimed' || claim?.state === 'managed_by_file',
  };
  if (!page.steps) {
    page.steps = {
      provider: providerStep(setup, refresh),
      agent: agentStep(setup, page.tools, refresh),
      bot: botStep(setup, refresh),
    };
    append(box, page.steps.provider.node, page.steps.agent.node, page.steps.bot.node,
      page.finish = el('div', { id: 'setup-finish' }));
  }
  page.steps.provider.update(setup, done.provider);
  page.steps.agent.update(setup, done.agent);
  page.steps.bot.update(setup, claim, done.bot, done.agent);
  clear(page.finish, done.provider && done.agent && done.bot
    ? el('div', { class: 'card ok-card', id: 'setup-done' }, el('h2', null, 'All set ✓'),
      el('p', null, `${setup.agent.name} answers on Telegram now. `, el('a', { href: '#/overview' }, 'Go to the Overview'),
        ' to watch it, or ', el('a', { href: `#/agents/${enc(setup.agent.name)}/edit` }, 'change it'), ' any time.'))
    : null);
}

function step(number, title, id) {
  const status = el('span', { class: 'badge', 'data-step-status': id });
  const summary = el('div', { class: 'step-summary-line' });
  const body = el('div', { class: 'step-body' });
  const node = el('section', { class: 'card setup-step', id: `step-${id}` },
    el('h2', null, el('span', { class: 'step-number' }, `${number}.`), ' ', title, ' ', status), summary, body);
  const mark = (state, label) => { status.className = `badge t-${state}`; status.textContent = label; node.dataset.done = String(state === 'ok'); };
  return { node, summary, body, mark };
}

// ---------- 1. the model ----------

function providerStep(setup, refresh) {
  const s = step(1, 'A model to think with', 'provider');
  const current = setup.provider;
  const kind = el('select', { name: 'kind' }, KINDS.map(([value, label]) => el('option', { value }, label)));
  kind.value = wizardKind(current) ?? 'openai';
  const url = el('input', { name: 'base_url', value: current?.base_url ?? '', autocomplete: 'off' });
  const key = el('input', { name: 'key', type: 'password', autocomplete: 'off', placeholder: current?.key_set ? 'kept; paste a new one to replace it' : 'paste the API key' });
  const keyLabel = el('label', { class: 'grow' }, 'API key', key);
  const model = el('select', { name: 'model', disabled: true }, el('option', { value: '' }, 'check first'));
  const note = el('div', { class: 'check-note', role: 'status' });
  const check = el('button', { type: 'button', 'data-action': 'check-provider' }, 'Check');
  const save = el('button', { type: 'submit', class: 'primary', 'data-action': 'save-provider', disabled: true }, 'Save');
  const usual = () => KINDS.find(([v]) => v === kind.value)?.[2] ?? '';
  const sync = () => {
    url.placeholder = `usually ${usual()}`;
    keyLabel.hidden = kind.value === 'ollama';
    save.disabled = true;
  };
  kind.addEventListener('change', () => { url.value = ''; sync(); });
  key.addEventListener('input', () => { save.disabled = true; });
  url.addEventListener('input', () => { save.disabled = true; });
  sync();

  check.onclick = () => act(check, async () => {
    note.replaceChildren(el('p', { class: 'muted' }, 'Asking the provider…'));
    const answer = await api('/api/v1/providers/check', { method: 'POST', body: { kind: kind.value, base_url: url.value.trim(), key: key.value.trim() } });
    memo.models = answer.models || [];
    memo.checked = answer;
    model.replaceChildren(...(memo.models.length ? memo.models : ['']).map((m) => el('option', { value: m }, m || 'type it in step 2')));
    model.disabled = !memo.models.length;
    const preferred = setup.agent?.model;
    if (preferred && memo.models.includes(preferred)) model.value = preferred;
    note.replaceChildren(answer.ok
      ? el('p', { class: 'ok-text', 'data-check': 'ok' }, `It answers${key.value.trim() ? ' and takes the key' : ''}. `,
        memo.models.length ? `${memo.models.length} ${memo.models.length === 1 ? 'model' : 'models'} to choose from.` : 'It lists no models; name one in step 2.')
      : el('p', { class: 'field-error', 'data-check': 'failed' }, `It did not work: ${answer.detail}`, el('br'),
        el('span', { class: 'muted small' }, 'Check the key (copy it whole) and the address, then check again.')));
    save.disabled = !answer.ok;
  });

  const form = el('form', { class: 'editor', onsubmit: async (event) => {
    event.preventDefault();
    const saved = await act(save, async () => {
      const chosen = kind.value;
      // The provider keeps its name when it stays the same kind; else it is named after the kind.
      const current = latest.provider;
      const sameKind = wizardKind(current) === chosen;
      const name = sameKind ? current.name : (chosen === 'ollama' ? 'local' : chosen);
      const variable = chosen === 'ollama' ? '' : (sameKind && current.api_key_env ? current.api_key_env : `${name.toUpperCase().replace(/-/g, '_')}_API_KEY`);
      if (variable && key.value.trim()) {
        await api(`/api/v1/secrets/${enc(variable)}`, { method: 'PUT', body: { value: key.value.trim() }, timeoutMs: SAVE_TIMEOUT_MS });
      }
      await api(`/api/v1/providers/${enc(name)}`, { method: 'PUT', body: { kind: chosen, base_url: url.value.trim(), api_key_env: variable }, timeoutMs: SAVE_TIMEOUT_MS });
      memo.provider = name;
      memo.model = model.value;
      memo.freshModel = true;
      key.value = '';
      // The agent follows: an existing one moves to this provider and model now.
      if (latest.agent && model.value) {
        await api(`/api/v1/agents/${enc(latest.agent.name)}`, { method: 'PATCH', body: { provider: name, model: model.value }, timeoutMs: SAVE_TIMEOUT_MS });
      }
      return name;
    });
    if (!saved) return;
    toast(`Saved: the daemon uses ${saved} now.`);
    s.body.hidden = true;
    refresh();
  } },
  el('div', { class: 'row' }, el('label', null, 'Who runs the model', kind), el('label', { class: 'grow' }, 'Address (empty: the usual one)', url)),
  el('div', { class: 'row' }, keyLabel, el('div', { class: 'row' }, check)),
  note,
  el('div', { class: 'row' }, el('label', { class: 'grow' }, 'Model', model)),
  el('p', { class: 'muted small' }, 'The key is kept by the daemon in its data folder (readable by it alone) and is never shown again.'),
  el('div', { class: 'row' }, save));
  s.body.append(form);

  const change = el('button', { type: 'button', class: 'link', 'data-action': 'change-provider', onclick: () => { s.body.hidden = !s.body.hidden; } }, 'Change');
  return {
    node: s.node,
    update(now, done) {
      s.mark(done ? 'ok' : 'warn', done ? 'done' : 'to do');
      clear(s.summary, now.provider
        ? el('p', null, done ? '✓ ' : '', 'Provider ', el('strong', null, now.provider.name), ` (${now.provider.base_url})`,
          now.provider.api_key_env ? [', key ', code(now.provider.api_key_env), now.provider.key_set ? ' kept.' : ' not set yet.'] : ', no key needed.',
          now.agent?.model ? [' Model ', code(now.agent.model), '.'] : '', ' ', done ? change : null)
        : el('p', null, 'No model provider yet.'));
      if (!done && s.body.hidden && !memo.provider) s.body.hidden = false;
      if (done && !s.node.dataset.opened) s.body.hidden = true;
      s.node.dataset.opened = 'true';
    },
  };
}

/** The wizard's choice a configured provider is: a keyless OpenAI-compatible one is a local model. */
function wizardKind(provider) {
  if (!provider) return null;
  return provider.kind === 'openai' && !provider.api_key_env ? 'ollama' : provider.kind;
}

// ---------- 2. the agent ----------

function agentStep(setup, tools, refresh) {
  const s = step(2, 'Your agent', 'agent');
  const agent = setup.agent;
  const name = el('input', { name: 'name', value: agent?.name ?? 'assistant', pattern: '[a-z0-9_-]+', required: true, readonly: !!agent, autocomplete: 'off' });
  const instructions = el('textarea', { name: 'instructions', rows: 7 }, agent?.instructions ?? DEFAULT_INSTRUCTIONS);
  const presets = tools?.presets ?? [];
  const startPreset = presets.find((p) => agent && p.tools.join() === [...agent.tools].join()) ?? presets.find((p) => p.id === 'helper') ?? presets[0];
  const byName = new Map((tools?.tools ?? []).map((t) => [t.name, t]));
  // Each preset's tools in plain words, with how careful the daemon is with each.
  const toolLines = (p) => el('details', { class: 'preset-tools small' }, el('summary', null, `What it may do (${p.tools.length})`),
    el('ul', null, p.tools.map((name) => byName.get(name)).filter(Boolean).map((t) => el('li', null, t.summary, ' ',
      el('span', { class: `chip ${t.asks ? 'warn' : ''}` }, t.care)))));
  const choices = el('div', { class: 'choices' }, presets.map((p) => el('div', { class: 'preset' },
    el('label', { class: 'inline choice', 'data-preset': p.id },
      el('input', { type: 'radio', name: 'preset', value: p.id, checked: p === startPreset }),
      el('span', null, el('strong', null, p.name), el('br'), el('span', { class: 'muted small' }, p.summary))),
    toolLines(p))));
  const keepTools = agent && !presets.some((p) => p.tools.join() === [...agent.tools].join());
  if (keepTools) {
    choices.prepend(el('label', { class: 'inline choice', 'data-preset': 'keep' },
      el('input', { type: 'radio', name: 'preset', value: 'keep', checked: true }),
      el('span', null, el('strong', null, 'Keep its tools'), el('br'), el('span', { class: 'muted small' }, agent.tools.join(', ') || 'none'))));
  }
  const model = el('input', { name: 'model', value: agent?.model ?? '', list: 'setup-models', autocomplete: 'off', placeholder: 'the model to use' });
  const models = el('datalist', { id: 'setup-models' });
  const save = el('button', { type: 'submit', class: 'primary', 'data-action': 'save-agent' }, agent ? 'Save the agent' : 'Create the agent');
  const form = el('form', { class: 'editor', onsubmit: async (event) => {
    event.preventDefault();
    const result = await act(save, async () => {
      const preset = form.querySelector('input[name="preset"]:checked')?.value;
      const body = { instructions: instructions.value, model: model.value.trim() };
      if (preset && preset !== 'keep') body.tools = presets.find((p) => p.id === preset)?.tools ?? [];
      const provider = memo.provider ?? latest.provider?.name;
      if (provider) body.provider = provider;
      if (!body.model) throw new Error('Pick the model it uses (step 1 lists them once the provider is checked).');
      if (latest.agent) return api(`/api/v1/agents/${enc(latest.agent.name)}`, { method: 'PATCH', body, timeoutMs: SAVE_TIMEOUT_MS });
      return api('/api/v1/agents', { method: 'POST', body: { name: name.value.trim(), ...body }, timeoutMs: SAVE_TIMEOUT_MS });
    });
    if (!result) return;
    toast(`${result.name} is saved and running.`);
    s.body.hidden = true;
    refresh();
  } },
  el('div', { class: 'row' }, el('label', null, 'Name', name), el('label', { class: 'grow' }, 'Model', model, models)),
  el('label', null, 'What it should do and know (its instructions)', instructions),
  el('fieldset', { class: 'editor-section' }, el('legend', null, 'What it may do'),
    el('p', { class: 'muted small' }, 'It asks you before anything that changes something; you can change the tools one by one later.'), choices),
  el('div', { class: 'row' }, save));
  s.body.append(form);
  const change = el('button', { type: 'button', class: 'link', 'data-action': 'change-agent', onclick: () => { s.body.hidden = !s.body.hidden; } }, 'Change');
  return {
    node: s.node,
    update(now, done) {
      s.mark(done ? 'ok' : 'warn', done ? 'done' : 'to do');
      // A finished step folds away once it was seen done; "Change" opens it again.
      if (done && !s.node.dataset.opened) s.body.hidden = true;
      if (!done) s.body.hidden = false;
      s.node.dataset.opened = 'true';
      if (memo.models) models.replaceChildren(...memo.models.map((m) => el('option', { value: m })));
      // The model just picked with the provider is the one the agent uses now.
      if (memo.freshModel && memo.model) { model.value = memo.model; memo.freshModel = false; }
      clear(s.summary, now.agent
        ? el('p', null, done ? '✓ ' : '', el('strong', null, now.agent.name), ` uses ${now.agent.provider}'s `, code(now.agent.model || '?'),
          '. ', done ? change : null, ' ', el('a', { href: `#/agents/${enc(now.agent.name)}/edit` }, 'Every setting'))
        : el('p', null, 'No agent yet.'));
    },
  };
}

// ---------- 3. the bot ----------

function botStep(setup, refresh) {
  const s = step(3, 'Its Telegram bot', 'bot');
  const token = el('input', { name: 'token', type: 'password', autocomplete: 'off', placeholder: '123456789:AAE…' });
  const apiUrl = el('input', { name: 'api_url', autocomplete: 'off', placeholder: 'https://api.telegram.org' });
  const note = el('div', { class: 'check-note', role: 'status' });
  const connect = el('button', { type: 'submit', class: 'primary', 'data-action': 'connect-bot' }, 'Connect');
  const claimBox = el('div', { id: 'claim', 'aria-live': 'polite' });
  const form = el('form', { class: 'editor', onsubmit: async (event) => {
    event.preventDefault();
    const username = await act(connect, async () => {
      const agent = latest.agent?.name;
      if (!agent) throw new Error('Create the agent first (step 2).');
      const address = apiUrl.value.trim() || undefined;
      note.replaceChildren(el('p', { class: 'muted' }, 'Asking Telegram whose token this is…'));
      const answer = await api('/api/v1/telegram/check', { method: 'POST', body: { token: token.value.trim(), api_url: address } });
      if (!answer.ok) {
        note.replaceChildren(el('p', { class: 'field-error', 'data-check': 'failed' }, answer.detail));
        return null;
      }
      memo.username = answer.username;
      note.replaceChildren(el('p', { class: 'ok-text', 'data-check': 'ok' }, `This is @${answer.username}. Connecting it to ${agent}…`));
      const variable = latest.agent.bot?.token_env || `${agent.toUpperCase().replace(/-/g, '_')}_TELEGRAM_TOKEN`;
      await api(`/api/v1/secrets/${enc(variable)}`, { method: 'PUT', body: { value: token.value.trim() }, timeoutMs: SAVE_TIMEOUT_MS });
      const telegram = { token_env: variable };
      if (address) telegram.api_url = address;
      await api(`/api/v1/agents/${enc(agent)}`, { method: 'PATCH', body: { telegram }, timeoutMs: SAVE_TIMEOUT_MS });
      token.value = '';
      return answer.username;
    });
    if (!username) return;
    toast(`@${username} is connected. Claim it from your phone.`);
    s.body.hidden = true;
    refresh();
  } },
  el('ol', { class: 'howto' },
    el('li', null, 'In Telegram, open ', el('a', { href: 'https://t.me/BotFather', target: '_blank', rel: 'noopener' }, '@BotFather'), ' and send ', code('/newbot'), '.'),
    el('li', null, 'Choose a name and a username ending in "bot". BotFather answers with a token.'),
    el('li', null, 'Paste the token here. It is checked with Telegram, then kept by the daemon and never shown again.')),
  el('div', { class: 'row' }, el('label', { class: 'grow' }, 'Bot token', token)),
  el('details', { class: 'muted small' }, el('summary', null, 'Advanced: your own Bot API server'), el('label', null, 'Bot API address', apiUrl)),
  note,
  el('div', { class: 'row' }, connect));
  s.body.append(form);
  s.node.append(claimBox);
  const change = el('button', { type: 'button', class: 'link', 'data-action': 'change-bot', onclick: () => { s.body.hidden = !s.body.hidden; } }, 'Use another bot');
  return {
    node: s.node,
    update(now, claim, done, agentDone) {
      const bot = now.agent?.bot;
      const username = bot?.username ?? memo.username;
      s.mark(done ? 'ok' : (bot ? 'warn' : 'idle'), done ? 'done' : (bot ? 'waiting for you' : 'to do'));
      clear(s.summary, bot
        ? el('p', null, done ? '✓ ' : '', username ? ['Bot ', el('strong', null, `@${username}`)] : 'The bot', ` talks for ${now.agent.name}`,
          bot.token_set ? '.' : [' — its token ', code(bot.token_env), ' is not set.'], ' ', change)
        : el('p', null, agentDone ? 'Optional, but this is how you reach your agent from your phone.' : 'After the agent: how you reach it from your phone.'));
      if (!bot && s.body.hidden) s.body.hidden = false;
      if (bot && !s.node.dataset.opened) s.body.hidden = true;
      s.node.dataset.opened = 'true';
      clear(claimBox, bot ? claimView(claim, username) : null);
    },
  };
}

function claimView(claim, username) {
  switch (claim?.state) {
    case 'claimed':
      return el('p', { class: 'ok-text', 'data-claim': 'claimed' }, `✓ Claimed by ${claim.owner?.name || claim.owner?.user_id}. `,
        username ? ['Say hello to ', el('a', { href: `https://t.me/${username}`, target: '_blank', rel: 'noopener' }, `@${username}`), '.'] : '');
    case 'managed_by_file':
      return el('p', { 'data-claim': 'file' }, 'Who may talk to it is written in its file.');
    case 'unclaimed': {
      const raw = claim.code.replace('-', '');
      const link = username ? `https://t.me/${username}?start=${raw}` : null;
      return el('div', { class: 'claim-card', 'data-claim': 'unclaimed' },
        el('p', null, el('strong', null, 'Last step: claim the bot, so that it answers you and only you.')),
        link
          ? [el('p', null, 'On your phone, open ', el('a', { href: link, target: '_blank', rel: 'noopener', 'data-claim-link': '' }, link),
              ' — or scan this — and press Start.'),
            el('img', { class: 'qr', src: `/api/v1/qr.svg?text=${enc(link)}`, alt: `QR code of ${link}`, width: 200, height: 200 })]
          : null,
        el('p', { class: 'muted small' }, 'Or send ', code(`/start ${claim.code}`), ' to the bot. The code works once and expires ', new Date(claim.expires_ms).toLocaleString(), '.'));
    }
    case 'renewing':
    case 'waiting_for_bot':
      return el('p', { class: 'muted', 'data-claim': 'waiting' }, 'Waiting for the bot to come online and make its claim code…');
    default:
      return null;
  }
}
