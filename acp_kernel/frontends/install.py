"""Kernelspecs: ``acp`` ("ACP Agent"), and one per agent on request."""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from typing import Any

from ..client.registry import AgentSpec


#: The packaged kernelspec folder: its logos go with every installed spec.
KERNELSPEC = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "kernelspec", "acp")
LOGOS = ("logo-32x32.png", "logo-64x64.png", "logo-svg.svg")


def kernel_json(spec: AgentSpec | None = None, *, executable: str | None = None) -> dict[str, Any]:
    data: dict[str, Any] = {
        "argv": [executable or sys.executable, "-m", "acp_kernel.frontends.kernel", "-f", "{connection_file}"],
        "display_name": f"ACP: {spec.title}" if spec else "ACP Agent",
        "language": "markdown",
        # SIGINT reaches only the kernel: agents run in their own session.
        "interrupt_mode": "signal",
        "metadata": {"debugger": False},
    }
    if spec is not None:
        data["env"] = {"ACP_KERNEL_AGENT": spec.name}
    return data


def kernel_name(spec: AgentSpec | None = None) -> str:
    return f"acp-{spec.name}" if spec else "acp"


def install(spec: AgentSpec | None = None, *, user: bool = False, prefix: str | None = None) -> str:
    """Install a kernelspec; returns the directory it went to."""
    from jupyter_client.kernelspec import KernelSpecManager

    with tempfile.TemporaryDirectory() as tmp:
        os.chmod(tmp, 0o755)
        with open(os.path.join(tmp, "kernel.json"), "w", encoding="utf-8") as f:
            json.dump(kernel_json(spec), f, indent=2)
        for name in LOGOS:  # the launcher's icon
            shutil.copy(os.path.join(KERNELSPEC, name), tmp)
        return KernelSpecManager().install_kernel_spec(
            tmp, kernel_name(spec), user=user, prefix=prefix
        )
