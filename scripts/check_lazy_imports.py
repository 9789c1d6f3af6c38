"""The gate's last check: no import of the package's own modules hidden in a function.

An import inside a function body hides a cycle from the import linter and
fails only when the function runs. Each one left must say why on its line,
``# lazy: start-up time`` (a heavy or rarely used module kept off the
start-up path); any other reason fails. Imports of other projects
(ipywidgets, acp.schema, ...) are not checked: they are lazy for start-up
time by design and cannot make a cycle here.

Usage: ``python scripts/check_lazy_imports.py [DIR...]`` (default: acp_kernel magics).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

OWN = ("acp_kernel", "magics")
MARK = "# lazy: start-up time"


def _own(node: ast.Import | ast.ImportFrom) -> bool:
    if isinstance(node, ast.ImportFrom):
        return node.level > 0 or (node.module or "").split(".")[0] in OWN
    return any(alias.name.split(".")[0] in OWN for alias in node.names)


def hidden_imports(path: Path) -> list[str]:
    """``path:line: statement`` for each unmarked own import inside a function."""
    source = path.read_text(encoding="utf-8")
    lines = source.splitlines()
    found: list[str] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inner = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, (ast.Import, ast.ImportFrom)) and in_function and _own(child):
                if MARK not in lines[child.lineno - 1]:
                    found.append(f"{path}:{child.lineno}: {lines[child.lineno - 1].strip()}")
            visit(child, inner)

    visit(ast.parse(source, str(path)), False)
    return found


def main(argv: list[str]) -> int:
    roots = [Path(a) for a in argv] or [Path("acp_kernel"), Path("magics")]
    found = [f for root in roots for p in sorted(root.rglob("*.py")) for f in hidden_imports(p)]
    for line in found:
        print(line)
    if found:
        print(f"{len(found)} imports of the package's own modules inside functions: move them to the top "
              f"(fix the cycle they dodge), or mark a start-up-time one with {MARK!r}.")
        return 1
    print("lazy imports: all marked")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
