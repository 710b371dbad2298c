// app.js — the Studio shell: session check and login screen, hash router, JSON API client with
// CSRF, the live event stream (SSE) with its status dot, and small shared helpers (DOM builder that
// always escapes text, time / money / duration formatting, loading + error + retry sections).
// Pages live in /pages/<name>.js and export `render(root, ctx)` and `events`: the runtime event
// kinds that change what they show. A page may set `ctx.refresh` (redraw its data in place, keeping
// what the operator is typing) and `ctx.accept(kind, event)` (skip events about something else).
// What agents write is drawn by /markdown.js (DOM nodes, never HTML); a tool call is a collapsible
// card with what it was asked and what it answered (`toolCard`), in Chat and in Runs alike.
import { markdown, markdownPreview } from '/markdown.js';

export { markdown, markdownPreview };

const PAGES = ['overview', 'agents', 'chat', 'runs', 'approvals', 'people', 'schedules', 'memory', 'mcp',
  'handoffs', 'audit', 'costs', 'skills',
  'logs', 'secrets', 'setup', 'triggers', 'nodes'];
const ALIASES = { sessions: 'agents' }; // #/sessions/ID is drawn by the agents page
const EVENT_KINDS = ['actor_started', 'actor_failed', 'actor_restarting', 'actor_stopped',
  'actor_escalated', 'actor_degraded', 'boot_complete', 'message_in', 'message_out', 'run_started',
  'run_step', 'run_finished', 'approval_requested', 'approval_decided', 'cost_recorded', 'bot_status',
  'mcp_health', 'schedule_fired', 'schedule_outcome', 'handoff_changed', 'memory_changed', 'agent_changed',
  'policy_changed', 'people_changed', 'audit_appended', 'config_reloaded', 'store_health', 'warning',
  'trigger_delivery'];
const SESSION = '/api/v1/session';
const TIMEOUT_MS = 20000;

export const session = { csrf: null, via: null };

// ---------- DOM ----------

const PROPS = new Set(['value', 'checked', 'disabled', 'selected', 'open']);

/** el('div', {class: 'x', 'data-id': 1, onclick: fn}, 'text', child, [more]) — text is never parsed as HTML. */
export function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  const props = [];
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value == null || value === false) continue;
    if (key === 'class') node.className = value;
    else if (key.startsWith('on') && typeof value === 'function') node.addEventListener(key.slice(2), value);
    else if (PROPS.has(key)) props.push([key, value]);
    else node.setAttribute(key, value === true ? '' : String(value));
  }
  add(node, children);
  for (const [key, value] of props) node[key] = value; // after children, so <select value> works
  return node;
}

