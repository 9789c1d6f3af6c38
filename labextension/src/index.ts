/**
 * acp-kernel's notebook side (JupyterLab 4 and Notebook 7).
 *
 * For each notebook whose kernel offers the comm target `acp_kernel.document`
 * (the ACP kernel, or a Python kernel after `%load_ext acp_kernel`), open one
 * comm and answer the kernel's requests about this notebook: for now a snapshot
 * of the live model (unsaved edits, the active and selected cells), so the
 * agent's `cells` tool sees what the user sees. The message shapes are
 * acp_kernel/notebook_mcp/docwire.py's; anything else is ignored.
 *
 * And proposals: the agent's insert, edit or delete (the `insert_cell`, `edit_cell`,
 * `delete_cell` tools) shown on the cell it concerns, with Accept and Reject (applied at
 * once and marked under the allow-all policy, with Undo); the answer says what became of
 * it: applied, rejected (with the user's words), conflict (the user changed that cell
 * meanwhile: never applied over their text), invalid, or expired.
 *
 * What the kernel sends (cell text may be an agent's) is only ever set as text
 * (`textContent`), never parsed as HTML.
 */

import {
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import type { ICellModel } from '@jupyterlab/cells';
import { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';
import { Kernel, KernelMessage } from '@jupyterlab/services';

const TARGET = 'acp_kernel.document';
const PROTOCOL = 1;
/** Set on the panel's node while the comm is open (tests wait on it; it shows nothing). */
const OPEN_ATTRIBUTE = 'data-acp-kernel-document';
/** A path longer than this is cut (the kernel refuses longer ones). */
const MAX_PATH = 4_000;

/** The caps the kernel asks for, each clamped to these ceilings (the kernel may not ask for more). */
const CEILINGS: Caps = {
  output_chars: 2_000,
  source_chars: 20_000,
  outputs_per_cell: 20,
  total_chars: 1_000_000,
  stub_chars: 200,
  max_cells: 10_000
};

interface Caps {
  output_chars: number;
  source_chars: number;
  outputs_per_cell: number;
  total_chars: number;
  stub_chars: number;
  max_cells: number;
}

interface Cut {
  head: string;
  tail: string;
  omitted: number;
}

type JSONish = { [key: string]: unknown };

function isObject(value: unknown): value is JSONish {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** A whole number within [0, ceiling], else the ceiling. */
function clampCap(value: unknown, ceiling: number): number {
  return typeof value === 'number' && Number.isInteger(value) && value >= 0
    ? Math.min(value, ceiling)
    : ceiling;
}

function capsFrom(value: unknown): Caps {
  const asked = isObject(value) ? value : {};
  const caps = { ...CEILINGS };
  for (const key of Object.keys(CEILINGS) as (keyof Caps)[]) {
    caps[key] = clampCap(asked[key], CEILINGS[key]);
  }
  return caps;
}

/** Text as nbformat keeps it: a string or a list of strings. */
function joined(value: unknown): string {
  if (typeof value === 'string') {
    return value;
  }
  if (Array.isArray(value)) {
    return value.filter(part => typeof part === 'string').join('');
  }
  return '';
}

/** `text` within `limit` characters: its head and tail, and the count left out. */
function cut(text: string, limit: number): Cut {
  if (text.length <= limit) {
    return { head: text, tail: '', omitted: 0 };
  }
  const head = Math.ceil(limit / 2);
  const tail = limit - head;
  return {
    head: text.slice(0, head),
    tail: tail > 0 ? text.slice(text.length - tail) : '',
    omitted: text.length - limit
  };
}

function cutSize(c: Cut): number {
  return c.head.length + c.tail.length;
}

/** One output, summarized and cut: text kept (cut), everything else named with its size. */
function summarizeOutput(output: JSONish, caps: Caps): { out: JSONish; size: number } {
  const kind = typeof output.output_type === 'string' ? output.output_type : '';
  if (kind === 'stream') {
    const text = cut(joined(output.text), caps.output_chars);
    const name = typeof output.name === 'string' ? output.name.slice(0, 100) : 'stdout';
    return { out: { output_type: kind, name, text }, size: cutSize(text) };
  }
  if (kind === 'error') {
    const ename = typeof output.ename === 'string' ? output.ename.slice(0, 200) : '';
    const evalue = cut(typeof output.evalue === 'string' ? output.evalue : '', caps.output_chars);
    return { out: { output_type: kind, ename, evalue }, size: ename.length + cutSize(evalue) };
  }
  if (kind === 'execute_result' || kind === 'display_data') {
    const data = isObject(output.data) ? output.data : {};
    let text: Cut | null = null;
    const others: JSONish[] = [];
    for (const mime of Object.keys(data).slice(0, 50)) {
      if (mime === 'text/plain') {
        text = cut(joined(data[mime]), caps.output_chars);
      } else {
        const value = data[mime];
        const size =
          typeof value === 'string' || Array.isArray(value)
            ? joined(value).length
            : JSON.stringify(value ?? null).length;
        others.push({ mime: mime.slice(0, 200), size });
      }
    }
    return {
      out: { output_type: kind, text, others },
      size: (text ? cutSize(text) : 0) + 40 * others.length
    };
  }
  return { out: { output_type: kind.slice(0, 100) || 'unknown' }, size: 20 };
}

/** The notebook as it is now, cut to `caps` (the kernel formats it for the agent). */
function snapshot(panel: NotebookPanel, id: number, caps: Caps): JSONish {
  const notebook = panel.content;
  const model = notebook.model;
  const cells: JSONish[] = [];
  const selected: number[] = [];
  let total = 0;
  const count = model ? model.cells.length : 0;
  const kept = Math.min(count, caps.max_cells);
  for (let i = 0; i < kept; i++) {
    const cell = model!.cells.get(i);
    const widget = notebook.widgets[i];
    if (widget && notebook.isSelected(widget)) {
      selected.push(i);
    }
    const source = cell.sharedModel.getSource();
    const stub = total >= caps.total_chars;
    const entry: JSONish = {
      id: String(cell.id ?? '').slice(0, 200),
      cell_type: String(cell.type),
      stub
    };
    if (stub) {
      entry.source = cut(source, caps.stub_chars);
      total += cutSize(entry.source as Cut);
      cells.push(entry);
      continue;
    }
    const src = cut(source, caps.source_chars);
    entry.source = src;
    total += cutSize(src);
    const json = cell.toJSON() as JSONish;
    if (json.cell_type === 'code') {
      const countValue = json.execution_count;
      entry.execution_count = typeof countValue === 'number' ? countValue : null;
      const outputs = Array.isArray(json.outputs) ? json.outputs : [];
      const summarized: JSONish[] = [];
      for (const output of outputs.slice(0, caps.outputs_per_cell)) {
        if (isObject(output)) {
          const { out, size } = summarizeOutput(output, caps);
          summarized.push(out);
          total += size;
        }
      }
      entry.outputs = summarized;
      entry.outputs_omitted = Math.max(0, outputs.length - summarized.length);
    }
    cells.push(entry);
  }
  const active = notebook.activeCellIndex;
  return {
    type: 'snapshot',
    id,
    path: panel.context.path.slice(0, MAX_PATH),
    dirty: panel.context.model.dirty,
    active: active >= 0 && active < count ? active : null,
    selected,
    cells,
    cells_omitted: count - kept
  };
}

/** The one document comm of one notebook panel, reopened after a restart or a kernel change. */
class DocumentLink {
  private comm: Kernel.IComm | null = null;
  private kernel: Kernel.IKernelConnection | null = null;
  private probing = false;
  private wanted = true; // probe when the kernel is next idle

  constructor(
    private panel: NotebookPanel,
    private app: string
  ) {
    const context = panel.sessionContext;
    context.kernelChanged.connect(() => this.reset(true), this);
    context.statusChanged.connect((_, status) => this.onStatus(status), this);
    context.ready.then(() => this.probe()).catch(() => undefined);
    panel.disposed.connect(() => this.close(true), this);
  }

  /** A cell ran: `%load_ext acp_kernel` may have registered the target. */
  executed(): void {
    if (!this.comm) {
      this.wanted = true;
      this.probe();
    }
  }

  private onStatus(status: Kernel.Status): void {
    if (status === 'restarting' || status === 'autorestarting' || status === 'dead') {
      this.reset(false); // its comms went with the old process: nothing to tell it
    } else if (status === 'idle' && this.wanted) {
      this.probe();
    }
  }

  private reset(tell = true): void {
    this.close(tell);
    this.wanted = true;
  }

  /** Forget the comm; with `tell`, close it in the kernel too (which then forgets this page). */
  private close(tell = true): void {
    const comm = this.comm;
    this.comm = null;
    this.kernel = null;
    this.panel.node.removeAttribute(OPEN_ATTRIBUTE);
    if (!comm || comm.isDisposed) {
      return;
    }
    if (!tell) {
      comm.dispose();
      return;
    }
    try {
      comm.close().done.catch(() => undefined);
    } catch {
      comm.dispose(); // the kernel is gone already
    }
  }

  /** Ask the kernel whether it offers the target (comm_info); open the comm if so. */
  private async probe(): Promise<void> {
    const kernel = this.panel.sessionContext.session?.kernel;
    if (!kernel || this.comm || this.probing || kernel.status === 'dead') {
      return;
    }
    this.probing = true;
    this.wanted = false;
    try {
      const reply = await kernel.requestCommInfo({ target_name: TARGET });
      const content = reply.content as unknown as JSONish;
      const comms = isObject(content.comms) ? content.comms : {};
      const offered = Object.values(comms).some(
        info => isObject(info) && info.target_name === TARGET
      );
      if (offered && kernel === this.panel.sessionContext.session?.kernel && !this.comm) {
        this.open(kernel);
      }
    } catch {
      this.wanted = true; // a kernel that went away meanwhile: the next idle asks again
    } finally {
      this.probing = false;
    }
  }

  private open(kernel: Kernel.IKernelConnection): void {
    const comm = kernel.createComm(TARGET);
    this.comm = comm;
    this.kernel = kernel;
    comm.onMsg = msg => this.onMsg(comm, msg);
    comm.onClose = () => {
      if (this.comm === comm) {
        this.comm = null;
        this.kernel = null;
        this.panel.node.removeAttribute(OPEN_ATTRIBUTE);
      }
    };
    comm.open({
      type: 'hello',
      protocol: PROTOCOL,
      path: this.panel.context.path.slice(0, MAX_PATH),
      app: this.app.slice(0, 100)
    });
  }

  private onMsg(comm: Kernel.IComm, msg: KernelMessage.ICommMsgMsg): void {
    const data = msg.content.data as unknown;
    if (!isObject(data) || comm !== this.comm) {
      return;
    }
    if (data.type === 'welcome' && data.protocol === PROTOCOL) {
      this.panel.node.setAttribute(OPEN_ATTRIBUTE, 'open');
      return;
    }
    if (data.type === 'snapshot_request' && Number.isInteger(data.id)) {
      let reply: JSONish;
      try {
        reply = snapshot(this.panel, data.id as number, capsFrom(data.caps));
      } catch (error) {
        reply = { type: 'error', id: data.id, error: String(error).slice(0, 1_000) };
      }
      this.send(comm, reply);
    } else if (data.type === 'propose' && Number.isInteger(data.id)) {
      const reply = (answer: JSONish) => this.send(comm, { type: 'decided', id: data.id, ...answer });
      try {
        showProposal(this.panel, data, reply);
      } catch (error) {
        reply({ outcome: 'invalid', detail: `the page could not show it: ${String(error).slice(0, 500)}` });
      }
    }
    // any other type: a later protocol's message, ignored
  }

  private send(comm: Kernel.IComm, reply: JSONish): void {
    if (!comm.isDisposed && this.kernel && this.kernel.status !== 'dead') {
      try {
        comm.send(reply as KernelMessage.ICommMsgMsg['content']['data']).done.catch(() => undefined);
      } catch {
        // the kernel went away meanwhile: the kernel side times out
      }
    }
  }
}

// -- proposals ----------------------------------------------------------------------

/** Set on a proposal's box: its kind and state (tests and styles read them). */
const PROPOSAL_CLASS = 'acp-proposal';

function text(tag: string, content: string, className = ''): HTMLElement {
  const node = document.createElement(tag);
  node.textContent = content; // agent text: never HTML
  if (className) {
    node.className = className;
  }
  return node;
}

function button(label: string, className: string, onClick: () => void): HTMLButtonElement {
  const node = document.createElement('button');
  node.type = 'button';
  node.textContent = label;
  node.className = `jp-Button ${className}`;
  node.addEventListener('click', onClick);
  return node;
}

function findCell(panel: NotebookPanel, id: string): { index: number; cell: ICellModel } | null {
  const cells = panel.content.model?.cells;
  if (!cells || !id) {
    return null;
  }
  for (let i = 0; i < cells.length; i++) {
    const cell = cells.get(i);
    if (cell.id === id) {
      return { index: i, cell };
    }
  }
  return null;
}

/** `before` -> `after` as lines: the common head and tail as context, the rest removed and added. */
function diffLines(before: string, after: string): [string, string][] {
  const a = before.split('\n');
  const b = after.split('\n');
  let head = 0;
  while (head < a.length && head < b.length && a[head] === b[head]) {
    head++;
  }
  let tail = 0;
  while (tail < a.length - head && tail < b.length - head && a[a.length - 1 - tail] === b[b.length - 1 - tail]) {
    tail++;
  }
  const out: [string, string][] = [];
  for (const line of a.slice(0, head)) out.push([' ', line]);
  for (const line of a.slice(head, a.length - tail)) out.push(['-', line]);
  for (const line of b.slice(head, b.length - tail)) out.push(['+', line]);
  for (const line of a.slice(a.length - tail)) out.push([' ', line]);
  return out;
}

function occurrences(haystack: string, needle: string): number {
  let count = 0;
  for (let at = haystack.indexOf(needle); at >= 0 && count < 2; at = haystack.indexOf(needle, at + 1)) {
    count++;
  }
  return count;
}

/** Show one proposal on the cell it concerns; `reply` once with what became of it. */
function showProposal(panel: NotebookPanel, data: JSONish, reply: (answer: JSONish) => void): void {
  const notebook = panel.content;
  const model = notebook.model;
  const kind = data.kind;
  const str = (v: unknown) => (typeof v === 'string' ? v : null);
  if (!model || (kind !== 'insert' && kind !== 'edit' && kind !== 'delete')) {
    reply({ outcome: 'invalid', detail: 'the page has no notebook, or the proposal is of an unknown kind' });
    return;
  }
  const cellType = data.cell_type === 'markdown' ? 'markdown' : 'code';
  const anchorId = str(data.cell_id) || (kind === 'insert' ? notebook.activeCell?.model.id ?? '' : '');
  const target = findCell(panel, anchorId);
  if (!target && !(kind === 'insert' && !anchorId)) {
    reply({ outcome: 'invalid', detail: `no cell with id ${JSON.stringify(anchorId.slice(0, 100))} in the notebook` });
    return;
  }
  const base = target ? target.cell.sharedModel.getSource() : '';
  let after = '';
  if (kind === 'edit') {
    const whole = str(data.source);
    const old = str(data.old);
    const replacement = str(data.new);
    if (whole !== null) {
      after = whole;
    } else if (old !== null && replacement !== null) {
      const found = occurrences(base, old);
      if (found !== 1) {
        reply({ outcome: 'invalid', detail: found === 0 ? 'the snippet old is not in the cell' : 'the snippet old occurs more than once in the cell' });
        return;
      }
      after = base.replace(old, () => replacement);
    } else {
      reply({ outcome: 'invalid', detail: 'an edit needs source, or old and new' });
      return;
    }
  }
  const source = kind === 'insert' ? str(data.source) ?? '' : after;

  // The box, on the cell it concerns (an insert: on the cell it goes below).
  const box = document.createElement('div');
  box.className = `${PROPOSAL_CLASS} ${PROPOSAL_CLASS}-${kind}`;
  box.dataset.state = 'waiting';
  box.style.cssText = 'margin:4px 0 4px 64px;padding:6px 8px;border:1px dashed var(--jp-brand-color1);' +
    'border-radius:4px;background:var(--jp-layout-color2);font-size:var(--jp-ui-font-size1)';
  const title =
    kind === 'insert' ? `The agent proposes a new ${cellType} cell below` :
    kind === 'edit' ? 'The agent proposes a change to this cell' : 'The agent proposes deleting this cell';
  const head = text('div', title, `${PROPOSAL_CLASS}-title`);
  head.style.fontWeight = 'bold';
  box.append(head);
  if (kind !== 'delete') {
    const pre = document.createElement('pre');
    pre.className = `${PROPOSAL_CLASS}-source`;
    pre.style.cssText = 'margin:4px 0;max-height:24em;overflow:auto;white-space:pre-wrap';
    if (kind === 'insert') {
      pre.textContent = source;
    } else {
      for (const [mark, line] of diffLines(base, after)) {
        const row = text('div', `${mark} ${line}`, mark === '-' ? 'acp-del' : mark === '+' ? 'acp-add' : '');
        if (mark !== ' ') {
          row.style.background = mark === '-' ? 'var(--jp-error-color3)' : 'var(--jp-success-color3)';
        }
        pre.append(row);
      }
    }
    box.append(pre);
  }
  const status = text('div', '', `${PROPOSAL_CLASS}-status`);
  const bar = document.createElement('div');
  bar.className = `${PROPOSAL_CLASS}-buttons`;
  box.append(status, bar);
  const host = target ? notebook.widgets.find(w => w.model.id === target.cell.id)?.node : null;
  (host ?? notebook.node).appendChild(box);

  let settled = false;
  let timer = 0;
  const watched = target?.cell;
  // Cells are found again by this id: a cell's model is disposed once the cell is deleted.
  const targetId = target ? anchorId : '';
  const onChange = () => {
    if (!settled && kind !== 'insert' && watched && watched.sharedModel.getSource() !== base) {
      finish('conflict', { detail: "the user changed the cell" },
        'You changed this cell while the proposal waited: it was not applied.');
    }
  };
  const onCells = () => {
    if (!settled && kind !== 'insert' && targetId && !findCell(panel, targetId)) {
      finish('conflict', { detail: "the cell was deleted" }, 'The cell is gone: not applied.');
    }
  };
  watched?.contentChanged.connect(onChange);
  model.cells.changed.connect(onCells);

  function finish(outcome: string, answer: JSONish, said: string, undo?: () => boolean): void {
    settled = true;
    window.clearTimeout(timer);
    watched?.contentChanged.disconnect(onChange);
    model?.cells.changed.disconnect(onCells);
    box.dataset.state = outcome;
    status.textContent = said;
    bar.replaceChildren();
    if (undo) {
      bar.append(button('Undo', `${PROPOSAL_CLASS}-undo`, () => {
        // Only over the change as it left the cell: never over the user's later edits.
        const undone = undo();
        box.dataset.state = undone ? 'undone' : 'kept';
        status.textContent = undone ? 'Undone.' : 'Not undone: the cell changed since.';
        bar.replaceChildren(button('Dismiss', `${PROPOSAL_CLASS}-dismiss`, () => box.remove()));
      }));
    }
    bar.append(button('Dismiss', `${PROPOSAL_CLASS}-dismiss`, () => box.remove()));
    reply({ outcome, ...answer });
  }

  /** Apply it now; what undoes it (false, and nothing done, when the cell changed since). */
  function apply(): { cellId: string; undo: () => boolean } | string {
    const cells = model!.cells;
    if (kind === 'insert') {
      const index = targetId ? findCell(panel, targetId)?.index : cells.length - 1;
      if (index === undefined) {
        return 'the cell to insert below is gone';
      }
      const inserted = model!.sharedModel.insertCell(index + 1, { cell_type: cellType, source });
      const id = inserted.getId();
      return { cellId: id, undo: () => {
        const now = findCell(panel, id);
        if (!now || now.cell.sharedModel.getSource() !== source) {
          return false;
        }
        model!.sharedModel.deleteCell(now.index);
        return true;
      } };
    }
    const now = findCell(panel, targetId);
    if (!now || now.cell.sharedModel.getSource() !== base) {
      return 'the cell changed';
    }
    if (kind === 'edit') {
      now.cell.sharedModel.setSource(after);
      const id = now.cell.id;
      return { cellId: id, undo: () => {
        const cell = findCell(panel, id);
        if (!cell || cell.cell.sharedModel.getSource() !== after) {
          return false;
        }
        cell.cell.sharedModel.setSource(base);
        return true;
      } };
    }
    const json = now.cell.toJSON();
    const id = now.cell.id;
    model!.sharedModel.deleteCell(now.index); // (the cell's model is disposed with it)
    // The box went with the cell: it stays (with Undo) on the cell above, or atop the notebook.
    const above = notebook.widgets[now.index - 1];
    if (above) {
      above.node.appendChild(box);
    } else {
      notebook.node.prepend(box);
    }
    return { cellId: id, undo: () => {
      model!.sharedModel.insertCell(Math.min(now.index, model!.cells.length), json as any);
      return true;
    } };
  }

  function accept(by: string): void {
    watched?.contentChanged.disconnect(onChange); // our own change is not the user's
    model?.cells.changed.disconnect(onCells);
    let done: ReturnType<typeof apply>;
    try {
      done = apply();
    } catch (error) {
      finish('invalid', { detail: `the page could not apply it: ${String(error).slice(0, 500)}` }, 'Could not apply it.');
      return;
    }
    if (typeof done === 'string') {
      finish('conflict', { detail: done }, `Not applied: ${done}.`);
      return;
    }
    finish('applied', { cell_id: done.cellId.slice(0, 200) }, by, done.undo);
  }

  if (data.apply === true) {
    accept('Applied by the agent (permissions: allow-all).');
    return;
  }
  const words = document.createElement('input');
  words.type = 'text';
  words.placeholder = 'why not (optional, for the agent)';
  words.className = `${PROPOSAL_CLASS}-words`;
  words.style.cssText = 'margin-left:8px;width:18em';
  bar.append(
    button('Accept', `${PROPOSAL_CLASS}-accept jp-mod-accept`, () => accept('Accepted.')),
    button('Reject', `${PROPOSAL_CLASS}-reject jp-mod-reject`, () =>
      finish('rejected', { detail: words.value.slice(0, 2_000) }, 'Rejected.')),
    words
  );
  const seconds = typeof data.seconds === 'number' && data.seconds > 0 ? Math.min(data.seconds, 86_400) : 900;
  timer = window.setTimeout(() => finish('expired', {}, 'Nobody answered in time: withdrawn.'), seconds * 1000);
  box.scrollIntoView({ block: 'nearest' });
}

const plugin: JupyterFrontEndPlugin<void> = {
  id: 'acp-kernel:document',
  description: 'Lets the ACP kernel (and %load_ext acp_kernel) read the live notebook for the agent.',
  autoStart: true,
  requires: [INotebookTracker],
  activate: (app: JupyterFrontEnd, tracker: INotebookTracker) => {
    const name = app.name || 'jupyter';
    tracker.widgetAdded.connect((_, panel) => {
      const link = new DocumentLink(panel, name);
      // A run finished (its kernel went idle after an execute_request): the run may
      // have been `%load_ext acp_kernel`, so a kernel without the target is asked again.
      panel.sessionContext.iopubMessage.connect((__, msg) => {
        if (
          msg.header.msg_type === 'status' &&
          (msg.content as JSONish).execution_state === 'idle' &&
          (msg.parent_header as JSONish).msg_type === 'execute_request'
        ) {
          link.executed();
        }
      });
    });
  }
};

export default plugin;
