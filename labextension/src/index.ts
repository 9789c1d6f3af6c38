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
 * This extension reads the notebook model and sends JSON. It draws nothing in the
 * page from what the kernel sends (cell text may be an agent's).
 */

import {
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
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
      if (!comm.isDisposed && this.kernel && this.kernel.status !== 'dead') {
        try {
          comm.send(reply as KernelMessage.ICommMsgMsg['content']['data']).done.catch(() => undefined);
        } catch {
          // the kernel went away meanwhile: the kernel side times out and falls back
        }
      }
    }
    // any other type: a later protocol's message, ignored
  }
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
