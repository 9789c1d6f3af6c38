"""papermill parameters for ACP-kernel notebooks: the translator (pure), and
a notebook run with ``-p`` whose prompt uses the parameter as ``{name}``."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib import metadata

import nbformat
import pytest

# papermill first, as its command line does: it imports the entry point's
# module (acp_kernel.frontends.papermill_engine) while it starts.
pm = pytest.importorskip("papermill")

from acp_kernel.frontends.papermill import AcpTranslator, codify  # noqa: E402
from acp_kernel.client.params import interpolate, parse_set  # noqa: E402
from tests.kernels import IpcKernelManager

from .conftest import use_scripted_agent  # noqa: E402

IMG = "<img src=x onerror=alert(1)>"


def entry_point_installed() -> bool:
    return any(ep.name == "acp" for ep in metadata.entry_points(group="papermill.engine"))


def test_codify_writes_one_set_line_per_parameter_and_they_parse_back():
    params = {"topic": "flaky\ntests `x`", "n": 3, "ratio": 0.5, "on": True, "none": None,
              "items": [1, "two"], "cfg": {"a": IMG}}
    cell = codify(params)
    lines = cell.splitlines()
    assert len(lines) == len(params) and all(line.startswith("%set ") for line in lines)
    assert dict(parse_set(line[len("%set"):]) for line in lines) == params


def test_codify_refuses_names_that_are_not_identifiers():
    with pytest.raises(ValueError, match="not an identifier"):
        codify({"a b": 1})
    with pytest.raises(ValueError, match="not a name"):
        parse_set("1x 2")
    with pytest.raises(ValueError, match="usage"):
        parse_set("alone")


def test_set_takes_text_when_it_is_not_json():
    assert parse_set("who the whole team") == ("who", "the whole team")
    assert parse_set('who "quoted"') == ("who", "quoted")


def test_interpolate_replaces_only_names_that_were_set():
    values = {"topic": "flaky tests", "n": 3, "cfg": {"k": [1]}}
    text = "Fix {topic} ({n} of them) per {cfg}; keep {other} and code like {x: 1} and {{topic}}"
    assert interpolate(text, values) == (
        'Fix flaky tests (3 of them) per {"k": [1]}; keep {other} and code like {x: 1} and {flaky tests}')
    assert interpolate("no braces", values) == "no braces"


def test_papermill_finds_the_translator_for_the_acp_kernel():
    from papermill.translators import translate_parameters

    assert translate_parameters("acp", "markdown", {"topic": "x"}, "Parameters") == '%set topic "x"\n'
    assert AcpTranslator.codify({"n": 1}) == "%set n 1\n"


def notebook(path):
    nb = nbformat.v4.new_notebook(metadata={"kernelspec": {"name": "acp", "display_name": "ACP", "language": "markdown"}})
    params = nbformat.v4.new_code_cell('%set topic "nothing"')
    params.metadata["tags"] = ["parameters"]
    nb.cells = [params, nbformat.v4.new_code_cell("Tell me about {topic}")]
    nbformat.write(nb, path)


def answers():
    return {"prompts": {"Tell me about flaky tests": [{"chunk": "About flaky tests."}]},
            "prompt": [{"chunk": "WRONG PROMPT"}]}


def test_papermill_parameters_reach_the_prompt(headless_env, tmp_path):
    use_scripted_agent(headless_env, answers())
    src, out = tmp_path / "in.ipynb", tmp_path / "out.ipynb"
    notebook(src)
    pm.execute_notebook(str(src), str(out), parameters={"topic": "flaky tests"},
                        kernel_name="acp", kernel_manager_class=IpcKernelManager, cwd=str(tmp_path / "work"), progress_bar=False)
    text = json.dumps(nbformat.read(out, as_version=4).cells[-1].outputs)
    assert "About flaky tests." in text and "WRONG PROMPT" not in text


def test_papermill_command_line_with_p(headless_env, tmp_path):
    assert entry_point_installed(), "the papermill.engine entry point 'acp' (pyproject.toml) is not installed"
    use_scripted_agent(headless_env, answers())
    src, out = tmp_path / "in.ipynb", tmp_path / "out.ipynb"
    notebook(src)
    run = subprocess.run([sys.executable, "-m", "papermill", str(src), str(out), "-p", "topic", "flaky tests",
                          "--cwd", str(tmp_path / "work"), "--no-progress-bar"],
                         capture_output=True, text=True, timeout=120, env=headless_env)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "About flaky tests." in json.dumps(nbformat.read(out, as_version=4).cells[-1].outputs)


def test_the_module_imports_before_papermill():
    run = subprocess.run([sys.executable, "-c", "import acp_kernel.frontends.papermill as m, acp_kernel.frontends.papermill_engine as e; print(m.AcpTranslator, e.AcpEngine)"],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr[-2000:]


def test_the_kernel_keeps_set_and_interpolate_free_of_papermill():
    """The kernel's %set does not import papermill (heavy, and the cycle above)."""
    run = subprocess.run([sys.executable, "-c", "import sys, acp_kernel.frontends.kernel, acp_kernel.frontends.cells as c; "
                          "c.parse_cell('%set a 1'); print('papermill' in sys.modules)"],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0 and run.stdout.strip() == "False", run.stderr[-2000:]
