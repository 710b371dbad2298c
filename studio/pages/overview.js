// overview.js — health at a glance: cards (boot/database with the shell sandbox's protections,
// agents, pending approvals, runs and cost today), hints, the live supervision tree (nested lists coloured by status, restart badges, last
// error), Telegram bot polling states (with the last completed poll), WhatsApp and Signal accounts
// (from the tree) and MCP server states.
// Refreshes on actor, bot, approval, run-start, cost and MCP events. Model providers are asked
// for their model list once when the page opens, and again on "Check again" (each check is a
// request to the provider, so events do not repeat it). Backups: the [backup] schedule, its next
// run, the recorded runs and the archives kept (reloaded with the page). "Reload configuration" asks
// the daemon to re-read its config and agent files (like SIGHUP) and shows the report: what was
// added, removed or restarted, the settings that need a restart, or why the files were refused.
// When the database cannot save (disk full, read-only, I/O error, permissions), a red banner at the
// top says so in plain words with what to do, the daemon's own sentence in a <details>; low disk
// space or a WAL checkpoint that cannot run is a yellow one. Refreshes on store_health and warning.
// While the machine has an OpenClaw installation not imported yet (the server says so:
// /api/v1/import/openclaw), a card at the top offers the commands that move it here.
import { api, load, el, append, clear, badge, tone, when, money, num, empty, fullTime } from '/app.js';

export const events = ['actor_started', 'actor_failed', 'actor_restarting', 'actor_stopped',
  'actor_escalated', 'actor_degraded', 'boot_complete', 'bot_status', 'approval_requested',
  'approval_decided', 'run_started', 'cost_recorded', 'mcp_health', 'config_reloaded', 'store_health', 'warning'];

export async function render(root, ctx) {
  const box = el('div');
  const providers = el('div', { id: 'providers' });
  const backups = el('div', { id: 'backups' });
  const reload = el('div', { id: 'reload' });
  const hint = el('div', { id: 'import-hint' });
  append(root, el('div', { class: 'row spread' }, el('h1', null, 'Overview'),
    el('div', { class: 'row' }, el('a', { class: 'button', href: '#/setup', 'data-action': 'setup' }, 'Set up'), reloadButton(reload))),
  el('p', { class: 'lead overview-lead' }, 'How the house is doing: what needs you first, then each agent and its bot, then the machinery.'),
  hint, reload, box, el('h2', null, 'Model providers'), providers,
  el('h2', null, 'Backups'), backups);
  const refresh = (quiet) => load(box, () => api('/api/v1/overview'), (d) => draw(box, d), { root, quiet });
  const check = () => load(providers, () => api('/api/v1/providers'), (d) => drawProviders(providers, d, check));
  const refreshBackups = (quiet) => load(backups, () => api('/api/v1/backups'), (d) => drawBackups(backups, d), { quiet });
  ctx.refresh = () => { refreshBackups(true); return refresh(true); };
  check();
  refreshBackups(false);
  // Optional: without an answer there is simply no card.
  api('/api/v1/import/openclaw').then((d) => drawImportHint(hint, d)).catch(() => {})
    .finally(() => { hint.dataset.checked = 'true'; });
  await refresh(false);
}

// The daemon answers a reload within 120 s (or says it is still running); the page waits longer,
// so that it shows that answer rather than its own timeout.
const RELOAD_TIMEOUT_MS = 150000;

/** The "Reload configuration" button; its report (or error) is drawn into `out`. */
function reloadButton(out) {
  const button = el('button', { type: 'button', id: 'reload-config' }, 'Reload configuration');
  button.addEventListener('click', async () => {
    button.disabled = true;
    clear(out, el('div', { class: 'muted small' }, 'Reloading… (restarting actors can take a minute or two)'));
    try {
      const r = await api('/api/v1/reload', { method: 'POST', timeoutMs: RELOAD_TIMEOUT_MS });
      const label = r.ok ? 'reloaded' : r.partial ? 'applied in part' : 'refused';
      clear(out, el('div', { class: r.ok ? 'card' : 'card error', 'data-reload-ok': String(r.ok) },
        badge(r.ok ? 'ok' : 'failed', label), ' ', el('span', null, r.summary)));
    } catch (e) {
      const unknown = e.timedOut || e.status === 504;
      clear(out, el('div', { class: 'card error' }, unknown
        ? 'No report yet, so the outcome is unknown: the reload may still be applying. Its report appears in the events (config_reloaded) and the daemon\'s log.'
        : e.message));
    } finally {
      button.disabled = false;
    }
  });
  return button;
}

