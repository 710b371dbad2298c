// nodes.js — tool nodes (issue #34): the household's other computers (a NAS, a Raspberry Pi)
// where agents may run commands and read files. Every action there still passes this daemon's
// approvals. One card per computer: reachable or not in words, round trip, version, whether its
// kernel enforces every protection, which agents use it, and Remove; the technical detail
// (address, fingerprint, tools, last error) is in a details block. "Add a computer" pairs with the
// code `clawvisor node pair` printed there. Refreshes on mcp_health and config_reloaded.
import { api, load, el, append, clear, enc, badge, empty, code, act, num } from '/app.js';

export const events = ['mcp_health', 'config_reloaded'];

const CHANGE_TIMEOUT_MS = 60000;

export async function render(root, ctx) {
  const box = el('div', { id: 'nodes-list' });
  const outcome = el('div', { id: 'nodes-outcome', 'aria-live': 'polite' });
  const form = addForm(outcome, () => refresh(true));
  append(root, el('h1', null, 'Nodes'),
    el('p', { class: 'muted small', id: 'nodes-purpose' },
      'Other computers in your home — a NAS, a Raspberry Pi — where your agents may run commands and read files. ',
      'Everything they do there still asks for your approval here. To add one, pair it with the code it shows.'),
    box, form.card, outcome);
  const refresh = (quiet) => load(box, () => api('/api/v1/nodes'), (d) => {
    form.agents(d.agent_names || []);
    draw(box, d.nodes || [], () => refresh(true));
  }, { root, quiet });
  ctx.refresh = () => refresh(true);
  await refresh(false);
}

function draw(box, nodes, refresh) {
  if (!nodes.length) {
    append(box, empty('No computers are paired yet. Follow the steps under "Add a computer" below.'));
    return;
  }
  append(box, nodes.map((n) => card(n, refresh)));
}

function tone(state) {
  return state === 'up' ? 'ok' : state === 'connecting' ? 'idle' : 'bad';
}

function protections(n) {
  if (n.protections_complete === true) return badge('ok', 'fully confined');
  if (n.protections_complete === false) return badge('warn', 'partly confined');
  return badge('idle', 'unknown until it answers');
}

// What it lends, in words: "1 folder and 2 MCP servers" (null before it answers).
function lends(n) {
  if (typeof n.roots !== 'number') return null;
  const folders = n.roots === 1 ? '1 folder' : `${n.roots} folders`;
  if (!n.mcp_servers) return folders;
  return `${folders} and ${n.mcp_servers === 1 ? '1 tool server' : `${n.mcp_servers} tool servers`}`;
}

function card(n, refresh) {
  const remove = el('button', { type: 'button', 'data-remove-node': n.name }, 'Remove');
  remove.addEventListener('click', () => {
    if (!window.confirm(`Unpair ${n.name}? Its tools are taken from the agents, and it forgets this daemon.`)) return;
    act(remove, () => api(`/api/v1/nodes/${enc(n.name)}`, { method: 'DELETE', timeoutMs: CHANGE_TIMEOUT_MS }).then(refresh),
      `${n.name} was unpaired.`);
  });
  const who = n.agents?.length ? n.agents.join(', ') : 'no agent yet';
  return el('section', { class: 'card node', 'data-node': n.name, 'data-state': n.state },
    el('div', { class: 'row spread' }, el('h2', null, n.name), badge(tone(n.state), n.state_words)),
    el('p', null, n.state === 'up'
      ? `Used by ${who}. It answers in ${num(n.latency_ms)} ms${lends(n) ? ` and lends ${lends(n)}` : ''}.`
      : `Used by ${who}. Its tools are unavailable until it answers again; check that the computer is on and runs clawvisor node serve.`),
    el('div', { class: 'row' }, el('span', null, 'Confinement: '), protections(n),
      n.version ? el('span', { class: 'small muted' }, ` · version ${n.version}`) : null),
    el('div', { class: 'row', style: 'margin:.6rem 0' }, remove),
    el('details', { class: 'small' }, el('summary', null, 'Technical details'),
      el('p', null, 'Address: ', code(n.url)),
      el('p', null, 'Certificate fingerprint: ', n.fingerprint ? code(n.fingerprint) : 'not paired'),
      n.protections ? el('p', null, 'Protections: ', n.protections) : null,
      el('p', null, 'Tools: ', n.tools?.length ? n.tools.map((t) => el('span', { class: 'chip' }, t)) : 'none right now'),
      el('p', null, `Link restarts: ${num(n.restarts)}`),
      n.last_error ? el('pre', { class: 'field-error' }, n.last_error) : null));
}

