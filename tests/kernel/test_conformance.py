"""jupyter_kernel_test's conformance checks for the ACP kernel."""

from __future__ import annotations

import os
import tempfile
import unittest

import jupyter_kernel_test as jkt

from acp_kernel.frontends.install import install
from tests.kernels import BlockingIpcKernelManager


class AcpKernelConformance(jkt.KernelTests):
    kernel_name = "acp"
    language_name = "markdown"
    file_extension = ".md"

    # %%shell output arrives on stdout
    code_hello_world = "%%shell\necho 'hello, world'"
    code_display_data = [{"code": "%help", "mime": "text/markdown"}]
    completion_samples = [{"text": "%he", "matches": {"%help"}}]
    complete_code_samples = ["hello", "%status", "%%shell\necho hi"]
    incomplete_code_samples = ["tell me about \\"]
    invalid_code_samples = ["%nonsense"]
    # A failing command: its error output alone says it (no display besides).
    code_generate_error = "%nonsense"
    code_inspect_sample = "%status"

    @classmethod
    def setUpClass(cls) -> None:
        cls._tmp = tempfile.TemporaryDirectory()
        install(prefix=cls._tmp.name)
        cls._env = {k: os.environ.get(k) for k in ("JUPYTER_PATH", "ACP_KERNEL_STATE", "ACP_DEMO_STATE_DIR")}
        os.environ["JUPYTER_PATH"] = os.path.join(cls._tmp.name, "share", "jupyter")
        os.environ["ACP_KERNEL_STATE"] = os.path.join(cls._tmp.name, "state.json")
        os.environ["ACP_DEMO_STATE_DIR"] = os.path.join(cls._tmp.name, "demo")
        # jupyter_kernel_test's own setUpClass, on Unix sockets (tests/kernels.py: no TCP port race)
        cls.km = BlockingIpcKernelManager(kernel_name=cls.kernel_name)
        cls.km.start_kernel()
        cls.kc = cls.km.client()
        cls.kc.start_channels()
        try:
            cls.kc.wait_for_ready(timeout=60)
        except RuntimeError:
            cls.kc.stop_channels()
            cls.km.shutdown_kernel()
            raise

    @classmethod
    def tearDownClass(cls) -> None:
        super().tearDownClass()
        for key, value in cls._env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        cls._tmp.cleanup()


if __name__ == "__main__":  # pragma: no cover
    unittest.main()