/** The card offering to move an OpenClaw installation here, while one waits to be imported. */
function drawImportHint(box, d) {
  if (!d?.available) return;
  append(box, el('div', { class: 'card import-hint', 'data-import-hint': 'openclaw' },
    el('strong', null, 'Your OpenClaw setup can be moved here.'),
    el('p', null, 'This computer has an OpenClaw installation. One command copies its agents with their personalities, '
      + 'its schedules, memories and skills into this house; keys and tokens go to the secrets store. OpenClaw itself is left as it is.'),
    el('p', null, '1. See what would come across. This changes nothing:'),
    el('pre', { class: 'command', 'data-command': 'dry-run' }, d.dry_run),
    el('p', null, '2. Stop this daemon, run the import, then start the daemon again. This card goes away after the import:'),
    el('pre', { class: 'command', 'data-command': 'import' }, d.command),
    el('details', null, el('summary', { class: 'small' }, 'Where it was found'), el('p', { class: 'small muted' }, d.path))));
}

function drawProviders(box, d, check) {
  append(box,
    d.providers?.length
      ? el('div', { class: 'card' }, d.providers.map((p) => el('div', { class: 'row', 'data-provider': p.provider, 'data-ok': String(p.ok) },
        el('strong', null, p.provider), badge(p.ok ? 'ok' : 'failed', p.ok ? 'answers' : 'failing'),
        el('span', { class: 'small' + (p.ok ? ' muted' : '') }, p.detail))))
      : empty('No model providers configured — add [providers.NAME] to config/clawvisor.toml.'),
    el('button', { type: 'button', onclick: check }, 'Check again'));
}

function drawBackups(box, d) {
  const last = d.recent?.[0];
  append(box,
    el('div', { class: 'card', 'data-backups': d.scheduled ? 'scheduled' : 'off' },
      d.scheduled
        ? el('div', { class: 'row' }, el('strong', null, d.schedule), el('span', { class: 'muted small' },
          `(${d.timezone}) · keep ${d.keep} in ${d.dir} · next run ${d.next_run_local ?? '—'}`))
        : empty('No scheduled backups — add [backup] schedule = "every 6h" to config/clawvisor.toml, or run `clawvisor backup <file>`.'),
      last && el('div', { class: 'row', 'data-last-backup': last.status },
        'last ', badge(last.status), when(last.finished_ms), el('span', { class: 'small muted' },
          last.status === 'ok' ? `${last.file} · ${num(last.size_bytes)} bytes` : last.error || '')),
      d.recent?.length > 1 && el('details', null, el('summary', { class: 'small muted' }, `${d.recent.length} recorded runs`),
        d.recent.map((r) => el('div', { class: 'row small' }, badge(r.status), when(r.started_ms),
          el('span', { class: 'muted' }, r.file), r.pruned && el('span', { class: 'muted' }, '(pruned)'), r.error || ''))),
      el('div', { class: 'small muted' }, `${d.archives?.length ?? 0} archives in the backup directory`)));
}

function stat(label, value, href, attrs = {}) {
  const body = [el('span', { class: 'value', ...attrs }, value), el('span', { class: 'label' }, label)];
  return href ? el('a', { class: 'card stat', href }, body) : el('div', { class: 'card stat' }, body);
}

