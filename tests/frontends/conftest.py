"""One harness for both front-ends: the ACP kernel and the magics in an IPython kernel.

``front.cmd("mode plan")`` runs a verb of the command table as the front-end
spells it (``%mode plan`` in the ACP kernel, ``%acp mode plan`` in the
magics), through a real kernel over jupyter_client, against the demo agent.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from tests.kernel import conftest as _kernel
from tests.kernel.conftest import scripted_command  # noqa: F401
from tests.magics import conftest as _magics
from tests.magics.conftest import CellResult, MagicsHarness, start, stop

ipython = _magics.ipython
magics = _magics.magics

kernelspec_path = _kernel.kernelspec_path
kernel_env = _kernel.kernel_env
acp_kernel = _kernel.acp_kernel


@dataclass
class Front:
    kind: str  # "kernel" or "magics"
    harness: MagicsHarness

    @property
    def prefix(self) -> str:
        return "%" if self.kind == "kernel" else "%acp "

    async def cmd(self, line: str, **kw: Any) -> CellResult:
        return await self.harness.execute(self.prefix + line, **kw)

    async def ok(self, line: str, **kw: Any) -> CellResult:
        res = await self.cmd(line, **kw)
        assert res.status == "ok", (line, res.reply["content"], res.text())
        return res

    @staticmethod
    def error(res: CellResult) -> str:
        """The one-line reason of a failed cell: the reply's evalue."""
        assert res.status == "error", res.text()
        return res.reply["content"]["evalue"]


@pytest.fixture(params=["kernel", "magics"])
async def front(request, kernel_env, tmp_path):
    kind = request.param
    harness = await start("acp" if kind == "kernel" else "python3", kernel_env, str(tmp_path / "work"))
    try:
        if kind == "magics":
            await harness.ok("%load_ext acp_kernel")
            await harness.ok("%acp connect demo")
        yield Front(kind, harness)
    finally:
        await stop(harness)
