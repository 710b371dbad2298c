// logs.js — the daemon's recent log lines (kept in memory, secrets already hidden), newest first:
// a level filter, a text search, and a live tail. Each line leads with its plain message; where it
// came from and its fields open on request. The tail is this page's own EventSource on
// /api/v1/logs/events (log lines are not runtime events, so the page refreshes on none of those):
// new lines are added on top, a reconnect resumes from the last line received (Last-Event-ID),
// and the stream is closed when the operator leaves the page or pauses it.
import { api, el, append, clear, qs, badge, empty, errorBox, kv, code, fullTime, num } from '/app.js';

export const events = [];

const LEVELS = [
  ['error', 'Errors only'],
  ['warn', 'Warnings and errors'],
  ['info', 'Normal: information, warnings and errors'],
  ['debug', 'Everything, with debugging detail'],
];
const WORDS = { error: 'Error', warn: 'Warning', info: 'Info', debug: 'Debug', trace: 'Trace' };
const TONES = { error: 'bad', warn: 'warn' };
const PAGE = 200;
const MAX_SHOWN = 1000; // the live tail drops the oldest rows on screen past this many

export async function render(root, ctx) {
  const level = el('select', { id: 'logs-level', 'aria-label': 'Which lines' },
    LEVELS.map(([value, label]) => el('option', { value }, label)));
  level.value = LEVELS.some(([value]) => value === ctx.query.get('level')) ? ctx.query.get('level') : 'info';
  const search = el('input', { id: 'logs-q', type: 'search', placeholder: 'Search the lines…', 'aria-label': 'Search',
    value: ctx.query.get('q') || '' });
  const toggle = el('button', { id: 'logs-live', type: 'button' });
  const status = el('p', { id: 'logs-status', class: 'muted small', 'aria-live': 'polite' });
  const toggleRow = el('div', { class: 'row spread log-status' }, status, toggle);
  const about = el('div');
  const list = el('ol', { id: 'logs-lines', class: 'log-lines' });
  const more = el('div', { class: 'row', style: 'margin-top:.6rem' });
  append(root,
    el('h1', null, 'Logs'),
    el('p', { class: 'lead' }, 'What the daemon has been doing, newest first. Something went wrong? Choose “Errors only” or search for a name; “details” shows where a line came from.'),
    el('form', { class: 'row log-filters', onsubmit: (e) => { e.preventDefault(); reload(); } },
      level, search, el('button', { type: 'submit', class: 'primary' }, 'Search')),
    toggleRow, about, list, more);

  let live = true;
  let source = null;
  let newest = 0; // the newest line number shown
  let oldest = null; // the oldest line number shown ("Load older" reads before it)
  let exhausted = true;
  let loadToken = 0;

  const filters = () => ({ level: level.value, q: search.value.trim() });
  const setStatus = (state) => {
    root.dataset.tail = state;
    status.textContent = {
      open: 'Live: new lines appear at the top as the daemon writes them.',
      connecting: 'Connecting to the live log…',
      paused: 'Paused: new lines are not added. Press Resume to catch up.',
      offline: 'The live log is not reachable right now; Studio keeps trying.',
    }[state];
    toggle.textContent = state === 'paused' ? 'Resume' : 'Pause';
  };
  const stop = () => { source?.close(); source = null; };
  const gone = () => { if (root.isConnected) return false; stop(); return true; };

  const lineRows = (lines) => lines.map(lineRow);
  const trim = () => {
    while (list.children.length > MAX_SHOWN) list.lastElementChild.remove();
    const rows = list.querySelectorAll('li[data-seq]');
    if (rows.length) oldest = Number(rows[rows.length - 1].dataset.seq);
    exhausted = false;
    showMore();
  };

  function tail() {
    stop();
    if (!live || gone()) return;
    setStatus('connecting');
    const es = source = new EventSource(`/api/v1/logs/events${qs({ ...filters(), after: newest })}`, { withCredentials: true });
    es.addEventListener('open', () => { if (source === es) setStatus('open'); });
    es.addEventListener('hello', (m) => {
      if (gone()) return;
      // A daemon restarted since: its lines are numbered from 1 again, so draw the list anew.
      if (JSON.parse(m.data).newest < newest) reload();
    });
    es.addEventListener('line', (m) => {
      if (gone()) return;
      const line = JSON.parse(m.data);
      if (line.seq <= newest) return;
      newest = line.seq;
      list.querySelector('.log-empty')?.remove();
      list.prepend(lineRow(line));
      if (list.children.length > MAX_SHOWN) trim();
    });
    es.addEventListener('gap', (m) => {
      if (gone()) return;
      const missed = JSON.parse(m.data).missed;
      list.prepend(el('li', { class: 'log-gap notice' },
        `${num(missed)} lines were written faster than Studio could keep them; the daemon’s own log (for example the system journal) has them all.`));
    });
    es.addEventListener('error', () => {
      if (source !== es || gone()) return;
      if (es.readyState === EventSource.CLOSED) {
        setStatus('offline');
        setTimeout(() => { if (source === es) tail(); }, 5000);
      } else setStatus('connecting');
    });
  }

  function showMore() {
    clear(more);
    if (exhausted || oldest == null) return;
    const button = el('button', { type: 'button', class: 'load-more', id: 'logs-more', onclick: async () => {
      button.disabled = true;
      button.textContent = 'Loading…';
      try {
        const d = await api(`/api/v1/logs${qs({ ...filters(), limit: PAGE, before: oldest })}`);
        const lines = d.lines || [];
        append(list, lineRows(lines));
        if (lines.length) oldest = lines[lines.length - 1].seq;
        exhausted = d.next_before == null;
        showMore();
      } catch (err) {
        clear(more, errorBox(err.message, showMore));
      }
    } }, 'Load older lines');
    append(more, button);
  }

  async function reload() {
    const token = ++loadToken;
    stop();
    history.replaceState(null, '', `#/logs${qs({ level: level.value === 'info' ? '' : level.value, q: search.value.trim() })}`);
    root.removeAttribute('data-loaded');
    clear(list, el('li', { class: 'loading' }, 'Loading…'));
    clear(more);
    let d;
    try {
      d = await api(`/api/v1/logs${qs({ ...filters(), limit: PAGE })}`);
    } catch (err) {
      if (token === loadToken) clear(list, el('li', null, errorBox(err.message, reload)));
      return;
    }
    if (token !== loadToken || gone()) return;
    const lines = d.lines || [];
    newest = d.newest ?? 0;
    oldest = lines.length ? lines[lines.length - 1].seq : null;
    exhausted = d.next_before == null;
    clear(list, lines.length ? lineRows(lines) : el('li', { class: 'log-empty' }, empty(filters().q || level.value !== 'info'
      ? 'No line matches. Choose a wider level or search for fewer words.'
      : 'Nothing logged yet. Lines appear here as the daemon writes them.')));
    clear(about, aboutRing(d));
    showMore();
    root.setAttribute('data-loaded', 'true');
    if (live) tail(); else setStatus('paused');
  }

  toggle.onclick = () => {
    live = !live;
    if (live) reload();
    else { stop(); setStatus('paused'); }
  };
  level.onchange = () => reload();
  let typing = null;
  search.oninput = () => { clearTimeout(typing); typing = setTimeout(reload, 400); };
  const leave = () => setTimeout(() => { if (gone()) window.removeEventListener('hashchange', leave); }, 0);
  window.addEventListener('hashchange', leave);
  setStatus('connecting');
  return reload();
}