// What each cause means to a person: a headline, then what to do.
const STORE_TROUBLE = {
  disk_full: ['The disk is full, so nothing new can be saved.',
    'Free some space on the disk that holds the data folder (delete old files or backups there). Messages wait with Telegram meanwhile and are answered when space returns; no restart is needed.'],
  read_only: ['The disk became read-only, so nothing new can be saved.',
    'Make the data folder writable again (a disk that turns read-only often has a fault: check it). Messages wait meanwhile and are answered when writing works again; no restart is needed.'],
  io_error: ['The disk reports errors, so nothing new can be saved.',
    'Check the disk that holds the data folder. Messages wait meanwhile and are answered as soon as writing works again.'],
  permission_denied: ['The daemon is not allowed to write its files, so nothing new can be saved.',
    'Give the daemon\'s user write access to the data folder (the detail below names the file, its owner and mode).'],
  corrupt: ['The database file is damaged.',
    'Stop the daemon and restore the latest backup (`clawvisor restore`).'],
  too_many_open_files: ['The daemon has too many files open, so nothing new can be saved.',
    'Raise the daemon\'s open-file limit (LimitNOFILE in its service file) and restart it.'],
  other: ['Nothing new can be saved right now.',
    'Read the detail below; messages wait and are answered once writing works again.'],
};

/** The red banner while the database cannot save, or the yellow one for low space; else nothing. */
function storeBanner(store) {
  if (!store) return null;
  if (store.state !== 'healthy') {
    const [headline, todo] = STORE_TROUBLE[store.cause] || STORE_TROUBLE.other;
    return el('div', { class: 'card error store-banner', role: 'alert', 'data-store': store.state, 'data-cause': store.cause || 'other' },
      el('strong', null, headline), el('p', null, todo),
      el('details', null, el('summary', { class: 'small' }, 'Technical detail'),
        el('p', { class: 'small' }, store.sentence || ''),
        store.detail && el('p', { class: 'small muted' }, `SQLite: ${store.detail}`),
        el('p', { class: 'small muted' }, 'since ', when(store.since_ms), ` · ${num(store.failed_writes)} ${store.failed_writes === 1 ? 'write' : 'writes'} failed or held back`,
          store.free_bytes != null ? ` · ${megabytes(store.free_bytes)} free in ${store.directory} (writes hold below ${megabytes(store.hold_free_bytes)})` : '')));
  }
  if (store.warning) {
    const low = store.free_bytes != null && store.free_bytes < store.min_free_bytes;
    return el('div', { class: 'card warn store-banner', 'data-store': 'warning' },
      el('strong', null, low ? 'Disk space is running low.' : 'The database cannot tidy its files.'),
      el('p', null, low
        ? 'Everything still works. Free some space on the disk that holds the data folder before it fills up: below the limit in the detail, the daemon stops saving and waits.'
        : 'Everything still works, but the database\'s side file keeps growing until this is fixed; the detail below says why.'),
      el('details', null, el('summary', { class: 'small' }, 'Technical detail'), el('p', { class: 'small' }, store.warning)));
  }
  return null;
}

function megabytes(bytes) {
  return `${(bytes / 1048576).toFixed(1)} MiB`;
}

