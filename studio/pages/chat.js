// chat.js — talk to an agent. POST /api/v1/agents/{name}/chat answers with a text/event-stream that
// we read with fetch + getReader: `partial` (whole answer so far) grows the assistant bubble, `tool`
// events become tool cards, `notice` a muted line, `final` ends the turn. One conversation id per
// agent lives in localStorage (default "operator"); "New conversation" picks a fresh one. Earlier
// messages of that conversation are shown when the session can be found. Live: agent_changed
// updates the agent picker (paused or not); message and run events of this conversation bring in
// what was said in it elsewhere (another tab or device on the same conversation) — never while a
// turn of this tab streams, never touching the text being typed, and this tab's own turns are not
// redrawn.
import { api, load, el, append, enc, badge, empty, mutationHeaders, transcriptItem, errorBox, clear } from '/app.js';

export const events = ['agent_changed', 'message_in', 'message_out', 'run_finished'];

const AGENT_KEY = 'clawvisor.chat.agent';
const convKey = (agent) => `clawvisor.chat.conversation.${agent}`;
const conversation = (agent) => localStorage.getItem(convKey(agent)) || 'operator';

export async function render(root, ctx) {
  const box = el('div');
  append(root, el('h1', null, 'Chat'), box);
  return load(box, () => api('/api/v1/agents'), (d) => {
    if (!d.agents?.length) {
      append(box, empty('No agents to talk to yet. Add an agent file under actors/ (for example actors/assistant.toml) and restart the daemon.'));
      return;
    }
    chatUi(box, d.agents, ctx);
  }, { root });
}

const textOf = (ev) => (typeof ev.content === 'string' ? ev.content : JSON.stringify(ev.content ?? '')).trim();

function chatUi(box, agents, ctx) {
  const names = agents.map((a) => a.name);
  let agent = [ctx.params[0], localStorage.getItem(AGENT_KEY)].find((n) => n && names.includes(n)) || names[0];
  let busy = false;
  let historySeq = 0;
  // What the history shows, to tell this tab's own turns from what was said elsewhere.
  let shownIds = new Set();
  let ownTexts = [];
  const ownRuns = new Set();
  let syncLater = false;

  const label = (a) => (a.reachable === false ? `${a.name} (not answering)` : a.paused ? `${a.name} (paused)` : a.name);
  const picker = el('select', { id: 'chat-agent', value: agent, 'aria-label': 'Agent' },
    agents.map((a) => el('option', { value: a.name }, label(a))));
  const convLabel = el('span', { class: 'muted small' });
  const newBtn = el('button', { id: 'chat-new', type: 'button' }, 'New conversation');
  const history = el('div', { class: 'history' });
  const live = el('div', { class: 'live' });
  const log = el('div', { class: 'chat-log', 'aria-live': 'polite' }, history, live);
  const input = el('textarea', { id: 'chat-input', rows: 3, placeholder: 'Message the agent… (Enter sends, Shift+Enter for a new line)' });
  const send = el('button', { id: 'chat-send', type: 'submit', class: 'primary' }, 'Send');

  const scroll = () => { log.scrollTop = log.scrollHeight; };

  function switchTo(name) {
    agent = name;
    localStorage.setItem(AGENT_KEY, name);
    live.replaceChildren();
    convLabel.textContent = `conversation: ${conversation(agent)}`;
    loadHistory();
  }

  async function transcript(name, conv) {
    const { sessions = [] } = await api(`/api/v1/sessions?agent=${enc(name)}`);
    const match = sessions.filter((s) => s.chat === `studio:${conv}` || s.chat === conv)
      .sort((x, y) => (y.updated_ms ?? 0) - (x.updated_ms ?? 0))[0];
    return match ? (await api(`/api/v1/sessions/${enc(match.id)}`)).events || [] : [];
  }

  function showHistory(events) {
    history.replaceChildren(...events.map((ev) => transcriptItem(ev, 'history')));
    shownIds = new Set(events.map((ev) => ev.id));
    ownTexts = [];
  }

  async function loadHistory() {
    const seq = ++historySeq;
    const conv = conversation(agent);
    history.replaceChildren(el('p', { class: 'notice' }, 'Loading earlier messages…'));
    history.dataset.loading = 'true';
    try {
      const events = await transcript(agent, conv);
      if (seq !== historySeq) return;
      delete history.dataset.loading;
      showHistory(events);
      if (!events.length && !live.firstChild) append(history, el('p', { class: 'notice hello' }, `Say hello to ${agent}.`));
      scroll();
    } catch (e) {
      if (seq !== historySeq) return;
      delete history.dataset.loading;
      history.replaceChildren(el('p', { class: 'notice' }, `Earlier messages are not available (${e.message}).`));
    }
  }

  /** Brings in what was said in this conversation elsewhere; this tab's own turns stay as drawn. */
  async function syncHistory() {
    if (history.dataset.loading) return; // that load brings the newest anyway
    if (busy) { syncLater = true; return; }
    const seq = historySeq;
    let events;
    try { events = await transcript(agent, conversation(agent)); } catch { return; }
    if (seq !== historySeq || busy) return;
    const foreign = events.filter((ev) => !shownIds.has(ev.id)
      && !(ev.run_id != null && ownRuns.has(ev.run_id))
      && !(ev.kind === 'user' && ownTexts.includes(textOf(ev))));
    if (!foreign.length) return;
    // The stored transcript is the whole truth: it replaces this tab's live bubbles too.
    live.replaceChildren();
    showHistory(events);
    scroll();
  }

  async function refreshAgents() {
    try {
      const { agents: now = [] } = await api('/api/v1/agents');
      for (const a of now) {
        const option = [...picker.options].find((o) => o.value === a.name);
        if (option) option.textContent = label(a);
      }
    } catch { /* the picker keeps its labels; sending still says what is wrong */ }
  }

  ctx.accept = (kind, event) => kind === 'agent_changed'
    || (event?.data?.agent === agent && event?.data?.chat === `studio:${conversation(agent)}`);
  ctx.refresh = () => { refreshAgents(); syncHistory(); };

  async function submit(text) {
    if (!text || busy) return;
    // Earlier messages still loading would now include this turn too: drop that load.
    if (history.dataset.loading) { historySeq++; history.replaceChildren(); delete history.dataset.loading; }
    history.querySelector('.hello')?.remove();
    busy = true;
    send.disabled = true;
    ownTexts.push(text.trim());
    const turn = { agent, conv: conversation(agent) };
    const mine = el('div', { class: 'msg user' }, text);
    append(live, mine);
    const tools = el('div', { class: 'tools' });
    const body = el('div', { class: 'msg-text' });
    const notices = el('div');
    const foot = el('div', { class: 'msg-foot' });
    const bubble = el('div', { class: 'msg assistant', 'data-streaming': 'true' }, tools, body, notices, foot);
    append(live, bubble);
    scroll();
    const finish = () => bubble.removeAttribute('data-streaming');
    try {
      const res = await fetch(`/api/v1/agents/${enc(turn.agent)}/chat`, {
        method: 'POST', credentials: 'same-origin', headers: { ...mutationHeaders(), Accept: 'text/event-stream' },
        body: JSON.stringify({ text, chat: turn.conv }),
      }).catch(() => { throw new Error('Cannot reach clawvisor. Is the daemon running?'); });
      if (!res.ok) {
        let message = `${res.status} ${res.statusText}`;
        try { message = (await res.json()).error?.message || message; } catch { /* not JSON */ }
        throw new Error(message);
      }
      let done = false;
      await readEvents(res.body, (kind, data) => {
        if (kind === 'partial') body.textContent = data.text ?? '';
        else if (kind === 'tool') toolCard(tools, data);
        else if (kind === 'notice') append(notices, el('p', { class: 'notice' }, data.text ?? ''));
        else if (kind === 'final') {
          if (data.text != null) body.textContent = data.text;
          if (data.run_id != null) {
            ownRuns.add(data.run_id);
            foot.append(el('a', { href: `#/runs/${enc(data.run_id)}` }, `run ${data.run_id}`));
          }
          finish();
          bubble.setAttribute('data-done', 'true');
          done = true;
        }
        scroll();
        return done;
      });
      if (!done) throw new Error('The answer stream ended before the agent finished. Check Runs for what happened.');
    } catch (e) {
      finish();
      append(bubble, errorBox(e.message, () => { mine.remove(); bubble.remove(); submit(text); }));
    } finally {
      busy = false;
      send.disabled = false;
      scroll();
      if (syncLater) { syncLater = false; syncHistory(); }
    }
  }

  picker.addEventListener('change', () => switchTo(picker.value));
  newBtn.addEventListener('click', () => {
    const id = `c-${Date.now().toString(36)}${Math.random().toString(36).slice(2, 6)}`;
    localStorage.setItem(convKey(agent), id);
    switchTo(agent);
    input.focus();
  });
  input.addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) { e.preventDefault(); form.requestSubmit(); }
  });
  const form = el('form', { class: 'composer', onsubmit: (e) => {
    e.preventDefault();
    const text = input.value.trim();
    if (!text || busy) return;
    input.value = '';
    submit(text);
  } }, input, send);

  append(box, el('div', { class: 'chat' },
    el('div', { class: 'row' }, el('label', { class: 'inline' }, 'Agent', picker), newBtn, convLabel),
    log, form));
  switchTo(agent);
}

