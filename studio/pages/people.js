// people.js — who talks to each agent: an unclaimed bot's claim code (the first person to send
// /start <code> to the bot becomes its owner), pending pairing requests with Approve / Deny /
// Block, the owner and paired people with Revoke / Block, blocked people with Unblock (they get no
// answer at all), a form to block anyone by Telegram id, and the people the agent file names
// (managed in the file, not here); an agent's WhatsApp account (its claim code, pending pairing
// requests with Approve / Deny, its people, the messages held outside WhatsApp's 24-hour window)
// and Signal account (its claim code, pending pairing requests, its people, its message stream's
// last news). Refreshes on people_changed, on a bot's pairing requests and on
// a Signal account's status.
import { api, load, el, append, enc, badge, when, expires, empty, act, code, toast } from '/app.js';

export const events = ['people_changed', 'bot_status'];

export async function render(root, ctx) {
  const box = el('div');
  append(root, el('h1', null, 'People'),
    el('p', { class: 'muted small' }, 'Who may talk to each agent through its Telegram bot, WhatsApp or Signal number. Changes apply to the next message.'),
    box);
  const refresh = (quiet) => load(box, () => api('/api/v1/people'), (d) => draw(box, d, () => refresh(true)), { root, quiet });
  ctx.refresh = () => refresh(true);
  // Of the bots' status events, a new pairing request and a Signal account's stream news change this page.
  ctx.accept = (kind, event) => kind !== 'bot_status' || event?.data?.state === 'pairing_requested'
    || String(event?.subject || '').startsWith('channel:sg:');
  await refresh(false);
}

function draw(box, data, refresh) {
  const agents = data.agents || [];
  if (!agents.length) { append(box, empty('No agents are configured.')); return; }
  append(box, agents.map((a) => agentCard(a, refresh)));
  if (data.note) append(box, el('p', { class: 'muted small' }, data.note));
}

function claimBlock(claim) {
  switch (claim?.state) {
    case 'unclaimed':
      return el('div', { class: 'hint', 'data-claim': 'unclaimed' },
        el('p', { style: 'margin:0 0 .3rem' }, el('strong', null, 'This bot is unclaimed. '),
          'The first person to send this to the bot in a private chat becomes its owner (and approver):'),
        el('p', { style: 'margin:0' }, el('code', { 'data-claim-code': claim.code }, `/start ${claim.code}`), ' ',
          el('span', { class: 'muted small' }, expires(claim.expires_ms))),
        el('p', { class: 'muted small', style: 'margin:.3rem 0 0' }, 'Keep it private: whoever sends it first owns the bot. It works once.'));
    case 'claimed':
      return el('p', { 'data-claim': 'claimed' }, 'Claimed by ', el('strong', null, claim.owner?.name ?? '?'),
        ` (${claim.owner?.user_id}) `, when(claim.claimed_ms), '.');
    case 'managed_by_file':
      return el('p', { class: 'muted small', 'data-claim': 'file' }, 'The agent file names who may talk to this bot.');
    case 'renewing':
      return el('p', { class: 'muted small', 'data-claim': 'renewing' }, 'The claim code expired or was used; the bot makes a new one within a minute.');
    case 'waiting_for_bot':
      return el('p', { class: 'muted small', 'data-claim': 'waiting' }, 'A claim code is made when the bot comes online.');
    default:
      return el('p', { class: 'muted small', 'data-claim': 'no-bot' }, 'No Telegram bot: nobody to pair.');
  }
}

