"""``fs/read_text_file`` and ``fs/write_text_file``, inside a workspace policy.

Where a path may go (after resolving symlinks with ``os.path.realpath``, so
``ws/link -> /etc`` is *outside*):

=====================  ===================================  ==============================
                       inside the session's roots           outside
=====================  ===================================  ==============================
read                   allowed (any policy)                 ask; ``deny`` refuses
write                  allowed; ``deny`` refuses            ask; ``deny`` refuses
=====================  ===================================  ==============================

The session's roots are exactly the workspace the agent was given: its
``cwd`` and the ``additionalDirectories`` sent with it (none when the agent
does not take them), no more.

Inside the workspace a write is not asked again: agents ask before an edit
(``session/request_permission``, which the policy answers), and a second
prompt for the same change would only train people to click through.
"Ask" goes through the :class:`~acp_kernel.services.permissions.PermissionBroker`
(one prompt UI, "allow for this session" remembered per path); when nobody
can answer (``ctx.interactive`` False) it refuses and says how to allow it.
``allow-all`` is about the workspace: a path outside it is still asked.

Writes that can run code or change who can log in
(:mod:`acp_kernel.services.sensitive`: ``.git/``, an executable, shell
start-up files and home dotfiles, ``~/.ssh``, IPython and Jupyter config,
any kernelspec, a venv's ``bin/``...) are asked under ``ask``,
``allow-reads`` and ``allow-all`` too, inside the workspace (``allow-all``
answers the agent's own requests; these files act by themselves later, on
the next ``git status`` or shell), and refused under ``deny``. The question
says why (``can run code: git hook``). A write never sets an x bit: a new
file gets the umask's default of 0o666; an existing executable keeps its
mode only when that write was asked (it turning executable after the check
is refused).

The client's own files are asked for under every policy (``deny`` refuses),
wherever the workspace is (it may be the home directory): writes to the
config file, the Jupyter config directory, the session store, the ``acp``
kernelspecs and the Jupyter runtime directory; reads of the config file
(agent API keys) and of the runtime directory (kernel connection keys).

No check-then-use race: the checked real path is opened by walking it from
its root directory one component at a time with ``O_NOFOLLOW`` (``openat``),
so a directory swapped for a symlink between the check and the open is
refused, never followed. Only regular files are read or replaced: a FIFO,
socket or device is refused without blocking (checked with ``lstat`` at the
directory fd before any open, opened ``O_NONBLOCK`` and checked again).
Reads stream: ``line``/``limit`` select lines chunk by chunk, and what is
returned is capped (``limits.file_read_bytes``; a ranged read may stream at
most ``limits.file_scan_bytes`` to reach its first line).

Writes are atomic: a temp file in the same directory (by its fd), fsync,
rename over the target at that fd (original mode kept), fsync the directory.
A crash leaves the old or the new content, never a mix. Missing parent
directories are created (agents write new files into new folders; the spec
says write creates the file). A ``.ipynb`` is written only if the content is
a valid notebook.
"""

from __future__ import annotations

import asyncio
import hashlib
import errno
import fcntl
import itertools
import os
import stat
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from ..errors import INTERNAL_ERROR, INVALID_PARAMS, RESOURCE_NOT_FOUND, AcpError, RpcError
from ..paths import config_path, registry_cache_dir, store_path
from ..safe import visible_controls
from .events import FileRead, FileWritten, Notice
from .sensitive import Places, Reason, classify, current_places

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


def access_decision(op: str, inside: bool, policy: str, guarded: bool = False, sensitive: bool = False) -> str:
    """"allow", "ask" or "deny" for a ``read``/``write`` (see the module table).

    ``guarded``: the path is one of the client's own files: asked whatever
    the policy (``deny`` refuses). ``sensitive``: a write that can run code
    or change access (:mod:`.sensitive`): the same for writes.
    """
    guarded = guarded or (sensitive and op == "write")
    if policy == "deny" and (op == "write" or not inside or guarded):
        return "deny"
    if guarded or not inside:
        return "ask"
    return "allow"


def resolve_roots(cwd: str, extra: Iterable[str]) -> list[str]:
    return [os.path.realpath(r) for r in (cwd, *extra) if r]


def root_of(real: str, roots: Iterable[str]) -> str | None:
    """The deepest root holding ``real``, or None (outside every root)."""
    holding = [r for r in roots if is_within(real, [r])]
    return max(holding, key=len) if holding else None


