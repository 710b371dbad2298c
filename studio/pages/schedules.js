// schedules.js — scheduled jobs: list (status, human schedule, next run, last outcome) with
// Pause / Resume / Delete, a create form with Preview (next fire times, or the server's validation
// message inline), and #/schedules/ID with the job's history (missed and caught-up fires marked).
// Only the list refreshes on schedule_* events, so the form keeps what the operator typed.
import { api, load, el, append, enc, badge, when, empty, table, kv, act, code, errorBox, clear, toast, fullTime } from '/app.js';

export const events = ['schedule_fired', 'schedule_outcome'];

const PLACEHOLDERS = { cron: '0 9 * * 1-5', every: '30m', at: '2030-01-31 09:00' };
const KIND_HELP = {
  cron: 'Cron expression (minute hour day month weekday), e.g. 0 9 * * 1-5 = weekdays at 9:00.',
  every: 'An interval, e.g. 30m, 2h, 1d.',
  at: 'One date and time, e.g. 2030-01-31 09:00 (in the timezone below).',
};
const localZone = () => Intl.DateTimeFormat().resolvedOptions().timeZone || 'UTC';

/** A time shown in the schedule's own timezone (falls back to the browser's). */
function inZone(ms, tz) {
  try {
    return `${new Date(ms).toLocaleString(undefined, { timeZone: tz, weekday: 'short', year: 'numeric', month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit' })} (${tz})`;
  } catch { return fullTime(ms); }
}

export async function render(root, ctx) {
  if (ctx.params[0]) return jobView(root, ctx, ctx.params[0]);
  const box = el('div');
  append(root, el('h1', null, 'Schedules'), box, el('h2', null, 'New schedule'));
  const refresh = (quiet) => load(box, () => api('/api/v1/schedules'), (d) => drawJobs(box, d.jobs || [], () => refresh(true)), { root, quiet });
  append(root, createForm(() => refresh(true)));
  ctx.refresh = () => refresh(true);
  return refresh(false);
}

function outcome(text) {
  if (text == null || text === '') return null;
  const s = String(text);
  return /^[a-z_]+$/.test(s) ? badge(s) : el('span', { class: 'small' }, s.length > 80 ? `${s.slice(0, 80)}…` : s);
}

function jobActions(job, after) {
  const call = (verb, label) => el('button', { type: 'button', 'data-action': verb, class: verb === 'delete' ? 'danger' : '', onclick: async (e) => {
    if (verb === 'delete' && !confirm(`Delete the schedule "${job.name}"? It will not fire again.`)) return;
    const path = `/api/v1/schedules/${enc(job.id)}${verb === 'delete' ? '' : `/${verb}`}`;
    const done = await act(e.currentTarget, () => api(path, { method: verb === 'delete' ? 'DELETE' : 'POST' }));
    if (done) { toast(`${{ pause: 'Paused', resume: 'Resumed', delete: 'Deleted' }[verb]}: ${job.name}`); after(done); }
  } }, label);
  const live = job.status === 'active' || job.status === 'paused';
  return el('div', { class: 'row' },
    job.status === 'active' && call('pause', 'Pause'),
    job.status === 'paused' && call('resume', 'Resume'),
    live && call('delete', 'Delete'));
}

function drawJobs(box, jobs, refresh) {
  if (!jobs.length) {
    append(box, empty("No schedules yet — create one below, or ask an agent: 'remind me every weekday at 9'"));
    return;
  }
  append(box, table([
    { label: 'Name', cell: (j) => el('a', { href: `#/schedules/${enc(j.id)}` }, j.name || `#${j.id}`) },
    { label: 'Agent', cell: (j) => j.agent },
    { label: 'Schedule', cell: (j) => el('span', null, j.schedule || j.expression, el('br'), el('span', { class: 'muted small' }, code(j.expression), ' ', j.timezone ?? '')) },
    { label: 'Status', cell: (j) => el('span', null, badge(j.status), j.failing ? [' ', badge('failed', 'failing')] : null) },
    { label: 'Next run', cell: (j) => (j.next_run_ms != null && j.status === 'active' ? el('span', { title: inZone(j.next_run_ms, j.timezone) }, j.next_run_local ?? '', el('br'), el('span', { class: 'muted small' }, when(j.next_run_ms))) : el('span', { class: 'muted' }, '—')) },
    { label: 'Last run', cell: (j) => el('span', null, when(j.last_run_ms), ' ', outcome(j.last_outcome)) },
    { label: '', cell: (j) => jobActions(j, refresh) },
  ], jobs, (j) => ({ 'data-job': j.id, 'data-status': j.status })));
}

