// acp-kernel: the turn widget's (turn.js) helpers: tool call rows, live
// terminal output. Not a module of its own: the kernel prepends this file to
// the widget's module (toolcall.esm_source), so these names are that
// module's own. Plain DOM, text only (textContent, never innerHTML): agent
// text stays inert.

const TERM_MAX = 200000;

function h(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined && text !== null) e.textContent = String(text);
  return e;
}

const DIFF_CLASS = { "+": "acp-add", "-": "acp-del", "@": "acp-hunk", h: "acp-hdr", " ": "" };

// How a widget shows text that may carry colours: `pre(cls, text)` makes a
// <pre>, `append(pre, data)` adds to it, `reset(pre, text)` replaces it.
// This one shows it as it is.
const PLAIN_TEXT = {
  pre: (cls, text) => h("pre", cls, text),
  append: (pre, data) => pre.append(document.createTextNode(data)),
  reset: (pre, text) => { pre.textContent = text; },
};

// Terminal output received as messages, kept per `slot` (block/row key +
// "\n" + terminal id) and cut to the last TERM_MAX characters.
function feedLive(live, slot, data) {
  let text = (live.get(slot) || "") + data;
  const trimmed = text.length > TERM_MAX;
  if (trimmed) text = text.slice(text.length - TERM_MAX);
  live.set(slot, text);
  return { text, trimmed };
}

function toolHasBody(st) {
  return !!(st.detail || st.text || (st.diffs || []).length || (st.terminals || []).length ||
            (st.locations || []).length);
}

// A tool call's content (command, text, diffs, terminals, locations) into
// `body`; `pres` gets each terminal's <pre> by terminal id.
function paintToolBody(body, st, live, key, pres, fmt) {
  if (st.detail) body.append(h("pre", "acp-tc-cmd", st.detail));
  if (st.text) body.append(fmt.pre("acp-tc-text", st.text));
  for (const d of st.diffs || []) {
    body.append(h("div", "acp-tc-sub", `${d.path}  (${d.newFile ? "new file, " : ""}+${d.added} -${d.removed})`));
    const pre = h("pre", "acp-tc-diff");
    for (const [op, line] of d.lines || []) pre.append(h("span", DIFF_CLASS[op] || "", line || " "));
    if (d.truncated) pre.append(h("span", "acp-note", "... diff cut here"));
    body.append(pre);
  }
  for (const t of st.terminals || []) {
    body.append(h("div", "acp-tc-sub", "$ " + (t.command || t.id)));
    if (t.note) body.append(h("div", "acp-note", t.note));
    const shown = t.live ? (live.get(key + "\n" + t.id) || "") : (t.output || "");
    const pre = fmt.pre("acp-tc-term", (t.truncated && !t.live ? "...\n" : "") + shown);
    pres.set(t.id, pre);
    body.append(pre);
    if (t.exit) body.append(h("div", "acp-note acp-exit", t.exit));
    pre.scrollTop = pre.scrollHeight;
  }
  const locs = st.locations || [];
  if (locs.length) {
    const ul = h("ul", "acp-tc-locs");
    for (const loc of locs) ul.append(h("li", "", "📍 " + loc));
    body.append(ul);
  }
}

// One tool call row: a compact header (kind icon, title, status) that
// expands to the call's content, repainted from the model's state under
// `key`. `live` holds terminal text received as messages; `fmt` says how
// text is shown (PLAIN_TEXT, or colours in turn.js). Call paint() once.
function toolRow(model, key, live, fmt) {
  const root = h("div", "acp-tc");
  root.dataset.row = key;
  const head = h("div", "acp-tc-head");
  head.tabIndex = 0;
  head.setAttribute("role", "button");
  const caret = h("span", "acp-tc-caret");
  const icon = h("span", "acp-tc-icon");
  const title = h("span", "acp-tc-title");
  const status = h("span", "acp-tc-status");
  head.append(caret, icon, title, status);
  const body = h("div", "acp-tc-body");
  root.append(head, body);
  const pres = new Map(); // terminal id -> <pre> currently shown

  const state = () => model.get(key) || {};
  // The reader's choice wins; otherwise open when it shows a terminal
  // (running or finished: a finished command's output must not fold away
  // under the reader's eyes) or when the call failed.
  const isOpen = () => {
    const st = state();
    if (!toolHasBody(st)) return false;
    const chosen = (model.get("expanded") || {})[key];
    if (typeof chosen === "boolean") return chosen;
    return (st.terminals || []).length > 0 || st.status === "failed";
  };

  let shownOpen = null;
  function paint() {
    const st = state();
    const s = st.status || "pending";
    root.dataset.status = s;
    icon.textContent = st.icon || "🔧";
    title.textContent = st.title || "tool call";
    title.title = st.title || "";
    status.textContent = st.status_label || s;
    const open = isOpen();
    shownOpen = open;
    caret.textContent = toolHasBody(st) ? (open ? "▾" : "▸") : "·";
    head.setAttribute("aria-expanded", String(open));
    body.hidden = !open;
    body.replaceChildren();
    pres.clear();
    if (open) paintToolBody(body, st, live, key, pres, fmt);
  }

  function toggle() {
    const chosen = { ...(model.get("expanded") || {}) };
    chosen[key] = !isOpen();
    model.set("expanded", chosen);
    model.save_changes();
    // Also as a message, which is never held back: while a turn keeps the kernel busy the
    // synced update can wait, and the turn's static end keeps the reader's choice.
    model.send({ type: "expanded", block: key, open: chosen[key] });
  }
  head.addEventListener("click", toggle);
  head.addEventListener("keydown", (e) => {
    if (e.key === "Enter" || e.key === " ") { e.preventDefault(); e.stopPropagation(); toggle(); }
  });

  return {
    root,
    paint,
    // `expanded` changed (here or in another view): repaint if this row's openness did.
    refreshOpen() { if (isOpen() !== shownOpen) paint(); },
    appendOutput(tid, data, text, trimmed) {
      const pre = pres.get(tid);
      if (!pre) return;
      if (trimmed) fmt.reset(pre, text);
      else fmt.append(pre, data);
      pre.scrollTop = pre.scrollHeight;
    },
    hasLive: () => (state().terminals || []).some((t) => t.live),
  };
}

