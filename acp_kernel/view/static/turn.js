// acp-kernel: one agent turn as one widget. The model holds the turn's
// ordered blocks (`count`, block i under `b:i`; the kernel sends only changed
// blocks). Plain DOM: agent text goes in with textContent only; the one
// exception is a block's `html`, which acp_kernel.safe made (agent markdown
// rendered with raw HTML off, links checked, images as placeholders).
//
// The page keeps the last `shown` blocks (plus any question still waiting);
// "Show N earlier" raises it. `expanded` (block key -> open) and `shown` are
// written here only, so a new view (JupyterLab renders one when the display is
// updated) keeps the reader's choices. Terminal output arrives as custom
// messages {type: "term"|"reset", block, id, data}; colours are plain SGR
// sequences (the kernel removed every other one), painted as JupyterLab's
// own ansi-* classes.

//
// Helpers (h, toolRow, feedLive, ...): static/common.js, which the kernel
// prepends to this module.

const PAGE = 100;

// -- colours ------------------------------------------------------------------

const NAMES = ["black", "red", "green", "yellow", "blue", "magenta", "cyan", "white"];

function sgr(state, params) {
  const p = params === "" ? [0] : params.split(";").map((x) => Number(x || 0));
  for (let i = 0; i < p.length; i++) {
    const c = p[i];
    if (c === 0) { state.fg = null; state.rgb = null; state.bold = state.italic = state.underline = false; }
    else if (c === 1) state.bold = true;
    else if (c === 3) state.italic = true;
    else if (c === 4) state.underline = true;
    else if (c === 22) state.bold = false;
    else if (c === 23) state.italic = false;
    else if (c === 24) state.underline = false;
    else if (c === 39) { state.fg = null; state.rgb = null; }
    else if (c >= 30 && c <= 37) { state.fg = NAMES[c - 30]; state.rgb = null; }
    else if (c >= 90 && c <= 97) { state.fg = NAMES[c - 90] + "-intense"; state.rgb = null; }
    else if (c === 38 && p[i + 1] === 5) {
      const n = p[i + 2] | 0;
      i += 2;
      if (n < 8) { state.fg = NAMES[n]; state.rgb = null; }
      else if (n < 16) { state.fg = NAMES[n - 8] + "-intense"; state.rgb = null; }
      else if (n < 232) {
        const v = [Math.floor((n - 16) / 36), Math.floor((n - 16) / 6) % 6, (n - 16) % 6].map((x) => (x ? 55 + x * 40 : 0));
        state.fg = null; state.rgb = v;
      } else { const g = 8 + (n - 232) * 10; state.fg = null; state.rgb = [g, g, g]; }
    } else if (c === 38 && p[i + 1] === 2) {
      state.fg = null; state.rgb = [p[i + 2] | 0, p[i + 3] | 0, p[i + 4] | 0];
      i += 4;
    }
  }
}

