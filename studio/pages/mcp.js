// mcp.js — MCP tool servers: state, transport, trust, latency, restarts, last error and the tools
// each one offers. Refreshes on mcp_health events.
import { api, load, el, append, badge, num, empty, kv } from '/app.js';

export const events = ['mcp_health'];

export async function render(root, ctx) {
  const box = el('div');
  append(root, el('h1', null, 'MCP servers'), box);
  const refresh = (quiet) => load(box, () => api('/api/v1/mcp'), (d) => draw(box, d.servers || []), { root, quiet });
  ctx.refresh = () => refresh(true);
  return refresh(false);
}

function draw(box, servers) {
  if (!servers.length) {
    append(box, empty('No MCP servers — add [[mcp.servers]] to config/clawvisor.toml'));
    return;
  }
  append(box, servers.map((s) => el('div', { class: 'card', 'data-server': s.server, 'data-state': s.state },
    el('div', { class: 'row spread' }, el('h3', null, s.server), badge(s.state)),
    kv([
      ['Transport', s.transport], ['Trust', s.trust],
      ['Latency', s.last_latency_ms != null ? `${num(s.last_latency_ms)} ms` : '—'],
      ['Restarts', num(s.restarts ?? 0)],
      ['Tools', s.tools?.length ? s.tools.map((t) => el('span', { class: 'chip' }, t)) : 'none listed yet'],
    ]),
    s.last_error && el('div', { class: 'small' }, el('strong', null, 'Last error: '), el('pre', { class: 'field-error' }, s.last_error)))));
}