function addForm(outcome, refreshed) {
  const name = el('input', { id: 'node-name', name: 'name', required: true, autocomplete: 'off', spellcheck: 'false', placeholder: 'e.g. nas' });
  const url = el('input', { id: 'node-url', name: 'url', required: true, autocomplete: 'off', spellcheck: 'false', placeholder: 'https://nas.lan:7443' });
  const codeInput = el('input', { id: 'node-code', name: 'code', required: true, autocomplete: 'off', spellcheck: 'false', placeholder: 'ABCDE-FGHJK' });
  const agentBox = el('fieldset', { id: 'node-agents', class: 'wide' }, el('legend', null, 'Agents that may use it'));
  const save = el('button', { id: 'node-add', type: 'submit', class: 'primary' }, 'Pair and add');
  const form = el('form', { id: 'node-form', class: 'form-grid', autocomplete: 'off' },
    el('label', null, 'Name', name),
    el('label', null, 'Address', url),
    el('label', null, 'Pairing code', codeInput),
    agentBox,
    el('div', { class: 'wide row' }, save));
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    save.disabled = true;
    clear(outcome, el('p', { class: 'loading', role: 'status' }, 'Pairing and reloading the configuration…'));
    const agents = [...agentBox.querySelectorAll('input:checked')].map((box) => box.value);
    try {
      const result = await api('/api/v1/nodes', { method: 'POST', timeoutMs: CHANGE_TIMEOUT_MS,
        body: { name: name.value.trim(), url: url.value.trim(), code: codeInput.value.trim(), agents } });
      clear(outcome, el('div', { class: 'hint', role: 'status', 'data-outcome': 'ok' },
        el('p', { style: 'margin:0' }, el('strong', null, `${result.node} is paired. Its tools reach the agents as soon as it answers.`)),
        el('details', { class: 'json' }, el('summary', null, 'What the reload did'), el('p', { class: 'small' }, result.reload))));
      name.value = ''; url.value = ''; codeInput.value = '';
      refreshed();
    } catch (err) {
      clear(outcome, el('div', { class: 'error', role: 'alert', 'data-outcome': 'refused' },
        el('p', { style: 'margin:0' }, `Nothing was added: ${err.message.replace(/^`\w+`: /, '')}`)));
    } finally {
      save.disabled = false;
    }
  });
  const card = el('div', { class: 'card', id: 'node-form-card', style: 'margin-top:1rem' },
    el('h2', { style: 'margin-top:0' }, 'Add a computer'),
    el('ol', { class: 'small' },
      el('li', null, 'On that computer, start ', code('clawvisor node serve'), '.'),
      el('li', null, 'There, run ', code('clawvisor node pair'), ': it shows a code, valid for 10 minutes.'),
      el('li', null, 'Type its address and that code here, choose the agents, and press Pair and add.')),
    form);
  return {
    card,
    agents: (names) => {
      const chosen = new Set([...agentBox.querySelectorAll('input:checked')].map((box) => box.value));
      clear(agentBox, el('legend', null, 'Agents that may use it'),
        names.length ? names.map((agent) => el('label', { class: 'inline' },
          el('input', { type: 'checkbox', value: agent, checked: chosen.has(agent), 'data-node-agent': agent }), ` ${agent}`))
          : el('span', { class: 'muted small' }, 'No agents yet.'));
    },
  };
}