function draw(box, d) {
  // The bots' status list also carries the WhatsApp and Signal accounts' (`channel:wa:ada`): they
  // are shown with their own section.
  const accountNews = new Map((d.bots || []).filter((b) => b.agent.startsWith('channel:')).map((b) => [b.agent, b]));
  d = { ...d, bots: (d.bots || []).filter((b) => !b.agent.startsWith('channel:')) };
  const health = d.health || {};
  const saving = !health.store || health.store.state === 'healthy';
  const ready = health.boot_complete && health.database;
  const failing = (d.bots || []).filter((b) => b.status === 'failing');
  const card = healthCard(health, saving, ready, failing);
  const queue = d.needs_you || [];
  append(box,
    storeBanner(health.store),
    el('h2', null, 'What needs you'),
    queue.length
      ? el('ul', { class: 'queue', 'data-queue': queue.length }, queue.map((item) => el('li', { class: 'card row spread', 'data-attention': item.kind },
        el('span', null, item.text), el('a', { class: 'button primary', href: item.href }, item.action))))
      : el('p', { class: 'card all-good', 'data-queue': '0' }, '✓ Nothing waits for you.'),
    el('h2', null, 'Agents'),
    (d.agent_lines || []).length
      ? el('ul', { class: 'agent-lines card' }, d.agent_lines.map((a) => el('li', { 'data-agent-line': a.name },
        el('a', { href: `#/agents/${encodeURIComponent(a.name)}` }, el('strong', null, a.name)),
        ' · ', el('span', { class: `bot-${a.bot.replace(/\s+/g, '-')}` }, a.bot === 'no bot' ? 'no bot yet' : `bot ${a.bot}`),
        ' · ', a.last_reply_ms ? ['replied ', when(a.last_reply_ms)] : 'has not answered yet',
        a.runs_today ? ` · ${a.runs_today} today` : '')))
      : empty('No agents yet. ', el('a', { href: '#/setup' }, 'Set up your first one'), '.'),
    el('div', { class: 'grid' },
      el('div', { class: 'card stat', 'data-health-card': card.state },
        el('span', { class: 'value' }, badge(card.badge, card.word)),
        el('span', { class: 'label' }, card.label),
        el('div', { class: 'small muted' }, `v${d.version ?? '?'} · up since `, when(d.started_ms))),
      stat('approvals waiting', num(d.approvals_pending ?? 0), '#/approvals', { id: 'approvals-pending' }),
      stat('runs today', num(d.runs_today), '#/runs'),
      stat('spent today', money(d.cost_today_usd), '#/costs')),
    el('h2', null, 'Telegram bots'),
    d.bots?.length
      ? el('div', { class: 'card' }, d.bots.map((b) => el('div', { class: 'row', 'data-bot': b.agent },
        el('strong', null, b.agent), badge(b.status), el('span', { class: 'muted small' }, b.detail || ''), when(b.at_ms),
        b.last_poll_ms != null && el('span', { class: 'muted small', 'data-last-poll': '' }, '· last poll ', when(b.last_poll_ms)))))
      : empty('No Telegram bots running yet. ', el('a', { href: '#/setup' }, 'Connect one'), ' to reach an agent from your phone.'),
    ...channelAccounts(d.tree || [], accountNews),
    el('h2', null, 'MCP servers'),
    d.mcp?.length
      ? el('div', { class: 'card row' }, d.mcp.map((m) => el('a', { href: '#/mcp', class: 'row' }, m.server, badge(m.state))))
      : empty('No MCP servers. They give agents more tools; add [[mcp.servers]] to clawvisor.toml.'),
    d.protections && sandbox(d.protections),
    el('details', { class: 'machinery', 'data-tree': '' },
      el('summary', null, el('h2', { class: 'inline' }, 'Supervision tree'), el('span', { class: 'muted small' }, ' — every part of the daemon, restarted by its supervisor when it fails')),
      d.tree?.length ? el('div', { class: 'card' }, tree(d.tree.filter(shown))) : empty('No actors reported yet — the daemon may still be starting.')),
  );
}

/** The health card's badge and words: the database first, then bots that cannot get online. */
function healthCard(health, saving, ready, failing) {
  if (!saving) return { state: 'cannot-save', badge: 'failed', word: 'cannot save', label: 'the database cannot save: see above' };
  if (!ready) {
    return health.database === false
      ? { state: 'down', badge: 'down', word: 'database down', label: `boot ${health.boot_complete ? 'complete' : 'in progress'} · database not available` }
      : { state: 'starting', badge: 'starting', word: 'starting…', label: 'boot in progress' };
  }
  if (failing.length) {
    const names = failing.map((b) => b.agent).join(', ');
    return { state: 'bots-failing', badge: 'warn', word: 'needs attention',
      label: `${failing.length === 1 ? 'a bot cannot' : `${failing.length} bots cannot`} reach Telegram (${names}): see Telegram bots below` };
  }
  return { state: 'healthy', badge: 'ok', word: 'healthy', label: 'everything is running' };
}

