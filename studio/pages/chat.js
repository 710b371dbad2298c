// chat.js — talk to an agent as the operator. POST /api/v1/agents/{name}/chat answers with a
// text/event-stream read with fetch + getReader: `partial` (the whole answer so far, drawn as
// Markdown) grows the assistant bubble, `tool` events become tool cards (a `waiting_approval` one
// brings in the approval card), `notice` a muted line, `final` ends the turn; then the run's steps
// fill the cards with what each tool was asked and answered. Stop asks the session to stop
// (/stop). A pending approval of this conversation is an inline card (approve once, allow exactly
// this for a while, deny; a blocked action: allow once by typing it) read from the approvals API,
// so it is still there after navigating away and back.
//
// Conversations: a Studio one (id in localStorage per agent, default "operator"; "New
// conversation" picks a fresh one) or any conversation the agent has on a person's channel —
// Telegram, WhatsApp, Signal (#/chat/ada?chat=tg:42, ?chat=wa:4915…, ?chat=sg:+4915… open one): a
// message sent there reaches the agent as the operator's and the answer goes to that chat, and
// shows here. Live: agent_changed updates the agent picker; message, run and
// approval events of this conversation bring in what was said elsewhere — never while a turn of
// this tab streams, never touching the text being typed.
import {
  api, load, el, append, enc, empty, mutationHeaders, transcriptItems, toolCard, markdown, errorBox, clear, toast,
  approvalCard,
} from '/app.js';

export const events = ['agent_changed', 'message_in', 'message_out', 'run_finished', 'approval_requested',
  'approval_decided'];

const AGENT_KEY = 'clawvisor.chat.agent';
const convKey = (agent) => `clawvisor.chat.conversation.${agent}`;
const conversation = (agent) => localStorage.getItem(convKey(agent)) || 'operator';
/** A person's channel of a conversation id (`tg:`, `wa:`, `sg:`), in words; null for Studio's own. */
const CHANNELS = { tg: 'Telegram', wa: 'WhatsApp', sg: 'Signal' };
const channelOf = (conv) => {
  const colon = conv.indexOf(':');
  return colon > 0 ? CHANNELS[conv.slice(0, colon)] ?? null : null;
};
/** The stored chat key of a conversation id: `tg:42`, `wa:49…` stay, `operator` is `studio:operator`. */
const chatKey = (conv) => (channelOf(conv) ? conv : `studio:${conv.replace(/^studio:/, '')}`);

export async function render(root, ctx) {
  const box = el('div');
  append(root, el('h1', null, 'Chat'),
    el('p', { class: 'lead' }, 'Talk to an agent as the operator, here or in one of its chats on Telegram, WhatsApp or Signal. '
      + 'Anything it needs your approval for shows up right here as a card.'), box);
  return load(box, () => api('/api/v1/agents'), (d) => {
    if (!d.agents?.length) {
      append(box, empty('No agents to talk to yet. Add an agent (Agents page), then come back here.'));
      return;
    }
    chatUi(box, d.agents, ctx);
  }, { root });
}

const textOf = (ev) => (typeof ev.content === 'string' ? ev.content : JSON.stringify(ev.content ?? '')).trim();