function createForm(onCreated) {
  const field = (label, input, wide) => el('label', { class: wide ? 'wide' : '' }, label, input);
  const agent = el('select', { id: 'sched-agent', name: 'agent', required: true }, el('option', { value: '' }, 'Loading agents…'));
  const name = el('input', { id: 'sched-name', name: 'name', required: true, placeholder: 'morning-briefing' });
  const prompt = el('textarea', { id: 'sched-prompt', name: 'prompt', rows: 3, required: true, placeholder: 'What should the agent do each time? e.g. Summarise my unread email.' });
  const kind = el('select', { id: 'sched-kind', name: 'kind' }, ['cron', 'every', 'at'].map((k) => el('option', { value: k }, k)));
  const expression = el('input', { id: 'sched-expression', name: 'expression', required: true, placeholder: PLACEHOLDERS.cron, autocomplete: 'off' });
  const help = el('span', { class: 'muted small' }, KIND_HELP.cron);
  const timezone = el('input', { id: 'sched-timezone', name: 'timezone', value: localZone(), list: 'sched-zones', required: true });
  const zones = el('datalist', { id: 'sched-zones' }, (Intl.supportedValuesOf?.('timeZone') || []).map((z) => el('option', { value: z })));
  const missed = el('select', { id: 'sched-missed', name: 'missed_policy' },
    el('option', { value: 'skip' }, 'skip missed runs'), el('option', { value: 'run_once' }, 'run once when back'),
    el('option', { value: 'catch_up' }, 'catch up every missed run'));
  const preview = el('div', { id: 'sched-preview', 'aria-live': 'polite' });
  const status = el('div', { id: 'sched-status', 'aria-live': 'polite' });
  const previewBtn = el('button', { id: 'sched-preview-btn', type: 'button' }, 'Preview');
  const create = el('button', { id: 'sched-create', type: 'submit', class: 'primary' }, 'Create schedule');
  const agentSlot = el('span');

  kind.addEventListener('change', () => {
    expression.placeholder = PLACEHOLDERS[kind.value];
    help.textContent = KIND_HELP[kind.value];
    clear(preview);
  });

  const loadAgents = async () => {
    clear(agentSlot);
    try {
      const { agents = [] } = await api('/api/v1/agents');
      clear(agent, agents.length ? null : el('option', { value: '' }, 'no agents configured'),
        agents.map((a) => el('option', { value: a.name }, a.name)));
    } catch (e) {
      clear(agent, el('option', { value: '' }, 'agents unavailable'));
      append(agentSlot, errorBox(e.message, loadAgents));
    }
  };
  loadAgents();

  async function runPreview() {
    if (!expression.value.trim()) {
      clear(preview, el('div', { class: 'error' }, el('p', null, 'Enter an expression first.'), el('button', { type: 'button', class: 'retry', onclick: runPreview }, 'Preview again')));
      return;
    }
    previewBtn.disabled = true;
    clear(preview, el('p', { class: 'loading' }, 'Working out the next runs…'));
    const tz = timezone.value.trim() || localZone();
    try {
      const d = await api('/api/v1/schedules/preview', { method: 'POST', body: { kind: kind.value, expression: expression.value.trim(), timezone: tz } });
      const next = d.next || [];
      clear(preview, el('p', null, el('strong', null, d.schedule || ''), next.length ? ' — next runs:' : ' — it will not fire again.'),
        el('ol', null, next.map((ms) => el('li', { 'data-ms': ms }, inZone(ms, tz), ' · ', when(ms)))));
    } catch (e) {
      clear(preview, errorBox(e.message, runPreview, 'Preview again'));
    } finally {
      previewBtn.disabled = false;
    }
  }
  previewBtn.addEventListener('click', runPreview);

  const form = el('form', { id: 'schedule-form', class: 'card', novalidate: true, onsubmit: async (e) => {
    e.preventDefault();
    clear(status);
    const body = {
      agent: agent.value, name: name.value.trim(), prompt: prompt.value.trim(), kind: kind.value,
      expression: expression.value.trim(), timezone: timezone.value.trim() || localZone(), missed_policy: missed.value,
    };
    const missing = ['agent', 'name', 'prompt', 'expression'].filter((k) => !body[k]);
    if (missing.length) {
      append(status, el('div', { class: 'error' }, el('p', null, `Please fill in: ${missing.join(', ')}.`),
        el('button', { type: 'button', class: 'retry', onclick: () => form.requestSubmit() }, 'Try again')));
      return;
    }
    create.disabled = true;
    try {
      const job = await api('/api/v1/schedules', { method: 'POST', body });
      for (const input of [name, prompt, expression]) input.value = '';
      clear(preview);
      append(status, el('p', { class: 'saved', role: 'status' }, `Created "${job.name}" — ${job.schedule || job.expression}`,
        job.next_run_ms != null ? ['; next run ', when(job.next_run_ms)] : null, '.'));
      onCreated(job);
    } catch (err) {
      append(status, errorBox(err.message, () => form.requestSubmit()));
    } finally {
      create.disabled = false;
    }
  } },
  el('div', { class: 'form-grid' },
    field('Agent', [agent, agentSlot]), field('Name', name), field('Prompt', prompt, true),
    field('Kind', kind), field('Expression', [expression, help]), field('Timezone', [timezone, zones]),
    field('If runs were missed (daemon off)', missed),
    el('div', { class: 'wide row' }, previewBtn, create),
    el('div', { class: 'wide' }, preview, status)));
  return form;
}

