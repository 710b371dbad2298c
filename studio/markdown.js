// markdown.js — a small Markdown renderer for what agents write (Chat bubbles, a run's outcome).
// It builds DOM nodes itself: text only ever becomes text nodes (never HTML), so a `<script>` in an
// answer is shown as the characters it is. Links are made only for http(s) addresses (anything
// else — javascript:, data:, file: — stays plain text) and open in a new tab without a referrer.
//
// Blocks: paragraphs (single line breaks kept), # headings, ``` fenced code, - * + and 1. lists
// (one level), > quotes, --- rules, | pipe | tables |. Inline: `code`, **bold**, *italic* / _italic_,
// ~~strike~~, [text](https://…), bare https://… addresses, \-escapes.

const SAFE_URL = /^https?:\/\/[^\s<>"]+$/i;

/** The rendered Markdown of `text` in a <div class="md">. */
export function markdown(text, className = 'md') {
  const root = document.createElement('div');
  root.className = className;
  const source = String(text ?? '').replace(/\r\n?/g, '\n');
  for (const block of blocks(source.split('\n'))) root.append(block);
  return root;
}

/** One line of plain text from Markdown, for previews in lists: markers gone, links as their text. */
export function markdownPreview(text) {
  return String(text ?? '')
    .replace(/```[\s\S]*?(```|$)/g, ' ')
    .replace(/\[([^\]\n]+)\]\([^)\s]+\)/g, '$1')
    .replace(/^\s{0,3}(#{1,6}\s+|>\s?|[-*+]\s+|\d{1,9}[.)]\s+)/gm, '')
    .replace(/(\*\*|__|~~|`)/g, '')
    .replace(/\s+/g, ' ')
    .trim();
}

// ---------- blocks ----------

function* blocks(lines) {
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    if (!line.trim()) { i++; continue; }
    const fence = line.match(/^\s{0,3}(```+|~~~+)\s*([\w+-]*)\s*$/);
    if (fence) {
      const body = [];
      i++;
      while (i < lines.length && !lines[i].trim().startsWith(fence[1])) body.push(lines[i++]);
      i++; // the closing fence (or the end)
      const pre = node('pre', 'md-code');
      const code = node('code');
      if (fence[2]) code.dataset.lang = fence[2];
      code.textContent = body.join('\n');
      pre.append(code);
      yield pre;
      continue;
    }
    const heading = line.match(/^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$/);
    if (heading) {
      // Headings inside a message stay modest: h1..h6 become h3..h6.
      const h = node(`h${Math.min(6, heading[1].length + 2)}`);
      inline(h, heading[2]);
      yield h;
      i++;
      continue;
    }
    if (/^\s{0,3}([-*_])(\s*\1){2,}\s*$/.test(line)) { yield node('hr'); i++; continue; }
    if (/^\s{0,3}>/.test(line)) {
      const quoted = [];
      while (i < lines.length && /^\s{0,3}>/.test(lines[i])) quoted.push(lines[i++].replace(/^\s{0,3}>\s?/, ''));
      const quote = node('blockquote');
      for (const inner of blocks(quoted)) quote.append(inner);
      yield quote;
      continue;
    }
    const item = listItem(line);
    if (item) {
      const list = node(item.ordered ? 'ol' : 'ul');
      if (item.ordered && item.start !== 1) list.start = item.start;
      while (i < lines.length) {
        const next = listItem(lines[i]);
        if (next && next.ordered === item.ordered) {
          const li = node('li');
          inline(li, next.text);
          list.append(li);
          i++;
        } else if (lines[i].trim() && /^\s{2,}/.test(lines[i]) && list.lastChild) {
          list.lastChild.append(document.createElement('br'));
          inline(list.lastChild, lines[i].trim());
          i++;
        } else break;
      }
      yield list;
      continue;
    }
    if (isTableStart(lines, i)) {
      const [table, used] = tableAt(lines, i);
      yield table;
      i += used;
      continue;
    }
    const para = [];
    while (i < lines.length && lines[i].trim() && !startsBlock(lines, i)) para.push(lines[i++]);
    if (!para.length) para.push(lines[i++]); // a line that starts a block we could not read
    const p = node('p');
    para.forEach((text, index) => {
      if (index) p.append(document.createElement('br'));
      inline(p, text.trim());
    });
    yield p;
  }
}

function listItem(line) {
  const bullet = line.match(/^\s{0,3}[-*+]\s+(.*)$/);
  if (bullet) return { ordered: false, text: bullet[1] };
  const numbered = line.match(/^\s{0,3}(\d{1,9})[.)]\s+(.*)$/);
  if (numbered) return { ordered: true, start: Number(numbered[1]), text: numbered[2] };
  return null;
}

