"""A failing ACP cell tells headless tools why: nbclient's CellExecutionError,
nbconvert's exit message and papermill's error carry the reason, one line."""

from __future__ import annotations

import subprocess
import sys

import nbformat
import pytest
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError
from tests.kernels import IpcKernelManager

from .conftest import use_scripted_agent

REASON = "usage: %permissions"  # what the kernel says of a bad %permissions line


def failing_notebook(path):
    nb = nbformat.v4.new_notebook(metadata={"kernelspec": {"name": "acp", "display_name": "ACP", "language": "markdown"}})
    nb.cells = [nbformat.v4.new_code_cell("%permissions sometimes"), nbformat.v4.new_code_cell("never reached")]
    nbformat.write(nb, path)
    return nb


def test_nbclient_error_names_the_reason(headless_env, tmp_path):
    use_scripted_agent(headless_env, {})
    nb = failing_notebook(tmp_path / "fail.ipynb")
    with pytest.raises(CellExecutionError) as info:
        NotebookClient(nb, timeout=60, kernel_name="acp", kernel_manager_class=IpcKernelManager, resources={"metadata": {"path": str(tmp_path / "work")}}).execute()
    message = str(info.value)
    assert REASON in message  # the reason, not an empty traceback
    assert info.value.ename and info.value.ename != "<Error>"
    assert "Traceback" not in message  # a usage error is one line, not a Python traceback
    errors = [o for o in nb.cells[0].outputs if o.output_type == "error"]
    assert len(errors) == 1 and errors[0].evalue


@pytest.mark.slow
def test_nbconvert_prints_the_reason_and_fails(headless_env, tmp_path):
    use_scripted_agent(headless_env, {})
    failing_notebook(tmp_path / "fail.ipynb")
    run = subprocess.run([sys.executable, "-m", "jupyter", "nbconvert", "--to", "notebook", "--execute",
                          "--output", str(tmp_path / "out.ipynb"), str(tmp_path / "fail.ipynb")],
                         capture_output=True, text=True, timeout=120, env=headless_env, cwd=str(tmp_path / "work"))
    assert run.returncode != 0
    assert REASON in run.stderr, run.stderr[-2000:]


def test_papermill_names_the_reason(headless_env, tmp_path):
    pm = pytest.importorskip("papermill")
    use_scripted_agent(headless_env, {})
    failing_notebook(tmp_path / "fail.ipynb")
    with pytest.raises(pm.PapermillExecutionError) as info:
        pm.execute_notebook(str(tmp_path / "fail.ipynb"), str(tmp_path / "out.ipynb"), kernel_name="acp",
                            kernel_manager_class=IpcKernelManager, cwd=str(tmp_path / "work"), progress_bar=False)
    assert REASON in str(info.value)
