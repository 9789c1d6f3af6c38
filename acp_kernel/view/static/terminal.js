// acp-kernel passthrough terminal: xterm.js over the widget's comm, text frames only
// (a kernel gateway's relay decodes every frame as UTF-8: no binary buffers either way).
// Kernel -> view: {type: "data", text, n} (PTY output, appended; n counts it for acks);
//                 {type: "replay", view, text} (the history, for that view only);
//                 {type: "assets", view, version, xterm, fit} (xterm.js, on request).
// View -> kernel: {type: "assets", view}, {type: "hello"|"resize", view, rows, cols},
//                 {type: "input", view, seq, data} (seq counts from 1 per view: the kernel
//                 writes a view's keys in that order), {type: "interrupt"}, {type: "bye", view},
//                 {type: "ack", view, drawn}: live output drawn so far (the kernel
//                 stops reading the PTY while every view is far behind).
// xterm.js is asked of the kernel once per page and version (never synced state,
// which a saved notebook would keep). Without a kernel or xterm.js the view shows the
// `screen` trait (the terminal's last screen, as text).
// Keys: Ctrl+Shift+Escape leaves the terminal for the notebook; Ctrl+C (or
// Ctrl+Shift+C) with a selection copies it; Ctrl/Cmd+S and Ctrl/Cmd+Shift+S reach the
// notebook. Everything else goes to the program (Escape, Tab and Shift+Tab included).

const loaded = new Map(); // version -> Promise<{Terminal, FitAddon}>
const ACK_EVERY = 256 * 1024;
const ASSET_WAIT_MS = 60000;
const HINT = "Ctrl+Shift+Esc: back to the notebook · Ctrl+C copies a selection";

function importText(text) {
  const url = URL.createObjectURL(new Blob([text], { type: "text/javascript" }));
  return import(/* webpackIgnore: true */ url).finally(() => URL.revokeObjectURL(url));
}

// xterm.js from the kernel, once per page and version.
function loadXterm(model, view) {
  const key = model.get("_xterm_version") || "unversioned";
  if (!loaded.has(key)) {
    const promise = new Promise((resolve, reject) => {
      const timer = setTimeout(() => { done(); reject(new Error("the kernel did not send xterm.js")); }, ASSET_WAIT_MS);
      const onMsg = (msg) => {
        if (!msg || msg.type !== "assets" || msg.view !== view) return;
        done();
        if (!msg.xterm) reject(new Error("xterm.js was not bundled with this install"));
        else resolve(Promise.all([importText(msg.xterm), importText(msg.fit)])
          .then(([x, f]) => ({ Terminal: x.Terminal, FitAddon: f.FitAddon })));
      };
      const done = () => { clearTimeout(timer); model.off("msg:custom", onMsg); };
      model.on("msg:custom", onMsg);
      model.send({ type: "assets", view });
    });
    promise.catch(() => loaded.delete(key)); // a later view may ask again
    loaded.set(key, promise);
  }
  return loaded.get(key);
}

function h(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = String(text);
  return e;
}

// Plain-text fallback: escape sequences dropped, carriage returns honoured per line.
function plain(text) {
  return text
    .replace(/\x1b\][^\x07\x1b]*(\x07|\x1b\\)?|\x1b\[[0-?]*[ -\/]*[@-~]|\x1b./g, "")
    .replace(/\r\n/g, "\n")
    .split("\n")
    .map((line) => { const parts = line.split("\r").filter(Boolean); return parts.length ? parts[parts.length - 1] : ""; })
    .join("\n");
}

// xterm measures glyphs itself: it needs a concrete font list, not a CSS variable.
function codeFont(el) {
  const value = getComputedStyle(el).getPropertyValue("--jp-code-font-family").trim();
  return value ? `${value}, monospace` : "monospace";
}

function stateOf(status) {
  if (status === "running" || status === "starting") return "running";
  return status === "stopped" ? "stopped" : "ended";
}

const isMac = typeof navigator !== "undefined" && /Mac|iPhone|iPad/.test(navigator.platform || "");
const accel = (ev) => (isMac ? ev.metaKey : ev.ctrlKey);
const isLeave = (ev) => ev.key === "Escape" && ev.ctrlKey && ev.shiftKey && !ev.altKey;
const isCopy = (ev) => !ev.altKey && !ev.metaKey && ev.ctrlKey && (ev.key === "c" || ev.key === "C");
const isNotebookKey = (ev) => accel(ev) && !ev.altKey && (ev.key === "s" || ev.key === "S");

async function copyText(text) {
  try {
    await navigator.clipboard.writeText(text);
  } catch (_) {
    const area = h("textarea");
    area.value = text;
    area.style.position = "fixed";
    area.style.opacity = "0";
    document.body.appendChild(area);
    area.select();
    document.execCommand("copy");
    area.remove();
  }
}

