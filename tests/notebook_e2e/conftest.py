"""Kernels of both kinds, from the kernel and magics harnesses."""

from tests.kernel.conftest import acp_kernel, kernel_env, kernelspec_path  # noqa: F401
from tests.magics.conftest import ipython, magics  # noqa: F401