@dataclass(frozen=True)
class Guarded:
    """A path of the client's own that an agent does not touch unasked."""

    path: str
    #: What it is, for the question and the error.
    why: str
    #: Reads are guarded too (it holds secrets), not only writes.
    reads: bool = False
    #: Only entries right below ``path`` with one of these names, or the
    #: name plus ``-...`` (kernelspecs we own: ``acp``, ``acp-claude``); () = all.
    names: tuple[str, ...] = ()

    def covers(self, real: str, op: str) -> bool:
        if op == "read" and not self.reads:
            return False
        if not is_within(real, [self.path]):
            return False
        if not self.names:
            return True
        rel = os.path.relpath(real, self.path)
        first = rel.split(os.sep)[0]
        return rel != "." and any(first == n or first.startswith(n + "-") for n in self.names)


def guarded_paths() -> list[Guarded]:
    """The client's own files, as they are configured now (env vars included)."""
    from jupyter_core.paths import jupyter_config_dir, jupyter_path, jupyter_runtime_dir

    real = os.path.realpath
    out = [
        Guarded(real(config_path()), "the acp-kernel config file", reads=True),
        Guarded(real(jupyter_config_dir()), "the Jupyter config directory"),
        Guarded(real(jupyter_runtime_dir()), "the Jupyter runtime directory (kernel connection keys)", reads=True),
    ]
    state = store_path()
    out.append(Guarded(real(state), "the acp-kernel session store"))
    if not os.environ.get("ACP_KERNEL_STATE"):
        out.append(Guarded(real(state.parent), "the acp-kernel state directory"))
    # a copy planted there would add agents to the next `acp-kernel agents` and %agent
    out.append(Guarded(real(registry_cache_dir()), "the acp-kernel agent registry cache"))
    for kernels in jupyter_path("kernels"):
        out.append(Guarded(real(kernels), "an acp-kernel kernelspec", names=("acp",)))
    return out


def guard_of(real: str, op: str, guarded: Iterable[Guarded]) -> Guarded | None:
    return next((g for g in guarded if g.covers(real, op)), None)


# -- errors of the file operations -----------------------------------------------------


class NotRegularFile(AcpError, OSError):
    """A FIFO, socket, device...: never read or replaced."""

    def __init__(self, what: str) -> None:
        super().__init__(errno.EINVAL, f"not a regular file ({what})")
        self.what = what


class PathChanged(AcpError, OSError):
    """A component turned out to be a symlink during the walk (swapped after the check)."""

    def __init__(self, name: str) -> None:
        super().__init__(errno.ELOOP, f"{name!r} is a symlink now")
        self.name = name


class BecameExecutable(AcpError, OSError):
    """The target has an x bit now, and the write was not asked as one that keeps it."""

    def __init__(self) -> None:
        super().__init__(errno.EPERM, "the file is executable now")


class TooBig(AcpError):
    """More than a limit would be read; ``what`` says which (``read``/``scan``)."""

    def __init__(self, what: str, size: int | None, limit: int) -> None:
        super().__init__(what)
        self.what = what
        self.size = size
        self.limit = limit


def _require_regular(st: os.stat_result, name: str) -> None:
    """An ``lstat`` result at a directory fd: a symlink means the path changed
    under us; only a regular file may be opened."""
    if stat.S_ISLNK(st.st_mode):
        raise PathChanged(name)
    if stat.S_ISDIR(st.st_mode):
        raise IsADirectoryError(errno.EISDIR, "is a directory")
    if not stat.S_ISREG(st.st_mode):
        raise NotRegularFile(_kind_name(st.st_mode))


