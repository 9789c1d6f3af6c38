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
 * meanwhile: never applied over their text), invalid, expired, or withdrawn (its turn
 * ended first). A turn's proposals share a bar on the turn's cell: Accept all, Reject all,
 * and "Undo this turn's edits" in one step.
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
/** How long a probe waits for comm_info before it opens the comm anyway (a busy kernel), in ms. */
const PROBE_WAIT = 3_000;
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

/** One cell's whole source (run_cell), or an error saying why not. */
function cellSource(panel: NotebookPanel, id: number, cellId: string): JSONish {
  const cells = panel.content.model?.cells;
  for (let i = 0; cells && i < cells.length; i++) {
    const cell = cells.get(i);
    if (cell.id === cellId) {
      const source = cell.sharedModel.getSource();
      if (source.length > CEILINGS.source_chars) {
        return { type: 'error', id, error: `the cell's source is longer than ${CEILINGS.source_chars} characters` };
      }
      return { type: 'cell', id, cell_id: cellId, cell_type: String(cell.type), source };
    }
  }
  return { type: 'error', id, error: `no cell with id ${JSON.stringify(cellId.slice(0, 100))} in the notebook` };
}

/** The one document comm of one notebook panel, reopened after a restart or a kernel change. */
class DocumentLink {
  private comm: Kernel.IComm | null = null;
  private kernel: Kernel.IKernelConnection | null = null;
  private proposals: Proposals;
  private probing = false;
  private wanted = true; // probe when the kernel is next idle

  constructor(
    private panel: NotebookPanel,
    private app: string
  ) {
    this.proposals = new Proposals(panel);
    const context = panel.sessionContext;
    context.kernelChanged.connect(() => this.reset(true), this);
    context.statusChanged.connect((_, status) => this.onStatus(status), this);
    context.ready.then(() => this.probe()).catch(() => undefined);
    panel.disposed.connect(() => this.close(true), this);
  }

