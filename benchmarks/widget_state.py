"""Saved widget state of the tour notebook: how many bytes each widget class leaves in the file.

``python benchmarks/widget_state.py [--notebook PATH] [--save OUT.ipynb]`` runs the notebook
(default ``notebooks/01-acp-kernel-tour.ipynb``) through nbclient with
``store_widget_state=True`` on a real ``acp`` kernel (a private kernelspec and temp state,
as ``tests/kernel/conftest.py`` sets up; the built-in demo agent), writes it with nbformat
and prints one JSON object on its last stdout line: the file's bytes, the bytes of its
widget state, and per widget class (``_anywidget_id``, else the model name) the models,
the bytes of their code (``_esm`` + ``_css``) and of everything else in their state.

The section (``widget_state(ctx)`` in ``run.py``'s registry, ``--only widget-state``) runs
it once: the figures are sizes, not times.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
TOUR = os.path.join(ROOT, "notebooks", "01-acp-kernel-tour.ipynb")
STATE_MIME = "application/vnd.jupyter.widget-state+json"
CODE_KEYS = ("_esm", "_css")


def _size(value: Any) -> int:
    """Bytes of ``value`` as JSON in a notebook file (nbformat writes UTF-8, not ASCII escapes)."""
    return len(json.dumps(value, ensure_ascii=False).encode())


def measure(nb: Any, size: int) -> dict[str, Any]:
    """Sizes of a saved notebook's widget state (``nb`` as nbformat read it, ``size`` its file's bytes)."""
    widgets = nb.get("metadata", {}).get("widgets", {})
    models = widgets.get(STATE_MIME, {}).get("state", {})
    by_class: dict[str, dict[str, int]] = {}
    for model in models.values():
        state = model.get("state", {})
        name = state.get("_anywidget_id") or model.get("model_name") or "?"
        row = by_class.setdefault(name, {"models": 0, "code_bytes": 0, "other_bytes": 0, "max_code_bytes": 0})
        code = sum(_size(state[k]) for k in CODE_KEYS if k in state)
        row["models"] += 1
        row["code_bytes"] += code
        row["max_code_bytes"] = max(row["max_code_bytes"], code)
        row["other_bytes"] += _size(state) - code
    return {"file_bytes": size, "widget_state_bytes": _size(widgets), "models": len(models),
            "classes": by_class}


def run(path: str, save: str | None) -> dict[str, Any]:
    import nbformat
    from nbclient import NotebookClient

    tmp = tempfile.mkdtemp(prefix="acp-widget-state-")
    if not os.environ.get("JUPYTER_PATH"):
        from acp_kernel.frontends.install import install

        install(prefix=os.path.join(tmp, "prefix"))
        os.environ["JUPYTER_PATH"] = os.path.join(tmp, "prefix", "share", "jupyter")
    os.environ.update({"ACP_KERNEL_STATE": os.path.join(tmp, "state", "sessions.json"),
                       "ACP_KERNEL_CONFIG": os.path.join(tmp, "acp_kernel.json"),  # absent: built-in agents
                       "ACP_DEMO_STATE_DIR": os.path.join(tmp, "demo-state")})
    for key in ("ACP_KERNEL_AGENT", "ACP_KERNEL_PERMISSIONS", "JPY_SESSION_NAME"):
        os.environ.pop(key, None)
    work = os.path.join(tmp, "work")
    os.makedirs(work)
    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, timeout=120, kernel_name="acp", store_widget_state=True,
                   resources={"metadata": {"path": work}}).execute()
    out = save or os.path.join(tmp, "saved.ipynb")
    nbformat.write(nb, out)
    saved = nbformat.read(out, as_version=4)
    return {"notebook": os.path.relpath(path, ROOT), **measure(saved, os.path.getsize(out))}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="widget_state.py")
    p.add_argument("--notebook", default=TOUR)
    p.add_argument("--save", help="keep the executed notebook here")
    args = p.parse_args(argv)
    sys.stdout.write(json.dumps(run(args.notebook, args.save)) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
