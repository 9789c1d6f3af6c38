"""Saved widget state of the tour notebook: how many bytes each widget class leaves in the file.

``python benchmarks/widget_state.py [run] [--notebook PATH] [--save OUT.ipynb]`` runs the notebook
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


#: The same measure of the tour saved at f8842c1, before the turn's code became a loader
#: (each turn widget carried common.js + turn.js + toolcall.css + turn.css).
BEFORE = {"file_bytes": 282_590, "widget_state_bytes": 240_523, "turn_models": 7, "turn_code_bytes": 201_782,
          "turn_max_code_bytes": 28_826, "turn_other_bytes": 14_518}


def widget_state(ctx: Any) -> Any:
    """The benchmark section for ``benchmarks/run.py`` (``--only widget-state``)."""
    from benchmarks.run import Failed, Section, kernel_env, worker

    sec = Section("Saved widget state of notebooks/01-acp-kernel-tour.ipynb (nbclient, store_widget_state=True)",
                  ["widget class", "models", "code bytes (_esm + _css)", "largest per model", "other state bytes"])
    print("  [widget-state] the tour through nbclient", file=sys.stderr)
    try:
        r = worker(ctx, "run", script=os.path.abspath(__file__), env=kernel_env(ctx), timeout=600,
                   cwd=os.path.join(ctx.tmp, "work"))
    except (Failed, OSError, ValueError, KeyError) as exc:
        sec.notes.append(f"failed: {exc}")
        return sec
    b = BEFORE
    sec.rows.append(["TurnWidget before (f8842c1)", str(b["turn_models"]), f"{b['turn_code_bytes']:,}",
                     f"{b['turn_max_code_bytes']:,}", f"{b['turn_other_bytes']:,}"])
    for name, row in sorted(r["classes"].items()):
        sec.rows.append([name.rsplit(".", 1)[-1], str(row["models"]), f"{row['code_bytes']:,}",
                         f"{row['max_code_bytes']:,}", f"{row['other_bytes']:,}"])
    sec.notes.append(f"the saved notebook: {r['file_bytes']:,} bytes, {r['widget_state_bytes']:,} of them widget state "
                     f"(before: {b['file_bytes']:,} and {b['widget_state_bytes']:,}); bytes as the file holds them "
                     "(JSON strings, UTF-8)")
    sec.notes.append("the turn's module (common.js + turn.js, toolcall.css + turn.css) is sent to a page on request "
                     "(a custom message, never saved); each turn saves static/turnloader.js + turnplain.css")
    return sec


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="widget_state.py")
    p.add_argument("mode", nargs="?", choices=["run"], default="run")
    p.add_argument("--notebook", default=TOUR)
    p.add_argument("--save", help="keep the executed notebook here")
    args = p.parse_args(argv)
    sys.stdout.write(json.dumps(run(args.notebook, args.save)) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
