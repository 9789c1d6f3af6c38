// acp-kernel passthrough terminal: xterm.js over the widget's comm.
// Kernel -> view: {type: "data"} + one binary buffer (PTY output, appended);
//                 {type: "replay", view} + buffer (the history, for that view only).
// View -> kernel: {type: "hello"|"resize", view, rows, cols}, {type: "input", data},
//                 {type: "interrupt"}, {type: "bye", view},
//                 {type: "ack", view, drawn}: live bytes drawn so far (the kernel
//                 stops reading the PTY while every view is far behind).
// xterm.js arrives as bytes in the `_xterm_js` / `_fit_js` traits (bundled at
// build time) and is imported from a blob URL once per page and version.

const loaded = new Map(); // version -> Promise<{Terminal, FitAddon}>
const ACK_EVERY = 256 * 1024;

function importBytes(bytes) {
  const url = URL.createObjectURL(new Blob([bytes], { type: "text/javascript" }));
  return import(/* webpackIgnore: true */ url).finally(() => URL.revokeObjectURL(url));
}

function loadXterm(model) {
  const js = model.get("_xterm_js");
  if (!js || js.byteLength === 0) return Promise.reject(new Error("xterm.js was not bundled with this install"));
  const key = model.get("_xterm_version") || "unversioned";
  if (!loaded.has(key)) {
    loaded.set(key, Promise.all([importBytes(js), importBytes(model.get("_fit_js"))])
      .then(([x, f]) => ({ Terminal: x.Terminal, FitAddon: f.FitAddon })));
  }
  return loaded.get(key);
}

function h(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = String(text);
  return e;
}

function bytesOf(buffer) {
  if (!buffer) return new Uint8Array(0);
  if (buffer instanceof Uint8Array) return buffer;
  if (ArrayBuffer.isView(buffer)) return new Uint8Array(buffer.buffer, buffer.byteOffset, buffer.byteLength);
  return new Uint8Array(buffer);
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

function render({ model, el }) {
  const view = Math.random().toString(36).slice(2, 10);
  const root = h("div", "acp-pty");
  root.setAttribute("data-lm-suppress-shortcuts", "true");
  const head = h("div", "acp-pty-head");
  const title = h("span", "acp-pty-title");
  const status = h("span", "acp-pty-status");
  const ctrlc = h("button", "acp-pty-ctrlc", "Ctrl-C");
  ctrlc.title = "Send Ctrl-C to the program (the kernel's interrupt does the same)";
  head.append(title, status, ctrlc);
  const screen = h("div", "acp-pty-screen");
  root.append(head, screen);
  el.appendChild(root);

  const showState = () => {
    title.textContent = model.get("title");
    status.textContent = model.get("status");
    root.dataset.status = model.get("status") === "running" ? "running" : "ended";
  };
  showState();
  model.on("change:status", showState);
  model.on("change:title", showState);
  ctrlc.addEventListener("click", () => model.send({ type: "interrupt" }));

  const decoder = new TextDecoder();
  let term = null;
  let fit = null;
  let fallback = null; // <pre> when xterm.js is unavailable
  let replayed = false;
  let observer = null;
  let drawn = 0; // live bytes drawn since the hello
  let acked = 0;

  // Small output needs no acknowledgement: only a view far behind holds the program back.
  const drewLive = (n) => {
    drawn += n;
    if (drawn - acked >= ACK_EVERY) {
      acked = drawn;
      model.send({ type: "ack", view, drawn });
    }
  };

  const write = (bytes, live) => {
    if (term) {
      term.write(bytes, live ? () => drewLive(bytes.length) : undefined);
    } else if (fallback) {
      fallback.textContent = plain(fallback.dataset.raw = (fallback.dataset.raw || "") + decoder.decode(bytes, { stream: true }));
      if (live) drewLive(bytes.length);
    }
  };

  const onMessage = (msg, buffers) => {
    if (!msg || typeof msg !== "object") return;
    if (msg.type === "replay" && msg.view === view) {
      if (term) term.reset();
      if (fallback) fallback.dataset.raw = "";
      replayed = true;
      write(bytesOf(buffers && buffers[0]), false);
      root.dataset.ready = "true";
    } else if (msg.type === "data" && replayed) {
      write(bytesOf(buffers && buffers[0]), true);
    }
  };
  model.on("msg:custom", onMessage);

  const fitCols = () => {
    if (!term || !fit) return;
    const dims = fit.proposeDimensions();
    const rows = model.get("rows");
    if (dims && dims.cols > 1 && (dims.cols !== term.cols || rows !== term.rows)) term.resize(dims.cols, rows);
  };

  loadXterm(model).then(({ Terminal, FitAddon }) => {
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
    term.open(screen);
    fitCols();
    term.onData((data) => model.send({ type: "input", data }));
    term.onResize(({ rows, cols }) => model.send({ type: "resize", view, rows, cols }));
    observer = new ResizeObserver(() => fitCols());
    observer.observe(screen);
    model.send({ type: "hello", view, rows: term.rows, cols: term.cols });
  }).catch((err) => {
    fallback = h("pre", "acp-pty-fallback");
    screen.append(h("div", "acp-pty-note", `Plain-text view: ${err.message || err}.`), fallback);
    model.send({ type: "hello", view });
  });

  return () => {
    model.off("msg:custom", onMessage);
    model.off("change:status", showState);
    model.off("change:title", showState);
    if (observer) observer.disconnect();
    model.send({ type: "bye", view });
    if (term) term.dispose();
  };
}

export default { render };
