"""The kernel side of the document comm: the notebook pages (the ``acp-kernel``
front-end extension) that opened one, and asking a page for the live notebook.

A page asks ``comm_info`` for :data:`~.docwire.DOCUMENT_TARGET` before it opens a
comm, so a kernel without the target gets no ``comm_open`` (ipykernel would log an
error for it). ``comm_info`` lists open comms, not targets: :func:`register` keeps one
*anchor* comm under the target in the comm manager, never opened to any page, so
that the answer names the target from the start.

A comm message may be handled on another thread than the event loop that waits for
the answer (subshells), so answers are handed over with ``call_soon_threadsafe``.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import posixpath
from dataclasses import dataclass, field
from typing import Any, Callable, TypeVar

from pydantic import BaseModel, ValidationError

from .docwire import (DOCUMENT_TARGET, PAGE_GRACE, PROPOSALS_WAITING, PROTOCOL, SNAPSHOT_TIMEOUT, CellRequest,
                      CellSource, Decided, Failed, Hello, Propose, Snapshot, SnapshotRequest, Welcome, Withdrawn)

log = logging.getLogger(__name__)


@dataclass(eq=False)
class Page:
    """One open document comm: a notebook page showing this kernel's notebook."""

    comm: Any
    path: str  # the notebook's path as the page names it (relative to the server's root)
    app: str


@dataclass(eq=False)
class _Asked:
    """One request waiting for a page's answer."""

    future: asyncio.Future[dict]
    pages: list[Page]  # the pages it was sent to; an answer from any of them settles it
    #: A proposal (kept to show again in a page of the same notebook that opens meanwhile:
    #: a reload), with when the user's time runs out (the loop's clock); None: a snapshot.
    message: dict | None = None
    deadline: float = 0.0
    grace: asyncio.TimerHandle | None = None  # running while no page shows the proposal
    gone: list[Page] = field(default_factory=list)  # pages it was shown in that closed


_pages: list[Page] = []  # oldest first
_pending: dict[int, _Asked] = {}
_ids = itertools.count(1)
_waiting = 0  # proposals sent to a page and not answered yet
_anchor: Any = None


def register() -> bool:
    """Offer the document target in this kernel (again: a no-op); False outside a kernel."""
    global _anchor
    try:
        import comm

        manager = comm.get_comm_manager()
    except Exception:  # noqa: BLE001 - not in a kernel
        return False
    if manager is None:
        return False
    if manager.targets.get(DOCUMENT_TARGET) is not _on_open:
        manager.register_target(DOCUMENT_TARGET, _on_open)
    if _anchor is None or manager.comms.get(str(getattr(_anchor, "comm_id", ""))) is not _anchor:
        try:  # primary=False: nothing is sent; the manager only lists it for comm_info
            _anchor = comm.create_comm(target_name=DOCUMENT_TARGET, primary=False)
            manager.register_comm(_anchor)
        except Exception:  # noqa: BLE001 - pages then see no target and fall back to the file
            log.exception("acp_kernel: the document comm's anchor could not be registered")
            return False
    return True


def pages() -> list[Page]:
    """The pages with an open document comm, oldest first."""
    return list(_pages)


def _on_open(comm: Any, msg: dict) -> None:
    data = (msg.get("content") or {}).get("data") or {}
    try:
        hello = Hello.model_validate(data)
    except ValidationError:
        hello = None
    if hello is None or hello.protocol != PROTOCOL:
        comm.send({"type": "refused", "error": f"this kernel speaks document protocol {PROTOCOL}"})
        comm.close()
        return
    page = Page(comm=comm, path=hello.path, app=hello.app)
    _pages.append(page)
    comm.on_msg(lambda m: _on_msg(page, m))
    comm.on_close(lambda m: _forget(page))
    comm.send(Welcome().model_dump())
    _show_again(page)


def _show_again(page: Page) -> None:
    """A page of a notebook that was shown proposals opened (the user reloaded it, or
    closed and opened it again): the unanswered ones are shown there too, with the time left."""
    for asked in list(_pending.values()):
        if asked.message is None or not any(p.path == page.path for p in asked.pages + asked.gone):
            continue
        left = asked.deadline - asked.future.get_loop().time()
        if left <= 1 or asked.future.done():
            continue
        asked.pages.append(page)
        _loop_call(asked.future, _stop_grace, asked)
        with contextlib.suppress(Exception):
            page.comm.send({**asked.message, "seconds": round(left, 1)})


def _forget(page: Page) -> None:
    """The page closed its comm (the notebook's tab closed, the kernel changed). A snapshot
    it owed fails now; a proposal waits :data:`PAGE_GRACE` seconds for the page to come back."""
    if page in _pages:
        _pages.remove(page)
    for rid, asked in list(_pending.items()):
        if page not in asked.pages:
            continue
        asked.pages.remove(page)
        asked.gone.append(page)
        if asked.pages:
            continue
        if asked.message is None:
            _settle(asked.future, {"type": "error", "id": rid, "error": "the page closed its comm"})
        else:
            _loop_call(asked.future, _start_grace, rid, asked)


def _start_grace(rid: int, asked: _Asked) -> None:
    if asked.grace is None and not asked.pages and not asked.future.done():
        asked.grace = asked.future.get_loop().call_later(PAGE_GRACE, _settle, asked.future, {
            "type": "error", "id": rid,
            "error": f"the page was closed and no page of the notebook opened within {PAGE_GRACE:g} s"})


