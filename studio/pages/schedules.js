// schedules.js — jobs that run an agent at set times and send its answer somewhere: the list
// (what, when, where the answer goes, status, next run, the last runs with links to each run) with
// Run now / Pause / Resume / Delete; a create form whose defaults come from the server (the
// agent's chats and people by name with the owner's private chat first, the agent's zone — never
// the browser's —, "run once when back"), with Preview; and #/schedules/ID with an edit form and
// the whole history. Only the list and the job's facts refresh on schedule_* events, so the forms
// keep what the operator typed.
import { api, load, el, append, enc, badge, when, empty, table, kv, act, code, errorBox, clear, toast, fullTime } from '/app.js';

export const events = ['schedule_fired', 'schedule_outcome'];

const PLACEHOLDERS = { cron: '0 9 * * 1-5', every: '30m', at: '2030-01-31 09:00' };
const KINDS = { cron: 'On set days and times', every: 'Every … (an interval)', at: 'Once, at a date and time' };
const KIND_HELP = {
  cron: 'Minute, hour, day, month, weekday (cron), e.g. 0 9 * * 1-5 is weekdays at 9:00.',
  every: 'An interval, e.g. 30m, 2h, 1d.',
  at: 'One date and time, e.g. 2030-01-31 09:00 (in the time zone below).',
};
const MISSED = [
  ['run_once', 'Run once when back'],
  ['skip', 'Skip the missed runs'],
  ['catch_up', 'Catch up every missed run'],
];
const JOB_STATUS = { active: 'active', paused: 'paused', done: 'finished', cancelled: 'deleted' };
const RUN_STATUS = { queued: 'waiting to start', running: 'running', succeeded: 'done', failed: 'failed',
  missed: 'missed', skipped: 'skipped' };
const TRIGGERS = { scheduled: 'on schedule', manual: 'started by you', retry: 'retry', caught_up: 'late run', record: '' };
const NOBODY = 'Nobody — keep the answers here only';

/** A time in the schedule's own zone ("Fri, 15 Jan 2027, 09:00 (Europe/Berlin)"). */
function inZone(ms, tz) {
  try {
    return `${new Date(ms).toLocaleString(undefined, { timeZone: tz, weekday: 'short', year: 'numeric', month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit' })} (${tz})`;
  } catch { return fullTime(ms); }
}

export async function render(root, ctx) {
  if (ctx.params[0]) return jobView(root, ctx, ctx.params[0]);
  const box = el('div');
  append(root, el('h1', null, 'Schedules'),
    el('p', { class: 'muted', id: 'schedules-purpose' }, 'Jobs that run an agent at set times — a morning briefing, a weekly reminder — and send its answer to you. ',
      'Create one below; "Run now" tries it at once.'),
    box, el('h2', null, 'New schedule'));
  const refresh = (quiet) => load(box, () => api('/api/v1/schedules'), (d) => drawJobs(box, d.jobs || [], () => refresh(true)), { root, quiet });
  append(root, createForm(() => refresh(true)));
  ctx.refresh = () => refresh(true);
  return refresh(false);
}

/** A run's outcome in words, linked to the agent's run when it has one. */
function runOutcome(run, zone) {
  const words = RUN_STATUS[run.status] ?? run.status;
  const label = run.status === 'missed' && run.missed_count > 1 ? `${words} ×${run.missed_count}` : words;
  const trigger = TRIGGERS[run.trigger] ?? run.trigger;
  const at = run.started_ms ?? run.fire_ms;
  return el('span', { class: 'row', 'data-run-of-job': run.job_id, 'data-run-status': run.status, style: 'gap:.3rem' },
    badge(run.status, label),
    run.run_id != null ? el('a', { href: `#/runs/${enc(run.run_id)}`, 'data-run-link': run.run_id, title: inZone(at, zone) }, when(at))
      : el('span', { title: inZone(at, zone) }, when(at)),
    trigger ? el('span', { class: 'muted small' }, trigger) : null);
}

