// The page as text with numbered references, run in clawvisor's isolated world (the page's own
// scripts cannot see or change `globalThis.__clawvisorRefs`). Returns a JSON string:
// {title, url, text, cut, refs: [{n, role, label, submits, password, href}]}.
(function (maxChars) {
  const refs = [];
  globalThis.__clawvisorRefs = refs;
  const lines = [];
  let size = 0;
  let cut = false;
  let line = "";
  const push = (text) => {
    if (cut) return;
    if (size + text.length + 1 > maxChars) { cut = true; return; }
    lines.push(text);
    size += text.length + 1;
  };
  const flush = () => {
    const text = line.replace(/\s+/g, " ").trim();
    if (text) push(text);
    line = "";
  };
  const clean = (text, max) => {
    text = String(text || "").replace(/\s+/g, " ").trim();
    return text.length > max ? text.slice(0, max) + "…" : text;
  };
  const SKIP = new Set(["SCRIPT", "STYLE", "NOSCRIPT", "TEMPLATE", "SVG", "HEAD", "META", "LINK", "IFRAME"]);
  const BLOCK = new Set(["P", "DIV", "LI", "UL", "OL", "TR", "TABLE", "SECTION", "ARTICLE", "HEADER",
    "FOOTER", "NAV", "MAIN", "ASIDE", "FORM", "FIELDSET", "BR", "HR", "DL", "DT", "DD", "PRE",
    "BLOCKQUOTE", "FIGURE", "FIGCAPTION", "LABEL"]);
  const TEXTUAL = new Set(["text", "email", "search", "url", "tel", "number", "password", "date",
    "datetime-local", "month", "week", "time", ""]);
  const visible = (el) => {
    const style = getComputedStyle(el);
    if (style.display === "none" || style.visibility === "hidden") return false;
    if (el.hidden) return false;
    const rect = el.getBoundingClientRect();
    return rect.width > 0 || rect.height > 0 || style.display === "contents";
  };
  const roleOf = (el) => {
    const tag = el.tagName;
    const type = (el.getAttribute("type") || "").toLowerCase();
    const role = (el.getAttribute("role") || "").toLowerCase();
    if (tag === "A" && el.hasAttribute("href")) return "link";
    if (tag === "BUTTON" || tag === "SUMMARY") return "button";
    if (tag === "INPUT") {
      if (type === "hidden") return null;
      if (["submit", "button", "reset", "image"].includes(type)) return "button";
      if (type === "checkbox") return "checkbox";
      if (type === "radio") return "radio";
      if (type === "file") return "file";
      if (TEXTUAL.has(type)) return "field";
      return "field";
    }
    if (tag === "TEXTAREA") return "field";
    if (tag === "SELECT") return "select";
    if (["button", "link", "checkbox", "radio", "tab", "menuitem", "option", "switch"].includes(role)) return role;
    if (role === "textbox" || el.isContentEditable && el.getAttribute("contenteditable") !== null) return "field";
    if (el.hasAttribute("onclick")) return "button";
    return null;
  };
  const labelOf = (el) => {
    const aria = el.getAttribute("aria-label");
    if (aria) return clean(aria, 120);
    const by = el.getAttribute("aria-labelledby");
    if (by) {
      const text = by.split(/\s+/).map((id) => document.getElementById(id)).filter(Boolean)
        .map((node) => node.innerText).join(" ");
      if (text.trim()) return clean(text, 120);
    }
    if (el.labels && el.labels.length) return clean(Array.from(el.labels).map((l) => l.innerText).join(" "), 120);
    if (el.tagName === "INPUT" && ["submit", "button", "reset"].includes((el.type || "").toLowerCase())) {
      return clean(el.value || el.type, 120);
    }
    const own = el.tagName === "SELECT" || el.tagName === "TEXTAREA" || el.tagName === "INPUT" ? "" : el.innerText;
    return clean(own || el.getAttribute("placeholder") || el.getAttribute("title") ||
      el.getAttribute("alt") || el.getAttribute("name") || "", 120);
  };
  const submits = (el) => {
    const tag = el.tagName;
    const type = (el.getAttribute("type") || "").toLowerCase();
    if (tag === "BUTTON") return !!el.form && (type === "" || type === "submit");
    if (tag === "INPUT") return !!el.form && (type === "submit" || type === "image");
    return false;
  };
  const describe = (el, role, n) => {
    const label = labelOf(el);
    let text = `[${n}] ${role} "${label}"`;
    const info = { n, role, label, submits: submits(el), password: false, href: "" };
    if (role === "link") {
      info.href = el.href || "";
      text += ` -> ${clean(el.getAttribute("href"), 160)}`;
    } else if (role === "field") {
      const type = (el.getAttribute("type") || "text").toLowerCase();
      if (type === "password") {
        info.password = true;
        text += el.value ? " (password, filled)" : " (password)";
      } else {
        if (type !== "text") text += ` (${type})`;
        const value = el.isContentEditable ? el.innerText : el.value;
        if (value) text += ` = "${clean(value, 80)}"`;
      }
    } else if (role === "checkbox" || role === "radio") {
      text += el.checked ? " (checked)" : " (not checked)";
    } else if (role === "select") {
      const options = Array.from(el.options || []).slice(0, 30)
        .map((option) => (option.selected ? "*" : "") + clean(option.label || option.text, 40));
      text += ` options: ${options.join(" | ")}`;
    } else if (info.submits) {
      text += " (submits the form)";
    }
    if (el.disabled) text += " (disabled)";
    return [text, info];
  };
  const walk = (node) => {
    if (cut) return;
    if (node.nodeType === Node.TEXT_NODE) {
      line += node.textContent;
      return;
    }
    if (node.nodeType !== Node.ELEMENT_NODE) return;
    const el = node;
    if (SKIP.has(el.tagName.toUpperCase())) return;
    if (!visible(el)) return;
    const role = roleOf(el);
    if (role) {
      refs.push(el);
      const [text, info] = describe(el, role, refs.length);
      flush();
      push(text);
      infos.push(info);
      return;
    }
    const heading = /^H([1-6])$/.exec(el.tagName);
    if (heading) {
      flush();
      line = "#".repeat(Number(heading[1])) + " ";
    } else if (BLOCK.has(el.tagName)) {
      flush();
    }
    for (const child of el.shadowRoot ? el.shadowRoot.childNodes : el.childNodes) walk(child);
    if (heading || BLOCK.has(el.tagName)) flush();
  };
  const infos = [];
  if (document.body) walk(document.body);
  flush();
  return JSON.stringify({
    title: document.title,
    url: location.href,
    text: lines.join("\n"),
    cut,
    refs: infos,
  });
})
