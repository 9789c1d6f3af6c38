"""Which session a notebook was talking to, so a restarted kernel can resume it.

Keyed by the notebook (``JPY_SESSION_NAME``, which Jupyter Server sets to the
notebook's path) or, failing that, the kernel id. Stored as one small JSON
file under the Jupyter data dir; written atomically, readable by its owner
only (0600 in a 0700 folder): it holds agent command lines (which may carry
tokens) and the last prompt typed.
"""

from __future__ import annotations

import json
import os
import stat
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..paths import store_path  # where the store is: shared with the file service's guard



@dataclass
class Remembered:
    """The agent (name and command: an ad hoc ``%agent --command`` one is
    started again from its command), the session ("" before the first
    prompt), its directory, and the agent the kernel was started for
    (``default``: when the notebook is later opened with another agent's
    kernel, this entry does not apply)."""

    agent: str
    command: list[str]
    session_id: str
    cwd: str
    default: str = ""
    #: The agent whose own CLI the cells were typed into (``%passthrough NAME``; "" none),
    #: so a restarted kernel goes on typing into it (resumed), not silently over ACP.
    passthrough: str = ""
    #: The last prompt typed into it: after a resume it is in the CLI's history already.
    passthrough_prompt: str = ""
    #: The workspace roots besides ``cwd`` (``%cwd add``), given again on resume.
    roots: list[str] = field(default_factory=list)


def notebook_key(kernel_id: str | None) -> str | None:
    return os.environ.get("JPY_SESSION_NAME") or kernel_id


def _read(path: Path) -> dict[str, dict]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def recall(key: str | None) -> Remembered | None:
    if not key:
        return None
    entry = _read(store_path()).get(key)
    if not isinstance(entry, dict):
        return None
    try:
        return Remembered(str(entry["agent"]), [str(w) for w in entry["command"]], str(entry["session_id"]),
                          str(entry["cwd"]), str(entry.get("default") or ""),
                          str(entry.get("passthrough") or ""), str(entry.get("passthrough_prompt") or ""),
                          [str(r) for r in entry["roots"]] if isinstance(entry.get("roots"), list) else [])
    except (KeyError, TypeError):
        return None


def private_folder(folder: Path) -> None:
    """Make ``folder`` (and missing parents) 0700. An existing one is made
    0700 only when it is ours (named ``acp_kernel``, as the default is): a
    folder named by ``ACP_KERNEL_STATE`` may be shared with other things."""
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    if folder.name == "acp_kernel" and stat.S_IMODE(folder.stat().st_mode) != 0o700:
        os.chmod(folder, 0o700)


def write_private(path: Path, text: str) -> None:
    """Replace ``path`` atomically with a 0600 file holding ``text`` (the
    umask cannot widen it: the mode is given at creation)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def remember(key: str | None, value: Remembered | None) -> None:
    if not key:
        return
    path = store_path()
    private_folder(path.parent)
    data = _read(path)
    if value is None:
        data.pop(key, None)
    else:
        data[key] = asdict(value)
    write_private(path, json.dumps(data, indent=1))