function jobActions(job, after) {
  const call = (verb, label, cls = '') => el('button', { type: 'button', 'data-action': verb, class: cls, onclick: async (e) => {
    if (verb === 'delete' && !confirm(`Delete the schedule "${job.name}"? It will not run again.`)) return;
    const path = `/api/v1/schedules/${enc(job.id)}${verb === 'delete' ? '' : `/${verb}`}`;
    const done = await act(e.currentTarget, () => api(path, { method: verb === 'delete' ? 'DELETE' : 'POST' }));
    if (!done) return;
    const where = job.target_label ? ` Its answer goes to ${job.target_label}.` : ' Its answer stays in its history.';
    toast({ pause: `Paused "${job.name}": it will not run until you resume it.`,
      resume: `Resumed "${job.name}".`, delete: `Deleted "${job.name}".`,
      run: `Started "${job.name}" now.${where}` }[verb]);
    after(done);
  } }, label);
  const live = job.status === 'active' || job.status === 'paused';
  return el('div', { class: 'row' },
    job.status === 'active' && call('run', 'Run now', 'primary'),
    job.status === 'active' && call('pause', 'Pause'),
    job.status === 'paused' && call('resume', 'Resume'),
    live && call('delete', 'Delete', 'danger'));
}

function deliveredTo(job) {
  return job.target ? el('span', { title: job.target }, job.target_label || job.target)
    : el('span', { class: 'muted' }, 'nobody (kept here)');
}

function drawJobs(box, jobs, refresh) {
  if (!jobs.length) {
    append(box, empty("No schedules yet — create one below, or ask an agent: 'remind me every weekday at 9'."));
    return;
  }
  append(box, table([
    { label: 'Name', cell: (j) => el('span', null, el('a', { href: `#/schedules/${enc(j.id)}` }, j.name || `#${j.id}`), el('br'),
      el('span', { class: 'muted small' }, j.agent)) },
    { label: 'When', cell: (j) => el('span', null, j.schedule || j.expression) },
    { label: 'Answer goes to', cell: (j) => deliveredTo(j) },
    { label: 'Status', cell: (j) => el('span', null, badge(j.status, JOB_STATUS[j.status] ?? j.status), j.failing ? [' ', badge('failed', 'failing')] : null) },
    { label: 'Next run', cell: (j) => (j.next_run_ms != null && j.status === 'active' ? el('span', { title: inZone(j.next_run_ms, j.timezone) }, when(j.next_run_ms)) : el('span', { class: 'muted' }, '—')) },
    { label: 'Last runs', cell: (j) => ((j.last_runs || []).length
      ? el('div', { style: 'display:flex;flex-direction:column;gap:.2rem' }, j.last_runs.map((r) => runOutcome(r, j.timezone)))
      : el('span', { class: 'muted' }, 'not yet')) },
    { label: '', cell: (j) => jobActions(j, refresh) },
  ], jobs, (j) => ({ 'data-job': j.id, 'data-status': j.status })));
}

/** The form's fields, shared by "New schedule" and a job's "Edit" (ids prefixed by `prefix`). */
function fields(prefix, job) {
  const id = (name) => `${prefix}-${name}`;
  const f = {
    name: el('input', { id: id('name'), name: 'name', required: true, placeholder: 'morning-briefing', value: job?.name ?? '' }),
    prompt: el('textarea', { id: id('prompt'), name: 'prompt', rows: 3, required: true, value: job?.prompt ?? '',
      placeholder: 'What should the agent do each time? e.g. Summarise my unread email.' }),
    kind: el('select', { id: id('kind'), name: 'kind', value: job?.kind ?? 'cron' }, Object.entries(KINDS).map(([k, label]) => el('option', { value: k }, label))),
    expression: el('input', { id: id('expression'), name: 'expression', required: true, autocomplete: 'off',
      placeholder: PLACEHOLDERS[job?.kind ?? 'cron'], value: job?.expression ?? '' }),
    help: el('span', { class: 'muted small' }, KIND_HELP[job?.kind ?? 'cron']),
    target: el('select', { id: id('target'), name: 'target' }, el('option', { value: '' }, NOBODY)),
    timezone: el('input', { id: id('timezone'), name: 'timezone', list: id('zones'), required: true, value: job?.timezone ?? '' }),
    zones: el('datalist', { id: id('zones') }, (Intl.supportedValuesOf?.('timeZone') || []).map((z) => el('option', { value: z }))),
    missed: el('select', { id: id('missed'), name: 'missed_policy', value: (job?.missed_policy ?? 'run_once').split(' ')[0] },
      MISSED.map(([value, label]) => el('option', { value }, label))),
    targetNote: el('span', { class: 'muted small', id: id('target-note') }),
  };
  f.kind.addEventListener('change', () => {
    f.expression.placeholder = PLACEHOLDERS[f.kind.value];
    f.help.textContent = KIND_HELP[f.kind.value];
  });
  return f;
}