def _stop_grace(asked: _Asked) -> None:
    if asked.grace is not None:
        asked.grace.cancel()
        asked.grace = None


def _on_msg(page: Page, msg: dict) -> None:
    data = (msg.get("content") or {}).get("data")
    if not isinstance(data, dict) or not isinstance(data.get("id"), int):
        return  # nothing this side asked for: a later protocol's message, ignored
    asked = _pending.get(data["id"])
    if asked is None or page not in asked.pages:
        return
    for other in asked.pages:  # the same proposal in another page (a reload): answered here
        if other is not page:
            with contextlib.suppress(Exception):
                other.comm.send(Withdrawn(id=data["id"], why="answered in another page").model_dump())
    _settle(asked.future, data)


def _loop_call(future: asyncio.Future[Any], fn: Callable[..., Any], *args: Any) -> None:
    """``fn(*args)`` on the loop that waits for ``future`` (comm handlers may run on another thread)."""
    with contextlib.suppress(RuntimeError):  # the loop closed: the kernel is shutting down
        future.get_loop().call_soon_threadsafe(fn, *args)


def _settle(future: asyncio.Future[dict], data: dict) -> None:
    def settle() -> None:
        if not future.done():
            future.set_result(data)

    _loop_call(future, settle)


def choose(kernel_path: str | None) -> Page | None:
    """The page to ask: the newest one showing the kernel's own notebook (Jupyter Server
    names it to the kernel as an absolute path, the page relative to the root), else
    the newest one (another notebook sharing this kernel: the snapshot names its path)."""
    if not _pages:
        return None
    if kernel_path:
        mine = posixpath.normpath(kernel_path.replace("\\", "/"))
        for page in reversed(_pages):
            theirs = posixpath.normpath(page.path) if page.path else ""
            if theirs and (mine == theirs or mine.endswith("/" + theirs.lstrip("/"))):
                return page
    return _pages[-1]


NO_PAGE = ("no notebook page with acp-kernel's JupyterLab / Notebook 7 extension is connected to this "
           "kernel")


Answer = TypeVar("Answer", Snapshot, Decided, CellSource)


async def _request(kernel_path: str | None, make: Callable[[int], BaseModel], answer: type[Answer], doing: str,
                   what: str, timeout: float) -> tuple[Answer | None, str]:
    """Send ``make(id)`` to the page showing the notebook; its answer as ``answer``, or None
    and why not (said to the agent: ``doing`` is what the page could not do, ``what`` its answer)."""
    page = choose(kernel_path)
    if page is None:
        return None, NO_PAGE
    rid = next(_ids)
    loop = asyncio.get_running_loop()
    message = make(rid).model_dump()
    asked = _Asked(loop.create_future(), [page])
    if message.get("type") == "propose":
        asked.message, asked.deadline = message, loop.time() + float(message.get("seconds") or timeout)
    _pending[rid] = asked
    try:
        page.comm.send(message)
        data = await asyncio.wait_for(asked.future, timeout)
    except asyncio.TimeoutError:
        return None, f"the notebook page did not answer within {timeout:g} s"
    except Exception as exc:  # noqa: BLE001 - a comm that closed under us
        return None, f"the notebook page could not be asked ({type(exc).__name__})"
    finally:
        _pending.pop(rid, None)
        _stop_grace(asked)
        answered = asked.future.done() and not asked.future.cancelled()
        if asked.message is not None and not answered:  # given up (a timeout, a cancel)
            for shown in asked.pages:
                with contextlib.suppress(Exception):
                    shown.comm.send(Withdrawn(id=rid, why="the agent stopped waiting").model_dump())
    if data.get("type") == "error":
        try:
            error = Failed.model_validate(data).error
        except ValidationError:
            error = "no reason given"
        return None, f"the notebook page could not {doing} ({error[:300]})"
    try:
        return answer.model_validate(data), ""
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        where = ".".join(map(str, first["loc"]))
        return None, (f"the notebook page's {what} was refused ({exc.error_count()} problems; "
                      f"first at {where}: {first['msg']})")


async def snapshot(kernel_path: str | None, timeout: float = SNAPSHOT_TIMEOUT) -> tuple[Snapshot | None, str]:
    """The live notebook from a page, or None and why not (said to the agent)."""
    return await _request(kernel_path, lambda rid: SnapshotRequest(id=rid), Snapshot, "read the notebook", "snapshot",
                          timeout)


async def cell(kernel_path: str | None, cell_id: str, timeout: float = SNAPSHOT_TIMEOUT) -> tuple[CellSource | None, str]:
    """One cell's whole source from a page, or None and why not (said to the agent)."""
    return await _request(kernel_path, lambda rid: CellRequest(id=rid, cell_id=cell_id), CellSource,
                          "read the cell", "cell", timeout)


async def propose(kernel_path: str | None, proposal: dict, timeout: float) -> tuple[Decided | None, str]:
    """Show a change to the notebook in its page (``proposal``: :class:`Propose`'s fields
    but ``id``); what the user (or the page) decided, or None and why not. At most
    :data:`PROPOSALS_WAITING` wait at once."""
    global _waiting
    if _waiting >= PROPOSALS_WAITING:
        return None, (f"{PROPOSALS_WAITING} proposals already wait for the user's answer "
                      f"(the limit); propose more once they are answered")
    _waiting += 1
    try:
        return await _request(kernel_path, lambda rid: Propose(id=rid, **proposal), Decided, "show the proposal",
                              "answer", timeout)
    finally:
        _waiting -= 1
