// approvals.js — the operator's inbox: pending approvals, each saying first in a sentence what the
// agent wants to do, then the exact action, the grant in the one wording every channel uses, and
// Approve once / Allow exactly this for 30 min / Deny (a blocked action: type it out to allow it
// once), the technical detail folded; below, active grants (with Revoke) and lapsed ones (something
// wrote in the workspace after they were given; with the reason), recently decided
// approvals with their outcome in plain words, and recent policy decisions. Refreshes on
// approval_*, policy_changed (a grant revoked or a rule changed elsewhere) and decision steps of runs.
// A browser approval shows the screenshot of the page it is about.
import { api, load, el, append, enc, badge, when, expires, empty, table, kv, act, code, approvalCard } from '/app.js';

export const events = ['approval_requested', 'approval_decided', 'policy_changed', 'run_step'];

export async function render(root, ctx) {
  const pending = el('div');
  const decided = el('div');
  const grants = el('div');
  const decisions = el('div');
  append(root, el('h1', null, 'Approvals'),
    el('p', { class: 'lead' }, 'What agents want to do that needs your OK. Decide the requests waiting below; '
      + 'grants you gave and past decisions are further down.'), pending,
    el('h2', null, 'Grants you gave'), grants,
    el('h2', null, 'Recently decided'), decided,
    el('h2', null, 'Policy decisions'), decisions);
  const refresh = (quiet) => Promise.all([
    load(pending, () => api('/api/v1/approvals?status=pending'), (d) => drawPending(pending, d.approvals || [], refreshAll), { root, quiet }),
    load(grants, () => api('/api/v1/grants'), (d) => drawGrants(grants, d.grants || [], refreshAll), { quiet }),
    load(decided, () => api('/api/v1/approvals?limit=30'), (d) => drawDecided(decided, d.approvals || []), { quiet }),
    // Optional section: a server without this endpoint just says so instead of showing an error.
    load(decisions, () => api('/api/v1/policy/decisions?limit=30').catch((e) => {
      if (e.status === 404) return { missing: true };
      throw e;
    }), (d) => drawDecisions(decisions, d), { quiet }),
  ]);
  const refreshAll = () => refresh(true);
  ctx.refresh = refreshAll;
  // Of the run steps, only the policy gate's decisions are shown here.
  ctx.accept = (kind, event) => kind !== 'run_step' || event?.data?.kind === 'decision';
  await refresh(false);
}

function actionText(action) {
  if (action == null) return '';
  return typeof action === 'string' ? action : JSON.stringify(action, null, 2);
}

function drawPending(box, items, refresh) {
  if (!items.length) {
    append(box, empty('Nothing waiting for you. When an agent wants to do something risky, it shows up here.'));
    return;
  }
  append(box, items.map((a) => approvalCard(a, refresh, el('div', null, pageShot(a), kv([
    ['Agent', el('a', { href: `#/agents/${enc(a.agent)}` }, a.agent)],
    // Studio and Telegram conversations open in Chat; others are named only.
    ['Conversation', /^(studio|tg):/.test(a.chat ?? '')
      ? el('a', { href: `#/chat/${enc(a.agent)}?chat=${enc(a.chat)}` }, a.chat_label ?? a.chat)
      : a.chat_label ?? a.chat],
    ['Requested', when(a.requested_ms)],
    ['Run', a.run_id != null ? el('a', { href: `#/runs/${enc(a.run_id)}` }, `#${a.run_id}`) : null],
  ])))));
}

// The page a browser approval is about, as the agent's browser showed it when it asked; the
// picture opens full size. Loaded from the approval's own route (never a path from the request).
function pageShot(a) {
  if (!a.screenshot) return null;
  const src = `/api/v1/approvals/${enc(a.id)}/screenshot`;
  return el('figure', { class: 'approval-shot', 'data-screenshot': a.id },
    el('a', { href: src, target: '_blank', rel: 'noopener', title: 'Open the screenshot full size' },
      el('img', { src, alt: `The page ${a.agent}'s browser is on`, loading: 'lazy' })),
    el('figcaption', { class: 'muted small' }, 'The page the agent is on, as its browser showed it. Click the picture to see it full size.'));
}

function riskTone(risk) {
  const r = String(risk).toLowerCase();
  return ['high', 'critical', 'destructive', 'l3'].includes(r) ? 'bad' : ['low', 'none', 'safe'].includes(r) ? 'idle' : 'warn';
}