/** Fills the "Answer goes to" select from the agent's choices; `keep`: the value to select. */
function fillTargets(f, choices, keep) {
  const targets = choices.targets || [];
  const options = targets.map((t) => el('option', { value: t.chat, 'data-reason': t.reason }, t.label));
  if (keep && !targets.some((t) => t.chat === keep)) options.push(el('option', { value: keep }, keep));
  clear(f.target, options, el('option', { value: '' }, NOBODY));
  f.target.value = keep ?? choices.default_target ?? '';
  f.targetNote.textContent = choices.bot ? (targets.length ? '' : 'Nobody has talked to this agent on Telegram yet: its answers stay here until someone does.')
    : 'This agent has no Telegram bot: its answers stay in the schedule\'s history.';
}

function createForm(onCreated) {
  const field = (label, input, wide) => el('label', { class: wide ? 'wide' : '' }, label, input);
  const f = fields('sched');
  const agent = el('select', { id: 'sched-agent', name: 'agent', required: true }, el('option', { value: '' }, 'Loading agents…'));
  const preview = el('div', { id: 'sched-preview', 'aria-live': 'polite' });
  const status = el('div', { id: 'sched-status', 'aria-live': 'polite' });
  const previewBtn = el('button', { id: 'sched-preview-btn', type: 'button' }, 'Preview');
  const create = el('button', { id: 'sched-create', type: 'submit', class: 'primary' }, 'Create schedule');
  const agentSlot = el('span');
  let zoneTouched = false;
  f.timezone.addEventListener('input', () => { zoneTouched = true; });
  f.kind.addEventListener('change', () => clear(preview));

  // The agent's defaults: where its answers can go (its owner first) and its zone.
  const loadChoices = async () => {
    if (!agent.value) return;
    try {
      const choices = await api(`/api/v1/schedules/choices?agent=${enc(agent.value)}`);
      fillTargets(f, choices, null);
      if (!zoneTouched) f.timezone.value = choices.timezone;
      agent.dataset.choicesFor = agent.value;
    } catch (e) {
      f.targetNote.textContent = `Could not load where answers can go: ${e.message}`;
    }
  };
  agent.addEventListener('change', loadChoices);

  const loadAgents = async () => {
    clear(agentSlot);
    try {
      const { agents = [] } = await api('/api/v1/agents');
      clear(agent, agents.length ? null : el('option', { value: '' }, 'no agents configured'),
        agents.map((a) => el('option', { value: a.name }, a.name)));
      await loadChoices();
    } catch (e) {
      clear(agent, el('option', { value: '' }, 'agents unavailable'));
      append(agentSlot, errorBox(e.message, loadAgents));
    }
  };
  loadAgents();

  async function runPreview() {
    if (!f.expression.value.trim()) {
      clear(preview, el('div', { class: 'error' }, el('p', null, 'Enter when it should run first.'), el('button', { type: 'button', class: 'retry', onclick: runPreview }, 'Preview again')));
      return;
    }
    previewBtn.disabled = true;
    clear(preview, el('p', { class: 'loading' }, 'Working out the next runs…'));
    const tz = f.timezone.value.trim();
    try {
      const d = await api('/api/v1/schedules/preview', { method: 'POST', body: { kind: f.kind.value, expression: f.expression.value.trim(), timezone: tz } });
      const next = d.next || [];
      clear(preview, el('p', null, el('strong', null, d.schedule || ''), next.length ? ' — next runs:' : ' — it will not run again.'),
        el('ol', null, next.map((ms, i) => el('li', { 'data-ms': ms }, d.next_local?.[i] ?? inZone(ms, tz), ' · ', when(ms)))));
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
      agent: agent.value, name: f.name.value.trim(), prompt: f.prompt.value.trim(), kind: f.kind.value,
      expression: f.expression.value.trim(), timezone: f.timezone.value.trim(), missed_policy: f.missed.value,
      target: f.target.value,
    };
    const labels = { agent: 'agent', name: 'name', prompt: 'what the agent should do', expression: 'when it runs' };
    const missing = Object.keys(labels).filter((k) => !body[k]);
    if (missing.length) {
      append(status, el('div', { class: 'error' }, el('p', null, `Nothing was created: please fill in ${missing.map((k) => labels[k]).join(', ')}.`),
        el('button', { type: 'button', class: 'retry', onclick: () => form.requestSubmit() }, 'Try again')));
      return;
    }
    create.disabled = true;
    try {
      const job = await api('/api/v1/schedules', { method: 'POST', body });
      for (const input of [f.name, f.prompt, f.expression]) input.value = '';
      clear(preview);
      const where = f.target.value ? ` Answers go to ${f.target.selectedOptions[0]?.textContent}.` : ' Answers stay in its history.';
      append(status, el('p', { class: 'saved', role: 'status' }, `Created "${job.name}" — ${job.schedule || job.expression}`,
        job.next_run_ms != null ? ['; next run ', when(job.next_run_ms)] : null, `.${where}`));
      onCreated(job);
    } catch (err) {
      append(status, errorBox(`Nothing was created: ${err.message}`, () => form.requestSubmit()));
    } finally {
      create.disabled = false;
    }
  } },
  el('div', { class: 'form-grid' },
    field('Agent', [agent, agentSlot]), field('Name', f.name),
    field('What should the agent do each time?', f.prompt, true),
    field('How often', f.kind), field('When', [f.expression, f.help]),
    field('Answer goes to', [f.target, f.targetNote]), field('Time zone', [f.timezone, f.zones]),
    field('If runs were missed (daemon off)', f.missed),
    el('div', { class: 'wide row' }, previewBtn, create),
    el('div', { class: 'wide' }, preview, status)));
  return form;
}

