// acp-kernel: the turn widget's saved module, a loader (see view/turnwidget.py).
// The turn's real module (common.js + turn.js, with toolcall.css + turn.css) is
// never synced state, which a notebook saves with every turn: a view asks the
// kernel for it ({type: "module", version}), once per page and version (kept on
// globalThis), and the answer ({type: "module", version, esm, css}) upgrades every
// view of that version on the page. Until then, and for good with no kernel (a
// saved notebook reopened, an HTML export), the blocks show plainly: a text
// block's html (made by acp_kernel.safe.markdown_html only, as turn.js shows it),
// everything else as textContent; a form's html is parsed in an inert document
// and only its text is kept.
// Comment lines and indentation are removed before this is synced (turnwidget.loader_source).

const V = "__VERSION__";
const S = ((globalThis.__acpKernelTurn ||= {})[V] ||= { views: new Set() });
const LEAD = { thought: "Thinking: ", user: "You: " };

function arrived(msg) {
  if (msg?.type !== "module" || msg.version !== V || S.mod || S.loading) return;
  S.loading = true;
  const url = URL.createObjectURL(new Blob([msg.esm], { type: "text/javascript" }));
  import(url).then((m) => {
    const style = document.createElement("style");
    style.textContent = msg.css;
    document.head.append(style);
    S.mod = m.default;
    for (const up of [...S.views]) up();
  }, () => { S.loading = false; }).finally(() => URL.revokeObjectURL(url));
}

// One request at a time per page: the next view asks 2 s later if none came, or at
// once when the view that asked is gone (a turn that ended before the answer came:
// its answer went to a closed model, and a page's next turn must not wait for it).
// S.by: whether the view that asked last still waits.
function ask(model, alive) {
  if (S.mod || !alive()) return;
  const wait = S.by?.() ? S.asked + 2000 - Date.now() : 0;
  if (wait > 0) return void setTimeout(() => ask(model, alive), wait);
  S.asked = Date.now();
  S.by = alive;
  model.send({ type: "module", version: V });
}

const htmlText = (html) => (html ? new DOMParser().parseFromString(html, "text/html").body.textContent : "");

function blockText(st) {
  const t = st.type;
  if (LEAD[t]) return LEAD[t] + st.text;
  if (t === "plan") return "Plan" + (st.entries || []).map((e) => `\n${e.status === "completed" ? "☑" : "☐"} ${e.content}`).join("");
  if (t === "permission") return `🔐 Permission requested: ${st.title} → ${st.chosen || st.state}`;
  if (t === "form") return `📝 The agent asks: ${htmlText(st.html)} → ${st.state}`;
  if (t !== "tool") return st.text;
  const parts = [`${st.icon} ${st.title} · ${st.status_label}`, st.detail, st.text];
  for (const d of st.diffs || []) parts.push(d.path, ...d.lines.map((l) => l[1]));
  for (const x of st.terminals || []) parts.push("$ " + (x.command || x.id), x.output, x.exit);
  return parts.filter(Boolean).join("\n").replace(/\x1b\[[0-9;]*m/g, "");
}

// The plain view draws the last PLAIN blocks, and more on request: it is drawn again on
// each change until the module comes, and a long turn's first view drew every block each
// time (an unpaced 900-step turn: 2,500 elements, a 230 ms frame before its question).
const PLAIN = 100;

function render({ model, el }) {
  let inner, frame = 0, keep = PLAIN;
  const box = el.appendChild(document.createElement("div"));
  box.className = "acp-turn-plain";
  const more = document.createElement("button");
  more.onclick = () => { keep += PLAIN; draw(); };
  const draw = () => {
    frame = 0;
    const n = model.get("count") || 0, first = Math.max(0, n - keep);
    more.textContent = `Show ${Math.min(PLAIN, first)} earlier (${first} hidden)`;
    box.replaceChildren(...(first ? [more] : []), ...Array.from({ length: n - first }, (_, j) => {
      const st = model.get("b:" + (first + j)) || {};
      const div = document.createElement("div");
      div.className = "acp-plain-" + st.type;
      if (st.type === "text") div.innerHTML = st.html || "";
      else div.textContent = blockText(st);
      return div;
    }));
  };
  const changed = () => { frame ||= requestAnimationFrame(draw); };
  const onMsg = (m) => arrived(m);
  const quiet = () => {
    S.views.delete(up);
    model.off("change", changed);
    model.off("msg:custom", onMsg);
    cancelAnimationFrame(frame);
  };
  const up = () => {
    quiet();
    box.remove();
    inner = S.mod.render({ model, el });
  };
  if (S.mod) up();
  else {
    draw();
    model.on("change", changed);
    model.on("msg:custom", onMsg);
    S.views.add(up);
    ask(model, () => S.views.has(up));
  }
  // The kernel then rebuilds the output's fallback (for readers without the widget) seldom.
  try { model.send({ type: "seen" }); } catch { /* no kernel: a saved notebook */ }
  return () => {
    quiet();
    if (typeof inner === "function") inner();
  };
}

export default { render };