/** What Studio keeps and how to see more, with the technical detail folded away. */
function aboutRing(d) {
  const limits = d.limits || {};
  return el('details', { class: 'small muted log-about' },
    el('summary', null, `Studio shows the newest ${num(limits.lines)} lines the daemon kept in memory since it started.`),
    el('p', null, 'Older lines, and lines from before the last restart, are in the daemon’s own log: the terminal that runs ',
      code('clawvisor serve'), ', or ', code('journalctl -u clawvisor'), ' when it runs as a service. Keys and tokens are replaced by ', code('***'), '.'),
    el('p', null, 'The daemon records ', code(d.recording || 'info'), ' and above. For debugging detail set ',
      code('[log] level = "debug"'), ' in clawvisor.toml and restart the daemon.'),
    el('p', null, `Kept now: ${num(d.held?.lines)} lines, ${num(Math.round((d.held?.bytes ?? 0) / 1024))} KiB of at most ${num(Math.round((limits.bytes ?? 0) / 1024))} KiB.`));
}

/** "14:03:27", with the date in front when it is not today. */
function clock(ms) {
  const date = new Date(ms);
  const time = date.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit', second: '2-digit' });
  return date.toDateString() === new Date().toDateString() ? time : `${date.toLocaleDateString()} ${time}`;
}

function lineRow(line) {
  const fields = Object.entries(line.fields || {});
  return el('li', { class: `log-line l-${line.level}`, 'data-seq': line.seq, 'data-level': line.level },
    el('div', { class: 'log-head' },
      badge(TONES[line.level] || 'idle', WORDS[line.level] || line.level),
      el('time', { class: 'muted small', datetime: new Date(line.at_ms).toISOString(), title: fullTime(line.at_ms) }, clock(line.at_ms))),
    el('div', { class: 'log-message' }, line.message || '(no message)'),
    el('details', { class: 'log-more small' }, el('summary', null, 'details'),
      kv([['Where', code(line.target)], ...fields.map(([name, value]) => [name, code(value)])])));
}
