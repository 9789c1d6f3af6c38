// acp-kernel tool call rows: one widget shows a run of consecutive tool calls.
// Each row is a compact header (kind icon, title, status) that expands to the
// call's content. Plain DOM, text only (textContent, never innerHTML): agent
// text stays inert.
//
// Model: `count` rows, row i's state under the key `row:i` (the kernel sends
// only the rows that changed, as partial updates); `expanded` maps a row key
// to the reader's choice (open or folded) and is written here only, so the
// choice survives a new view (JupyterLab renders one when the display is
// updated). Terminal output arrives as custom messages {type: "term", row,
// id, data} (appended) and {type: "reset", row, id, data}; a row's final
// output is in its state, so saved widget state shows it.

const TERM_MAX = 200000;

function h(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined && text !== null) e.textContent = String(text);
  return e;
}

const DIFF_CLASS = { "+": "acp-add", "-": "acp-del", "@": "acp-hunk", h: "acp-hdr", " ": "" };

const rowKey = (i) => `row:${i}`;

function hasBody(st) {
  return !!(st.detail || st.text || (st.diffs || []).length || (st.terminals || []).length ||
            (st.locations || []).length);
}

// One row's DOM, repainted from its state. `live` holds terminal text
// received as messages (shared by the rows of this view).
function makeRow(model, key, live) {
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
    if (!hasBody(st)) return false;
    const chosen = (model.get("expanded") || {})[key];
    if (typeof chosen === "boolean") return chosen;
    return (st.terminals || []).length > 0 || st.status === "failed";
  };

  function paintBody(st) {
    body.replaceChildren();
    pres.clear();
    if (st.detail) body.append(h("pre", "acp-tc-cmd", st.detail));
    if (st.text) body.append(h("pre", "acp-tc-text", st.text));
    for (const d of st.diffs || []) {
      body.append(h("div", "acp-tc-sub", `${d.path}  (${d.newFile ? "new file, " : ""}+${d.added} -${d.removed})`));
      const pre = h("pre", "acp-tc-diff");
      for (const [op, line] of d.lines || []) {
        pre.append(h("span", DIFF_CLASS[op] || "", line || " "));
      }
      if (d.truncated) pre.append(h("span", "acp-note", "... diff cut here"));
      body.append(pre);
    }
    for (const t of st.terminals || []) {
      body.append(h("div", "acp-tc-sub", "$ " + (t.command || t.id)));
      if (t.note) body.append(h("div", "acp-note", t.note));
      const shown = t.live ? (live.get(key + "\n" + t.id) || "") : (t.output || "");
      const pre = h("pre", "acp-tc-term", (t.truncated && !t.live ? "...\n" : "") + shown);
      pres.set(t.id, pre);
      body.append(pre);
      if (t.exit) body.append(h("div", "acp-note", t.exit));
      pre.scrollTop = pre.scrollHeight;
    }
    const locs = st.locations || [];
    if (locs.length) {
      const ul = h("ul", "acp-tc-locs");
      for (const loc of locs) ul.append(h("li", "", "📍 " + loc));
      body.append(ul);
    }
  }

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
    caret.textContent = hasBody(st) ? (open ? "▾" : "▸") : "·";
    head.setAttribute("aria-expanded", String(open));
    body.hidden = !open;
    if (open) paintBody(st);
    else {
      body.replaceChildren();
      pres.clear();
    }
  }

  function toggle() {
    const chosen = { ...(model.get("expanded") || {}) };
    chosen[key] = !isOpen();
    model.set("expanded", chosen);
    model.save_changes();
  }
  head.addEventListener("click", toggle);
  head.addEventListener("keydown", (e) => {
    if (e.key === "Enter" || e.key === " ") {
      e.preventDefault();
      toggle();
    }
  });

  paint();
  return {
    root,
    paint,
    // `expanded` changed (here or in another view): repaint if this row's openness did.
    refreshOpen() {
      if (isOpen() !== shownOpen) paint();
    },
    appendOutput(tid, data, text, trimmed) {
      const pre = pres.get(tid);
      if (!pre) return;
      if (trimmed) pre.textContent = text;
      else pre.append(document.createTextNode(data));
      pre.scrollTop = pre.scrollHeight;
    },
    hasLive: () => (state().terminals || []).some((t) => t.live),
  };
}

function render({ model, el }) {
  const list = h("div", "acp-tcs");
  el.appendChild(list);
  const live = new Map(); // row key + "\n" + terminal id -> text received live
  const rows = []; // index -> row
  const listeners = [];
  const listen = (name, fn) => {
    model.on(name, fn);
    listeners.push([name, fn]);
  };

  function grow() {
    const count = model.get("count") || 0;
    while (rows.length < count) {
      const key = rowKey(rows.length);
      const row = makeRow(model, key, live);
      rows.push(row);
      list.append(row.root);
      listen(`change:${key}`, row.paint);
    }
  }

  function onMsg(msg) {
    if (!msg || typeof msg.id !== "string" || typeof msg.row !== "string") return;
    const slot = msg.row + "\n" + msg.id;
    const row = rows[Number(msg.row.slice(4))];
    if (msg.type === "term") {
      let text = (live.get(slot) || "") + msg.data;
      const trimmed = text.length > TERM_MAX;
      if (trimmed) text = text.slice(text.length - TERM_MAX);
      live.set(slot, text);
      if (row) row.appendOutput(msg.id, msg.data, text, trimmed);
    } else if (msg.type === "reset") {
      live.set(slot, msg.data || "");
      if (row) row.paint();
    }
  }

  listen("change:count", grow);
  listen("change:expanded", () => rows.forEach((r) => r.refreshOpen()));
  listen("msg:custom", onMsg);
  grow();
  // A view opened mid-run (reload, second view) asks for the output kept so far.
  if (rows.some((r) => r.hasLive())) model.send({ type: "hello" });

  return () => {
    for (const [name, fn] of listeners) model.off(name, fn);
  };
}

export default { render };
