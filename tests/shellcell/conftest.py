"""Kernel fixtures for ``%%shell`` cells: those of tests/magics (a real IPython
kernel and the ACP kernel through jupyter_client, temp kernelspec and state)."""

from tests.magics.conftest import acp_sh_kernel, ipython, kernel_env, kernelspec_path, magics  # noqa: F401