/** What the kernel lets each kind of command do, and which protections this machine enforces. */
function sandbox(p) {
  return el('details', { class: 'machinery', 'data-protections': p.landlock?.status, 'data-sandbox': p.complete ? 'complete' : 'incomplete' },
    el('summary', null, el('h2', { class: 'inline' }, 'Shell sandbox '),
      badge(p.complete ? 'ok' : 'warn', p.complete ? 'complete' : 'incomplete'),
      el('span', { class: 'muted small' }, p.complete
        ? ' — the kernel holds every command to what it was rated'
        : ' — some protections are missing on this machine; see which below')),
    el('p', { class: 'small muted' }, p.summary),
    (p.profiles || []).map((profile) => el('div', { class: 'card', 'data-profile': profile.name },
      el('strong', null, profile.name), ' ', el('span', { class: 'muted small' }, profile.reach),
      el('ul', { class: 'small' }, profile.protections.map((layer) => el('li', { 'data-layer': layer.name },
        badge(layer.active ? 'ok' : 'warn', layer.active ? 'on' : 'off'), ' ', el('strong', null, layer.name), ' — ', layer.detail))))));
}

/** Temporary actors that stopped (a session gone idle, a finished contract) are not news. */
function shown(actor) {
  return !(actor.status === 'stopped' && /^(session|contract):/.test(actor.id));
}

/** Nested lists: children under their parent; anything orphaned or cyclic is shown at the top level. */
/** The WhatsApp and Signal accounts (from the supervision tree), each with its state in words. */
function channelAccounts(actors, news) {
  const names = { wa: 'WhatsApp', sg: 'Signal' };
  const accounts = actors.filter((a) => /^channel:(wa|sg):/.test(a.id));
  if (!accounts.length) return [];
  const words = (a) => ({
    running: 'connected', starting: 'connecting…', failing: 'cannot connect — see People for what to fix',
    stopped: 'stopped — see People',
  }[a.status] || a.status);
  return [
    el('h2', null, 'WhatsApp and Signal'),
    el('div', { class: 'card' }, accounts.map((a) => {
      const [, channel, agent] = a.id.split(':');
      return el('div', { class: 'row', 'data-channel-account': `${channel}:${agent}`, 'data-status': a.status },
        el('strong', null, agent), el('span', null, names[channel]), badge(a.status, words(a)),
        a.last_error
          ? el('span', { class: 'muted small' }, a.last_error.replace(/^failed: /, ''))
          : news.get(a.id)?.detail && el('span', { class: 'muted small' }, news.get(a.id).detail),
        el('a', { href: '#/people', class: 'small' }, 'People'));
    })),
  ];
}

function tree(actors) {
  const ids = new Set(actors.map((a) => a.id));
  const kids = new Map();
  for (const a of actors) {
    const parent = a.parent && ids.has(a.parent) && a.parent !== a.id ? a.parent : null;
    if (!kids.has(parent)) kids.set(parent, []);
    kids.get(parent).push(a);
  }
  for (const list of kids.values()) list.sort((x, y) => (x.id === 'root' ? -1 : y.id === 'root' ? 1 : x.id.localeCompare(y.id)));
  const seen = new Set();
  const node = (a) => {
    seen.add(a.id);
    const children = (kids.get(a.id) || []).filter((c) => !seen.has(c.id));
    const restarts = a.restarts ?? 0;
    return el('li', { 'data-actor': a.id, 'data-status': a.status, 'data-restarts': restarts },
      el('div', { class: 'actor-row', title: a.last_error || `${a.status} since ${fullTime(a.since_ms)}` },
        el('span', { class: `dot t-${tone(a.status)}` }),
        el('span', { class: 'actor-id' }, a.id),
        badge(a.status),
        el('span', { class: `restarts${restarts ? ' hot' : ''}`, title: 'restarts' }, `↻ ${restarts}`),
        el('span', { class: 'muted small' }, 'since ', when(a.since_ms))),
      a.last_error && el('details', { class: 'last-error' }, el('summary', { class: 'small muted' }, 'last error'), el('pre', null, a.last_error)),
      children.length > 0 && el('ul', null, children.map(node)));
  };
  const top = (kids.get(null) || []).map(node);
  const rest = [];
  for (const a of actors) if (!seen.has(a.id)) rest.push(node(a));
  return el('ul', { class: 'tree' }, top, rest);
}