function drawGrants(box, items, refresh) {
  const now = Date.now();
  const open = items.filter((g) => g.revoked_ms == null && (g.expires_ms == null || g.expires_ms > now));
  const live = open.filter((g) => (g.status ?? 'live') === 'live');
  const lapsed = open.filter((g) => g.status === 'lapsed');
  if (!open.length) {
    append(box, empty('No active grants. “Allow exactly this for 30 min” on a request lets exactly that action — the same tool with the same arguments, character for character — run again in its chat without asking, for 30 minutes or until something else writes in the agent’s workspace.'));
    return;
  }
  const revoke = (g, text) => el('button', { type: 'button', class: 'danger', 'data-action': 'revoke', onclick: async (e) => {
    if (await act(e.currentTarget, () => api(`/api/v1/grants/${enc(g.id)}/revoke`, { method: 'POST' }), 'Grant revoked.')) refresh();
  } }, text);
  append(box, el('p', { class: 'muted small' }, 'Each grant lets exactly one action (the same tool with the same arguments, character for character) run again in its chat without asking, until it expires — or until something else writes in the agent’s workspace: then it lapses and the action asks again. Anything else still asks.'));
  if (live.length) {
    append(box, table([
      { label: 'Agent', cell: (g) => g.agent },
      { label: 'Tool', cell: (g) => g.tool },
      { label: 'Exactly this action', cell: (g) => (g.target ? code(g.target) : '—') },
      { label: 'Chat', cell: (g) => g.chat ?? 'any' },
      { label: 'Expires', cell: (g) => expires(g.expires_ms) },
      { label: 'By', cell: (g) => g.created_by ?? '—' },
      { label: '', cell: (g) => revoke(g, 'Revoke') },
    ], live, (g) => ({ 'data-grant': g.id, 'data-grant-status': 'live' })));
  } else {
    append(box, empty('No grant applies right now.'));
  }
  if (lapsed.length) {
    append(box, el('h3', null, 'Lapsed grants'),
      el('p', { class: 'muted small' }, 'These no longer apply: something wrote in the agent’s workspace after they were given, '
        + 'and a changed file could change what the action does. The same action asks you again.'),
      table([
        { label: 'Agent', cell: (g) => g.agent },
        { label: 'Exactly this action', cell: (g) => (g.target ? code(g.target) : '—') },
        { label: 'Status', cell: () => badge('warn', 'lapsed') },
        { label: 'Why', cell: (g) => g.lapsed_reason ?? 'something wrote in the workspace after it was given' },
        { label: 'Lapsed', cell: (g) => when(g.lapsed_ms) },
        { label: '', cell: (g) => revoke(g, 'Remove') },
      ], lapsed, (g) => ({ 'data-grant': g.id, 'data-grant-status': 'lapsed' })));
  }
}

function drawDecided(box, items) {
  const done = items.filter((a) => a.status !== 'pending');
  if (!done.length) { append(box, empty('No decisions yet.')); return; }
  append(box, table([
    { label: 'When', cell: (a) => when(a.decided_ms ?? a.requested_ms) },
    { label: 'What the agent wanted', cell: (a) => a.summary ?? `${a.agent}: ${a.tool}` },
    { label: 'Exactly', cell: (a) => el('code', { title: actionText(a.action) }, actionText(a.action).slice(0, 80)) },
    { label: 'Outcome', cell: (a) => badge(outcomeTone(a.status), a.outcome ?? a.status) },
    { label: 'By', cell: (a) => a.decided_by ?? '—' },
  ], done, (a) => ({ 'data-decided-approval': a.id })));
}

function outcomeTone(status) {
  return status === 'consumed' || status === 'approved' ? 'ok' : status === 'pending' ? 'warn' : 'bad';
}

function drawDecisions(box, d) {
  if (d.missing) { append(box, el('p', { class: 'muted small' }, 'Policy decisions are not available from this daemon.')); return; }
  const items = d.decisions || [];
  if (!items.length) { append(box, empty('No policy decisions recorded yet.')); return; }
  append(box, table([
    { label: 'When', cell: (d) => when(d.at_ms) },
    { label: 'Agent', cell: (d) => d.agent },
    { label: 'Tool', cell: (d) => d.tool },
    { label: 'Decision', cell: (d) => badge(d.decision, { allow: 'allowed', require_approval: 'asked a person', deny: 'refused' }[d.decision] ?? d.decision) },
    { label: 'Risk', cell: (d) => (d.risk != null ? badge(riskTone(d.risk), d.risk) : '—') },
    { label: 'Reason', cell: (d) => d.reason ?? '' },
    { label: 'Run', cell: (d) => (d.run_id != null ? el('a', { href: `#/runs/${enc(d.run_id)}` }, `#${d.run_id}`) : '—') },
  ], items));
}
