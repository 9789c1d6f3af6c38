"""Kernel fixtures for the stand-in tests (the kernel suite's, reused)."""

from tests.kernel.conftest import kernel_env, kernelspec_path  # noqa: F401
