"""Saved widget state of the tour notebook: how many bytes each widget class leaves in the file.

``python benchmarks/widget_state.py [run] [--notebook PATH] [--save OUT.ipynb]`` runs the notebook
(default ``notebooks/01-acp-kernel-tour.ipynb``) through nbclient with
``store_widget_state=True`` on a real ``acp`` kernel (a private kernelspec and temp state,
as ``tests/kernel/conftest.py`` sets up; the built-in demo agent), writes it with nbformat
and prints one JSON object on its last stdout line: the file's bytes, the bytes of its
widget state, and per widget class (``_anywidget_id``, else the model name) the models,
the bytes of their code (``_esm`` + ``_css``) and of everything else in their state.
``long [--steps 1000] [--store]`` saves one turn of that many steps instead (a paragraph and a
tool call each) and prints the file's bytes, the turn's output bytes per mime type, the
widget state's bytes and how many steps the saved output keeps.

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


def _env(tmp: str) -> None:
    """A private kernelspec and temp state for the kernels nbclient starts here."""
    if not os.environ.get("JUPYTER_PATH"):
        from acp_kernel.frontends.install import install

        install(prefix=os.path.join(tmp, "prefix"))
        os.environ["JUPYTER_PATH"] = os.path.join(tmp, "prefix", "share", "jupyter")
    os.environ.update({"ACP_KERNEL_STATE": os.path.join(tmp, "state", "sessions.json"),
                       "ACP_KERNEL_CONFIG": os.path.join(tmp, "acp_kernel.json"),  # absent: built-in agents
                       "ACP_DEMO_STATE_DIR": os.path.join(tmp, "demo-state")})
    for key in ("ACP_KERNEL_AGENT", "ACP_KERNEL_PERMISSIONS", "JPY_SESSION_NAME"):
        os.environ.pop(key, None)


def run(path: str, save: str | None) -> dict[str, Any]:
    import nbformat
    from nbclient import NotebookClient

    with tempfile.TemporaryDirectory(prefix="acp-widget-state-") as tmp:
        _env(tmp)
        work = os.path.join(tmp, "work")
        os.makedirs(work)
        nb = nbformat.read(path, as_version=4)
        NotebookClient(nb, timeout=120, kernel_name="acp", store_widget_state=True,
                       resources={"metadata": {"path": work}}).execute()
        out = save or os.path.join(tmp, "saved.ipynb")
        nbformat.write(nb, out)
        saved = nbformat.read(out, as_version=4)
        return {"notebook": os.path.relpath(path, ROOT), **measure(saved, os.path.getsize(out))}


def long_turn(steps: int, store_widget_state: bool) -> dict[str, Any]:
    """One turn of ``steps`` steps (a paragraph and a tool call each: long_turn_browser.py's
    agent, as fast as it writes) saved by nbclient: the file's bytes, the turn's output bytes
    per mime type, the widget state's bytes, and how many steps the output keeps."""
    import nbformat
    from nbclient import NotebookClient

    with tempfile.TemporaryDirectory(prefix="acp-long-saved-") as tmp:
        _env(tmp)
        agent = [sys.executable, os.path.join(HERE, "long_turn_browser.py"), "agent", "--steps", str(steps),
                 "--rate", "0", "--stamp", os.path.join(tmp, "stamp")]
        with open(os.environ["ACP_KERNEL_CONFIG"], "w", encoding="utf-8") as f:
            json.dump({"default_agent": "long", "agents": {"long": {"title": "Long", "command": agent}}}, f)
        work = os.path.join(tmp, "work")
        os.makedirs(work)
        nb = nbformat.v4.new_notebook(metadata={"kernelspec": {"name": "acp", "display_name": "ACP", "language": "markdown"}})
        nb.cells = [nbformat.v4.new_code_cell("go")]
        NotebookClient(nb, timeout=300, kernel_name="acp", store_widget_state=store_widget_state,
                       resources={"metadata": {"path": work}}).execute()
        out = os.path.join(tmp, "saved.ipynb")
        nbformat.write(nb, out)
        saved = nbformat.read(out, as_version=4)
        mimes: dict[str, int] = {}
        for o in saved.cells[0].outputs:
            for mime, value in o.get("data", {}).items():
                mimes[mime] = mimes.get(mime, 0) + _size(value)
        md = "".join(o.get("data", {}).get("text/markdown", "") for o in saved.cells[0].outputs)
        return {"steps": steps, "file_bytes": os.path.getsize(out), "mimes": mimes,
                "widget_state_bytes": _size(saved.get("metadata", {}).get("widgets", {})),
                "steps_kept": md.count("Step ") - md.count("steps of this turn are not kept")}


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
                     "(a custom message, never saved); a finished turn's widget is closed, its state emptied first, "
                     "so nbclient (which keeps closed models) saves static/turnloader.js + turnplain.css and no blocks")
    for store in (False, True):
        try:
            lt = worker(ctx, "long", "--steps", "1000", *(["--store"] if store else []), script=os.path.abspath(__file__),
                        env=kernel_env(ctx), timeout=600, cwd=os.path.join(ctx.tmp, "work"))
        except (Failed, OSError, ValueError, KeyError) as exc:
            sec.notes.append(f"the 1,000-step turn failed: {exc}")
            continue
        per = ", ".join(f"{m} {n:,}" for m, n in sorted(lt["mimes"].items()))
        sec.notes.append(f"a 1,000-step turn saved by nbclient (store_widget_state={store}): {lt['file_bytes']:,} bytes; "
                         f"its output {per}; widget state {lt['widget_state_bytes']:,}; steps kept "
                         f"{lt['steps_kept']:,} of {lt['steps']:,}")
    return sec


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="widget_state.py")
    p.add_argument("mode", nargs="?", choices=["run", "long"], default="run")
    p.add_argument("--notebook", default=TOUR)
    p.add_argument("--save", help="keep the executed notebook here")
    p.add_argument("--steps", type=int, default=1000, help="long: the turn's steps")
    p.add_argument("--store", action="store_true", help="long: nbclient's store_widget_state")
    args = p.parse_args(argv)
    result = long_turn(args.steps, args.store) if args.mode == "long" else run(args.notebook, args.save)
    sys.stdout.write(json.dumps(result) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