function render({ model, el }) {
  const view = Math.random().toString(36).slice(2, 10);
  let typed = 0; // input messages sent by this view
  const root = h("div", "acp-pty tex2jax_ignore mathjax_ignore");
  // Lumino's shortcuts stop here: keys typed in the terminal are the program's
  // (the notebook's own keys are let through one keydown at a time, see below).
  root.setAttribute("data-lm-suppress-shortcuts", "true");
  const head = h("div", "acp-pty-head");
  const title = h("span", "acp-pty-title");
  const status = h("span", "acp-pty-status");
  const hint = h("span", "acp-pty-hint", HINT);
  const ctrlc = h("button", "acp-pty-ctrlc", "Ctrl-C");
  ctrlc.title = "Send Ctrl-C to the program (the kernel's interrupt does the same)";
  head.append(title, status, hint, ctrlc);
  const screen = h("div", "acp-pty-screen");
  root.append(head, screen);
  el.appendChild(root);

  let term = null;
  let fit = null;
  let fallback = null; // <pre> while xterm.js is not (or cannot be) drawing
  let replayed = false;
  let observer = null;
  let disposed = false;
  let drawn = 0; // live output drawn since the hello (in the kernel's units, `n`)
  let acked = 0;

  const showState = () => {
    title.textContent = model.get("title");
    status.textContent = model.get("status");
    root.dataset.status = stateOf(model.get("status"));
    if (!term && fallback && !replayed) fallback.textContent = model.get("screen");
  };

  // The last screen as text: shown until xterm.js draws (and for good without a kernel).
  fallback = h("pre", "acp-pty-fallback");
  screen.append(fallback);
  showState();
  model.on("change:status", showState);
  model.on("change:title", showState);
  model.on("change:screen", showState);
  ctrlc.addEventListener("click", () => model.send({ type: "interrupt" }));

  // Small output needs no acknowledgement: only a view far behind holds the program back.
  const drewLive = (n) => {
    drawn += n;
    if (drawn - acked >= ACK_EVERY) {
      acked = drawn;
      model.send({ type: "ack", view, drawn });
    }
  };

  const write = (text, n) => {
    if (typeof text !== "string") return;
    if (term) {
      term.write(text, n ? () => drewLive(n) : undefined);
    } else if (fallback) {
      fallback.dataset.raw = (fallback.dataset.raw || "") + text;
      fallback.textContent = plain(fallback.dataset.raw);
      if (n) drewLive(n);
    }
  };

  const onMessage = (msg) => {
    if (!msg || typeof msg !== "object") return;
    if (msg.type === "replay" && msg.view === view) {
      if (term) term.reset();
      if (fallback) fallback.dataset.raw = "";
      replayed = true;
      write(msg.text, 0);
      root.dataset.ready = "true";
    } else if (msg.type === "data" && replayed) {
      write(msg.text, typeof msg.n === "number" ? msg.n : 0);
    }
  };
  model.on("msg:custom", onMessage);

  const fitCols = () => {
    if (!term || !fit) return;
    const dims = fit.proposeDimensions();
    const rows = model.get("rows");
    if (dims && dims.cols > 1 && (dims.cols !== term.cols || rows !== term.rows)) term.resize(dims.cols, rows);
  };

  // Leave the terminal for the notebook: focus the cell (command mode), else just blur.
  const leave = () => {
    if (term) term.blur();
    const cell = el.closest(".jp-Cell");
    const notebook = el.closest(".jp-Notebook");
    const target = (cell && cell.tabIndex >= 0 && cell) || notebook;
    if (target) target.focus();
    else if (document.activeElement instanceof HTMLElement) document.activeElement.blur();
  };

  // One keydown may reach the notebook's shortcuts: the attribute that stops
  // them is off until this event has been dispatched.
  const letThrough = () => {
    root.removeAttribute("data-lm-suppress-shortcuts");
    setTimeout(() => root.setAttribute("data-lm-suppress-shortcuts", "true"), 0);
  };

  const keys = (ev) => {
    if (isLeave(ev)) {
      if (ev.type === "keydown") { ev.preventDefault(); leave(); }
      return false;
    }
    if (isCopy(ev) && term && term.hasSelection()) {
      if (ev.type === "keydown") { ev.preventDefault(); copyText(term.getSelection()); }
      return false;
    }
    if (isNotebookKey(ev)) {
      if (ev.type === "keydown") letThrough();
      return false;
    }
    return true;
  };

  // With a selection, the browser's own context menu (whose Copy copies it: xterm
  // puts the selection in its textarea on right-click), not JupyterLab's.
  root.addEventListener("contextmenu", (ev) => { if (term && term.hasSelection()) ev.stopPropagation(); });
  // The browser's copy (menu, Cmd+C): the terminal's selection.
  root.addEventListener("copy", (ev) => {
    if (term && term.hasSelection() && ev.clipboardData) {
      ev.clipboardData.setData("text/plain", term.getSelection());
      ev.preventDefault();
    }
  });

  loadXterm(model, view).then(({ Terminal, FitAddon }) => {
    if (disposed) return;
    term = new Terminal({
      rows: model.get("rows"),
      scrollback: 5000,
      fontSize: 13,
      fontFamily: codeFont(el),
      cursorBlink: true,
      allowProposedApi: false,
    });
    fit = new FitAddon();
    term.loadAddon(fit);
    if (fallback) { fallback.remove(); fallback = null; }
    term.open(screen);
    term.attachCustomKeyEventHandler(keys);
    fitCols();
    // Counted: the kernel may get two messages swapped (main shell or subshell thread).
    term.onData((data) => model.send({ type: "input", view, seq: ++typed, data }));
    term.onResize(({ rows, cols }) => model.send({ type: "resize", view, rows, cols }));
    observer = new ResizeObserver(() => fitCols());
    observer.observe(screen);
    model.send({ type: "hello", view, rows: term.rows, cols: term.cols });
  }).catch((err) => {
    if (disposed) return;
    screen.prepend(h("div", "acp-pty-note", `Plain-text view: ${err.message || err}.`));
    model.send({ type: "hello", view });
  });

  return () => {
    disposed = true;
    model.off("msg:custom", onMessage);
    model.off("change:status", showState);
    model.off("change:title", showState);
    model.off("change:screen", showState);
    if (observer) observer.disconnect();
    model.send({ type: "bye", view });
    if (term) term.dispose();
  };
}

export default { render };