// ---------- one job ----------

function jobView(root, ctx, id) {
  const box = el('div');
  const editBox = el('div');
  append(root, el('p', null, el('a', { href: '#/schedules' }, '← All schedules')), box, editBox);
  let editing = false;
  const refresh = (quiet) => load(box, () => api(`/api/v1/schedules/${enc(id)}`), (j) => {
    drawJob(box, j, () => refresh(true));
    if (!editing && (j.status === 'active' || j.status === 'paused')) {
      editing = true;
      clear(editBox, el('h2', null, 'Change this schedule'), editForm(j, () => refresh(true)));
    }
  }, { root, quiet });
  ctx.refresh = () => refresh(true);
  return refresh(false);
}

function drawJob(box, j, refresh) {
  const where = j.target ? `Its answers go to ${j.target_label || j.target}.` : 'Its answers stay in the history below (nobody is sent them).';
  const next = j.status === 'active' || j.status === 'paused' ? ' Change it below, or "Run now" to try it.' : '';
  append(box, el('h1', null, j.name || `Schedule #${j.id}`),
    el('p', { class: 'muted', id: 'schedule-purpose' }, `${j.agent} runs this ${j.schedule}. ${where}${next}`),
    el('div', { class: 'card', 'data-job': j.id, 'data-status': j.status },
      kv([
        ['Agent', el('a', { href: `#/agents/${enc(j.agent)}` }, j.agent)],
        ['Status', el('span', null, badge(j.status, JOB_STATUS[j.status] ?? j.status), j.failing ? [' ', badge('failed', 'failing')] : null)],
        ['When', j.schedule], ['Answer goes to', deliveredTo(j)],
        ['If missed', (MISSED.find(([v]) => j.missed_policy?.startsWith(v)) || [null, j.missed_policy])[1]],
        ['Next run', j.next_run_ms != null ? [j.next_run_local ?? inZone(j.next_run_ms, j.timezone), ' · ', when(j.next_run_ms)] : null],
        ['What it asks', el('span', { style: 'white-space:pre-wrap' }, j.prompt)],
      ]),
      j.upcoming?.length > 1 ? el('details', null, el('summary', { class: 'muted small' }, `The next ${j.upcoming.length} runs`),
        el('ol', null, j.upcoming.map((ms, i) => el('li', null, j.upcoming_local?.[i] ?? inZone(ms, j.timezone), ' · ', when(ms))))) : null,
      el('details', null, el('summary', { class: 'muted small' }, 'Technical details'),
        kv([['Schedule', code(`${j.kind} ${j.expression}`)], ['Time zone', j.timezone], ['Missed-run policy', code(j.missed_policy)],
          ['Target chat', j.target ? code(j.target) : null], ['Created by', j.created_by], ['Job id', String(j.id)]])),
      jobActions(j, refresh)));
  append(box, el('h2', null, 'History'));
  const history = j.history || [];
  if (!history.length) { append(box, empty('This schedule has not run yet. "Run now" tries it at once.')); return; }
  append(box, table([
    { label: 'Time', cell: (h) => el('span', { title: fullTime(h.fire_ms) }, inZone(h.started_ms ?? h.fire_ms, j.timezone)) },
    { label: 'How', cell: (h) => (TRIGGERS[h.trigger] ?? h.trigger) || '—' },
    { label: 'Outcome', cell: (h) => el('span', null, badge(h.status, RUN_STATUS[h.status] ?? h.status), h.status === 'missed' && h.missed_count > 1 ? ` ×${h.missed_count}` : null) },
    { label: 'Run', cell: (h) => (h.run_id != null ? el('a', { href: `#/runs/${enc(h.run_id)}`, 'data-run-link': h.run_id }, 'See the run') : el('span', { class: 'muted' }, '—')) },
    { label: 'Answer or reason', cell: (h) => el('span', { class: 'small', style: 'white-space:pre-wrap' }, typeof h.detail === 'string' ? h.detail : h.detail != null ? JSON.stringify(h.detail) : '') },
  ], history, (h) => ({ 'data-history': h.id, 'data-status': h.status, 'data-trigger': h.trigger,
    class: h.status === 'missed' ? 'missed' : h.trigger === 'caught_up' ? 'caught-up' : '' })));
}

