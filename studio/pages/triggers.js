// triggers.js — webhook triggers (issue #32): other systems (a doorbell, Home Assistant, GitHub,
// a mail push) wake an agent by posting to the trigger's address with its secret. One card per
// trigger: what it is for (its agent and where the answer goes), whether its secret is set (never
// the secret), the last deliveries with their outcome and the agent's answer, and "Send test
// event" (stored, audited and run like a real delivery). The address, secret variable, limits and
// prompt are in a details block for whoever sets the sender up. Refreshes on trigger_delivery.
import { api, load, el, append, enc, badge, empty, code, act, ago, fullTime } from '/app.js';

export const events = ['trigger_delivery'];

const STATUS = { received: 'waiting to run', running: 'running', succeeded: 'answered', failed: 'failed' };
const ORIGIN = { webhook: 'from the sender', test: 'test event' };

export async function render(root, ctx) {
  const box = el('div', { id: 'triggers-list' });
  append(root, el('h1', null, 'Triggers'),
    el('p', { class: 'muted small', id: 'triggers-purpose' },
      'Other systems — a doorbell, Home Assistant, GitHub, a mail notification — can wake an agent here. ',
      'Each trigger below shows what came in last and what the agent answered; send a test event to try one.'),
    box);
  const refresh = (quiet) => load(box, () => api('/api/v1/triggers'), (d) => draw(box, d, () => refresh(true)), { root, quiet });
  ctx.refresh = () => refresh(true);
  await refresh(false);
}

function draw(box, d, refresh) {
  const triggers = d.triggers || [];
  if (!triggers.length) {
    append(box, empty('No triggers yet. Add a ', code('[[triggers]]'), ' entry to the config file (the README has recipes), then restart the daemon.'));
    return;
  }
  append(box, triggers.map((t) => card(t, refresh)));
}

function card(t, refresh) {
  const button = el('button', { type: 'button', class: 'primary', 'data-test-trigger': t.name }, 'Send test event');
  button.addEventListener('click', () => act(button,
    () => api(`/api/v1/triggers/${enc(t.name)}/test`, { method: 'POST', body: {} }).then(refresh),
    `Test event sent to ${t.name}; the answer appears below when ${t.agent} has answered.`));
  const secret = t.secret_set
    ? badge('ok', 'secret set')
    : el('span', null, badge('warn', 'no secret'), el('span', { class: 'small' },
      ' It accepts nothing until its secret is set: ', el('a', { href: '#/secrets' }, 'Keys & tokens'), '.'));
  return el('section', { class: 'card trigger', 'data-trigger': t.name },
    el('div', { class: 'row spread' }, el('h2', null, t.name), secret),
    el('p', null, `Wakes ${t.agent}; the answer goes ${t.deliver_to_text}.`),
    el('div', { class: 'row' }, button),
    el('h3', null, 'Last deliveries'),
    deliveries(t.deliveries || []),
    el('details', { class: 'small' }, el('summary', null, 'How to send to it'),
      el('p', null, 'POST the event to ', code(`${location.origin}${t.address}`),
        ' with either ', code('X-Signature-256: sha256=<HMAC-SHA256 of the body>'), ' or ',
        code('Authorization: Bearer <secret>'), '. A delivery id in ', code('X-Delivery-Id'),
        ' (or GitHub\'s ', code('X-GitHub-Delivery'), ') makes a resend run only once.'),
      el('p', null, 'Secret variable: ', code(t.secret_var), ` · at most ${t.max_body} per event · ${t.per_minute} events a minute`),
      el('p', null, 'What the agent is told (the event goes where ', code('{{body}}'), ' is, marked as untrusted):'),
      el('pre', null, t.prompt)));
}

function deliveries(rows) {
  if (!rows.length) return empty('Nothing has come in yet.');
  return el('ul', { class: 'deliveries' }, rows.map((r) => el('li', { 'data-delivery': r.id, 'data-status': r.status },
    el('div', { class: 'row' }, badge(r.status === 'succeeded' ? 'ok' : r.status === 'failed' ? 'bad' : 'idle', STATUS[r.status] || r.status),
      el('span', { class: 'small muted', title: fullTime(r.received_ms) }, ` ${ORIGIN[r.origin] || r.origin}, ${ago(r.received_ms)}`),
      r.run_id ? el('a', { class: 'small', href: `#/runs/${r.run_id}` }, ' see the run') : null),
    r.answer ? el('p', { class: 'answer' }, r.answer) : null,
    r.detail && r.status !== 'succeeded' ? el('p', { class: 'small' }, r.detail) : null,
    r.detail && r.status === 'succeeded' ? el('p', { class: 'small muted' }, r.detail) : null)));
}
