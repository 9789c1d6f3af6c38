"""acp-kernel benchmarks: run with ``python -m benchmarks`` (see README.md)."""
