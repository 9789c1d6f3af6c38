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

// Shared with turn.js (h, toolRow, feedLive, ...): static/common.js, which
// the kernel prepends to this module.

const rowKey = (i) => `row:${i}`;

function render({ model, el }) {
  const list = h("div", "acp-tcs tex2jax_ignore mathjax_ignore");
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
      const row = toolRow(model, key, live, PLAIN_TEXT);
      row.paint();
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
      const { text, trimmed } = feedLive(live, slot, msg.data);
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