// ---------- one job ----------

function jobView(root, ctx, id) {
  const box = el('div');
  append(root, el('p', null, el('a', { href: '#/schedules' }, '← All schedules')), box);
  const refresh = (quiet) => load(box, () => api(`/api/v1/schedules/${enc(id)}`), (j) => drawJob(box, j, () => refresh(true)), { root, quiet });
  ctx.refresh = () => refresh(true);
  return refresh(false);
}

function drawJob(box, j, refresh) {
  append(box, el('h1', null, j.name || `Schedule #${j.id}`),
    el('div', { class: 'card', 'data-job': j.id, 'data-status': j.status },
      kv([
        ['Agent', el('a', { href: `#/agents/${enc(j.agent)}` }, j.agent)],
        ['Status', el('span', null, badge(j.status), j.failing ? [' ', badge('failed', 'failing')] : null)],
        ['Schedule', [j.schedule, ' ', code(`${j.kind} ${j.expression}`)]], ['Timezone', j.timezone],
        ['If missed', j.missed_policy], ['Target', j.target],
        ['Next run', j.next_run_ms != null ? [inZone(j.next_run_ms, j.timezone), ' · ', when(j.next_run_ms)] : null],
        ['Last run', j.last_run_ms != null ? [when(j.last_run_ms), ' ', outcome(j.last_outcome)] : null],
        ['Prompt', el('span', { style: 'white-space:pre-wrap' }, j.prompt)],
      ]),
      jobActions(j, refresh)));
  if (j.upcoming?.length) {
    append(box, el('h2', null, 'Upcoming'), el('ol', { class: 'card' }, j.upcoming.map((ms) => el('li', null, inZone(ms, j.timezone), ' · ', when(ms)))));
  }
  append(box, el('h2', null, 'History'));
  const history = j.history || [];
  if (!history.length) { append(box, empty('This schedule has not fired yet.')); return; }
  append(box, table([
    { label: 'Fire time', cell: (h) => el('span', { title: fullTime(h.fire_ms) }, inZone(h.fire_ms, j.timezone)) },
    { label: 'Trigger', cell: (h) => (h.trigger === 'caught_up' ? badge('caught_up', 'caught up') : h.trigger) },
    { label: 'Status', cell: (h) => el('span', null, badge(h.status), h.status === 'missed' && h.missed_count > 1 ? ` ×${h.missed_count}` : null) },
    { label: 'Attempt', cell: (h) => h.attempt ?? 1 },
    { label: 'Started', cell: (h) => when(h.started_ms) },
    { label: 'Finished', cell: (h) => when(h.finished_ms) },
    { label: 'Run', cell: (h) => (h.run_id != null ? el('a', { href: `#/runs/${enc(h.run_id)}` }, `#${h.run_id}`) : '—') },
    { label: 'Detail', cell: (h) => el('span', { class: 'small' }, typeof h.detail === 'string' ? h.detail : h.detail != null ? JSON.stringify(h.detail) : '') },
  ], history, (h) => ({ 'data-history': h.id, 'data-status': h.status,
    class: h.status === 'missed' ? 'missed' : h.trigger === 'caught_up' ? 'caught-up' : '' })));
}