// Someone new who wrote to a WhatsApp or Signal number got a code; the operator lets them in or
// turns them down here (as an approver can by replying "pair <code>" / "deny <code>" there).
function seamPending(prefix, pending, shown, agent, refresh) {
  if (!pending.length) {
    return el('p', { class: 'muted small', [`data-${prefix}-pairings`]: 0 },
      'No one is waiting. Someone new who writes to this number gets a code, and their request shows here.');
  }
  const decide = (r, op, done) => el('button', { type: 'button', class: op === 'approve' ? 'good' : '', 'data-action': op,
    onclick: async (e) => { if (await act(e.currentTarget, () => api(`/api/v1/channel-pairings/${enc(r.code)}/${op}`, { method: 'POST' }), done)) refresh(); } },
    op === 'approve' ? 'Approve' : 'Deny');
  return el('div', { class: 'hint', [`data-${prefix}-pairings`]: pending.length },
    el('p', { style: 'margin:0 0 .3rem' }, el('strong', null, pending.length === 1 ? 'Someone new is waiting. ' : `${pending.length} new people are waiting. `),
      'They got a code and no answer yet. Approve to let them talk to the agent, or deny (they get no answer until the code expires).'),
    pending.map((r) => el('div', { class: 'row spread person', [`data-${prefix}-pairing`]: r.code },
      el('div', null, el('strong', null, r.name || shown(r.number)), ` (${shown(r.number)}) `,
        el('span', { class: 'muted small' }, el('span', { style: 'white-space:nowrap' }, 'code ', code(r.display)), ' · ', expires(r.expires_ms))),
      el('div', { class: 'row buttons' },
        decide(r, 'approve', `${r.name || shown(r.number)} can talk to ${agent} now.`),
        decide(r, 'deny', `Denied ${r.name || shown(r.number)}: no answer until the code expires.`)))),
    el('p', { class: 'muted small', style: 'margin:.3rem 0 0' }, 'Approvers can also reply "pair <code>" or "deny <code>" to the number.'));
}

// An agent's WhatsApp number: who may write to it, its claim code while nobody owns it, and the
// messages waiting because the person has not written in the last 24 hours.
function whatsappBlock(w, agent, refresh) {
  if (!w?.account) return null;
  const claim = w.claim || {};
  const people = w.people || [];
  const fromFile = w.from_file || [];
  const held = w.held || [];
  return el('div', { 'data-whatsapp': w.phone_number_id },
    el('h4', null, 'WhatsApp'),
    claim.state === 'unclaimed'
      ? el('div', { class: 'hint', 'data-wa-claim': 'unclaimed' },
        el('p', { style: 'margin:0 0 .3rem' }, el('strong', null, 'Nobody owns this WhatsApp number yet. '),
          'The first person to send this code to it becomes its owner (and approver):'),
        el('p', { style: 'margin:0' }, el('code', { 'data-wa-claim-code': claim.code }, claim.code), ' ',
          el('span', { class: 'muted small' }, expires(claim.expires_ms))),
        el('p', { class: 'muted small', style: 'margin:.3rem 0 0' }, 'Keep it private: it works once.'))
      : claim.state === 'claimed'
        ? el('p', { 'data-wa-claim': 'claimed' }, 'Owned by ', el('strong', null, claim.owner?.name ?? '?'), ` (+${claim.owner?.number}) `, when(claim.claimed_ms), '.')
        : claim.state === 'managed_by_file'
          ? el('p', { class: 'muted small', 'data-wa-claim': 'file' }, 'The agent file names who may write to this number.')
          : el('p', { class: 'muted small', 'data-wa-claim': 'waiting' }, 'A claim code is made when the number comes online.'),
    fromFile.map((p) => el('div', { class: 'row person', 'data-wa-file-person': p.number },
      el('strong', null, `+${p.number}`), p.approver && badge('ok', 'approver'))),
    people.filter((p) => p.status !== 'owner').map((p) => el('div', { class: 'row person', 'data-wa-person': p.number },
      el('strong', null, p.name), ` (+${p.number}) `, badge(p.status === 'blocked' ? 'bad' : 'ok', p.status))),
    claim.state !== 'unclaimed' && seamPending('wa', w.pending || [], (n) => `+${n}`, agent, refresh),
    held.length > 0 && el('div', { class: 'hint', 'data-wa-held': held.length },
      el('p', { style: 'margin:0' }, el('strong', null, held.length === 1 ? 'One message is waiting. ' : `${held.length} messages are waiting. `),
        'WhatsApp lets the agent write only within 24 hours of the person\'s last message. ',
        held.length === 1 ? 'It is sent as soon as the person writes again; to send it now, set a message template in the agent file.'
          : 'They are sent as soon as each person writes again; to send them now, set a message template in the agent file.'),
      held.map((h) => el('p', { class: 'muted small', style: 'margin:.2rem 0 0' }, `To +${h.chat.replace(/^wa:/, '')}, held `, when(h.held_ms)))),
    el('details', null, el('summary', { class: 'muted small' }, 'Technical detail'),
      el('p', { class: 'muted small' }, `Phone number id ${w.phone_number_id}. Meta delivers messages to /hooks/whatsapp on this server (signed with the app secret).`)));
}