function add(node, children) {
  for (const child of children) {
    if (child == null || child === false || child === true) continue;
    if (Array.isArray(child)) add(node, child);
    else node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

/** Like node.append, but flattens arrays and skips null / false (use it whenever children may be arrays). */
export function append(node, ...children) {
  add(node, children);
  return node;
}

export function clear(node, ...children) {
  node.replaceChildren();
  add(node, children);
  return node;
}

// ---------- formatting ----------

/** "just now", "3 min ago", "in 5 min", "2 h ago", "in 3 d". */
export function ago(ms) {
  if (ms == null) return '—';
  const delta = ms - Date.now();
  const abs = Math.abs(delta);
  if (abs < 45e3) return delta > 0 ? 'in a few seconds' : 'just now';
  let text;
  if (abs < 3600e3) text = `${Math.round(abs / 60e3)} min`;
  else if (abs < 48 * 3600e3) text = `${Math.round(abs / 3600e3)} h`;
  else text = `${Math.round(abs / 86400e3)} d`;
  return delta > 0 ? `in ${text}` : `${text} ago`;
}

/** "4 min 12 s left" style countdown; "expired" once past. */
export function countdown(ms) {
  if (ms == null) return 'no expiry';
  const left = Math.round((ms - Date.now()) / 1000);
  if (left <= 0) return 'expired';
  const h = Math.floor(left / 3600), m = Math.floor((left % 3600) / 60), s = left % 60;
  return `expires in ${h ? `${h} h ` : ''}${h || m ? `${m} min ` : ''}${h ? '' : `${s} s`}`.trim();
}

export const fullTime = (ms) => (ms == null ? '—' : new Date(ms).toLocaleString());

/** A <time> that keeps its "3 min ago" text fresh (see the ticker below). */
export function when(ms) {
  if (ms == null) return el('span', { class: 'muted' }, '—');
  return el('time', { datetime: new Date(ms).toISOString(), title: fullTime(ms), 'data-rel-ms': ms }, ago(ms));
}

export function expires(ms) {
  return el('span', { class: 'countdown', title: fullTime(ms), 'data-countdown-ms': ms ?? '' }, countdown(ms));
}

export function money(usd) {
  if (usd == null || Number.isNaN(Number(usd))) return '—';
  const v = Number(usd);
  if (v === 0) return '$0.00';
  return Math.abs(v) < 0.01 ? `$${v.toFixed(4)}` : `$${v.toFixed(2)}`;
}

export function duration(ms) {
  if (ms == null) return '—';
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60000) return `${(ms / 1000).toFixed(1)} s`;
  return `${Math.floor(ms / 60000)} min ${Math.round((ms % 60000) / 1000)} s`;
}

export const num = (n) => (n == null ? '—' : Number(n).toLocaleString());

const TONES = {
  ok: ['running', 'up', 'succeeded', 'success', 'active', 'polling', 'done', 'completed', 'approved',
    'ok', 'intact', 'allow', 'allowed', 'consumed', 'enabled', 'yes', 'live', 'accepted'],
  warn: ['starting', 'connecting', 'restarting', 'waiting', 'waiting_approval', 'pending', 'queued',
    'degraded', 'rate_limited', 'retry', 'caught_up', 'missed', 'ask', 'in_progress', 'offered', 'open'],
  bad: ['failed', 'down', 'escalated', 'error', 'denied', 'deny', 'conflict', 'unauthorized', 'refused',
    'denied_timeout', 'denied_unreachable', 'broken', 'timed_out', 'rejected', 'high', 'critical'],
};

/** 'ok' | 'warn' | 'bad' | 'idle' for a status word; drives the colours. */
export function tone(status) {
  const s = String(status ?? '').toLowerCase();
  if (['ok', 'warn', 'bad', 'idle'].includes(s)) return s;
  for (const [name, words] of Object.entries(TONES)) if (words.includes(s)) return name;
  return 'idle';
}

export function badge(status, label) {
  return el('span', { class: `badge t-${tone(status)}` }, label ?? status ?? 'unknown');
}

/** Pretty JSON in a collapsible block. */
export function json(value, { summary = 'details', open = false } = {}) {
  const text = typeof value === 'string' ? value : JSON.stringify(value, null, 2);
  return el('details', { class: 'json', open }, el('summary', null, summary), el('pre', null, text ?? 'null'));
}

export const empty = (...text) => el('div', { class: 'empty' }, ...text);
export const code = (text) => el('code', null, text);

/** A table that turns into cards on narrow screens. cols: [{label, cell(item)}]; attrs(item) per row. */
export function table(cols, items, attrs = () => ({})) {
  return el('div', { class: 'table-wrap' }, el('table', { class: 'cards' },
    el('thead', null, el('tr', null, cols.map((c) => el('th', null, c.label)))),
    el('tbody', null, items.map((item) => el('tr', attrs(item),
      cols.map((c) => el('td', { 'data-label': c.label }, c.cell(item))))))));
}

/** Definition list from [[label, value], ...]; null values are skipped. */
export function kv(pairs) {
  return el('dl', { class: 'kv' }, pairs.filter(([, v]) => v != null && v !== '')
    .map(([k, v]) => [el('dt', null, k), el('dd', null, v)]));
}

/** One stored session event as a chat bubble (used by the session view and Chat's history). A
 *  request for tools is drawn as tool cards with their arguments (never as an empty bubble), a
 *  tool's answer as a collapsed card; the assistant's words as Markdown. */
export function transcriptItem(ev, extra = '') {
  return transcriptItems([ev], extra)[0] ?? el('span');
}

/** Stored session events as chat bubbles: each tool call's answer goes into that call's card. */
export function transcriptItems(events, extra = '') {
  const cards = new Map(); // call id -> card of a call shown above
  const nodes = [];
  for (const ev of events) {
    const meta = el('div', { class: 'msg-foot' }, ev.sender ? `${ev.sender} · ` : '', when(ev.created_ms),
      ev.run_id != null && [' · ', el('a', { href: `#/runs/${enc(ev.run_id)}` }, `run ${ev.run_id}`)]);
    if (ev.kind === 'notice') { nodes.push(markdown(ev.content ?? '', 'notice md')); continue; }
    if (ev.kind === 'tool_result') {
      const card = cards.get(ev.tool?.call_id);
      if (card) { card.answer(ev.content ?? '', ev.tool?.is_error === true); continue; }
      const lone = toolCard({ name: ev.tool?.name ?? 'tool', output: ev.content ?? '', isError: ev.tool?.is_error === true });
      nodes.push(el('div', { class: `msg tool ${extra}`.trim() }, lone, meta));
      continue;
    }
    const who = ev.kind === 'user' ? 'user' : 'assistant';
    const text = (typeof ev.content === 'string' ? ev.content : JSON.stringify(ev.content ?? '')).trim();
    if (who === 'assistant' && ev.tool_calls?.length) {
      const calls = ev.tool_calls.map((call) => {
        const card = toolCard({ name: call.name, args: call.arguments });
        cards.set(call.id, card);
        return card;
      });
      nodes.push(el('div', { class: `msg tool-request ${extra}`.trim(), 'data-tools': ev.tool_calls.length },
        text && markdown(text), calls, meta));
      continue;
    }
    if (!text) continue; // nothing to show: no empty bubbles
    nodes.push(el('div', { class: `msg ${who} ${extra}`.trim() },
      who === 'assistant' ? markdown(text, 'msg-text md') : el('div', { class: 'msg-text' }, text), meta));
  }
  return nodes;
}

/** A tool call as a collapsible card: the tool's name and how it went on the first line; opened,
 *  what it was asked (arguments) and what it answered (output, already redacted by the daemon).
 *  `card.answer(output, isError)` fills in the answer later; `card.status(word)` updates the badge. */
export function toolCard({ name, args, output, isError = false, status }) {
  const badgeBox = el('span', { class: 'tool-status' });
  const asked = el('div', { class: 'tool-args' });
  const answered = el('div', { class: 'tool-output' });
  const why = el('div', { class: 'tool-decision muted small' });
  const card = el('details', { class: 'tool-card', 'data-tool': name },
    el('summary', null, el('span', { class: 'mono' }, name), badgeBox), why, asked, answered);
  /** The policy's decision on the call (a run step's `decision`): verdict, who decided, effect, risk. */
  card.decision = (d) => {
    if (!d) return;
    const verdict = { allow: 'Allowed', require_approval: 'Asked a person', deny: 'Refused' }[d.verdict] ?? d.verdict;
    const said = d.approval && d.outcome
      ? `${d.outcome[0].toUpperCase()}${d.outcome.slice(1)}: decided by ${d.decided_by}`
      : `${verdict} by ${d.decided_by ?? 'the policy'}`;
    clear(why, said,
      d.risk ? ` · risk ${d.risk}` : '', d.effect ? ` · ${String(d.effect).replace('_', ' ')}` : '',
      d.reason ? el('div', null, `Why: ${d.reason}`) : null);
  };
  card.status = (word, label) => { clear(badgeBox, badge(word, label ?? TOOL_WORDS[word] ?? word)); card.dataset.status = word; };
  card.args = (value) => {
    if (value == null || (typeof value === 'object' && !Object.keys(value).length)) { clear(asked); return; }
    const text = typeof value === 'string' ? value : JSON.stringify(value, null, 2);
    clear(asked, el('div', { class: 'muted small' }, 'Asked with'), el('pre', null, text));
  };
  card.answer = (text, error = false) => {
    const refused = error && /^Not run\b/.test(text ?? '');
    clear(answered, el('div', { class: 'muted small' }, refused ? 'Not run' : error ? 'Answered with an error' : 'Answered'),
      el('pre', { class: error ? 'is-error' : '' }, text || '(nothing)'));
    card.status(refused ? 'refused' : error ? 'failed' : 'done');
  };
  card.args(args);
  if (output != null) card.answer(output, isError);
  else card.status(status ?? 'asked');
  return card;
}

const TOOL_WORDS = { asked: 'asked', started: 'running', running: 'running', done: 'done', failed: 'failed',
  waiting_approval: 'waiting for approval', refused: 'not run' };

/** A pending approval as a card (Chat's inline one and the Approvals inbox): the plain sentence,
 *  the exact action, the grant in the one wording every channel uses (from the API), the buttons
 *  (a blocked action: a field to type it out and "Allow once"); the technical detail folded.
 *  `extra` goes above the buttons. `refresh()` runs after a decision. */
export function approvalCard(a, refresh, extra = null) {
  const buttons = el('div', { class: 'row buttons' });
  const setAll = (off) => { for (const b of card.querySelectorAll('button, input')) b.disabled = off; };
  const decide = async (body, said) => {
    setAll(true);
    try {
      const result = await api(`/api/v1/approvals/${enc(a.id)}/decision`, { method: 'POST', body });
      toast(said);
      card.setAttribute('data-decided', result.status || body.decision);
      refresh();
    } catch (err) {
      toast(err.message, 'bad');
      setAll(false);
    }
  };
  const button = (action, cls, text, body, said) => el('button', { type: 'button', class: cls, 'data-action': action,
    onclick: () => decide(body, said) }, text);
  let confirm = null;
  if (a.blocked) {
    confirm = el('input', { type: 'text', class: 'confirm-input', 'data-confirm': a.id, autocomplete: 'off', spellcheck: 'false',
      placeholder: 'Type the action exactly as shown (without the “runs with” line)', 'aria-label': 'Type the action to allow it once' });
    const allow = el('button', { type: 'button', class: 'danger', 'data-action': 'allow-once', onclick: () => {
      decide({ decision: 'allow_once', confirmation: confirm.value }, `Allowed once: ${a.tool} for ${a.agent}.`);
    } }, 'Allow once');
    buttons.append(allow, button('deny', 'good', 'Keep it blocked', { decision: 'deny' }, `Kept blocked: ${a.tool}.`));
  } else {
    buttons.append(
      button('approve', 'good', 'Approve once', { decision: 'approve' }, `Approved once: ${a.tool} for ${a.agent}.`),
      a.grant && button('approve-30', '', a.grant.label, { decision: 'approve', grant_minutes: a.grant.minutes },
        `Approved, and ${a.grant.label.toLowerCase()}.`),
      button('deny', 'danger', 'Deny', { decision: 'deny' }, `Denied: ${a.tool} for ${a.agent}.`));
  }
  const card = el('div', { class: `card approval inline${a.blocked ? ' blocked' : ''}`, 'data-approval': a.id },
    el('div', { class: 'row spread' }, el('strong', { class: 'approval-summary' }, `${a.blocked ? 'Blocked' : 'Approval needed'}: ${a.summary}.`),
      expires(a.expires_ms)),
    el('div', { class: 'muted small' }, 'Exactly this:'),
    el('pre', { class: 'action-block' }, a.action ?? ''),
    a.blocked
      ? el('p', { class: 'small' }, 'The safety check blocks this kind of action. You may allow exactly this, once, by typing it out below. Nothing else is allowed by it.')
      : a.grant && el('p', { class: 'small muted' }, a.grant.scope),
    extra, confirm, buttons,
    el('details', { class: 'small' }, el('summary', null, 'Technical details'),
      el('dl', { class: 'kv' },
        el('dt', null, 'Tool'), el('dd', null, a.tool),
        el('dt', null, 'Risk'), el('dd', null, badge(a.blocked ? 'bad' : 'warn', a.risk)),
        el('dt', null, 'Why'), el('dd', null, a.reason ?? ''),
        el('dt', null, 'Request'), el('dd', null, a.id),
        el('dt', null, 'Conversation'), el('dd', null, a.chat_label ?? a.chat))));
  return card;
}

export function errorBox(message, retry, label = 'Try again') {
  return el('div', { class: 'error', role: 'alert' },
    el('p', null, message || 'Something went wrong.'),
    el('button', { class: 'retry', type: 'button', onclick: retry }, label));
}

/** Short-lived message in the corner (mutation results and errors). */
export function toast(message, kind = 'ok') {
  let box = document.getElementById('toasts');
  if (!box) document.body.append(box = el('div', { id: 'toasts', 'aria-live': 'polite' }));
  const item = el('div', { class: `toast t-${kind}` }, message);
  box.append(item);
  setTimeout(() => item.remove(), kind === 'bad' ? 8000 : 4000);
}

/** Runs a mutation from a button: disables it meanwhile, toasts errors. Returns the result or undefined. */
export async function act(button, fn, done) {
  if (button) button.disabled = true;
  try {
    const result = await fn();
    if (done) toast(done);
    return result;
  } catch (e) {
    toast(e.message, 'bad');
  } finally {
    if (button && button.isConnected) button.disabled = false;
  }
}

// ---------- API ----------

export const enc = encodeURIComponent;

/** '?a=1&b=2' from an object, skipping empty values. */
export function qs(params) {
  const parts = Object.entries(params).filter(([, v]) => v != null && v !== '')
    .map(([k, v]) => `${enc(k)}=${enc(v)}`);
  return parts.length ? `?${parts.join('&')}` : '';
}

export function mutationHeaders() {
  return { 'Content-Type': 'application/json', 'X-CSRF-Token': session.csrf ?? '', Accept: 'application/json' };
}

/** Calls the JSON API. Throws an Error carrying the server's error.message (and .status; .timedOut
 *  when no answer came within `timeoutMs`, so the caller does not know what the server did). */
export async function api(path, { method = 'GET', body, timeoutMs = TIMEOUT_MS } = {}, retried = false) {
  const mutation = method !== 'GET';
  const abort = new AbortController();
  const timer = setTimeout(() => abort.abort(), timeoutMs);
  let res, text;
  try {
    res = await fetch(path, {
      method, credentials: 'same-origin', signal: abort.signal,
      headers: mutation ? mutationHeaders() : { Accept: 'application/json' },
      body: mutation ? JSON.stringify(body ?? {}) : undefined,
    });
    text = await res.text();
  } catch (e) {
    const error = new Error(e.name === 'AbortError'
      ? `The server did not answer within ${timeoutMs / 1000} s. Try again in a moment.`
      : 'Cannot reach clawvisor. Is the daemon running? Check the connection and try again.');
    error.timedOut = e.name === 'AbortError';
    throw error;
  } finally {
    clearTimeout(timer);
  }
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { /* not JSON */ }
  if (!res.ok) {
    // A stale CSRF token (e.g. after a new login in another tab): refresh it once and retry.
    if (res.status === 403 && mutation && !retried && await refreshSession()) return api(path, { method, body, timeoutMs }, true);
    const plain = text && text.length < 300 && !text.trim().startsWith('<') ? text.trim() : '';
    const error = new Error(data?.error?.message || plain || `${res.status} ${res.statusText}`);
    error.status = res.status;
    error.body = data;
    if (res.status === 401 && path !== SESSION) showLogin();
    throw error;
  }
  return data ?? {};
}

async function refreshSession() {
  try {
    const s = await api(SESSION);
    session.csrf = s.csrf;
    return true;
  } catch { return false; }
}

/**
 * Loads data into `box`: shows "Loading…" (unless quiet and something is already shown), then
 * draw(data, box). On failure shows the server's message and a Try again button. When `root` is
 * given, its data-loaded="true" is removed meanwhile and set once drawn.
 */
const loadTokens = new WeakMap();
export async function load(box, fetcher, draw, { root = null, quiet = false } = {}) {
  const token = (loadTokens.get(box) || 0) + 1;
  loadTokens.set(box, token);
  if (root) root.removeAttribute('data-loaded');
  if (!quiet || !box.firstChild) clear(box, el('p', { class: 'loading', role: 'status' }, 'Loading…'));
  try {
    const data = await fetcher();
    if (loadTokens.get(box) !== token) return undefined;
    clear(box);
    draw(data, box);
    if (root) root.setAttribute('data-loaded', 'true');
    return data;
  } catch (e) {
    if (loadTokens.get(box) !== token) return undefined;
    clear(box, errorBox(e.message, () => load(box, fetcher, draw, { root })));
    return undefined;
  }
}

// ---------- router ----------

let current = null; // { name, mod, root, ctx }
let navSeq = 0;

/** '#/runs/12?agent=x' → { parts: ['runs', '12'], query: URLSearchParams('agent=x') } */
function parseHash() {
  const [path, query = ''] = location.hash.replace(/^#\/?/, '').split('?');
  const parts = path.split('/').filter(Boolean).map(decodeURIComponent);
  return { parts: parts.length ? parts : ['overview'], query: new URLSearchParams(query) };
}

async function route() {
  document.getElementById('nav')?.classList.remove('open');
  document.getElementById('nav-more')?.setAttribute('aria-expanded', 'false');
  const { parts, query } = parseHash();
  const section = parts[0];
  const name = ALIASES[section] || section;
  if (!PAGES.includes(name)) { location.replace('#/overview'); return; }
  for (const a of document.querySelectorAll('[data-nav]')) {
    a.classList.toggle('active', a.dataset.nav === name);
    if (a.dataset.nav === name) a.scrollIntoView?.({ block: 'nearest', inline: 'nearest' });
  }
  const seq = ++navSeq;
  const root = el('div', { class: 'page', 'data-page': name }, el('p', { class: 'loading' }, 'Loading…'));
  document.getElementById('page').replaceChildren(root);
  const ctx = { name, section, params: parts.slice(1), query, root, refresh: null };
  current = { name, root, ctx, mod: null };
  let mod;
  try {
    mod = await import(`/pages/${name}.js`);
  } catch (e) {
    if (seq === navSeq) clear(root, errorBox(`Could not load the ${name} page (${e.message}).`, route));
    return;
  }
  if (seq !== navSeq) return;
  current.mod = mod;
  await renderPage(root, mod, ctx);
}

async function renderPage(root, mod, ctx) {
  clear(root);
  try {
    await mod.render(root, ctx);
  } catch (e) {
    if (root.isConnected) clear(root, errorBox(e.message, () => renderPage(root, mod, ctx)));
  }
}

// At most one refresh per 300 ms, even under a steady stream of events.
let pending = null; // { timer, target }
function pageEvent(kind, event) {
  const kinds = current?.mod?.events || [];
  if (!kinds.length || (kind !== 'resync' && !kinds.includes(kind))) return;
  if (kind !== 'resync' && current.ctx.accept && !current.ctx.accept(kind, event)) return;
  if (pending?.target === current) return;
  if (pending) clearTimeout(pending.timer);
  const target = current;
  pending = { target, timer: setTimeout(() => {
    pending = null;
    if (current !== target || !target.root.isConnected) return;
    if (target.ctx.refresh) target.ctx.refresh();
    else renderPage(target.root, target.mod, target.ctx);
  }, 300) };
}

// ---------- live events ----------

let source = null;
let wasDown = false;

function setLive(state) {
  const dot = document.getElementById('live');
  if (!dot) return;
  dot.dataset.state = state;
  const text = { open: 'live', connecting: 'reconnecting…', closed: 'offline' }[state];
  dot.title = { open: 'Live: updates arrive as they happen', connecting: 'Reconnecting to live events…',
    closed: 'Live events are off; retrying shortly' }[state];
  dot.querySelector('.live-text').textContent = text;
}

function connectEvents() {
  source?.close();
  setLive('connecting');
  const es = source = new EventSource('/api/v1/events', { withCredentials: true });
  es.onopen = () => {
    setLive('open');
    if (wasDown) pageEvent('resync'); // we may have missed events while away
    wasDown = false;
  };
  es.onerror = () => {
    wasDown = true;
    if (es.readyState === EventSource.CLOSED) {
      setLive('closed');
      // Closed for good (e.g. the session expired): check the session, then reconnect.
      setTimeout(async () => {
        if (source !== es) return;
        try { await api(SESSION); } catch (e) { if (e.status === 401) { showLogin(); return; } }
        if (source === es) connectEvents();
      }, 5000);
    } else setLive('connecting');
  };
  for (const kind of EVENT_KINDS) {
    es.addEventListener(kind, (message) => {
      let event = null;
      try { event = JSON.parse(message.data); } catch { /* a page then decides on the kind alone */ }
      pageEvent(kind, event);
      navEvent(kind);
    });
  }
  es.addEventListener('resync', () => pageEvent('resync'));
}

// Small pending-approvals counter on the nav link.
let badgeTimer = null;
function navEvent(kind) {
  if (!kind.startsWith('approval_')) return;
  clearTimeout(badgeTimer);
  badgeTimer = setTimeout(updateApprovalCount, 500);
}

async function updateApprovalCount() {
  const link = document.querySelector('[data-nav="approvals"]');
  if (!link) return;
  try {
    const data = await api('/api/v1/approvals?status=pending');
    const n = (data.approvals || []).length;
    let count = link.querySelector('.count');
    if (!count) link.append(' ', count = el('span', { class: 'count' }));
    count.textContent = n ? String(n) : '';
  } catch { /* the page itself shows errors */ }
}

// Keeps every "3 min ago" and countdown on screen current.
function tick() {
  for (const node of document.querySelectorAll('[data-rel-ms]')) node.textContent = ago(Number(node.dataset.relMs));
  for (const node of document.querySelectorAll('[data-countdown-ms]')) {
    if (node.dataset.countdownMs !== '') node.textContent = countdown(Number(node.dataset.countdownMs));
  }
}

// ---------- session & boot ----------

function showLogin() {
  source?.close();
  source = null;
  navSeq++;
  current = null;
  document.body.classList.add('logged-out');
  setLive('closed');
  document.getElementById('page').replaceChildren(el('section', { id: 'login', class: 'login' },
    el('h1', null, 'Welcome to clawvisor Studio'),
    el('p', null, 'You are not signed in yet. Studio uses one-time login links instead of passwords:'),
    el('ol', null,
      el('li', null, 'Open the login link that was printed in the terminal when the daemon started, ',
        el('em', null, 'or')),
      el('li', null, 'on the server, run ', code('clawvisor studio-link'), ' and open the link it prints.')),
    el('p', { class: 'muted' }, 'Each link works once: it signs this browser in and opens Studio.'),
    el('button', { type: 'button', class: 'primary', onclick: boot }, 'I opened the link — check again')));
}

async function boot() {
  const main = document.getElementById('page');
  clear(main, el('p', { class: 'loading' }, 'Connecting to clawvisor…'));
  try {
    const s = await api(SESSION);
    session.csrf = s.csrf;
    session.via = s.via;
  } catch (e) {
    if (e.status === 401) return showLogin();
    clear(main, el('div', { class: 'page' }, errorBox(e.message, boot)));
    return undefined;
  }
  document.body.classList.remove('logged-out');
  const logout = document.getElementById('logout');
  logout.hidden = session.via !== 'cookie';
  logout.onclick = async () => {
    if (await act(logout, () => api('/api/v1/session/logout', { method: 'POST' }))) showLogin();
  };
  connectEvents();
  updateApprovalCount();
  const more = document.getElementById('nav-more');
  if (more) {
    more.onclick = () => more.setAttribute('aria-expanded', String(document.getElementById('nav').classList.toggle('open')));
  }
  // A house that cannot answer yet opens on the setup (unless a page was asked for).
  if (!location.hash || location.hash === '#' || location.hash === '#/') {
    const setup = await api('/api/v1/setup').catch(() => null);
    if (setup?.needed) location.replace('#/setup');
  }
  return route();
}

window.addEventListener('hashchange', () => { if (current || !document.getElementById('login')) route(); });
// A page left (or kept in the back-forward cache) gives its live stream back: a browser holds
// six connections per server, and streams of pages left behind would starve the next load.
window.addEventListener('pagehide', () => { source?.close(); source = null; });
window.addEventListener('pageshow', (event) => { if (event.persisted && session.csrf) { wasDown = true; connectEvents(); } });
setInterval(tick, 1000);
boot();
