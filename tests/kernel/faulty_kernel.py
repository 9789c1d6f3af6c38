"""The ACP kernel with one fault put in: a prompt holding ``FAIL-HERE`` makes
``Controller.prompt`` raise an exception the kernel does not expect (its
message full of hostile text), so ``do_execute``'s last-resort branch runs.
Run as a kernelspec's argv, like ``python -m acp_kernel.frontends.kernel``."""

from __future__ import annotations

from acp_kernel.client.controller import Controller
from acp_kernel.frontends import kernel

MARKER = "FAIL-HERE"
#: Raw HTML, math delimiters, a backtick run and a path with a newline in it.
HOSTILE = "<img src=x onerror=alert(1)> $x$ \\( \\[ \\begin{x} `tick` \x1b]0;title\x07\x1b[2J /tmp/a\nb.txt"

_prompt = Controller.prompt


async def prompt(self, blocks, *args, **kwargs):
    if any(MARKER in str(b.get("text", "")) for b in blocks):
        raise RuntimeError(HOSTILE)
    return await _prompt(self, blocks, *args, **kwargs)


Controller.prompt = prompt  # type: ignore[method-assign]

if __name__ == "__main__":
    kernel.main()