// An agent's Signal number: who may write to it, its claim code while nobody owns it, and how its
// message stream is doing (a drop is said in words, with what happens to messages meanwhile).
function signalBlock(s, agent, refresh) {
  if (!s?.account) return null;
  const claim = s.claim || {};
  const fromFile = s.from_file || [];
  const people = s.people || [];
  const stream = s.stream;
  return el('div', { 'data-signal': s.number },
    el('h4', null, 'Signal'),
    claim.state === 'unclaimed'
      ? el('div', { class: 'hint', 'data-sg-claim': 'unclaimed' },
        el('p', { style: 'margin:0 0 .3rem' }, el('strong', null, 'Nobody owns this Signal number yet. '),
          'The first person to send this code to it becomes its owner (and approver):'),
        el('p', { style: 'margin:0' }, el('code', { 'data-sg-claim-code': claim.code }, claim.code), ' ',
          el('span', { class: 'muted small' }, expires(claim.expires_ms))),
        el('p', { class: 'muted small', style: 'margin:.3rem 0 0' }, 'Keep it private: it works once.'))
      : claim.state === 'claimed'
        ? el('p', { 'data-sg-claim': 'claimed' }, 'Owned by ', el('strong', null, claim.owner?.name || '?'), ` (${claim.owner?.number}) `, when(claim.claimed_ms), '.')
        : claim.state === 'managed_by_file'
          ? el('p', { class: 'muted small', 'data-sg-claim': 'file' }, 'The agent file names who may write to this number.')
          : el('p', { class: 'muted small', 'data-sg-claim': 'waiting' }, 'A claim code is made when the number comes online.'),
    stream && el(stream.dropped ? 'div' : 'p', { class: stream.dropped ? 'hint' : 'muted small', 'data-sg-stream': stream.dropped ? 'dropped' : 'ok' },
      stream.dropped ? el('strong', null, 'Signal is not connected right now. ') : null, stream.detail, ' ', el('span', { class: 'muted small' }, when(stream.at_ms))),
    fromFile.map((p) => el('div', { class: 'row person', 'data-sg-file-person': p.number },
      el('strong', null, p.number), p.approver && badge('ok', 'approver'))),
    people.filter((p) => p.status !== 'owner').map((p) => el('div', { class: 'row person', 'data-sg-person': p.number },
      el('strong', null, p.name || p.number), ` (${p.number}) `, badge(p.status === 'blocked' ? 'bad' : 'ok', p.status))),
    claim.state !== 'unclaimed' && seamPending('sg', s.pending || [], (n) => n, agent, refresh),
    el('details', null, el('summary', { class: 'muted small' }, 'Technical detail'),
      el('p', { class: 'muted small' }, `Number ${s.number}. clawvisor reads signal-cli's message stream and sends with its JSON-RPC; approvals are answered in words ("yes <id>" / "no <id>").`)));
}