// Append `text` (plain SGR sequences only) to `parent` as text nodes and spans.
function appendAnsi(parent, text, state) {
  const re = /\x1b\[([0-9;]*)m/g;
  let last = 0;
  let m;
  const put = (s) => {
    if (!s) return;
    if (!state.fg && !state.rgb && !state.bold && !state.italic && !state.underline) {
      parent.append(document.createTextNode(s));
      return;
    }
    const span = h("span", "", s);
    if (state.fg) span.classList.add(`ansi-${state.fg}-fg`);
    if (state.rgb) span.style.color = `rgb(${state.rgb.map((x) => Math.max(0, Math.min(255, x))).join(",")})`;
    if (state.bold) span.classList.add("ansi-bold");
    if (state.italic) span.style.fontStyle = "italic";
    if (state.underline) span.classList.add("ansi-underline");
    parent.append(span);
  };
  while ((m = re.exec(text)) !== null) {
    put(text.slice(last, m.index));
    sgr(state, m[1]);
    last = re.lastIndex;
  }
  put(text.slice(last));
}

function ansiPre(cls, text) {
  const pre = h("pre", cls);
  pre._ansi = {};
  appendAnsi(pre, text || "", pre._ansi);
  return pre;
}

// Text with colours, for toolRow (common.js).
const ANSI_TEXT = {
  pre: ansiPre,
  append: (pre, data) => appendAnsi(pre, data, pre._ansi),
  reset: (pre, text) => { pre.replaceChildren(); pre._ansi = {}; appendAnsi(pre, text, pre._ansi); },
};

// -- images in agent markdown: placeholders until a click ------------------------

const IMAGE_OK = /^(https?:\/\/|data:image\/(png|gif|jpeg|webp);base64,)/i;

function wireImages(root) {
  for (const ph of root.querySelectorAll(".acp-img")) {
    const load = () => {
      const src = ph.dataset.src || "";
      if (!IMAGE_OK.test(src)) return;
      const img = document.createElement("img");
      img.referrerPolicy = "no-referrer";
      img.alt = ph.textContent;
      img.className = "acp-img-loaded";
      img.src = src;
      ph.replaceWith(img);
    };
    ph.addEventListener("click", load);
    ph.addEventListener("keydown", (e) => {
      if (e.key === "Enter" || e.key === " ") { e.preventDefault(); load(); }
    });
  }
}

// -- blocks --------------------------------------------------------------------------

function toolBlock(ctx, key) {
  return toolRow(ctx.model, key, ctx.live, ANSI_TEXT);
}

function textBlock(ctx, key) {
  const root = h("div", "acp-text jp-RenderedHTMLCommon");
  return {
    root,
    paint() {
      const st = ctx.model.get(key) || {};
      root.innerHTML = st.html || ""; // made by acp_kernel.safe.markdown_html only
      root.classList.toggle("acp-open", !!st.open);
      wireImages(root);
    },
  };
}

function simpleBlock(ctx, key, render) {
  const root = h("div");
  return { root, paint() { root.replaceChildren(); render(root, ctx.model.get(key) || {}); } };
}

const LEVEL_ICON = { info: "ℹ️", warning: "⚠️", error: "❌" };

function renderThought(root, st) {
  root.className = "acp-thought";
  const d = h("details");
  d.append(h("summary", "", "Thinking"), h("div", "acp-thought-text", st.text || ""));
  root.append(d);
}

function renderUser(root, st) {
  root.className = "acp-user";
  root.append(h("b", "", "You: "), h("span", "", st.text || ""));
}

function renderPlan(root, st) {
  root.className = "acp-plan";
  root.append(h("div", "acp-plan-title", "Plan"));
  const ul = h("ul");
  for (const e of st.entries || []) {
    const li = h("li", "acp-plan-" + (e.status || "pending"));
    li.append(h("span", "acp-plan-mark", e.status === "completed" ? "☑" : e.status === "in_progress" ? "◐" : "☐"),
              h("span", "", " " + (e.content || "")));
    ul.append(li);
  }
  root.append(ul);
}

function renderNotice(root, st) {
  root.className = "acp-notice acp-notice-" + (st.level || "info");
  root.append(h("span", "", (LEVEL_ICON[st.level] || "ℹ️") + " "), h("span", "acp-notice-text", st.text || ""));
}

function renderLine(root, st) {
  root.className = "acp-line";
  root.textContent = st.text || "";
}

function renderStatus(root, st) {
  root.className = "acp-status-line";
  root.append(h("sub", "acp-status", st.text || ""));
}

const BUTTON_CLASS = { allow_once: "acp-allow", allow_always: "acp-allow", reject_once: "acp-reject", reject_always: "acp-reject" };

function permissionBlock(ctx, key) {
  return simpleBlock(ctx, key, (root, st) => {
    root.className = "acp-question acp-permission";
    root.dataset.state = st.state || "asking";
    const head = h("div", "acp-q-head");
    head.append(h("b", "", "🔐 Permission requested "), h("span", "acp-q-icon", (st.icon || "") + " "),
                h("span", "acp-q-title", st.title || ""));
    root.append(head);
    if (st.detail) {
      const pre = h("pre", "acp-q-detail", st.detail); // the whole payload: scrolled, never cut
      pre.style.maxHeight = "24em";
      pre.style.overflow = "auto";
      root.append(pre);
    }
    const bar = h("div", "acp-q-buttons");
    for (const o of st.options || []) {
      const b = h("button", "acp-button " + (BUTTON_CLASS[o.kind] || ""), o.name);
      b.type = "button";
      b.disabled = st.state !== "asking";
      b.addEventListener("click", () => {
        for (const x of bar.querySelectorAll("button")) x.disabled = true;
        outcome.textContent = "→ " + o.name + "…";
        ctx.model.send({ type: "answer", block: key, option: o.id });
      });
      bar.append(b);
    }
    root.append(bar);
    const outcome = h("div", "acp-q-outcome");
    if (st.state === "answered") { outcome.append("→ chose ", h("b", "", st.chosen || "")); }
    else if (st.state === "cancelled") outcome.append(h("i", "", "cancelled"));
    root.append(outcome);
  });
}

function formBlock(ctx, key) {
  const drafts = ctx.drafts;
  return simpleBlock(ctx, key, (root, st) => {
    root.className = "acp-question acp-form";
    root.dataset.state = st.state || "asking";
    const asking = st.state === "asking";
    const head = h("div", "acp-q-head");
    head.append(h("b", "", "📝 The agent asks: "));
    const msg = h("div", "acp-form-message jp-RenderedHTMLCommon");
    msg.innerHTML = st.html || ""; // made by acp_kernel.safe.markdown_html only
    head.append(msg);
    root.append(head);
    const grid = h("div", "acp-form-grid");
    const qid = st.qid || key;
    const draft = drafts.get(qid) || {};
    drafts.set(qid, draft);
    const getters = {};
    (st.fields || []).forEach((f, i) => {
      const id = `${ctx.uid}-${key.replace(":", "-")}-${i}`;
      const label = h("label", "acp-form-label", f.label);
      label.htmlFor = id;
      let input;
      const initial = f.name in draft ? draft[f.name] : f.value;
      if (f.kind === "choice") {
        input = h("select");
        const none = h("option", "", f.required ? "— choose —" : "—");
        none.value = "";
        input.append(none);
        (f.choices || []).forEach((c, j) => { const o = h("option", "", c); o.value = String(j); input.append(o); });
        input.value = initial === null || initial === undefined ? "" : String(initial);
        getters[f.name] = () => (input.value === "" ? null : Number(input.value));
      } else if (f.kind === "multi") {
        input = h("select");
        input.multiple = true;
        (f.choices || []).forEach((c, j) => {
          const o = h("option", "", c); o.value = String(j);
          o.selected = Array.isArray(initial) && initial.includes(j);
          input.append(o);
        });
        getters[f.name] = () => [...input.selectedOptions].map((o) => Number(o.value));
      } else if (f.kind === "boolean") {
        input = h("input");
        input.type = "checkbox";
        input.checked = !!initial;
        getters[f.name] = () => input.checked;
      } else if (f.kind === "integer" || f.kind === "number") {
        input = h("input");
        input.type = "number";
        if (f.kind === "integer") input.step = "1"; else input.step = "any";
        input.value = initial === null || initial === undefined ? "" : String(initial);
        getters[f.name] = () => (input.value === "" ? null : Number(input.value));
      } else {
        input = h("input");
        input.type = "text";
        input.placeholder = f.placeholder || "";
        input.value = initial || "";
        getters[f.name] = () => input.value;
      }
      input.id = id;
      input.className = (input.className + " acp-form-input").trim();
      input.disabled = !asking;
      input.addEventListener("input", () => { draft[f.name] = getters[f.name](); });
      input.addEventListener("change", () => { draft[f.name] = getters[f.name](); });
      input.addEventListener("keydown", (e) => e.stopPropagation());
      grid.append(label, input);
      if (f.description) { grid.append(h("span"), h("small", "acp-form-desc", f.description)); }
    });
    root.append(grid);
    if ((st.errors || []).length) {
      const errs = h("div", "acp-form-errors");
      for (const e of st.errors) errs.append(h("div", "", e));
      root.append(errs);
    }
    const bar = h("div", "acp-q-buttons");
    const send = (type) => {
      const msg = { type, block: key };
      if (type === "submit") {
        msg.values = {};
        for (const [name, get] of Object.entries(getters)) msg.values[name] = get();
      }
      ctx.model.send(msg);
    };
    for (const [type, label, cls] of [["submit", "Submit", "acp-allow"], ["decline", "Decline", ""], ["cancel", "Cancel", ""]]) {
      const b = h("button", "acp-button " + cls, label);
      b.type = "button";
      b.disabled = !asking;
      b.addEventListener("click", () => send(type));
      bar.append(b);
    }
    root.append(bar);
    const outcome = { submitted: "→ submitted", declined: "→ declined", cancelled: "→ cancelled" }[st.state];
    if (outcome) root.append(h("div", "acp-q-outcome", outcome));
  });
}

// A page the agent asks the user to open (URL elicitation): the host named, the agent's
// message and the whole address as text only. Nothing is opened but by a click on
// "Open <host>", and then in a new tab with no opener and no referrer.
const PAGE_OK = /^https?:\/\/[^\s\\\/?#@]+([\/?#][^\s\\]*)?$/i; // no user@, spaces or backslashes
const URL_OUTCOME = {
  opened: "→ opened in a new tab; waiting for the agent to say it is done",
  completed: "✓ done (the agent says so)",
  declined: "→ declined",
  cancelled: "→ cancelled",
};

function urlBlock(ctx, key) {
  return simpleBlock(ctx, key, (root, st) => {
    root.className = "acp-question acp-url";
    root.dataset.state = st.state || "asking";
    const asking = st.state === "asking";
    const head = h("div", "acp-q-head");
    head.append(h("b", "", "🔗 The agent asks you to open a page on "), h("b", "acp-url-host", st.host || ""));
    root.append(head);
    if (st.hostUnicode) {
      root.append(h("div", "acp-url-warn", `⚠️ This host name has letters outside ASCII: it reads “${st.hostUnicode}”. ` +
        "Letters from other alphabets can look like familiar ones: check it is the site you expect."));
    }
    if (st.message) root.append(h("div", "acp-url-message", st.message));
    const addr = h("div", "acp-url-address");
    addr.append(h("span", "", "Address: "), h("code", "acp-url-full", st.url || ""));
    root.append(addr);
    const bar = h("div", "acp-q-buttons");
    const button = (label, cls, act) => {
      const b = h("button", "acp-button " + cls, label);
      b.type = "button";
      b.disabled = !asking;
      b.addEventListener("click", () => {
        for (const x of bar.querySelectorAll("button")) x.disabled = true;
        act();
      });
      bar.append(b);
    };
    button("Open " + (st.host || ""), "acp-allow acp-url-open", () => {
      const url = st.url || "";
      if (!PAGE_OK.test(url)) return; // the kernel checked it; never open anything else
      window.open(url, "_blank", "noopener,noreferrer");
      ctx.model.send({ type: "open", block: key });
    });
    button("Decline", "", () => ctx.model.send({ type: "decline", block: key }));
    button("Cancel", "", () => ctx.model.send({ type: "cancel", block: key }));
    root.append(bar);
    const outcome = URL_OUTCOME[st.state];
    if (outcome) root.append(h("div", "acp-q-outcome", outcome));
  });
}

const MAKERS = {
  text: textBlock,
  tool: toolBlock,
  permission: permissionBlock,
  form: formBlock,
  url: urlBlock,
  thought: (ctx, key) => simpleBlock(ctx, key, renderThought),
  user: (ctx, key) => simpleBlock(ctx, key, renderUser),
  plan: (ctx, key) => simpleBlock(ctx, key, renderPlan),
  notice: (ctx, key) => simpleBlock(ctx, key, renderNotice),
  line: (ctx, key) => simpleBlock(ctx, key, renderLine),
  status: (ctx, key) => simpleBlock(ctx, key, renderStatus),
};

// Blocks that ask the reader something (kept in view while they wait).
const QUESTIONS = new Set(["permission", "form", "url"]);

let uidCounter = 0;
// Half-filled forms by question id: a new view of the widget keeps what was typed.
const DRAFTS = new Map();

// The views drawing each turn (by the model's `turn` id). JupyterLab draws an updated
// output (the fallback the kernel rebuilds every few seconds, and as a question comes)
// in a new view, emptying its node without removing the old view. The new view takes the
// old one's drawing: nothing is built again, nothing flickers, a question stays where it
// was. A view that lost its place draws nothing while it waits to be taken.
const TURNS = new Map(); // turn id -> Set of views ({orphan, adopt, release, stop})

function render({ model, el }) {
  const id = model.get("turn");
  const views = id ? TURNS.get(id) || TURNS.set(id, new Set()).get(id) : null;
  const orphans = views ? [...views].filter((v) => v.orphan()) : [];
  const heir = orphans.pop();
  for (const v of orphans) v.stop();
  if (heir) {
    heir.adopt(el);
    return heir.release();
  }
  return draw(model, el, id, views);
}

function draw(model, el, id, views) {
  const ctx = { model, live: new Map(), drafts: DRAFTS, uid: `acp${++uidCounter}` };
  const root = h("div", "acp-turn tex2jax_ignore mathjax_ignore"); // MathJax never typesets agent text
  const more = h("button", "acp-more");
  more.type = "button";
  // Says a question waits below, at the top of the turn (a long turn's question can be far down).
  const waitingNote = h("button", "acp-waiting");
  waitingNote.type = "button";
  waitingNote.hidden = true;
  const list = h("div", "acp-blocks");
  root.append(waitingNote, more, list);
  let host = el; // the element drawn in: the view's, or the one of the view that took it over
  host.appendChild(root);
  const shown = new Map(); // index -> {root, paint, kind}
  const listeners = [];
  // Placed: once in the page; paused: out of it after that (see TURNS), until taken.
  let placed = false;
  let paused = false;
  const away = () => {
    if (!host.parentNode) {
      if (placed) paused = true;
      return paused;
    }
    placed = true;
    if (paused) catchUp();
    return false;
  };
  function catchUp() {
    paused = false;
    for (const i of [...shown.keys()]) repaint(i);
    grow();
  }
  const listen = (name, fn, always = false) => {
    const heard = (...args) => { if (always || !away()) fn(...args); };
    model.on(name, heard);
    listeners.push([name, heard]);
  };
  function stop() {
    for (const [name, fn] of listeners.splice(0)) model.off(name, fn);
    views?.delete(me);
    if (views?.size === 0) TURNS.delete(id); // a page shows many turns: none is kept once its views are gone
    host.closest(".jp-Cell")?.classList.remove("acp-asking");
  }
  let owner = 0;
  const me = {
    orphan: () => listeners.length > 0 && placed && !host.parentNode,
    adopt(next) {
      host = next;
      next.appendChild(root);
      placed = false;
      unplaced = 0;
      if (paused) catchUp();
      else noteQuestions();
    },
    // The view's cleanup: only the view that holds the drawing now stops it.
    release() {
      const mine = ++owner;
      return () => { if (owner === mine) stop(); };
    },
    stop,
  };
  views?.add(me);

  const key = (i) => `b:${i}`;
  const count = () => model.get("count") || 0;
  const asking = (i) => {
    const st = model.get(key(i)) || {};
    return QUESTIONS.has(st.type) && st.state === "asking";
  };

  function make(i) {
    const k = key(i);
    const st = model.get(k) || {};
    const maker = MAKERS[st.type] || MAKERS.line;
    const b = maker(ctx, k);
    b.kind = st.type;
    b.root.dataset.block = k;
    b.root.classList.add("acp-block");
    b.paint();
    return b;
  }

  function insert(i, b) {
    // before the first shown block with a larger index (few: the window is bounded)
    let next = null;
    for (const [j, other] of shown) if (j > i && (next === null || j < next[0])) next = [j, other];
    list.insertBefore(b.root, next ? next[1].root : null);
    shown.set(i, b);
  }

  function layout() {
    const n = count();
    const keep = Math.max(model.get("shown") || PAGE, 1);
    const first = Math.max(0, n - keep);
    for (const [i, b] of [...shown]) {
      if (i < first && !asking(i)) { b.root.remove(); shown.delete(i); }
    }
    for (let i = 0; i < n; i++) {
      if ((i >= first || asking(i)) && !shown.has(i)) insert(i, make(i));
    }
    const hidden = first - [...shown.keys()].filter((i) => i < first).length;
    more.hidden = hidden <= 0;
    more.textContent = `Show ${Math.min(PAGE, hidden)} earlier (${hidden} hidden)`;
    noteQuestions();
  }

  // A question that needs the reader: brought into view when it arrives while this turn
  // is on screen (never pulling the page away from another cell), and marked where the
  // reader may be looking: a note at the top of the turn, and the cell's prompt area.
  const seen = new Set();
  let unplaced = 0;
  function noteQuestions() {
    // A new view (the output was rendered again) may not be in the page yet: where it is
    // decides whether to bring a question into view, so decide once it is (a bounded wait).
    if (!root.isConnected) {
      if (unplaced++ < 300) requestAnimationFrame(noteQuestions);
      return;
    }
    placed = true;
    const waiting = [...shown.keys()].filter(asking).sort((a, b) => a - b);
    waitingNote.hidden = waiting.length === 0;
    waitingNote.textContent = waiting.length === 1 ? "A question is waiting for you below \u2193"
      : `${waiting.length} questions are waiting for you below \u2193`;
    root.classList.toggle("acp-asking", waiting.length > 0);
    const cell = host.closest(".jp-Cell");
    if (cell) cell.classList.toggle("acp-asking", waiting.length > 0);
    for (const i of waiting) {
      if (seen.has(i)) continue;
      seen.add(i);
      const r = root.getBoundingClientRect();
      const onScreen = r.bottom > 0 && r.top < window.innerHeight && document.visibilityState === "visible";
      if (onScreen) requestAnimationFrame(() => shown.get(i)?.root.scrollIntoView({ block: "nearest" }));
    }
  }
  waitingNote.addEventListener("click", () => {
    const first = [...shown.keys()].filter(asking).sort((a, b) => a - b)[0];
    const target = first === undefined ? null : shown.get(first).root;
    if (!target) return;
    target.scrollIntoView({ block: "center" });
    const button = target.querySelector("button:not([disabled]), select, input");
    if (button) button.focus({ preventScroll: true });
  });

  more.addEventListener("click", () => {
    const next = (model.get("shown") || PAGE) + PAGE;
    model.set("shown", next);
    model.save_changes();
    // Said in a message too: a synced change waits for the kernel to go idle, and the kernel
    // sends a block out of the window only once the page shows it (TurnOutput._reveal).
    model.send({ type: "shown", shown: next });
  });

  function repaint(i) {
    const b = shown.get(i);
    if (!b) return;
    const st = model.get(key(i)) || {};
    if (st.type !== b.kind) { b.root.remove(); shown.delete(i); insert(i, make(i)); }
    else b.paint();
  }

  let watched = 0; // blocks with a change listener
  function grow() {
    const n = count();
    while (watched < n) {
      const i = watched++;
      listen(`change:${key(i)}`, () => {
        repaint(i);
        const t = (model.get(key(i)) || {}).type;
        if (QUESTIONS.has(t)) layout(); // a question settled: it may leave the window
      });
    }
    layout();
  }

  function onMsg(msg) {
    if (!msg || typeof msg.id !== "string" || typeof msg.block !== "string") return;
    const slot = msg.block + "\n" + msg.id;
    const b = shown.get(Number(msg.block.slice(2)));
    if (msg.type === "term") {
      const { text, trimmed } = feedLive(ctx.live, slot, msg.data);
      if (b && b.appendOutput && !paused) b.appendOutput(msg.id, msg.data, text, trimmed);
    } else if (msg.type === "reset") {
      ctx.live.set(slot, msg.data || "");
      if (b) b.paint();
    }
  }

  listen("change:count", grow);
  listen("change:shown", layout);
  listen("change:expanded", () => { for (const b of shown.values()) if (b.refreshOpen) b.refreshOpen(); });
  listen("msg:custom", onMsg, true); // terminal output is kept while paused, drawn when taken
  grow();
  // A view opened mid-run (reload, second view) asks for the terminal output kept so far.
  const running = [...shown.values()].some((b) => b.kind === "tool") &&
    Array.from({ length: count() }, (_, i) => model.get(key(i)) || {})
      .some((st) => st.type === "tool" && (st.terminals || []).some((t) => t.live));
  if (running) model.send({ type: "hello" });

  return me.release();
}

export default { render };