def _kind_name(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISLNK(mode):
        return "a symlink"
    return "a special file"


# -- walking without following symlinks (sync; run in a thread) -------------------------

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
#: Directories are held as O_PATH fds where there is O_PATH: no read
#: permission needed to pass through, exactly like path resolution.
_DIR = getattr(os, "O_PATH", os.O_RDONLY) | os.O_DIRECTORY | _CLOEXEC


def split_under(real: str, base: str) -> list[str]:
    """The components of ``real`` below ``base`` (both resolved); [] for the base itself."""
    rel = os.path.relpath(real, base)
    return [] if rel == "." else rel.split(os.sep)


def _step(dfd: int, name: str, *, create: bool) -> int:
    """Open directory ``name`` at ``dfd`` without following a symlink."""
    try:
        return os.open(name, _DIR | _NOFOLLOW, dir_fd=dfd)
    except FileNotFoundError:
        if not create:
            raise
        try:
            os.mkdir(name, 0o777, dir_fd=dfd)
        except FileExistsError:
            pass
        return os.open(name, _DIR | _NOFOLLOW, dir_fd=dfd)
    except OSError as exc:
        if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
            raise
        st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
        if stat.S_ISLNK(st.st_mode):
            raise PathChanged(name) from None
        raise NotADirectoryError(errno.ENOTDIR, f"{name!r} is not a directory") from None


def open_dir(base: str, parts: list[str], *, create: bool = False) -> int:
    """An fd of directory ``base/parts...``, walked with ``O_NOFOLLOW``.

    ``base`` itself is opened normally (it is a resolved root); below it a
    symlink is :class:`PathChanged`. ``create`` makes missing directories.
    """
    fd = os.open(base, _DIR)
    try:
        for name in parts:
            nxt = _step(fd, name, create=create)
            os.close(fd)
            fd = nxt
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_regular(dfd: int, name: str) -> int:
    """Open regular file ``name`` at ``dfd`` for reading: no symlink, never blocks.

    Non-regular files are refused by ``lstat`` before any open; the open is
    ``O_NONBLOCK`` (a FIFO swapped in after the check does not block) and
    checked again with ``fstat``, then made blocking again.
    """
    _require_regular(os.stat(name, dir_fd=dfd, follow_symlinks=False), name)
    flags = os.O_RDONLY | _NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | _CLOEXEC
    try:
        fd = os.open(name, flags, dir_fd=dfd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise PathChanged(name) from None
        raise
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError(errno.EISDIR, "is a directory")
        if not stat.S_ISREG(st.st_mode):
            raise NotRegularFile(_kind_name(st.st_mode))
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
    except BaseException:
        os.close(fd)
        raise
    return fd


# -- reading, streamed --------------------------------------------------------------------

CHUNK = 1 << 16


def read_range(fd: int, line: int | None, limit: int | None, *, cap: int, scan_cap: int) -> bytes:
    """Lines ``line`` (1-based) .. ``line+limit-1`` of an open file, newlines kept.

    Never holds more than ``cap`` bytes (plus one chunk): a whole file over
    ``cap`` is refused by its size before reading; a selected range that grows
    past ``cap`` is refused; more than ``scan_cap`` bytes before the first
    selected line is refused. Lines end at ``\\n`` (``\\r\\n`` stays whole).
    """
    start = max((line or 1) - 1, 0)
    if limit is not None and limit <= 0:
        return b""
    if start == 0 and limit is None:
        size = os.fstat(fd).st_size
        if size > cap:
            raise TooBig("read", size, cap)
        out = bytearray()
        while len(out) <= cap:
            chunk = os.read(fd, min(CHUNK, cap + 1 - len(out)))
            if not chunk:
                return bytes(out)
            out += chunk
        raise TooBig("read", None, cap)  # it grew while we read
    out = bytearray()
    skipped = 0  # bytes before the first selected line
    seen = 0  # newlines passed while skipping
    taken = 0  # whole lines selected
    while True:
        chunk = os.read(fd, CHUNK)
        if not chunk:
            return bytes(out)
        pos = 0
        while seen < start:
            i = chunk.find(b"\n", pos)
            if i < 0:
                skipped += len(chunk) - pos
                pos = len(chunk)
                break
            skipped += i + 1 - pos
            seen += 1
            pos = i + 1
        if skipped > scan_cap:
            raise TooBig("scan", None, scan_cap)
        if seen < start:
            continue
        if limit is None:
            out += chunk[pos:]
        else:
            while taken < limit and pos < len(chunk):
                i = chunk.find(b"\n", pos)
                end = len(chunk) if i < 0 else i + 1
                out += chunk[pos:end]
                pos = end
                if i >= 0:
                    taken += 1
        if len(out) > cap:
            raise TooBig("range", None, cap)
        if limit is not None and taken >= limit:
            return bytes(out)


def read_text_at(base: str, parts: list[str], line: int | None, limit: int | None, *, cap: int, scan_cap: int) -> str:
    """Read ``base/parts...`` (see :func:`open_dir`, :func:`open_regular`, :func:`read_range`)."""
    if not parts:
        raise IsADirectoryError(errno.EISDIR, "is a directory")
    dfd = open_dir(base, parts[:-1])
    try:
        fd = open_regular(dfd, parts[-1])
    finally:
        os.close(dfd)
    try:
        data = read_range(fd, line, limit, cap=cap, scan_cap=scan_cap)
    finally:
        os.close(fd)
    return data.decode("utf-8")


# -- writing, atomically ------------------------------------------------------------------

_tmp_ids = itertools.count()


def write_at(dfd: int, name: str, data: bytes, *, chunk_size: int = 1 << 20, exec_ok: bool = True) -> bool:
    """Replace ``name`` in directory ``dfd`` with ``data`` atomically; True if created.

    Temp file beside the target (same directory fd, so the rename is atomic),
    written and fsynced, given the original mode (or the umask's default for
    a new file: never an x bit), renamed over the target at the fd, directory
    fsynced. A symlink or non-regular file in the target's place is refused;
    so is an executable one unless ``exec_ok`` (its mode would be kept).
    """
    try:
        st: os.stat_result | None = os.stat(name, dir_fd=dfd, follow_symlinks=False)
    except FileNotFoundError:
        st = None
    if st is not None:
        _require_regular(st, name)
        if not exec_ok and st.st_mode & 0o111:
            raise BecameExecutable()
    tmp = f".{name[:200]}.{os.getpid()}.{next(_tmp_ids)}.tmp"
    # 0o666 lets the umask decide for a new file, like open(..., "w").
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC, 0o666, dir_fd=dfd)
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
        os.replace(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
    except BaseException:
        try:
            os.unlink(tmp, dir_fd=dfd)
        except OSError:
            pass
        raise
    try:
        sync_fd = os.open(".", os.O_RDONLY | os.O_DIRECTORY | _CLOEXEC, dir_fd=dfd)
    except OSError:
        return st is None
    try:
        os.fsync(sync_fd)
    except OSError:
        pass
    finally:
        os.close(sync_fd)
    return st is None


def write_text_at(base: str, parts: list[str], content: str, *, exec_ok: bool = True) -> bool:
    """Write ``base/parts...`` atomically, making missing directories, no symlink followed."""
    if not parts:
        raise IsADirectoryError(errno.EISDIR, "is a directory")
    data = content.encode("utf-8")
    dfd = open_dir(base, parts[:-1], create=True)
    try:
        return write_at(dfd, parts[-1], data, exec_ok=exec_ok)
    finally:
        os.close(dfd)


def atomic_write_text(path: str, content: str, *, chunk_size: int = 1 << 20) -> bool:
    """Replace the file at ``path`` (its real path) with ``content`` atomically;
    True if it was created. For the client's own files (the session store)."""
    directory, name = os.path.split(os.path.realpath(path))
    dfd = os.open(directory or ".", _DIR)
    try:
        return write_at(dfd, name, content.encode("utf-8"), chunk_size=chunk_size)
    finally:
        os.close(dfd)


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

#: What the sensitive writes are, in the question's hint and the refusal.
SENSITIVE_WORDS = "can run code or change who can log in"


def _reject_nul(method: str, path: str) -> None:
    """A NUL byte cannot be in a path (the OS would raise ValueError): invalid params."""
    if "\0" in path:
        raise RpcError(INVALID_PARAMS, f"{method}: path contains a NUL byte: {path!r}")


def is_open_notebook(path: str, open_paths: list[str]) -> bool:
    """Whether ``path`` is (a link to) one of the notebooks open in the front-end."""
    real = _real_or_none(path)
    return bool(real) and any(real == _real_or_none(p) for p in open_paths)


def open_notebook_message(path: str) -> str:
    """The refusal of a write to an open notebook, with what the agent can do instead."""
    return (f"fs/write_text_file: refusing to write {path}: this notebook is open in the user's notebook "
            f"editor, which holds its cells: a write to the file behind it would be overwritten by the "
            f"editor's next save, or would overwrite the user's unsaved edits. Use the `notebook` MCP server's "
            f"tools instead: `cells` reads the live notebook, `insert_cell`, `edit_cell` and `delete_cell` "
            f"propose changes the user accepts in the page.")


def _real_or_none(path: str) -> str:
    """``os.path.realpath``, or "" when a component changes under it (a race)."""
    try:
        return os.path.realpath(path)
    except OSError:
        return ""


def too_big_message(exc: TooBig, path: str) -> str:
    """The refusal of an over-limit read: which limit, and how to change it."""
    head = "fs/read_text_file: refused"
    if exc.what == "scan":
        return (
            f"{head}: the first requested line of {path} is more than {exc.limit} bytes into the file "
            f'(limits.file_scan_bytes); raise it under "limits" in the config file: '
            f'"limits": {{"file_scan_bytes": ...}}'
        )
    what = f"{path} is {exc.size} bytes" if exc.size is not None else (
        f"the selected lines of {path} are" if exc.what == "range" else f"{path} is")
    return (
        f"{head}: {what} over the read limit of {exc.limit} bytes (limits.file_read_bytes); read a smaller "
        f'range with line/limit, or raise the limit in the config file: "limits": {{"file_read_bytes": ...}}'
    )


class FileService:
    """Answers ``fs/read_text_file`` and ``fs/write_text_file``.

    ``guarded``: the client's own files (default :func:`guarded_paths`, read
    at each request so a changed environment counts). ``places``: where
    writes can run code (default :func:`~.sensitive.current_places`, likewise).
    """

    def __init__(self, host: Any, broker: Any, guarded: Any = None,
                 places: Callable[[], Places] | None = None) -> None:
        self.host = host
        self.broker = broker
        self.guarded = guarded or guarded_paths
        self.places = places or current_places

    async def _check(self, ctx: Any, op: str, path: str) -> tuple[str, list[str], bool]:
        """(the root to walk from, the components below it, whether a person
        allowed it) if ``op`` may touch ``path``, else an RpcError."""
        if not os.path.isabs(path):
            raise RpcError(INVALID_PARAMS, f"fs: path must be absolute, got {path!r}")
        try:
            real = os.path.realpath(path)
        except OSError as exc:  # a component changed between its lstat and readlink
            raise self._refuse(ctx, f"fs: {op} of {path} refused: the path changed while it was being "
                                    f"resolved ({exc.strerror or exc})") from None
        roots = resolve_roots(ctx.cwd, ctx.additional_directories)
        root = root_of(real, roots)
        inside = root is not None
        guard = guard_of(real, op, self.guarded())
        reason: Reason | None = None
        if op == "write":
            places = self.places()
            reason = await asyncio.to_thread(classify, path, real, places)
        decision = access_decision(op, inside, ctx.settings.permissions, guard is not None, reason is not None)
        shown = path if real == os.path.normpath(path) else f"{path} (really {real})"
        # One line, controls shown (a newline in a path is ␊): the views escape the rest.
        shown = visible_controls(shown, keep_newlines=False)
        where = "inside the workspace" if inside else "outside the workspace (" + ", ".join(roots) + ")"
        if guard is not None:
            where = f"{guard.why}, {where}"
        if reason is not None:
            where = f"{reason}; {where}"
        base = root if root is not None else os.sep
        if decision == "allow":
            return base, split_under(real, base), False
        if decision == "ask":
            verb = "Read" if op == "read" else "Write"
            hint = ("The client's own files are asked for under every policy." if guard is not None
                    else f"Writes that {SENSITIVE_WORDS} are asked under every policy but deny." if reason is not None
                    else "`%cwd add DIR` gives an agent that takes additional directories one more root.")
            verdict = await self.broker.authorize(
                ctx, title=f"{verb} {shown}, {where}", kind="read" if op == "read" else "edit",
                locations=[real], policy="ask", hint=hint,
            )
            if verdict.allowed:
                return base, split_under(real, base), True
            if verdict.by == "headless":
                why = "nobody can answer here: " + (
                    "the client's own files are asked for under every policy" if guard is not None
                    else f"writes that {SENSITIVE_WORDS} are asked under every policy but deny" if reason is not None
                    else "set a permission policy, or give the agent the directory with %cwd add")
            elif verdict.by == "limit":
                why = "too many questions already wait for an answer: limits.pending_prompts"
            else:
                why = "the user refused or the question was cancelled"
            err = RpcError(INVALID_PARAMS, f"fs: {op} of {shown} was not allowed ({where}; {why})")
            if verdict.by not in ("headless", "limit"):  # those already said so
                ctx.emit(Notice("warning", err.message, ctx.id, kind="fs"))
            raise err
        raise self._refuse(ctx, f"fs: {op} of {shown} refused: permission policy {ctx.settings.permissions!r} ({where})")

    @staticmethod
    def _refuse(ctx: Any, message: str) -> RpcError:
        """A refusal: the agent gets the error, the person a notice."""
        ctx.emit(Notice("warning", message, ctx.id, kind="fs"))
        return RpcError(INVALID_PARAMS, message)

    def _os_error(self, ctx: Any, method: str, path: str, exc: OSError) -> RpcError:
        """The error for a failed open/read/write; refusals also get a notice."""
        if isinstance(exc, PathChanged):
            return self._refuse(
                ctx,
                f"{method}: refused {path}: {exc.name!r} on the way is a symlink now (it changed after the "
                f"check, or loops); symlinks are not followed while opening",
            )
        if isinstance(exc, NotRegularFile):
            return self._refuse(ctx, f"{method}: refused {path}: it is {exc.what}, not a regular file")
        if isinstance(exc, BecameExecutable):
            return self._refuse(ctx, f"{method}: refused {path}: it became executable after the check (the write "
                                     f"would keep its mode); writes to executable files are asked")
        if isinstance(exc, FileNotFoundError):
            return RpcError(RESOURCE_NOT_FOUND, f"{method}: no such file: {path}")
        if isinstance(exc, IsADirectoryError):
            return RpcError(INVALID_PARAMS, f"{method}: {path} is a directory")
        if isinstance(exc, (NotADirectoryError, FileExistsError)):
            return RpcError(INVALID_PARAMS, f"{method}: a parent of {path} is not a directory")
        if isinstance(exc, PermissionError):
            return RpcError(INVALID_PARAMS, f"{method}: permission denied: {path}")
        return RpcError(INTERNAL_ERROR, f"{method}: {path}: {exc.strerror or exc}")

    async def read_text_file(self, params: Any) -> dict[str, Any]:
        from ..protocol.schema import ReadTextFileRequest  # lazy: start-up time

        req = ReadTextFileRequest.model_validate(params)
        _reject_nul("fs/read_text_file", req.path)
        ctx = self.host.session_context(req.session_id)
        base, parts, _ = await self._check(ctx, "read", req.path)
        limits = ctx.settings.limits
        try:
            content = await asyncio.to_thread(
                read_text_at, base, parts, req.line, req.limit,
                cap=limits.file_read_bytes, scan_cap=limits.file_scan_bytes,
            )
        except TooBig as exc:
            raise self._refuse(ctx, too_big_message(exc, req.path)) from None
        except UnicodeDecodeError as exc:
            raise RpcError(
                INVALID_PARAMS,
                f"fs/read_text_file: {req.path} is not UTF-8 text (byte 0x{exc.object[exc.start]:02x} "
                f"at offset {exc.start} of the part read); it may be binary",
            ) from None
        except OSError as exc:
            raise self._os_error(ctx, "fs/read_text_file", req.path, exc) from None
        real = os.path.join(base, *parts)
        ctx.emit(FileRead(req.session_id, real, req.line, req.limit, len(content)))
        return {"content": content}

    async def write_text_file(self, params: Any) -> dict[str, Any]:
        from ..protocol.schema import WriteTextFileRequest  # lazy: start-up time

        req = WriteTextFileRequest.model_validate(params)
        _reject_nul("fs/write_text_file", req.path)
        ctx = self.host.session_context(req.session_id)
        if req.path.lower().endswith(".ipynb") or _real_or_none(req.path).lower().endswith(".ipynb"):
            if is_open_notebook(req.path, ctx.settings.open_notebooks()):
                raise self._refuse(ctx, open_notebook_message(req.path))
            problem = await asyncio.to_thread(notebook_problem, req.content)
            if problem:
                raise RpcError(
                    INVALID_PARAMS,
                    f"fs/write_text_file: refusing to write {req.path}: {problem}. A .ipynb must hold "
                    f"a whole notebook's JSON (nbformat 4); writing anything else would leave a file "
                    f"Jupyter cannot open.",
                )
        base, parts, asked = await self._check(ctx, "write", req.path)
        try:
            created = await asyncio.to_thread(write_text_at, base, parts, req.content, exec_ok=asked)
        except OSError as exc:
            raise self._os_error(ctx, "fs/write_text_file", req.path, exc) from None
        real = os.path.join(base, *parts)
        data = req.content.encode("utf-8")
        ctx.emit(FileWritten(req.session_id, real, created, len(data), hashlib.sha256(data).hexdigest()))
        return {}

    def register(self, conn: Any) -> None:
        conn.on_request("fs/read_text_file", self.read_text_file)
        conn.on_request("fs/write_text_file", self.write_text_file)
