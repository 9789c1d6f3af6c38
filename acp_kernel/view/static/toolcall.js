// acp-kernel tool call row: a compact header (kind icon, title, status) that
// expands to the call's content. Plain DOM, text only (textContent, never
// innerHTML): agent text stays inert. Terminal output arrives as custom
// messages {type: "term", id, data} (appended) and {type: "reset", id, data};
// the final output is in the `terminals` trait so saved widget state shows it.

const TERM_MAX = 200000;

function h(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined && text !== null) e.textContent = String(text);
  return e;
}

const DIFF_CLASS = { "+": "acp-add", "-": "acp-del", "@": "acp-hunk", h: "acp-hdr", " ": "" };

function render({ model, el }) {
  const root = h("div", "acp-tc");
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
  el.appendChild(root);

  // null: automatic. Open when it shows a terminal (running or finished: a
  // finished command's output must not fold away under the reader's eyes;
  // JupyterLab also renders a new view when the display is updated at the
  // end, so "while running" could not hold) or when the call failed.
  let expanded = null;
  const live = new Map(); // terminal id -> text received live
  const pres = new Map(); // terminal id -> <pre> currently shown

  const terminals = () => model.get("terminals") || [];
  const hasBody = () =>
    !!(model.get("detail") || model.get("text") || (model.get("diffs") || []).length ||
       terminals().length || (model.get("locations") || []).length);
  const isOpen = () => {
    if (!hasBody()) return false;
    if (expanded !== null) return expanded;
    return terminals().length > 0 || model.get("status") === "failed";
  };

  function paintBody() {
    body.replaceChildren();
    pres.clear();
    const detail = model.get("detail");
    if (detail) body.append(h("pre", "acp-tc-cmd", detail));
    const text = model.get("text");
    if (text) body.append(h("pre", "acp-tc-text", text));
    for (const d of model.get("diffs") || []) {
      body.append(h("div", "acp-tc-sub", `${d.path}  (${d.newFile ? "new file, " : ""}+${d.added} -${d.removed})`));
      const pre = h("pre", "acp-tc-diff");
      for (const [op, line] of d.lines || []) {
        pre.append(h("span", DIFF_CLASS[op] || "", line || " "));
      }
      if (d.truncated) pre.append(h("span", "acp-note", "... diff cut here"));
      body.append(pre);
    }
    for (const t of terminals()) {
      body.append(h("div", "acp-tc-sub", "$ " + (t.command || t.id)));
      if (t.note) body.append(h("div", "acp-note", t.note));
      const shown = t.live ? (live.get(t.id) || "") : (t.output || "");
      const pre = h("pre", "acp-tc-term", (t.truncated && !t.live ? "...\n" : "") + shown);
      pres.set(t.id, pre);
      body.append(pre);
      if (t.exit) body.append(h("div", "acp-note", t.exit));
      pre.scrollTop = pre.scrollHeight;
    }
    const locs = model.get("locations") || [];
    if (locs.length) {
      const ul = h("ul", "acp-tc-locs");
      for (const loc of locs) ul.append(h("li", "", "📍 " + loc));
      body.append(ul);
    }
  }

  function paint() {
    const st = model.get("status") || "pending";
    root.dataset.status = st;
    icon.textContent = model.get("icon") || "🔧";
    title.textContent = model.get("title") || "tool call";
    title.title = model.get("title") || "";
    status.textContent = model.get("status_label") || st;
    const open = isOpen();
    caret.textContent = hasBody() ? (open ? "▾" : "▸") : "·";
    head.setAttribute("aria-expanded", String(open));
    body.hidden = !open;
    if (open) paintBody();
    else {
      body.replaceChildren();
      pres.clear();
    }
  }

  function toggle() {
    expanded = !isOpen();
    paint();
  }
  head.addEventListener("click", toggle);
  head.addEventListener("keydown", (e) => {
    if (e.key === "Enter" || e.key === " ") {
      e.preventDefault();
      toggle();
    }
  });

  function onMsg(msg) {
    if (!msg || typeof msg.id !== "string") return;
    if (msg.type === "term") {
      let text = (live.get(msg.id) || "") + msg.data;
      const trimmed = text.length > TERM_MAX;
      if (trimmed) text = text.slice(text.length - TERM_MAX);
      live.set(msg.id, text);
      const pre = pres.get(msg.id);
      if (pre) {
        if (trimmed) pre.textContent = text;
        else pre.append(document.createTextNode(msg.data));
        pre.scrollTop = pre.scrollHeight;
      }
    } else if (msg.type === "reset") {
      live.set(msg.id, msg.data || "");
      paint();
    }
  }

  const traits = ["title", "icon", "status", "status_label", "detail", "text", "diffs", "terminals", "locations"];
  for (const name of traits) model.on(`change:${name}`, paint);
  model.on("msg:custom", onMsg);
  paint();
  // A view opened mid-run (reload, second view) asks for the output kept so far.
  if (terminals().some((t) => t.live)) model.send({ type: "hello" });

  return () => {
    for (const name of traits) model.off(`change:${name}`, paint);
    model.off("msg:custom", onMsg);
  };
}

export default { render };