function startsBlock(lines, i) {
  const line = lines[i];
  return /^\s{0,3}(```|~~~|#{1,6}\s|>)/.test(line) || listItem(line) != null
    || /^\s{0,3}([-*_])(\s*\1){2,}\s*$/.test(line) || isTableStart(lines, i);
}

const cells = (line) => line.trim().replace(/^\|/, '').replace(/\|$/, '').split('|').map((c) => c.trim());

function isTableStart(lines, i) {
  return /^\s*\|.*\|\s*$/.test(lines[i] || '') && /^\s*\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$/.test(lines[i + 1] || '');
}

function tableAt(lines, start) {
  const wrap = node('div', 'md-table');
  const table = node('table');
  const head = node('tr');
  for (const cell of cells(lines[start])) { const th = node('th'); inline(th, cell); head.append(th); }
  const thead = node('thead');
  thead.append(head);
  const tbody = node('tbody');
  let i = start + 2;
  while (i < lines.length && /^\s*\|.*\|\s*$/.test(lines[i])) {
    const row = node('tr');
    for (const cell of cells(lines[i])) { const td = node('td'); inline(td, cell); row.append(td); }
    tbody.append(row);
    i++;
  }
  table.append(thead, tbody);
  wrap.append(table);
  return [wrap, i - start];
}

// ---------- inline ----------

/** Appends the inline Markdown of `text` to `parent`, as text nodes and a few safe elements. */
function inline(parent, text) {
  let plain = '';
  const flush = () => { if (plain) { parent.append(document.createTextNode(plain)); plain = ''; } };
  let i = 0;
  while (i < text.length) {
    const c = text[i];
    const rest = text.slice(i);
    if (c === '\\' && i + 1 < text.length && /[\\`*_~[\]()#>!|-]/.test(text[i + 1])) {
      plain += text[i + 1];
      i += 2;
      continue;
    }
    if (c === '`') {
      const ticks = rest.match(/^`+/)[0];
      const end = text.indexOf(ticks, i + ticks.length);
      if (end > 0) {
        flush();
        const code = node('code');
        code.textContent = text.slice(i + ticks.length, end).replace(/^ (.+) $/, '$1');
        parent.append(code);
        i = end + ticks.length;
        continue;
      }
    }
    const wrapped = emphasis(text, i);
    if (wrapped) {
      flush();
      const element = node(wrapped.tag);
      inline(element, wrapped.inner);
      parent.append(element);
      i = wrapped.end;
      continue;
    }
    if (c === '[') {
      const link = rest.match(/^\[([^\]\n]+)\]\(\s*([^)\s]+)\s*\)/);
      if (link) {
        flush();
        if (SAFE_URL.test(link[2])) parent.append(anchor(link[2], link[1]));
        else inline(parent, link[1]); // not a web address: its text only
        i += link[0].length;
        continue;
      }
    }
    if ((c === 'h' || c === 'H') && /^https?:\/\//i.test(rest) && (i === 0 || /[\s(<]/.test(text[i - 1]))) {
      let url = rest.match(/^[^\s<>"]+/)[0];
      url = url.replace(/[.,;:!?)\]'"]+$/, '');
      if (SAFE_URL.test(url)) {
        flush();
        parent.append(anchor(url));
        i += url.length;
        continue;
      }
    }
    plain += c;
    i++;
  }
  flush();
}

/** `**x**`, `__x__`, `*x*`, `_x_`, `~~x~~` starting at `i`: { tag, inner, end } or null. */
function emphasis(text, i) {
  for (const [mark, tag] of [['**', 'strong'], ['__', 'strong'], ['~~', 'del'], ['*', 'em'], ['_', 'em']]) {
    if (!text.startsWith(mark, i)) continue;
    const open = i + mark.length;
    if (open >= text.length || /\s/.test(text[open])) continue;
    // `_` only at a word's edge, so snake_case_names stay as they are.
    if (mark[0] === '_' && i > 0 && /\w/.test(text[i - 1])) continue;
    let end = text.indexOf(mark, open + 1);
    while (end > 0) {
      const closes = !/\s/.test(text[end - 1]) && !(mark.length === 1 && text[end + 1] === mark)
        && !(mark[0] === '_' && /\w/.test(text[end + mark.length] || ''));
      if (closes) return { tag, inner: text.slice(open, end), end: end + mark.length };
      end = text.indexOf(mark, end + 1);
    }
  }
  return null;
}

function anchor(url, label) {
  const a = node('a');
  a.href = url;
  a.target = '_blank';
  a.rel = 'noopener noreferrer nofollow';
  a.textContent = label ?? url;
  return a;
}

function node(tag, className) {
  const element = document.createElement(tag);
  if (className) element.className = className;
  return element;
}
