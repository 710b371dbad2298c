// approvals.js — the operator's inbox: pending approvals (exact action in a monospace block, agent,
// tool, risk, reason, expiry countdown) with Approve / Deny / Approve for 30 min; below, recently
// decided approvals, active grants (with Revoke) and recent policy decisions. Refreshes on approval_*,
// policy_changed (a grant revoked or a rule changed elsewhere) and decision steps of runs.
import { api, load, el, append, enc, badge, when, expires, empty, table, kv, act, code, toast } from '/app.js';

export const events = ['approval_requested', 'approval_decided', 'policy_changed', 'run_step'];

export async function render(root, ctx) {
  const pending = el('div');
  const decided = el('div');
  const grants = el('div');
  const decisions = el('div');
  append(root, el('h1', null, 'Approvals'), pending,
    el('h2', null, 'Active grants'), grants,
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
  append(box, items.map((a) => {
    const buttons = el('div', { class: 'row buttons' });
    const decide = (decision, minutes, label) => el('button', {
      type: 'button', 'data-action': minutes ? 'approve-30' : decision,
      class: decision === 'approve' ? (minutes ? '' : 'good') : 'danger',
      onclick: async () => {
        const setAll = (off) => { for (const b of buttons.querySelectorAll('button')) b.disabled = off; };
        setAll(true);
        try {
          const body = minutes ? { decision, grant_minutes: minutes } : { decision };
          const result = await api(`/api/v1/approvals/${enc(a.id)}/decision`, { method: 'POST', body });
          toast(`${decision === 'approve' ? 'Approved' : 'Denied'}: ${a.tool} for ${a.agent}${minutes ? ` (allowed for ${minutes} min)` : ''}.`);
          card.setAttribute('data-decided', result.status || decision);
          refresh();
        } catch (err) {
          toast(err.message, 'bad');
          setAll(false);
        }
      },
    }, label);
    buttons.append(decide('approve', 0, 'Approve'), decide('deny', 0, 'Deny'), decide('approve', 30, 'Approve for 30 min'));
    const card = el('div', { class: 'card approval', 'data-approval': a.id },
      el('div', { class: 'row spread' },
        el('div', { class: 'row' }, el('strong', null, a.tool), a.risk && badge(riskTone(a.risk), `risk: ${a.risk}`)),
        expires(a.expires_ms)),
      el('pre', { class: 'action-block' }, actionText(a.action)),
      kv([
        ['Agent', el('a', { href: `#/agents/${enc(a.agent)}` }, a.agent)],
        ['Chat', a.chat ? code(a.chat) : null], ['Target', a.target ? code(a.target) : null],
        ['Reason', a.reason], ['Requested', when(a.requested_ms)],
        ['Run', a.run_id != null ? el('a', { href: `#/runs/${enc(a.run_id)}` }, `#${a.run_id}`) : null],
      ]),
      buttons);
    return card;
  }));
}

function riskTone(risk) {
  const r = String(risk).toLowerCase();
  return ['high', 'critical', 'destructive'].includes(r) ? 'bad' : ['low', 'none', 'safe'].includes(r) ? 'idle' : 'warn';
}

function drawGrants(box, items, refresh) {
  const live = items.filter((g) => g.revoked_ms == null && (g.expires_ms == null || g.expires_ms > Date.now()));
  if (!live.length) {
    append(box, empty('No active grants. "Approve for 30 min" lets an agent repeat the same kind of action without asking again.'));
    return;
  }
  append(box, table([
    { label: 'Agent', cell: (g) => g.agent },
    { label: 'Tool', cell: (g) => g.tool },
    { label: 'Target', cell: (g) => (g.target ? code(g.target) : 'any') },
    { label: 'Chat', cell: (g) => g.chat ?? 'any' },
    { label: 'Expires', cell: (g) => expires(g.expires_ms) },
    { label: 'By', cell: (g) => g.created_by ?? '—' },
    { label: '', cell: (g) => el('button', { type: 'button', class: 'danger', 'data-action': 'revoke', onclick: async (e) => {
      if (await act(e.currentTarget, () => api(`/api/v1/grants/${enc(g.id)}/revoke`, { method: 'POST' }), 'Grant revoked.')) refresh();
    } }, 'Revoke') },
  ], live, (g) => ({ 'data-grant': g.id })));
}

function drawDecided(box, items) {
  const done = items.filter((a) => a.status !== 'pending');
  if (!done.length) { append(box, empty('No decisions yet.')); return; }
  append(box, table([
    { label: 'When', cell: (a) => when(a.decided_ms ?? a.requested_ms) },
    { label: 'Agent', cell: (a) => a.agent },
    { label: 'Tool', cell: (a) => a.tool },
    { label: 'Action', cell: (a) => el('code', { title: actionText(a.action) }, actionText(a.action).slice(0, 80)) },
    { label: 'Outcome', cell: (a) => badge(a.status) },
    { label: 'By', cell: (a) => a.decided_by ?? '—' },
  ], done, (a) => ({ 'data-decided-approval': a.id })));
}

function drawDecisions(box, d) {
  if (d.missing) { append(box, el('p', { class: 'muted small' }, 'Policy decisions are not available from this daemon.')); return; }
  const items = d.decisions || [];
  if (!items.length) { append(box, empty('No policy decisions recorded yet.')); return; }
  append(box, table([
    { label: 'When', cell: (d) => when(d.at_ms) },
    { label: 'Agent', cell: (d) => d.agent },
    { label: 'Tool', cell: (d) => d.tool },
    { label: 'Decision', cell: (d) => badge(d.decision) },
    { label: 'Risk', cell: (d) => (d.risk != null ? badge(riskTone(d.risk), d.risk) : '—') },
    { label: 'Reason', cell: (d) => d.reason ?? '' },
    { label: 'Run', cell: (d) => (d.run_id != null ? el('a', { href: `#/runs/${enc(d.run_id)}` }, `#${d.run_id}`) : '—') },
  ], items));
}