function chatUi(box, agents, ctx) {
  const names = agents.map((a) => a.name);
  let agent = [ctx.params[0], localStorage.getItem(AGENT_KEY)].find((n) => n && names.includes(n)) || names[0];
  const asked = ctx.query.get('chat');
  // #/chat/ada?chat=tg:42 (or wa:<number>, sg:<number or group>, studio:<id>) opens that conversation.
  if (asked && ctx.params[0] === agent
    && /^(tg:-?\d+(\/\d+)?|wa:\d{5,20}|sg:[\w+=/.-]{1,128}|studio:[\w-]{1,64})$/.test(asked)) {
    localStorage.setItem(convKey(agent), asked.replace(/^studio:/, ''));
  }
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
  const convPicker = el('select', { id: 'chat-conversation', 'aria-label': 'Conversation' });
  const newBtn = el('button', { id: 'chat-new', type: 'button' }, 'New conversation');
  const where = el('p', { class: 'muted small', id: 'chat-where' });
  const history = el('div', { class: 'history' });
  const live = el('div', { class: 'live' });
  const approvals = el('div', { class: 'inline-approvals', id: 'chat-approvals', 'aria-live': 'polite' });
  const log = el('div', { class: 'chat-log', 'aria-live': 'polite' }, history, live, approvals);
  const input = el('textarea', { id: 'chat-input', rows: 3, placeholder: 'Message the agent… (Enter sends, Shift+Enter for a new line)' });
  const send = el('button', { id: 'chat-send', type: 'submit', class: 'primary' }, 'Send');
  const stop = el('button', { id: 'chat-stop', type: 'button', class: 'danger', hidden: true }, 'Stop');

  const scroll = () => { log.scrollTop = log.scrollHeight; };
  const key = () => chatKey(conversation(agent));

  function describeWhere() {
    const k = key();
    const channel = channelOf(k);
    where.textContent = channel
      ? `You write into this ${channel} chat as the operator. The agent answers there and here.`
      : 'A conversation in Studio only. Start a new one for a fresh topic.';
  }

  async function loadConversations() {
    const current = conversation(agent);
    let sessions = [];
    try { ({ sessions = [] } = await api(`/api/v1/sessions?agent=${enc(agent)}`)); } catch { /* only the current one is offered */ }
    const seen = new Set();
    const options = [];
    for (const s of sessions) {
      if (!s.continuable || seen.has(s.chat)) continue;
      seen.add(s.chat);
      options.push([channelOf(s.chat) ? s.chat : s.chat.replace(/^studio:/, ''), s.label || s.chat]);
    }
    if (!options.some(([v]) => v === current)) {
      options.unshift([current, channelOf(current) ? `${channelOf(current)} ${current.slice(3)}` : `Studio: ${current}`]);
    }
    clear(convPicker, options.map(([value, text]) => el('option', { value }, text)));
    convPicker.value = current;
  }

  function switchTo(name) {
    agent = name;
    localStorage.setItem(AGENT_KEY, name);
    live.replaceChildren();
    describeWhere();
    loadConversations();
    loadHistory();
    loadApprovals();
  }

  async function transcript(name, conv) {
    const { sessions = [] } = await api(`/api/v1/sessions?agent=${enc(name)}`);
    const k = chatKey(conv);
    const match = sessions.filter((s) => s.chat === k)
      .sort((x, y) => (y.updated_ms ?? 0) - (x.updated_ms ?? 0))[0];
    return match ? (await api(`/api/v1/sessions/${enc(match.id)}`)).events || [] : [];
  }

  function showHistory(evs) {
    history.replaceChildren(...transcriptItems(evs, 'history'));
    shownIds = new Set(evs.map((ev) => ev.id));
    ownTexts = [];
  }

  async function loadHistory() {
    const seq = ++historySeq;
    const conv = conversation(agent);
    history.replaceChildren(el('p', { class: 'notice' }, 'Loading earlier messages…'));
    history.dataset.loading = 'true';
    try {
      const evs = await transcript(agent, conv);
      if (seq !== historySeq) return;
      delete history.dataset.loading;
      showHistory(evs);
      if (!evs.length && !live.firstChild) append(history, el('p', { class: 'notice hello' }, `Say hello to ${agent}.`));
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
    let evs;
    try { evs = await transcript(agent, conversation(agent)); } catch { return; }
    if (seq !== historySeq || busy) return;
    const foreign = evs.filter((ev) => !shownIds.has(ev.id)
      && !(ev.run_id != null && ownRuns.has(ev.run_id))
      && !(ev.kind === 'user' && ownTexts.includes(textOf(ev))));
    if (!foreign.length) return;
    // The stored transcript is the whole truth: it replaces this tab's live bubbles too.
    live.replaceChildren();
    showHistory(evs);
    scroll();
  }

  // ---------- inline approval cards ----------

  let approvalSeq = 0;
  async function loadApprovals() {
    const seq = ++approvalSeq;
    let items = [];
    try {
      ({ approvals: items = [] } = await api(`/api/v1/approvals?status=pending&agent=${enc(agent)}&chat=${enc(key())}`));
    } catch (e) {
      if (seq === approvalSeq) clear(approvals, el('p', { class: 'notice' }, `Pending approvals are not available (${e.message}).`));
      return;
    }
    if (seq !== approvalSeq) return;
    // Keep cards being worked on (typed confirmation) as they are.
    const keep = new Map([...approvals.querySelectorAll('[data-approval]')].map((c) => [c.dataset.approval, c]));
    clear(approvals, items.map((a) => keep.get(a.id) || approvalCard(a, loadApprovals)));
    if (items.length) scroll();
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
    || (kind === 'approval_decided' && event?.data?.agent === agent)
    || (event?.data?.agent === agent && event?.data?.chat === key());
  ctx.refresh = () => { refreshAgents(); syncHistory(); loadApprovals(); };

  // ---------- one turn ----------

  async function submit(text) {
    if (!text || busy) return;
    // Earlier messages still loading would now include this turn too: drop that load.
    if (history.dataset.loading) { historySeq++; history.replaceChildren(); delete history.dataset.loading; }
    history.querySelector('.hello')?.remove();
    busy = true;
    send.disabled = true;
    stop.hidden = false;
    stop.disabled = false;
    ownTexts.push(text.trim());
    const turn = { agent, chat: key() };
    const mine = el('div', { class: 'msg user' }, el('div', { class: 'msg-text' }, text));
    append(live, mine);
    const tools = el('div', { class: 'tools' });
    const body = el('div', { class: 'msg-text md' });
    const notices = el('div');
    const foot = el('div', { class: 'msg-foot' });
    const bubble = el('div', { class: 'msg assistant', 'data-streaming': 'true' }, tools, notices, body, foot);
    append(live, bubble);
    scroll();
    const finish = () => bubble.removeAttribute('data-streaming');
    try {
      const res = await fetch(`/api/v1/agents/${enc(turn.agent)}/chat`, {
        method: 'POST', credentials: 'same-origin', headers: { ...mutationHeaders(), Accept: 'text/event-stream' },
        body: JSON.stringify({ text, chat: turn.chat }),
      }).catch(() => { throw new Error('Cannot reach clawvisor. Is the daemon running?'); });
      if (!res.ok) {
        let message = `${res.status} ${res.statusText}`;
        try { message = (await res.json()).error?.message || message; } catch { /* not JSON */ }
        throw new Error(message);
      }
      let done = false;
      await readEvents(res.body, (kind, data) => {
        if (kind === 'partial') setBody(data.text ?? '');
        else if (kind === 'tool') liveTool(tools, data, loadApprovals);
        else if (kind === 'notice') append(notices, markdown(data.text ?? '', 'notice md'));
        else if (kind === 'final') {
          setBody(data.text ?? '');
          if (data.run_id != null) {
            ownRuns.add(data.run_id);
            foot.append(el('a', { href: `#/runs/${enc(data.run_id)}` }, `run ${data.run_id}`));
            fillToolsFromRun(tools, data.run_id);
          }
          if (!(data.text ?? '').trim() && !tools.firstChild && !notices.firstChild) {
            append(notices, el('p', { class: 'notice' }, 'No answer text came back. The run page has what happened.'));
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
      stop.hidden = true;
      scroll();
      loadApprovals();
      if (syncLater) { syncLater = false; syncHistory(); }
    }

    // The answer so far, as Markdown (the text node is replaced, never parsed as HTML).
    function setBody(textSoFar) {
      const current = bubble.querySelector('.msg-text');
      const next = markdown(textSoFar, 'msg-text md');
      if (current) current.replaceWith(next); else bubble.insertBefore(next, foot);
    }
  }

  stop.addEventListener('click', async () => {
    stop.disabled = true;
    try {
      const result = await api(`/api/v1/agents/${enc(agent)}/chat/stop`, { method: 'POST', body: { chat: key() } });
      toast(result.message || 'Asked the agent to stop.');
    } catch (e) {
      toast(e.message, 'bad');
      stop.disabled = false;
    }
  });

  picker.addEventListener('change', () => switchTo(picker.value));
  convPicker.addEventListener('change', () => {
    localStorage.setItem(convKey(agent), convPicker.value);
    switchTo(agent);
  });
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
  } }, input, el('div', { class: 'composer-buttons' }, send, stop));

  append(box, el('div', { class: 'chat' },
    el('div', { class: 'row' }, el('label', { class: 'inline' }, 'Agent', picker),
      el('label', { class: 'inline' }, 'Conversation', convPicker), newBtn),
    where, log, form));
  switchTo(agent);
}

/** A `tool` event of the live turn: a new card, or the newest unfinished card of that tool updated. */
function liveTool(tools, data, onApproval) {
  const name = data.name ?? 'tool';
  const open = [...tools.querySelectorAll('.tool-card')].reverse()
    .find((c) => c.dataset.tool === name && ['asked', 'started', 'waiting_approval'].includes(c.dataset.status));
  const card = open || tools.appendChild(toolCard({ name, status: 'started' }));
  card.status(data.status ?? 'started');
  if (data.status === 'waiting_approval') onApproval();
}

/** Once the run ended: its tool cards are redrawn from the recorded steps, with each call's
 *  arguments and output, and the calls the policy refused marked as not run (with why). */
async function fillToolsFromRun(tools, runId) {
  let run;
  try { run = await api(`/api/v1/runs/${enc(runId)}`); } catch { return; /* the live cards stay */ }
  const cards = [];
  const byCall = new Map();
  const decisions = new Map();
  for (const step of run.steps || []) {
    const callId = step.detail?.call_id;
    if (step.kind === 'decision') decisions.set(callId, step.decision);
    const notApproved = step.decision?.verdict === 'require_approval'
      && String(step.decision?.approval?.status ?? '').startsWith('denied');
    if (step.kind === 'decision' && (step.decision?.verdict === 'deny' || notApproved)) {
      const why = notApproved ? step.decision.outcome : step.decision.reason;
      const card = toolCard({ name: step.name, output: `Not run: ${why ?? ''}`, isError: true });
      card.status('refused');
      card.decision(step.decision);
      cards.push(card);
    } else if (step.kind === 'tool_call') {
      const card = toolCard({ name: step.name, args: step.detail?.arguments, status: 'started' });
      card.decision(decisions.get(callId));
      byCall.set(callId, card);
      cards.push(card);
    } else if (step.kind === 'tool_result' && byCall.has(callId)) {
      byCall.get(callId).answer(step.output ?? step.detail?.summary ?? '', step.detail?.is_error === true);
    }
  }
  if (cards.length) clear(tools, cards);
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