/** Edits a job: only the fields that changed are sent. */
function editForm(job, after) {
  const field = (label, input, wide) => el('label', { class: wide ? 'wide' : '' }, label, input);
  const f = fields('edit', job);
  const status = el('div', { id: 'edit-status', 'aria-live': 'polite' });
  const save = el('button', { id: 'edit-save', type: 'submit', class: 'primary' }, 'Save changes');
  api(`/api/v1/schedules/choices?agent=${enc(job.agent)}`)
    .then((choices) => { fillTargets(f, choices, job.target ?? ''); f.target.dataset.loaded = 'true'; })
    .catch((e) => { f.targetNote.textContent = `Could not load where answers can go: ${e.message}`; });
  const original = { name: job.name, prompt: job.prompt, kind: job.kind, expression: job.expression, timezone: job.timezone,
    missed_policy: (job.missed_policy ?? '').split(' ')[0], target: job.target ?? '' };
  const form = el('form', { id: 'schedule-edit', class: 'card', novalidate: true, onsubmit: async (e) => {
    e.preventDefault();
    clear(status);
    const now = { name: f.name.value.trim(), prompt: f.prompt.value.trim(), kind: f.kind.value, expression: f.expression.value.trim(),
      timezone: f.timezone.value.trim(), missed_policy: f.missed.value, target: f.target.dataset.loaded ? f.target.value : original.target };
    const body = Object.fromEntries(Object.entries(now).filter(([k, v]) => v !== original[k]));
    // A changed schedule is checked as a whole: send its kind and expression together.
    if (body.kind || body.expression) Object.assign(body, { kind: now.kind, expression: now.expression });
    if (!Object.keys(body).length) { append(status, el('p', { class: 'muted' }, 'Nothing changed.')); return; }
    save.disabled = true;
    try {
      const updated = await api(`/api/v1/schedules/${enc(job.id)}`, { method: 'PATCH', body });
      Object.assign(original, body);
      const where = updated.target ? `its answers go to ${f.target.selectedOptions[0]?.textContent ?? updated.target}` : 'its answers stay in its history';
      append(status, el('p', { class: 'saved', role: 'status' }, `Saved. "${updated.name}" now runs ${updated.schedule}; ${where}.`));
      after(updated);
    } catch (err) {
      append(status, errorBox(`Nothing was changed: ${err.message}`, () => form.requestSubmit()));
    } finally {
      save.disabled = false;
    }
  } },
  el('div', { class: 'form-grid' },
    field('Name', f.name), field('Answer goes to', [f.target, f.targetNote]),
    field('What should the agent do each time?', f.prompt, true),
    field('How often', f.kind), field('When', [f.expression, f.help]),
    field('Time zone', [f.timezone, f.zones]), field('If runs were missed (daemon off)', f.missed),
    el('div', { class: 'wide row' }, save),
    el('div', { class: 'wide' }, status)));
  return form;
}