  /** The request `msgId` is done: `%load_ext acp_kernel` may have registered the target, and
   * proposals of a turn that request ran can no longer be answered. */
  executed(msgId: string): void {
    this.proposals.turnEnded(msgId);
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
    this.proposals.kernelGone();
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

  /**
   * Ask the kernel whether it offers the target (comm_info); open the comm if so.
   *
   * A kernel running a cell answers comm_info only once the cell is done (ipykernel lets
   * only comm messages past a running cell), and that cell may be a turn waiting for this
   * page (a proposal shown before a reload): without an answer in `PROBE_WAIT` ms the
   * comm is opened anyway. A kernel without the target closes it again (and logs it).
   */
  private async probe(): Promise<void> {
    const kernel = this.panel.sessionContext.session?.kernel;
    if (!kernel || this.comm || this.probing || kernel.status === 'dead') {
      return;
    }
    this.probing = true;
    this.wanted = false;
    try {
      let timer = 0;
      const late = new Promise<null>(resolve => {
        timer = window.setTimeout(() => resolve(null), PROBE_WAIT);
      });
      const reply = await Promise.race([kernel.requestCommInfo({ target_name: TARGET }), late]);
      window.clearTimeout(timer);
      const content = (reply?.content ?? {}) as unknown as JSONish;
      const comms = isObject(content.comms) ? content.comms : {};
      const offered = reply === null || Object.values(comms).some(
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
        this.proposals.kernelGone();
        this.wanted = true; // refused (no target yet): the next idle asks again
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
    } else if (data.type === 'cell_request' && Number.isInteger(data.id)) {
      this.send(comm, cellSource(this.panel, data.id as number, typeof data.cell_id === 'string' ? data.cell_id : ''));
    } else if (data.type === 'propose' && Number.isInteger(data.id)) {
      const reply = (answer: JSONish) => this.send(comm, { type: 'decided', id: data.id, ...answer });
      try {
        this.proposals.show(data, reply);
      } catch (error) {
        reply({ outcome: 'invalid', detail: `the page could not show it: ${String(error).slice(0, 500)}` });
      }
    } else if (data.type === 'withdrawn' && Number.isInteger(data.id)) {
      this.proposals.withdrawn(data.id as number, typeof data.why === 'string' ? data.why : '');
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
/** Set on a turn's bar (Accept all, Reject all, Undo this turn's edits). */
const TURN_CLASS = 'acp-proposals-turn';

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

function wordsInput(className: string): HTMLInputElement {
  const words = document.createElement('input');
  words.type = 'text';
  words.placeholder = 'why not (optional, for the agent)';
  words.className = className;
  words.style.cssText = 'margin-left:8px;width:18em';
  return words;
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

/** The node of the cell with this id, if it is in the notebook. */
function cellNode(panel: NotebookPanel, id: string): HTMLElement | null {
  return id ? panel.content.widgets.find(w => w.model.id === id)?.node ?? null : null;
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

type Kind = 'insert' | 'edit' | 'delete';
type Answer = (answer: JSONish) => void;

/** A proposal's states: waiting, then what became of it (the answer's outcome), then maybe undone or kept. */
type State = 'waiting' | 'applied' | 'rejected' | 'conflict' | 'invalid' | 'expired' | 'withdrawn' | 'undone' | 'kept';

/** Counts each application, so a turn's edits are undone newest first. */
let applications = 0;

/**
 * One proposal, shown on the cell it concerns; it answers the kernel once with what
 * became of it. The notebook changes only in `accept`, and only if the cell is still
 * as the proposal was shown.
 */
class Proposal {
  readonly box = document.createElement('div');
  state: State = 'waiting';
  /** When it was applied (for Undo this turn's edits: newest first); 0: not applied. */
  applied = 0;
  private status = text('div', '', `${PROPOSAL_CLASS}-status`);
  private bar = document.createElement('div');
  private timer = 0;
  private undoing: (() => boolean) | null = null;
  private readonly watched: ICellModel | null;
  private readonly onModel = () => this.check();

  constructor(
    private panel: NotebookPanel,
    readonly kind: Kind,
    private cellType: 'code' | 'markdown',
    /** The cell it concerns (an insert: the one it goes below; "": below the last cell). */
    private targetId: string,
    /** The cell's source as shown, and what it becomes (an insert: its source). */
    private base: string,
    private after: string,
    private answer: Answer,
    readonly turn: string,
    private changed: () => void
  ) {
    this.watched = findCell(panel, targetId)?.cell ?? null;
    this.draw();
    this.watched?.contentChanged.connect(this.onModel);
    panel.content.model?.cells.changed.connect(this.onModel);
  }

  private draw(): void {
    const { box, kind } = this;
    box.className = `${PROPOSAL_CLASS} ${PROPOSAL_CLASS}-${kind}`;
    box.dataset.state = 'waiting';
    box.style.cssText = 'margin:4px 0 4px 64px;padding:6px 8px;border:1px dashed var(--jp-brand-color1);' +
      'border-radius:4px;background:var(--jp-layout-color2);font-size:var(--jp-ui-font-size1)';
    const title =
      kind === 'insert' ? `The agent proposes a new ${this.cellType} cell below` :
      kind === 'edit' ? 'The agent proposes a change to this cell' : 'The agent proposes deleting this cell';
    const head = text('div', title, `${PROPOSAL_CLASS}-title`);
    head.style.fontWeight = 'bold';
    box.append(head);
    if (kind !== 'delete') {
      const pre = document.createElement('pre');
      pre.className = `${PROPOSAL_CLASS}-source`;
      pre.style.cssText = 'margin:4px 0;max-height:24em;overflow:auto;white-space:pre-wrap';
      if (kind === 'insert') {
        pre.textContent = this.after;
      } else {
        for (const [mark, line] of diffLines(this.base, this.after)) {
          const row = text('div', `${mark} ${line}`, mark === '-' ? 'acp-del' : mark === '+' ? 'acp-add' : '');
          if (mark !== ' ') {
            row.style.background = mark === '-' ? 'var(--jp-error-color3)' : 'var(--jp-success-color3)';
          }
          pre.append(row);
        }
      }
      box.append(pre);
    }
    this.bar.className = `${PROPOSAL_CLASS}-buttons`;
    box.append(this.status, this.bar);
    (cellNode(this.panel, this.targetId) ?? this.panel.content.node).appendChild(box);
  }

  /** Wait for the user: Accept, Reject (with words), until `seconds` pass. */
  ask(seconds: number): void {
    const words = wordsInput(`${PROPOSAL_CLASS}-words`);
    this.bar.append(
      button('Accept', `${PROPOSAL_CLASS}-accept jp-mod-accept`, () => this.accept('Accepted.')),
      button('Reject', `${PROPOSAL_CLASS}-reject jp-mod-reject`, () => this.reject(words.value)),
      words
    );
    this.timer = window.setTimeout(() => this.finish('expired', {}, 'Nobody answered in time: withdrawn.'), seconds * 1000);
    this.box.scrollIntoView({ block: 'nearest' });
  }

  /** A user's edit to the cell, or its deletion, while the proposal waits: a conflict. */
  private check(): void {
    if (this.state !== 'waiting' || this.kind === 'insert' || !this.targetId) {
      return;
    }
    if (!findCell(this.panel, this.targetId)) {
      this.finish('conflict', { detail: 'the cell was deleted' }, 'The cell is gone: not applied.');
    } else if (this.watched && this.watched.sharedModel.getSource() !== this.base) {
      this.finish('conflict', { detail: 'the user changed the cell' },
        'You changed this cell while the proposal waited: it was not applied.');
    }
  }

  private unwatch(): void {
    window.clearTimeout(this.timer);
    this.watched?.contentChanged.disconnect(this.onModel);
    this.panel.content.model?.cells.changed.disconnect(this.onModel);
  }

  /** Settle it: say so in the box, and (with `tell`) answer the kernel; not when the kernel withdrew it. */
  private finish(outcome: State, answer: JSONish, said: string, tell = true): void {
    if (this.state !== 'waiting') {
      return;
    }
    this.unwatch();
    this.state = outcome;
    this.box.dataset.state = outcome;
    this.status.textContent = said;
    this.bar.replaceChildren();
    if (this.undoing) {
      this.bar.append(button('Undo', `${PROPOSAL_CLASS}-undo`, () => this.undo()));
    }
    this.bar.append(button('Dismiss', `${PROPOSAL_CLASS}-dismiss`, () => this.box.remove()));
    if (tell) {
      this.answer({ outcome, ...answer });
    }
    this.changed();
  }

  reject(words: string): void {
    this.finish('rejected', { detail: words.slice(0, 2_000) }, 'Rejected.');
  }

  /** No longer answerable: its turn ended (`tell`: say so to the kernel), or the kernel withdrew it. */
  withdraw(said: string, detail: string, tell: boolean): void {
    this.finish('withdrawn', { detail }, said, tell);
  }

  accept(by: string): void {
    if (this.state !== 'waiting') {
      return;
    }
    this.unwatch(); // our own change is not the user's
    let done: { cellId: string; undo: () => boolean } | string;
    try {
      done = this.apply();
    } catch (error) {
      this.finish('invalid', { detail: `the page could not apply it: ${String(error).slice(0, 500)}` }, 'Could not apply it.');
      return;
    }
    if (typeof done === 'string') {
      this.finish('conflict', { detail: done }, `Not applied: ${done}.`);
      return;
    }
    this.undoing = done.undo;
    this.applied = ++applications;
    this.finish('applied', { cell_id: done.cellId.slice(0, 200) }, by);
  }

  /** Undo it, only over the change as it left the cell (never over the user's later edits). */
  undo(): boolean {
    if (this.state !== 'applied' || !this.undoing) {
      return false;
    }
    const undone = this.undoing();
    this.state = undone ? 'undone' : 'kept';
    this.box.dataset.state = this.state;
    this.status.textContent = undone ? 'Undone.' : 'Not undone: the cell changed since.';
    this.bar.replaceChildren(button('Dismiss', `${PROPOSAL_CLASS}-dismiss`, () => this.box.remove()));
    this.changed();
    return undone;
  }

  /** Apply it now; what undoes it (false, and nothing done, when the cell changed since). */
  private apply(): { cellId: string; undo: () => boolean } | string {
    const { panel, kind, base, after, targetId } = this;
    const model = panel.content.model!;
    if (kind === 'insert') {
      const index = targetId ? findCell(panel, targetId)?.index : model.cells.length - 1;
      if (index === undefined) {
        return 'the cell to insert below is gone';
      }
      const id = model.sharedModel.insertCell(index + 1, { cell_type: this.cellType, source: after }).getId();
      return { cellId: id, undo: () => {
        const now = findCell(panel, id);
        if (!now || now.cell.sharedModel.getSource() !== after) {
          return false;
        }
        model.sharedModel.deleteCell(now.index);
        return true;
      } };
    }
    const now = findCell(panel, targetId);
    if (!now || now.cell.sharedModel.getSource() !== base) {
      return 'the cell changed';
    }
    const id = now.cell.id;
    if (kind === 'edit') {
      now.cell.sharedModel.setSource(after);
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
    model.sharedModel.deleteCell(now.index); // (the cell's model is disposed with it)
    // The box went with the cell: it stays (with Undo) on the cell above, or atop the notebook.
    const above = panel.content.widgets[now.index - 1];
    if (above) {
      above.node.appendChild(this.box);
    } else {
      panel.content.node.prepend(this.box);
    }
    return { cellId: id, undo: () => {
      if (findCell(panel, id)) {
        return false; // it is back already
      }
      model.sharedModel.insertCell(Math.min(now.index, model.cells.length), json as any);
      return true;
    } };
  }
}

/**
 * The proposals one turn made, on the cell that ran the turn: how many wait, Accept all
 * and Reject all while two or more wait, and "Undo this turn's edits" (every change of the
 * turn that was applied, newest first, each only if its cell is as the change left it).
 */
class TurnBar {
  readonly proposals: Proposal[] = [];
  private node = document.createElement('div');
  private summary = text('div', '', `${TURN_CLASS}-summary`);
  private buttons = document.createElement('div');
  private said = text('div', '', `${TURN_CLASS}-status`);
  private words = wordsInput(`${TURN_CLASS}-words`);

  constructor(private panel: NotebookPanel, readonly turn: string, readonly cellId: string) {
    this.node.className = TURN_CLASS;
    this.node.style.cssText = 'margin:4px 0 4px 64px;padding:4px 8px;border-left:3px solid var(--jp-brand-color1);' +
      'font-size:var(--jp-ui-font-size1)';
    this.buttons.className = `${TURN_CLASS}-buttons`;
    this.node.append(this.summary, this.buttons, this.said);
  }

  add(proposal: Proposal): void {
    this.proposals.push(proposal);
    this.refresh();
  }

  remove(): void {
    this.node.remove();
  }

  /** Redraw the counts and buttons; put the bar on the turn's cell (again: cells move). */
  refresh(): void {
    const count = (state: State) => this.proposals.filter(p => p.state === state).length;
    const waiting = count('waiting');
    const applied = this.proposals.filter(p => p.state === 'applied');
    const parts = (['waiting', 'applied', 'rejected', 'conflict', 'undone', 'kept', 'withdrawn', 'expired', 'invalid'] as State[])
      .map(state => [state, count(state)] as const)
      .filter(([, n]) => n > 0)
      .map(([state, n]) => `${n} ${state === 'kept' ? 'kept (changed since)' : state}`);
    this.summary.textContent = `This turn's proposals: ${parts.join(', ')}.`;
    this.node.dataset.waiting = String(waiting);
    this.node.dataset.applied = String(applied.length);
    this.buttons.replaceChildren();
    if (waiting >= 2) {
      this.buttons.append(
        button('Accept all', `${TURN_CLASS}-accept jp-mod-accept`, () => this.acceptAll()),
        button('Reject all', `${TURN_CLASS}-reject jp-mod-reject`, () => this.rejectAll()),
        this.words
      );
    }
    if (applied.length > 0) {
      this.buttons.append(button("Undo this turn's edits", `${TURN_CLASS}-undo`, () => this.undoAll()));
    }
    const host = cellNode(this.panel, this.cellId) ?? this.panel.content.node;
    if (this.node.parentElement !== host) {
      if (host === this.panel.content.node) {
        host.prepend(this.node);
      } else {
        host.appendChild(this.node);
      }
    }
  }

  private acceptAll(): void {
    for (const p of this.proposals.filter(p => p.state === 'waiting')) {
      p.accept('Accepted (Accept all).');
    }
    this.say('');
  }

  private rejectAll(): void {
    const words = this.words.value;
    for (const p of this.proposals.filter(p => p.state === 'waiting')) {
      p.reject(words);
    }
    this.say('');
  }

  /** One step: the turn's applied changes, newest first. */
  private undoAll(): void {
    const applied = this.proposals.filter(p => p.state === 'applied').sort((a, b) => b.applied - a.applied);
    const kept = applied.filter(p => !p.undo()).length;
    const undone = applied.length - kept;
    this.say(kept === 0
      ? `Undid this turn's ${undone} change${undone === 1 ? '' : 's'}.`
      : `Undid ${undone} of ${applied.length}: ${kept} kept, their cells changed since.`);
  }

  private say(words: string): void {
    this.said.textContent = words;
    this.refresh();
  }
}

/** The proposals shown in one notebook page, by id, and their turns. */
class Proposals {
  private byId = new Map<number, Proposal>();
  private turns = new Map<string, TurnBar>();

  constructor(private panel: NotebookPanel) {}

  /** Show one proposal on the cell it concerns; `reply` once with what became of it. */
  show(data: JSONish, reply: Answer): void {
    const panel = this.panel;
    const notebook = panel.content;
    const kind = data.kind;
    const str = (v: unknown) => (typeof v === 'string' ? v : null);
    if (!notebook.model || (kind !== 'insert' && kind !== 'edit' && kind !== 'delete')) {
      reply({ outcome: 'invalid', detail: 'the page has no notebook, or the proposal is of an unknown kind' });
      return;
    }
    const id = data.id as number;
    const anchorId = str(data.cell_id) || (kind === 'insert' ? notebook.activeCell?.model.id ?? '' : '');
    const target = findCell(panel, anchorId);
    if (!target && !(kind === 'insert' && !anchorId)) {
      reply({ outcome: 'invalid', detail: `no cell with id ${JSON.stringify(anchorId.slice(0, 100))} in the notebook` });
      return;
    }
    const base = target ? target.cell.sharedModel.getSource() : '';
    let after = str(data.source) ?? '';
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
    const turn = (str(data.turn) ?? '').slice(0, 300);
    let bar: TurnBar | undefined;
    if (turn) {
      bar = this.turns.get(turn);
      if (!bar) {
        const cellId = (str(data.turn_cell) ?? '').slice(0, 300);
        // The cell ran again: an earlier turn's bar there goes, unless it can still undo something.
        for (const [key, old] of this.turns) {
          if (old.cellId === cellId && !old.proposals.some(p => p.state === 'applied' || p.state === 'waiting')) {
            old.remove();
            this.turns.delete(key);
          }
        }
        bar = new TurnBar(panel, turn, cellId);
        this.turns.set(turn, bar);
      }
    }
    const proposal = new Proposal(panel, kind, data.cell_type === 'markdown' ? 'markdown' : 'code',
      target ? anchorId : '', base, after, reply, turn, () => bar?.refresh());
    this.byId.set(id, proposal);
    bar?.add(proposal);
    if (data.apply === true) {
      proposal.accept('Applied by the agent (permissions: allow-all).');
      return;
    }
    const seconds = typeof data.seconds === 'number' && data.seconds > 0 ? Math.min(data.seconds, 86_400) : 900;
    proposal.ask(seconds);
  }

  /** The kernel no longer waits for `id` (answered in another page, or the agent stopped waiting). */
  withdrawn(id: number, why: string): void {
    this.byId.get(id)?.withdraw(`Withdrawn: ${why.slice(0, 200) || 'no longer asked'}.`, '', false);
  }

  /** The request that ran `turn` is done (the cell finished, or was interrupted): its waiting proposals go. */
  turnEnded(turn: string): void {
    for (const p of this.turns.get(turn)?.proposals ?? []) {
      p.withdraw('Withdrawn: the turn ended before you answered.', 'its turn ended (the cell finished or was interrupted)', true);
    }
  }

  /** The kernel went (a restart, another kernel): nobody waits for the answers any more. */
  kernelGone(): void {
    for (const p of this.byId.values()) {
      p.withdraw('Withdrawn: the kernel restarted or changed.', '', false);
    }
    this.byId.clear(); // a new kernel counts its ids from 1 again
  }
}

const plugin: JupyterFrontEndPlugin<void> = {
  id: 'acp-kernel:document',
  description: "Lets the ACP kernel (and %load_ext acp_kernel) read the live notebook for the agent, and shows the agent's changes as proposals to accept, reject and undo.",
  autoStart: true,
  requires: [INotebookTracker],
  activate: (app: JupyterFrontEnd, tracker: INotebookTracker) => {
    const name = app.name || 'jupyter';
    tracker.widgetAdded.connect((_, panel) => {
      const link = new DocumentLink(panel, name);
      // A run finished (its kernel went idle after an execute_request): the run may
      // have been `%load_ext acp_kernel`, so a kernel without the target is asked again;
      // and if it ran an agent's turn, that turn's unanswered proposals are withdrawn.
      panel.sessionContext.iopubMessage.connect((__, msg) => {
        if (
          msg.header.msg_type === 'status' &&
          (msg.content as JSONish).execution_state === 'idle' &&
          (msg.parent_header as JSONish).msg_type === 'execute_request'
        ) {
          link.executed(String((msg.parent_header as JSONish).msg_id ?? ''));
        }
      });
    });
  }
};

export default plugin;
