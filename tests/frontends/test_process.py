"""The processes acp-kernel owns tune their garbage collector; a user's Python is left alone."""

from __future__ import annotations

import gc
import json
import subprocess
import sys

from acp_kernel.frontends.process import GC_THRESHOLDS


def _thresholds_after(code: str) -> tuple[int, ...]:
    out = subprocess.run([sys.executable, "-c", code + "\nimport gc, json; print(json.dumps(gc.get_threshold()))"],
                         capture_output=True, text=True, timeout=60, check=True).stdout
    return tuple(json.loads(out.strip().splitlines()[-1]))


def test_the_kernel_and_the_cli_tune_their_own_process_and_importing_the_package_does_not():
    default = gc.get_threshold() if gc.get_threshold() != GC_THRESHOLDS else (700, 10, 10)
    # What the magics do in a user's kernel: import the package and its front-ends.
    assert _thresholds_after("import acp_kernel.frontends.kernel, acp_kernel.frontends.cli, magics") == default
    # The ACP kernel's main and the prompt command set them (run up to the point where they would
    # start a kernel or an agent: both are replaced by a stub that ends the process).
    kernel = ("import acp_kernel.frontends.kernel as k, acp_kernel.compat as c\n"
              "c.launch_kernel_app = lambda cls: None\nk.main()")
    assert _thresholds_after(kernel) == GC_THRESHOLDS
    cli = ("import acp_kernel.frontends.cli as c\nc.prompt_main = lambda args: 0\n"
           "c.main(['prompt', '--agent-command', 'true', 'hi'])")
    assert _thresholds_after(cli) == GC_THRESHOLDS
