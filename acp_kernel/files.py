"""``fs/read_text_file`` and ``fs/write_text_file``, inside a workspace policy.

Where a path may go (after resolving symlinks with ``os.path.realpath``, so
``ws/link -> /etc`` is *outside*):

=====================  ===================================  ==============================
                       inside the session cwd/extra roots   outside
=====================  ===================================  ==============================
read                   allowed (any policy)                 ask; ``deny`` refuses
write                  allowed; ``deny`` refuses            ask; ``deny`` refuses
=====================  ===================================  ==============================

Inside the workspace a write is not asked again: agents ask before an edit
(``session/request_permission``, which the policy answers), and a second
prompt for the same change would only train people to click through.
"Ask" goes through the :class:`~acp_kernel.permissions.PermissionBroker`
(one prompt UI, "allow for this session" remembered per path); when nobody
can answer (``ctx.interactive`` False) it refuses and says how to allow it.
``allow-all`` is about the workspace: a path outside it is still asked.

Writes are atomic: a temp file in the same directory, fsync, rename over the
target (original mode kept), fsync the directory. A crash leaves the old or
the new content, never a mix. Missing parent directories are created (agents
write new files into new folders; the spec says write creates the file). A
``.ipynb`` is written only if the content is a valid notebook.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import stat
from collections.abc import Iterable
from typing import Any

from .errors import INTERNAL_ERROR, INVALID_PARAMS, RESOURCE_NOT_FOUND, RpcError
from .service_events import FileRead, FileWritten

# -- pure policy ------------------------------------------------------------------


def is_within(path: str, roots: Iterable[str]) -> bool:
    """True when the (already resolved) ``path`` is one of ``roots`` or below one."""
    for root in roots:
        try:
            if os.path.commonpath([path, root]) == root:
                return True
        except ValueError:  # different drives on Windows
            continue
    return False


def access_decision(op: str, inside: bool, policy: str) -> str:
    """"allow", "ask" or "deny" for a ``read``/``write`` (see the module table)."""
    if policy == "deny" and (op == "write" or not inside):
        return "deny"
    if not inside:
        return "ask"
    return "allow"


def resolve_roots(cwd: str, extra: Iterable[str]) -> list[str]:
    return [os.path.realpath(r) for r in (cwd, *extra) if r]


# -- pure file operations (sync; run in a thread) -------------------------------------


def read_text(path: str, line: int | None = None, limit: int | None = None) -> str:
    """Lines ``line`` (1-based) .. ``line+limit-1`` of a UTF-8 file, newlines kept."""
    start = max((line or 1) - 1, 0)
    with open(path, encoding="utf-8", newline="") as f:
        if start == 0 and limit is None:
            return f.read()
        out = []
        for i, text in enumerate(f):
            if i < start:
                continue
            if limit is not None and len(out) >= limit:
                break
            out.append(text)
        return "".join(out)


_tmp_ids = itertools.count()


def atomic_write_text(path: str, content: str, *, chunk_size: int = 1 << 20) -> bool:
    """Replace ``path`` with ``content`` atomically; returns True if it was created.

    Temp file beside the target (same filesystem, so ``os.replace`` is
    atomic), written and fsynced, given the original mode (or the umask's
    default for a new file), renamed over the target, directory fsynced.
    """
    directory, name = os.path.split(path)
    data = content.encode("utf-8")
    try:
        st: os.stat_result | None = os.stat(path)
    except FileNotFoundError:
        st = None
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise IsADirectoryError(path)
    tmp = os.path.join(directory, f".{name}.{os.getpid()}.{next(_tmp_ids)}.tmp")
    # 0o666 lets the umask decide for a new file, like open(..., "w").
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666)
    try:
        try:
            if st is not None:
                os.fchmod(fd, stat.S_IMODE(st.st_mode))
                if hasattr(os, "fchown"):
                    try:
                        os.fchown(fd, st.st_uid, st.st_gid)
                    except OSError:
                        pass  # only root may give a file away; the mode still holds
            view = memoryview(data)
            while view:
                n = os.write(fd, view[:chunk_size])
                view = view[n:]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    try:
        dfd = os.open(directory or ".", os.O_RDONLY)
    except OSError:
        return st is None
    try:
        os.fsync(dfd)
    except OSError:
        pass
    finally:
        os.close(dfd)
    return st is None


def notebook_problem(content: str) -> str | None:
    """Why ``content`` is not a valid notebook, or None when it is."""
    import json

    import nbformat

    try:
        json.loads(content)
    except ValueError as exc:
        return f"it is not notebook JSON ({exc})"
    try:
        nb = nbformat.reads(content, as_version=nbformat.NO_CONVERT)
        nbformat.validate(nb)
    except Exception as exc:
        msg = getattr(exc, "message", None) or str(exc)
        return f"it does not validate against the nbformat schema ({msg.splitlines()[0][:300]})"
    return None


# -- the ACP service ------------------------------------------------------------------


def _reject_nul(method: str, path: str) -> None:
    """A NUL byte cannot be in a path (the OS would raise ValueError): invalid params."""
    if "\0" in path:
        raise RpcError(INVALID_PARAMS, f"{method}: path contains a NUL byte: {path!r}")


class FileService:
    """Answers ``fs/read_text_file`` and ``fs/write_text_file``."""

    def __init__(self, host: Any, broker: Any) -> None:
        self.host = host
        self.broker = broker

    async def _check(self, ctx: Any, op: str, path: str) -> str:
        """The resolved path if ``op`` may touch it, else an RpcError."""
        if not os.path.isabs(path):
            raise RpcError(INVALID_PARAMS, f"fs: path must be absolute, got {path!r}")
        real = os.path.realpath(path)
        roots = resolve_roots(ctx.cwd, ctx.settings.extra_roots)
        inside = is_within(real, roots)
        decision = access_decision(op, inside, ctx.settings.permissions)
        shown = path if real == os.path.normpath(path) else f"{path} (really {real})"
        where = "inside the workspace" if inside else "outside the workspace (" + ", ".join(roots) + ")"
        if decision == "allow":
            return real
        if decision == "ask":
            verb = "Read" if op == "read" else "Write"
            if await self.broker.ask(ctx, title=f"{verb} {shown}, {where}", kind="read" if op == "read" else "edit", locations=[real]):
                return real
            raise RpcError(
                INVALID_PARAMS,
                f"fs: {op} of {shown} was not allowed ({where}; "
                + ("the user refused or nobody could answer)" if ctx.interactive else "nobody can answer here: set a permission policy or add an extra root)"),
            )
        raise RpcError(INVALID_PARAMS, f"fs: {op} of {shown} refused: permission policy {ctx.settings.permissions!r} ({where})")

    async def read_text_file(self, params: Any) -> dict[str, Any]:
        from acp.schema import ReadTextFileRequest

        req = ReadTextFileRequest.model_validate(params)
        _reject_nul("fs/read_text_file", req.path)
        ctx = self.host.session_context(req.session_id)
        real = await self._check(ctx, "read", req.path)
        try:
            content = await asyncio.to_thread(read_text, real, req.line, req.limit)
        except FileNotFoundError:
            raise RpcError(RESOURCE_NOT_FOUND, f"fs/read_text_file: no such file: {req.path}") from None
        except IsADirectoryError:
            raise RpcError(INVALID_PARAMS, f"fs/read_text_file: {req.path} is a directory") from None
        except UnicodeDecodeError as exc:
            raise RpcError(
                INVALID_PARAMS,
                f"fs/read_text_file: {req.path} is not UTF-8 text (byte 0x{exc.object[exc.start]:02x} "
                f"at offset {exc.start} of the part read); it may be binary",
            ) from None
        except PermissionError:
            raise RpcError(INVALID_PARAMS, f"fs/read_text_file: permission denied: {req.path}") from None
        except OSError as exc:
            raise RpcError(INTERNAL_ERROR, f"fs/read_text_file: {req.path}: {exc.strerror or exc}") from None
        ctx.emit(FileRead(req.session_id, real, req.line, req.limit, len(content)))
        return {"content": content}

    async def write_text_file(self, params: Any) -> dict[str, Any]:
        from acp.schema import WriteTextFileRequest

        req = WriteTextFileRequest.model_validate(params)
        _reject_nul("fs/write_text_file", req.path)
        ctx = self.host.session_context(req.session_id)
        if req.path.lower().endswith(".ipynb") or os.path.realpath(req.path).lower().endswith(".ipynb"):
            problem = await asyncio.to_thread(notebook_problem, req.content)
            if problem:
                raise RpcError(
                    INVALID_PARAMS,
                    f"fs/write_text_file: refusing to write {req.path}: {problem}. A .ipynb must hold "
                    f"a whole notebook's JSON (nbformat 4); writing anything else would leave a file "
                    f"Jupyter cannot open.",
                )
        real = await self._check(ctx, "write", req.path)
        try:
            os.makedirs(os.path.dirname(real), exist_ok=True)
            created = await asyncio.to_thread(atomic_write_text, real, req.content)
        except IsADirectoryError:
            raise RpcError(INVALID_PARAMS, f"fs/write_text_file: {req.path} is a directory") from None
        except (NotADirectoryError, FileExistsError):
            raise RpcError(INVALID_PARAMS, f"fs/write_text_file: a parent of {req.path} is not a directory") from None
        except PermissionError:
            raise RpcError(INVALID_PARAMS, f"fs/write_text_file: permission denied: {req.path}") from None
        except OSError as exc:
            raise RpcError(INTERNAL_ERROR, f"fs/write_text_file: {req.path}: {exc.strerror or exc}") from None
        ctx.emit(FileWritten(req.session_id, real, created, len(req.content.encode("utf-8"))))
        return {}

    def register(self, conn: Any) -> None:
        conn.on_request("fs/read_text_file", self.read_text_file)
        conn.on_request("fs/write_text_file", self.write_text_file)