/** Adds or updates a tool card: a new status for the newest unfinished card of that tool updates it. */
function toolCard(tools, data) {
  const name = data.name ?? 'tool';
  const open = [...tools.querySelectorAll('.tool-card')].reverse()
    .find((c) => c.dataset.tool === name && ['running', 'waiting_approval', 'started'].includes(c.dataset.status));
  const card = open || tools.appendChild(el('div', { class: 'tool-card', 'data-tool': name }));
  card.dataset.status = data.status ?? '';
  clear(card, el('span', { class: 'mono' }, name), badge(data.status),
    data.status === 'waiting_approval' && el('a', { href: '#/approvals' }, 'approve →'));
}

/** Reads a text/event-stream body; calls onEvent(kind, data) per event; stops when it returns true. */
async function readEvents(stream, onEvent) {
  const reader = stream.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  const dispatch = (block) => {
    let kind = 'message';
    const data = [];
    for (const line of block.split('\n')) {
      if (!line || line.startsWith(':')) continue;
      const colon = line.indexOf(':');
      const field = colon < 0 ? line : line.slice(0, colon);
      const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
      if (field === 'event') kind = value;
      else if (field === 'data') data.push(value);
    }
    if (!data.length) return false;
    let parsed;
    try { parsed = JSON.parse(data.join('\n')); } catch { parsed = { text: data.join('\n') }; }
    return onEvent(kind, parsed ?? {});
  };
  for (;;) {
    const { value, done } = await reader.read();
    // Normalise CRLF / CR, but keep a trailing CR until we know whether an LF follows.
    buffer = (buffer + (done ? decoder.decode() : decoder.decode(value, { stream: true }))).replace(/\r\n|\r(?!$)/g, '\n');
    let cut;
    while ((cut = buffer.indexOf('\n\n')) >= 0) {
      const block = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      if (dispatch(block)) { reader.cancel().catch(() => {}); return; }
    }
    if (done) {
      if (buffer.trim()) dispatch(buffer.replace(/\r$/, ''));
      return;
    }
  }
}
