"""Every shared verb of the command table, through the ACP kernel and through
the magics, saying the same words (front-end spellings aside)."""

from __future__ import annotations

import re

from acp_kernel.client.commands import BOTH, KERNEL, MAGICS, VERBS
from acp_kernel import safe


def _session(text: str) -> str:
    match = re.search(r"session: `([^`]+)`", text)
    assert match, text
    return match.group(1)


async def test_help_is_built_from_the_one_table(front):
    text = (await front.ok("help")).text()
    kind = KERNEL if front.kind == "kernel" else MAGICS
    for verb in VERBS.values():
        # A usage with "|" is a <code> element with "|" as a reference (a backslash escape
        # would feed JupyterLab's math pre-pass); the others stay code spans.
        usage = str(safe.code(verb.usage(kind)))
        assert "\\" not in usage and "$" not in usage
        if kind in verb.frontends:
            assert f"{usage} | {verb.help} |" in text, verb.name
        else:
            assert usage not in text, verb.name
    assert "%%shell" in text


async def test_status_mode_model_and_config_say_the_same_words(front):
    await front.ok("mode")  # the ACP kernel starts its agent on first use: now both have one
    status = (await front.ok("status")).text()
    for line in ("- agent: **", "- running: acp-kernel demo agent", "- session: `demo-", "- mode: `code`",
                 "- model: `demo-fast`", "- permissions: ask", "- working directory: `"):
        assert line in status, (line, status)

    # No argument: what the agent offers, as a tidy list with the current one marked.
    modes = (await front.ok("mode")).text()
    assert "Modes **" in modes and "offers:" in modes
    assert "- `code` Code — Default. The demo script behaves the same in every mode. ← **current**" in modes
    assert "- `plan` Plan — " in modes and "{" not in modes
    models = (await front.ok("model")).text()
    assert "- `demo-fast` — Streams with short pauses. ← **current**" in models
    assert "- `demo-thorough` — Streams slowly, like typing." in models and "{" not in models

    assert "*Mode: `plan`.*" in (await front.ok("mode plan")).text()
    assert "*Model: `demo-thorough`.*" in (await front.ok("model demo-thorough")).text()
    status = (await front.ok("status")).text()
    assert "- mode: `plan`" in status and "- model: `demo-thorough`" in status
    assert "← **current**" in (await front.ok("mode")).text().split("`plan`", 1)[1].split("\n", 1)[0]

    config = (await front.ok("config")).text()
    assert "- `thinking` (Thinking): `off`; choices: `off`, `brief`, `deep`" in config
    assert "*`thinking` = `brief`.*" in (await front.ok("config thinking brief")).text()
    assert "- `thinking` (Thinking): `brief`" in (await front.ok("config thinking")).text()


async def test_permissions_cwd_new_sessions_load_and_restart(front, tmp_path):
    assert "*Permissions: ask.*" in (await front.ok("permissions")).text()
    assert "*Permissions: deny.*" in (await front.ok("permissions deny")).text()
    assert "- permissions: deny" in (await front.ok("status")).text()

    await front.ok("new")
    first = _session((await front.ok("status")).text())
    sub = tmp_path / "work" / "sub dir"
    sub.mkdir()
    moved = (await front.ok(f"cwd '{sub}'")).text()
    assert f"*Working directory: `{sub}` (for new sessions;" in moved
    new = (await front.ok("new")).text()
    assert "*New session `demo-" in new and f"in `{sub}`.*" in new
    second = _session((await front.ok("status")).text())
    assert second != first

    listed = (await front.ok("sessions")).text()
    assert f"- `{second}`" in listed and "← **current**" in listed and "Reopen one with `" in listed

    loaded = (await front.ok(f"load {first}")).text()
    assert f"session `{first}` in `{sub}`" in loaded
    assert _session((await front.ok("status")).text()) == first

    restarted = (await front.ok("restart")).text()
    assert "*Restarted **" in restarted and f"Resumed session `{first}`" in restarted


async def test_usage_errors_fail_the_cell_with_one_line(front):
    kind = KERNEL if front.kind == "kernel" else MAGICS
    for line, says in (("mode a b", "usage: " + VERBS["mode"].usage(kind)),
                       ("frobnicate", "unknown command 'frobnicate'"),
                       ("permissions sometimes", "usage: " + VERBS["permissions"].usage(kind)),
                       ("load", "usage: " + VERBS["load"].usage(kind)),
                       ("cwd /no/such/dir", "not a directory: /no/such/dir")):
        res = await front.cmd(line)
        reason = front.error(res)
        assert says in reason and "\n" not in reason, (line, reason)
        assert res.reply["content"]["ename"] == "UsageError"
    # A verb of the other front-end is named as such.
    other = "connect demo" if front.kind == "kernel" else "agent demo"
    assert "exists in the" in front.error(await front.cmd(other))
    assert await front.harness.km.is_alive()


async def test_agents_lists_the_registry(front, tmp_path):
    (tmp_path / "acp_kernel.json").write_text("{}")  # the config file the kernels were given
    text = (await front.ok("agents")).text()
    assert "demo (default)" in text and "config file:" in text


def test_the_table_marks_where_each_verb_exists():
    only_kernel = {n for n, v in VERBS.items() if v.frontends == {KERNEL}}
    only_magics = {n for n, v in VERBS.items() if v.frontends == {MAGICS}}
    assert only_kernel == {"agent", "set"}  # %set: papermill's parameters; the magics have Python variables
    assert only_magics == {"connect", "disconnect", "cancel"}
    assert all(v.frontends <= BOTH for v in VERBS.values())
