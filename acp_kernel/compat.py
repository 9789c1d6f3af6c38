"""Every use of another project's private API, in one place, with version gates.

acp-kernel leans on a few things ipykernel, ipywidgets, anywidget and
terminado do not promise: when one of them changes, this is the file to
read. :data:`TESTED` lists the ranges the test suite ran against;
:func:`untested` names installed versions outside them (the kernel can log
it at start-up), so a break shows up as a clear line, not a strange
traceback deep in a turn.

Not here, because they are public: terminado's ``PtyWithClients.ptyproc``
(a ptyprocess ``PtyProcess``: ``fd``, ``pid``, ``getwinsize``...), and the
``comm`` package's ``create_comm``/``get_comm_manager``, which it documents for
kernels to replace.

One use lives elsewhere, by design: :class:`acp_kernel.passthrough.manager.PassthroughManager`
subclasses terminado's ``NamedTermManager`` and replaces some of its methods
(a subclass is terminado's own way to set a policy, but these methods are not
documented as hooks). :data:`TERMINADO_OVERRIDES` names each and why, and
:func:`terminado_seams` checks that the installed terminado still has them.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import sys
import threading
from collections.abc import Callable, Iterator
from importlib import metadata
from typing import Any

from .errors import Abandoned, AcpError

#: Package -> (lowest, first untested) major.minor versions this file was written against.
TESTED: dict[str, tuple[tuple[int, int], tuple[int, int]]] = {
    "ipykernel": ((7, 4), (8, 0)),
    "ipywidgets": ((8, 0), (9, 0)),
    "anywidget": ((0, 9), (0, 12)),
    "terminado": ((0, 18), (0, 19)),
    "pyte": ((0, 8), (0, 9)),
    "pydantic": ((2, 7), (3, 0)),
}

#: terminado internals the passthrough manager replaces or reads (name: why).
TERMINADO_OVERRIDES: dict[str, str] = {
    "NamedTermManager.pty_read": "one read per wake-up becomes a drain of what the PTY holds (a flood "
    "is one round of client calls, not thousands)",
    "NamedTermManager.on_eof": "stop reading at once and reap the child on the executor, never on the "
    "event loop; a paused (flow-controlled) terminal has no handler to remove",
    "NamedTermManager.ptys_by_fd": "pty_read finds its terminal by fd, as terminado's own does",
    "NamedTermManager.terminals": "names in use (NamedTermManager's dict), for unique names and kill_now",
    "NamedTermManager.blocking_io_executor": "where on_eof reaps the child",
    "PtyWithClients.read_buffer": "replaced by an empty deque: each client keeps what it needs, so "
    "terminado's 1,000-read history would be a copy",
    "PtyWithClients.clients": "the readers pty_read calls (add_pty_client)",
}


def terminado_seams() -> list[str]:
    """The names in :data:`TERMINADO_OVERRIDES` the installed terminado lacks, as sentences
    (empty when all are there): a break shows as one line at start-up, not deep in a turn."""
    from terminado import management

    manager = management.NamedTermManager(shell_command=["true"])
    # A PtyWithClients sets its attributes in __init__ (it spawns a process): read its names.
    pty_names = set(management.PtyWithClients.__init__.__code__.co_names)
    missing = []
    for dotted in TERMINADO_OVERRIDES:
        owner, name = dotted.split(".")
        there = hasattr(manager, name) if owner == "NamedTermManager" else name in pty_names
        if not there:
            missing.append(f"terminado {metadata.version('terminado')} has no {dotted}: "
                           "acp_kernel.passthrough.manager relies on it (see acp_kernel.compat)")
    return missing


def _major_minor(version: str) -> tuple[int, int]:
    parts = []
    for piece in version.split(".")[:2]:
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits or 0))
    while len(parts) < 2:
        parts.append(0)
    return parts[0], parts[1]


def untested() -> list[str]:
    """Installed packages whose version is outside :data:`TESTED`, as sentences."""
    out = []
    for name, (low, high) in TESTED.items():
        try:
            have = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
        if not (low <= _major_minor(have) < high):
            out.append(f"{name} {have} is outside the tested range "
                       f"{low[0]}.{low[1]} to before {high[0]}.{high[1]}: acp_kernel.compat may need a look")
    return out


# -- ipywidgets ------------------------------------------------------------------


def send_partial_state(widget: Any, state: dict[str, Any]) -> None:
    """Send some keys of a widget's state (the widget protocol's partial
    ``update``), keys that are not traits included. ipywidgets 8 has no
    public call for it: ``Widget._send`` is what ``send_state`` uses."""
    widget._send({"method": "update", "state": state, "buffer_paths": []})


def register_widget_control(manager: Any) -> bool:
    """Give a comm manager ipywidgets' targets (what ``ipywidgets`` does on
    import inside IPython): a reloaded page then gets every widget's state
    through ``jupyter.widget.control``. False when ipywidgets is missing."""
    try:
        from ipywidgets import Widget
    except ImportError:
        return False
    manager.register_target("jupyter.widget", Widget.handle_comm_opened)
    manager.register_target("jupyter.widget.control", Widget.handle_control_comm_opened)
    return True


# -- anywidget -------------------------------------------------------------------

_class_traits_base: Any = None


def class_traits_anywidget() -> Any:
    """An ``anywidget.AnyWidget`` whose ``_esm``/``_css``/``_anywidget_id`` may be
    class traits: anywidget (0.9 to 0.11) adds them per instance with
    ``add_traits``, which makes a new class per widget; this base adds only
    the ones a subclass did not declare."""
    global _class_traits_base
    if _class_traits_base is None:
        import anywidget

        class ClassTraitsWidget(anywidget.AnyWidget):
            def add_traits(self, **traits: Any) -> None:
                missing = {k: v for k, v in traits.items() if not self.has_trait(k)}
                if missing:
                    super().add_traits(**missing)

        _class_traits_base = ClassTraitsWidget
    return _class_traits_base


# -- IPython --------------------------------------------------------------------


def ipython_asyncio_loop() -> asyncio.AbstractEventLoop:
    """IPython's own asyncio loop (``IPython.core.async_helpers``, where its
    autoawait runs cells): terminal IPython has no loop running between cells,
    and a magic must run its coroutine on the loop later cells will see."""
    from IPython.core.async_helpers import get_asyncio_loop

    return get_asyncio_loop()


@contextlib.contextmanager
def displays_to(append: Callable[[dict[str, Any]], None]) -> Iterator[None]:
    """While inside, ``display()`` calls and ``sys.displayhook`` results go to
    ``append({"data": bundle})`` instead of the cell. IPython has no public way to
    redirect them: the shell's ``display_pub`` is swapped (as its ``capture_output``
    does), and the display hook replaced. Outside IPython: nothing changes."""
    try:
        from IPython import get_ipython
        from IPython.core.displayhook import CapturingDisplayHook
        from IPython.core.displaypub import DisplayPublisher
    except ImportError:
        yield
        return
    shell = get_ipython()
    if shell is None:
        yield
        return

    class _Sink:  # what CapturingDisplayHook appends its results to
        def append(self, output: dict[str, Any]) -> None:
            append(output)

    saved = DisplayState.now(shell)

    class Publisher(DisplayPublisher):
        def publish(self, data: Any, metadata: Any = None, source: Any = None, *, transient: Any = None,
                    update: bool = False, **kwargs: Any) -> None:
            append({"data": data})

        def clear_output(self, wait: bool = False) -> None:
            pass

        def set_parent(self, parent: Any) -> None:
            """ipykernel calls it on every shell message: pass it on, as a shell message
            can come while the code runs (and must never find the kernel unable to answer)."""
            setter = getattr(saved.pub, "set_parent", None)
            if setter is not None:
                setter(parent)

    entry = (shell, saved.pub)
    try:  # the swap inside the try: an interrupt landing mid-swap still restores
        _diverted.append(entry)
        shell.display_pub = Publisher(shell=shell)
        sys.displayhook = CapturingDisplayHook(shell=shell, outputs=_Sink())
        yield
    finally:
        saved.restore()  # (and takes ``entry`` off _diverted)


@dataclasses.dataclass(frozen=True)
class DisplayState:
    """A shell's display publisher, ``sys.displayhook``, ``sys.stdout`` and ``sys.stderr``
    at one moment. The notebook server's ``execute`` takes one before it runs code under
    SIGINT-raises and restores it after (where a KeyboardInterrupt can no longer land
    between two statements of a restore), so an interrupted run never leaves the cell's
    displays diverted. :meth:`restore` also ends the diversions of that publisher."""

    shell: Any
    pub: Any
    hook: Any
    stdout: Any
    stderr: Any

    @classmethod
    def now(cls, shell: Any = None) -> DisplayState:
        if shell is None:
            try:
                from IPython import get_ipython
            except ImportError:  # pragma: no cover - IPython is a dependency
                return cls(None, None, sys.displayhook, sys.stdout, sys.stderr)
            shell = get_ipython()
        return cls(shell, getattr(shell, "display_pub", None), sys.displayhook, sys.stdout, sys.stderr)

    def restore(self) -> None:
        if self.shell is not None and self.shell.display_pub is not self.pub:
            self.shell.display_pub = self.pub
        if sys.displayhook is not self.hook:
            sys.displayhook = self.hook
        if sys.stdout is not self.stdout:
            sys.stdout = self.stdout
        if sys.stderr is not self.stderr:
            sys.stderr = self.stderr
        if self.shell is not None:
            _diverted[:] = [d for d in _diverted if d[0] is not self.shell or d[1] is not self.pub]


#: (shell, its own publisher) for each :func:`displays_to` in force, innermost last.
_diverted: list[tuple[Any, Any]] = []


@contextlib.contextmanager
def cell_displays() -> Iterator[None]:
    """Inside :func:`displays_to`, our own views' display messages (a passthrough
    run's progress, a turn's fallback) still go to the cell, not into what the
    running code is said to have displayed. Same thread only (the run's)."""
    if not _diverted:
        yield
        return
    shell, own = _diverted[-1]
    swapped = shell.display_pub
    shell.display_pub = own
    try:
        yield
    finally:
        shell.display_pub = swapped


# -- pydantic -----------------------------------------------------------------------


@contextlib.contextmanager
def lean_pydantic_models() -> Iterator[None]:
    """Models defined inside are built on first use, and without their field docstrings.

    For a large generated module (``acp.schema``: about 280 models) this is most of its
    import's CPU. ``defer_build`` is public pydantic config, set on ``BaseModel`` for the
    duration so every model defined inside inherits it (and keeps it). The docstrings
    (``use_attribute_docstrings``, read from each class's source) only become JSON-schema
    descriptions, which acp-kernel never makes; skipping them patches a private function,
    ``pydantic._internal._fields._update_fields_from_docstrings`` (2.7 and later), and is
    left out when it is not there. Call it at import time, not while other threads define
    models: both changes are process-wide while inside."""
    from pydantic import BaseModel

    try:
        from pydantic._internal import _fields
    except ImportError:  # pragma: no cover - a pydantic without the private module
        _fields = None  # type: ignore[assignment]
    docstrings = getattr(_fields, "_update_fields_from_docstrings", None)
    config = BaseModel.model_config
    BaseModel.model_config = {**config, "defer_build": True}
    if docstrings is not None:
        _fields._update_fields_from_docstrings = lambda *args, **kwargs: None
    try:
        yield
    finally:
        BaseModel.model_config = config
        if docstrings is not None:
            _fields._update_fields_from_docstrings = docstrings


# -- pyte -------------------------------------------------------------------------


def reset_pyte_parser(stream: Any) -> None:
    """Start a ``pyte.Stream``'s parser again after it raised (its parser is a
    generator, dead after an exception; pyte has no public reset)."""
    stream._initialize_parser()


# -- terminado -------------------------------------------------------------------


def add_pty_client(pty: Any, client: Any) -> None:
    """Make ``client`` a reader of a terminado ``PtyWithClients`` (its
    ``clients`` list is what terminado's read loop calls ``on_pty_read`` on)."""
    pty.clients.append(client)


# -- ipykernel --------------------------------------------------------------------


def install_comms(kernel: Any) -> None:
    """Give ipywidgets a comm manager bound to this wrapper kernel (as
    ipykernel's IPythonKernel does for itself): ipykernel's ``BaseComm`` and
    ``CommManager``, and its shell handlers for the comm messages."""
    import comm
    from ipykernel.comm.comm import BaseComm
    from ipykernel.comm.manager import CommManager

    manager = CommManager(kernel=kernel)
    comm.create_comm = lambda *a, **k: BaseComm(*a, **k)
    comm.get_comm_manager = lambda *a, **k: manager
    for msg_type in ("comm_open", "comm_msg", "comm_close"):
        kernel.shell_handlers[msg_type] = getattr(manager, msg_type)
    kernel.comm_manager = manager


def short_flushes() -> None:
    """At shutdown: the control thread flushes ``sys.stdout``/``stderr`` after the
    ``shutdown_request`` handler, while the main thread may already have stopped
    the IOPub thread (``IPKernelApp.close``); ``OutStream.flush`` then waits its
    ``flush_timeout`` (10 s) for a thread that is gone, the main thread waits for
    the control thread, and jupyter_client ends the kernel with SIGTERM after
    2.5 s. A short timeout lets it exit by itself."""
    for stream in (sys.stdout, sys.stderr):
        if hasattr(stream, "flush_timeout"):
            stream.flush_timeout = 0.2


def iopub_topic(kernel: Any, msg_type: str) -> bytes:
    """The iopub topic ipykernel gives a message of this type (``Kernel._topic``)."""
    return kernel._topic(msg_type)


def allow_stdin(kernel: Any) -> bool:
    """ipykernel's flag for the running request: may it ask the frontend (``Kernel._allow_stdin``)."""
    return bool(getattr(kernel, "_allow_stdin", False))


def iopub_thread_class() -> Any:
    """ipykernel's ``IOPubThread`` with two changes for this kernel.

    - No fork pipe (see :func:`launch_kernel_app`).
    - Waking the IOPub thread never blocks. At shutdown the main thread stops
      that thread and closes its event pipes while the control thread, done with
      ``shutdown_request``, still flushes stdout and publishes "idle"
      (``Kernel.process_control``); its send on a pipe nobody reads then blocks
      forever, the main thread waits for it, and jupyter_client ends the kernel
      with SIGTERM after half its wait (30 s in the tests, which hit it in about
      one shutdown in seven on a loaded 2-core machine). Here a wake-up that cannot
      be sent at once is dropped: the event is queued, and the thread, while it
      runs, drains every queued event on each wake-up it already has pending.
    """
    import zmq
    from ipykernel.iostream import IOPubThread

    class AcpIOPubThread(IOPubThread):
        def __init__(self, socket: Any, pipe: bool = False, **kwargs: Any) -> None:
            super().__init__(socket, pipe=False, **kwargs)

        def schedule(self, f: Callable[[], Any]) -> None:
            if not self.thread.is_alive():
                return super().schedule(f)
            self._events.append(f)
            try:
                self._event_pipe.send(b"", zmq.NOBLOCK)
            except zmq.ZMQError:  # stopped meanwhile: nobody reads the pipe (or it is closed)
                pass

    return AcpIOPubThread


def launch_kernel_app(kernel_class: Any) -> None:
    """Start ``IPKernelApp`` for ``kernel_class`` without the fork pipe: the
    app's IOPub thread listens on a sixth TCP port (127.0.0.1) for output of
    *forked* Python children. A wrapper kernel that runs no user Python forks
    none (agents and terminals are exec'd with pipes of their own), so no port
    beyond the five in the connection file. ipykernel has no switch for it:
    the app's ``IOPubThread`` is swapped while ``init_iopub`` runs (for
    :func:`iopub_thread_class`, which also never blocks waking that thread)."""
    from ipykernel import kernelapp

    iopub_class = iopub_thread_class()

    class AcpKernelApp(kernelapp.IPKernelApp):
        def init_iopub(self, context: Any) -> None:
            # Swapping the class ipykernel's module builds its IOPub thread from (a private seam).
            saved, kernelapp.IOPubThread = kernelapp.IOPubThread, iopub_class  # type: ignore[misc]
            try:
                super().init_iopub(context)
            finally:
                kernelapp.IOPubThread = saved  # type: ignore[misc]

    AcpKernelApp.launch_instance(kernel_class=kernel_class)


def watch_shell_messages(kernel: Any, msg_types: tuple[str, ...], watcher: Callable[[dict[str, Any]], Any]) -> None:
    """Call ``watcher(msg)`` on each shell message of these types before its
    handler (``Kernel.shell_handlers`` maps a type to ``handler(stream, idents, msg)``)."""
    for msg_type in msg_types:
        handler = kernel.shell_handlers.get(msg_type)
        if handler is None:
            continue

        def watched(stream: Any, idents: Any, msg: dict[str, Any], _handler: Any = handler) -> Any:
            try:
                watcher(msg)
            except Exception:  # noqa: BLE001 - watching must never break the handler
                pass
            return _handler(stream, idents, msg)

        kernel.shell_handlers[msg_type] = watched


class StdinClosed(AcpError, EOFError):
    """The frontend cannot answer input requests (``allow_stdin`` False)."""


def stdin_reader(kernel: Any, *, poll: float = 0.05) -> Callable[[str, threading.Event], str]:
    """``read(prompt, stop)`` for :class:`acp_kernel.frontends.ask.StdinQuestions`: an
    ``input_request`` to the frontend of the current cell, whose answer is
    awaited (in a worker thread) until it comes or ``stop`` is set.

    ipykernel's ``Kernel.raw_input`` waits forever; a question the agent
    withdrew (a cancelled turn) must stop waiting. This is its loop with a
    stop event; it uses the cell's parent identity, which ipykernel keeps in
    the private ``_parent_ident``. Call it in the cell's context (the
    parent header is read then)."""
    import zmq

    parent = kernel.get_parent("shell")
    ident = kernel._parent_ident["shell"]
    lock = threading.Lock()  # one question on the stdin socket at a time

    def read(prompt: str, stop: threading.Event) -> str:
        if not getattr(kernel, "_allow_stdin", True):
            raise StdinClosed("this frontend does not answer input requests")
        with lock:
            sock = kernel.stdin_socket
            while True:  # drop stale replies
                try:
                    sock.recv_multipart(zmq.NOBLOCK)
                except zmq.ZMQError:
                    break
            kernel.session.send(sock, "input_request", {"prompt": str(prompt), "password": False}, parent, ident=ident)
            while not stop.is_set():
                rlist, _, xlist = zmq.select([sock], [], [sock], poll)
                if not (rlist or xlist):
                    continue
                _ident, reply = kernel.session.recv(sock)
                if reply is None:
                    continue
                value = reply.get("content", {}).get("value", "")
                if value == "\x04":
                    raise EOFError
                return str(value)
            raise Abandoned
    return read
