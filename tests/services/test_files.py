"""fs/read_text_file and fs/write_text_file: lines, errors, workspace policy, atomicity."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest

from acp_kernel.errors import INVALID_PARAMS, RESOURCE_NOT_FOUND, RpcError
from acp_kernel.services.files import FileService, access_decision, atomic_write_text, is_within
from acp_kernel.services.permissions import PermissionBroker
from acp_kernel.services.events import FileWritten, PermissionPrompt

from .conftest import FakeContext, FakeHost


@pytest.fixture
def files(host: FakeHost) -> FileService:
    return FileService(host, PermissionBroker(host))


def p(ctx: FakeContext, *parts: str) -> str:
    return os.path.join(ctx.cwd, *parts)


# -- pure policy ----------------------------------------------------------------------


def test_is_within() -> None:
    assert is_within("/a/b", ["/a"]) and is_within("/a", ["/a"])
    assert not is_within("/ab", ["/a"]) and not is_within("/", ["/a"])


@pytest.mark.parametrize(
    "op,inside,policy,expected",
    [
        ("read", True, "ask", "allow"),
        ("read", True, "deny", "allow"),
        ("read", False, "allow-all", "ask"),
        ("read", False, "deny", "deny"),
        ("write", True, "allow-all", "allow"),
        ("write", True, "ask", "allow"),
        ("write", True, "allow-reads", "allow"),
        ("write", True, "deny", "deny"),
        ("write", False, "allow-all", "ask"),
        ("write", False, "deny", "deny"),
    ],
)
def test_access_decision(op: str, inside: bool, policy: str, expected: str) -> None:
    assert access_decision(op, inside, policy) == expected


# -- reading --------------------------------------------------------------------------


async def test_read_whole_and_lines(files: FileService, ctx: FakeContext) -> None:
    Path(p(ctx, "f.txt")).write_text("one\ntwo\r\nthree\nfour")
    read = files.read_text_file
    assert (await read({"sessionId": "s1", "path": p(ctx, "f.txt")}))["content"] == "one\ntwo\r\nthree\nfour"
    assert (await read({"sessionId": "s1", "path": p(ctx, "f.txt"), "line": 1, "limit": 2000}))["content"] == "one\ntwo\r\nthree\nfour"
    assert (await read({"sessionId": "s1", "path": p(ctx, "f.txt"), "line": 2, "limit": 2}))["content"] == "two\r\nthree\n"
    assert (await read({"sessionId": "s1", "path": p(ctx, "f.txt"), "line": 4}))["content"] == "four"
    assert (await read({"sessionId": "s1", "path": p(ctx, "f.txt"), "line": 9}))["content"] == ""


async def test_read_errors(files: FileService, ctx: FakeContext) -> None:
    with pytest.raises(RpcError) as e:
        await files.read_text_file({"sessionId": "s1", "path": p(ctx, "missing.txt")})
    assert e.value.code == RESOURCE_NOT_FOUND
    with pytest.raises(RpcError) as e:
        await files.read_text_file({"sessionId": "s1", "path": "rel.txt"})
    assert e.value.code == INVALID_PARAMS and "absolute" in e.value.message
    Path(p(ctx, "bin")).write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe")
    with pytest.raises(RpcError) as e:
        await files.read_text_file({"sessionId": "s1", "path": p(ctx, "bin")})
    assert "not UTF-8" in e.value.message
    with pytest.raises(RpcError) as e:
        await files.read_text_file({"sessionId": "nope", "path": p(ctx, "bin")})
    assert "'nope'" in e.value.message
    with pytest.raises(RpcError) as e:
        await files.read_text_file({"sessionId": "s1", "path": ctx.cwd})
    assert "directory" in e.value.message


async def test_symlink_and_dotdot_escapes_are_refused_headless(files: FileService, ctx: FakeContext, tmp_path: Path) -> None:
    ctx.interactive = False
    ctx.settings.permissions = "allow-all"
    secret = tmp_path / "secret.txt"
    secret.write_text("s3cret")
    os.symlink(tmp_path, p(ctx, "link"))
    for path in (p(ctx, "link", "secret.txt"), p(ctx, "..", "secret.txt"), str(secret)):
        with pytest.raises(RpcError) as e:
            await files.read_text_file({"sessionId": "s1", "path": path})
        assert "outside the workspace" in e.value.message and "nobody can answer" in e.value.message
        with pytest.raises(RpcError):
            await files.write_text_file({"sessionId": "s1", "path": path, "content": "pwned"})
    assert secret.read_text() == "s3cret"
    # A symlink inside pointing inside is fine.
    Path(p(ctx, "real.txt")).write_text("x")
    os.symlink(p(ctx, "real.txt"), p(ctx, "alias.txt"))
    assert (await files.read_text_file({"sessionId": "s1", "path": p(ctx, "alias.txt")}))["content"] == "x"
    # The additional directories the agent was given widen the workspace.
    ctx.additional_directories = [str(tmp_path)]
    assert (await files.read_text_file({"sessionId": "s1", "path": str(secret)}))["content"] == "s3cret"


async def test_outside_read_asks_and_user_decides(files: FileService, ctx: FakeContext, tmp_path: Path) -> None:
    outside = tmp_path / "o.txt"
    outside.write_text("hi")
    prompt_f = ctx.next_event(PermissionPrompt)
    task = asyncio.ensure_future(files.read_text_file({"sessionId": "s1", "path": str(outside)}))
    prompt = await asyncio.wait_for(prompt_f, 5)
    assert "outside the workspace" in prompt.title
    prompt.allow()
    assert (await task)["content"] == "hi"
    # Refused the second time.
    prompt_f = ctx.next_event(PermissionPrompt)
    task = asyncio.ensure_future(files.read_text_file({"sessionId": "s1", "path": str(outside)}))
    (await prompt_f).reject()
    with pytest.raises(RpcError, match="not allowed"):
        await task


# -- writing --------------------------------------------------------------------------


async def test_write_policies(files: FileService, ctx: FakeContext, tmp_path: Path) -> None:
    target = p(ctx, "new", "dir", "f.txt")
    ctx.settings.permissions = "allow-all"
    await files.write_text_file({"sessionId": "s1", "path": target, "content": "héllo"})
    assert Path(target).read_text() == "héllo"
    assert ctx.of(FileWritten)[-1].created is True

    ctx.settings.permissions = "deny"
    with pytest.raises(RpcError, match="refused"):
        await files.write_text_file({"sessionId": "s1", "path": target, "content": "x"})

    # Inside the workspace, "ask" does not ask again: the agent asked for the edit.
    ctx.settings.permissions = "ask"
    await files.write_text_file({"sessionId": "s1", "path": target, "content": "v2"})
    assert Path(target).read_text() == "v2"
    assert ctx.of(FileWritten)[-1].created is False

    # Outside it, the user decides.
    outside = tmp_path / "outside.txt"
    outside.write_text("old")
    prompt_f = ctx.next_event(PermissionPrompt)
    task = asyncio.ensure_future(files.write_text_file({"sessionId": "s1", "path": str(outside), "content": "v2"}))
    prompt = await prompt_f
    # The UI answers from another thread, as a widget callback may.
    await asyncio.to_thread(prompt.allow)
    assert await task == {}
    assert outside.read_text() == "v2"

    ctx.interactive = False
    with pytest.raises(RpcError, match="nobody can answer"):
        await files.write_text_file({"sessionId": "s1", "path": str(outside), "content": "v3"})
    assert outside.read_text() == "v2"


async def test_write_keeps_mode_and_symlink(files: FileService, ctx: FakeContext) -> None:
    ctx.settings.permissions = "allow-all"
    real = Path(p(ctx, "script.sh"))
    real.write_text("old")
    real.chmod(0o751)
    os.symlink(real, p(ctx, "link.sh"))
    # An executable keeps its x bits through the write, so it is asked even under allow-all.
    prompt_f = ctx.next_event(PermissionPrompt)
    task = asyncio.ensure_future(files.write_text_file({"sessionId": "s1", "path": p(ctx, "link.sh"), "content": "new"}))
    prompt = await asyncio.wait_for(prompt_f, 10)
    assert "an executable file" in prompt.title
    await asyncio.to_thread(prompt.allow)
    assert await asyncio.wait_for(task, 10) == {}
    assert real.read_text() == "new"
    assert stat.S_IMODE(real.stat().st_mode) == 0o751
    assert os.path.islink(p(ctx, "link.sh"))
    assert sorted(os.listdir(ctx.cwd)) == ["link.sh", "script.sh"]  # no temp file left


async def test_notebook_writes_must_be_valid(files: FileService, ctx: FakeContext) -> None:
    ctx.settings.permissions = "allow-all"
    path = p(ctx, "a.ipynb")
    with pytest.raises(RpcError) as e:
        await files.write_text_file({"sessionId": "s1", "path": path, "content": "print('hi')"})
    assert "not notebook JSON" in e.value.message and "nbformat" in e.value.message
    with pytest.raises(RpcError) as e:
        await files.write_text_file({"sessionId": "s1", "path": path, "content": json.dumps({"cells": [{"cell_type": "code", "source": "x"}], "nbformat": 4, "nbformat_minor": 5, "metadata": {}})})
    assert "does not validate" in e.value.message
    assert not os.path.exists(path)
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1+1")])
    await files.write_text_file({"sessionId": "s1", "path": path, "content": nbformat.writes(nb)})
    assert nbformat.read(path, as_version=4).cells[0].source == "1+1"


_WRITER = r"""
import sys
sys.path.insert(0, sys.argv[3])
from acp_kernel.services.files import atomic_write_text
print("start", flush=True)
atomic_write_text(sys.argv[1], sys.argv[2] * (64 << 20), chunk_size=1 << 16)
print("done", flush=True)
"""


def test_killed_mid_write_leaves_old_or_new_never_a_mix(tmp_path: Path) -> None:
    target = tmp_path / "f.txt"
    old = "o" * 1000
    target.write_text(old)
    repo = str(Path(__file__).resolve().parents[2])
    proc = subprocess.Popen([sys.executable, "-c", _WRITER, str(target), "n", repo], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    assert proc.stdout.readline() == "start\n"
    # Kill as soon as the temp file has data in it: mid-write.
    deadline = time.monotonic() + 20
    tmp_seen = False
    while time.monotonic() < deadline and not tmp_seen:
        for name in os.listdir(tmp_path):
            if name.endswith(".tmp") and os.path.getsize(tmp_path / name) > 0:
                tmp_seen = True
        if proc.poll() is not None:
            break
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert tmp_seen, "never saw the write in progress"
    content = target.read_text()
    assert content == old or content == "n" * (64 << 20)
    assert content == old  # killed mid-write: the rename never happened
    # And a write that completes replaces the content whole.
    atomic_write_text(str(target), "new")
    assert target.read_text() == "new"