function agentCard(a, refresh) {
  // A button that makes a change and then redraws (the change's event would too, a little later).
  const button = (label, action, cls, run, done) => el('button', { type: 'button', class: cls, 'data-action': action,
    onclick: async (e) => { if (await act(e.currentTarget, run, done)) refresh(); } }, label);
  const pending = a.pending || [];
  const people = a.people || [];
  const fromFile = a.from_file || [];
  const change = (p, op) => () => api(`/api/v1/people/${enc(a.agent)}/${enc(p.user_id)}/${op}`, { method: 'POST' });
  const blockId = el('input', { type: 'text', inputmode: 'numeric', placeholder: 'Telegram user id', 'aria-label': 'Telegram user id', name: 'block-id', size: 14 });
  return el('div', { class: 'card', 'data-people-agent': a.agent },
    el('div', { class: 'row spread' }, el('h3', null, a.agent), a.bot ? badge(a.claim?.state === 'unclaimed' ? 'warn' : 'ok', a.claim?.state === 'unclaimed' ? 'unclaimed' : 'bot')
      : a.whatsapp?.account ? badge('ok', 'WhatsApp') : a.signal?.account ? badge('ok', 'Signal') : badge('idle', 'no bot')),
    !a.bot && (a.whatsapp?.account || a.signal?.account)
      ? el('p', { class: 'muted small', 'data-claim': 'no-bot' }, `No Telegram bot: this agent talks on ${[a.whatsapp?.account && 'WhatsApp', a.signal?.account && 'Signal'].filter(Boolean).join(' and ')}.`)
      : claimBlock(a.claim),
    a.bot && [
      el('h4', null, 'Waiting for approval'),
      pending.length ? pending.map((r) => el('div', { class: 'row spread person', 'data-pairing': r.code },
        el('div', null, el('strong', null, r.name), ` (${r.user_id}) `, el('span', { class: 'muted small' }, 'code ', code(r.display), ' · ', expires(r.expires_ms))),
        el('div', { class: 'row buttons' },
          button('Approve', 'approve', 'good', () => api(`/api/v1/pairings/${enc(r.code)}/approve`, { method: 'POST' }), `${r.name} can talk to ${a.agent} now.`),
          button('Deny', 'deny', '', () => api(`/api/v1/pairings/${enc(r.code)}/deny`, { method: 'POST' }), `Denied ${r.name}.`),
          button('Block', 'block', 'danger', change(r, 'block'), `Blocked ${r.name}: they get no answer.`))))
        : el('p', { class: 'muted small' }, 'No requests. Someone unknown who writes to the bot gets a code, and their request shows here.'),
      el('h4', null, 'People'),
      people.length ? people.map((p) => el('div', { class: 'row spread person', 'data-person': p.user_id, 'data-status': p.status },
        el('div', null, el('strong', null, p.name), ` (${p.user_id}) `, badge(p.status === 'blocked' ? 'bad' : 'ok', p.status), ' ',
          el('span', { class: 'muted small' }, when(p.changed_ms), p.changed_by ? ` · ${p.changed_by}` : '')),
        el('div', { class: 'row buttons' }, p.status === 'blocked'
          ? button('Unblock', 'unblock', '', change(p, 'unblock'), `Unblocked ${p.name}.`)
          : [button('Revoke', 'revoke', '', change(p, 'revoke'), `${p.name} no longer talks to ${a.agent}.`),
            button('Block', 'block', 'danger', change(p, 'block'), `Blocked ${p.name}: they get no answer.`)])))
        : el('p', { class: 'muted small' }, 'Nobody paired or blocked yet.'),
      el('form', { class: 'row', onsubmit: async (e) => {
        e.preventDefault();
        const id = blockId.value.trim();
        if (!/^[0-9]+$/.test(id)) { toast('A Telegram user id is a number.', 'bad'); return; }
        if (await act(e.submitter, change({ user_id: id }, 'block'), `Blocked ${id}: they get no answer.`)) { blockId.value = ''; refresh(); }
      } }, blockId, el('button', { type: 'submit', class: 'danger', 'data-action': 'block-id' }, 'Block by id')),
    ],
    whatsappBlock(a.whatsapp, a.agent, refresh),
    signalBlock(a.signal, a.agent, refresh),
    fromFile.length > 0 && [
      el('h4', null, 'From the agent file'),
      el('p', { class: 'muted small' }, 'Named in allow_users or approvers: not revocable here — edit the agent file.'),
      fromFile.map((p) => el('div', { class: 'row person', 'data-file-person': p.user_id },
        el('strong', null, p.name ?? `user ${p.user_id}`), ` (${p.user_id})`, p.approver && badge('ok', 'approver'))),
    ]);
}
