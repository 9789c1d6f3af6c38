"""The test oracle: JupyterLab's own renderers, in the test Chromium.

A JupyterLab page (started with ``--LabApp.expose_app_in_browser=True``)
hands us its real ``IRenderMimeRegistry``; ``oracle.js`` renders output data
with it exactly as an output area does (``createRenderer(mime).renderModel``
then attach, so marked, JupyterLab's math pass, ``renderHTML`` with or
without the sanitizer and MathJax all run) and scans the DOM for anything
live or typeset. Many items go in one ``page.evaluate`` round trip.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator

ORACLE_JS = (Path(__file__).parent / "oracle.js").read_text()

#: Items per page round trip: big enough to amortise the call, small enough
#: that one batch's DOM stays cheap.
BATCH = 400


@dataclass(frozen=True)
class Item:
    """One output to render: a mime type, its source, and whether JupyterLab trusts it."""

    mime: str
    source: str
    trusted: bool
    label: str = ""


@dataclass
class Verdict:
    item: Item
    findings: list[str]
    text: str
    html: str = ""


@dataclass
class Oracle:
    """A JupyterLab page ready to render; :meth:`judge` renders and scans."""

    page: Any
    info: dict = field(default_factory=dict)
    pwned: list[str] = field(default_factory=list)

    @classmethod
    @contextlib.contextmanager
    def in_chromium(cls, url: str, timeout_ms: int) -> Iterator["Oracle"]:
        """Chromium (Debian's, headless) on ``url``, a JupyterLab that exposes its app."""
        from playwright.sync_api import sync_playwright

        from tests.browser.conftest import CHROMIUM, CHROMIUM_ARGS

        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
            try:
                page = browser.new_page()
                page.set_default_timeout(timeout_ms)
                yield cls.open(page, url, timeout_ms)
            finally:
                browser.close()

    @classmethod
    def open(cls, page: Any, url: str, timeout_ms: int) -> "Oracle":
        page.goto(url)
        page.wait_for_function("!!(window.jupyterapp && window.jupyterapp.pluginRegistry)", timeout=timeout_ms)
        info = page.evaluate(ORACLE_JS)
        return cls(page, info)

    def judge(self, items: Iterable[Item], mode: str = "batch") -> list[Verdict]:
        items = list(items)
        out: list[Verdict] = []
        for start in range(0, len(items), BATCH):
            chunk = items[start:start + BATCH]
            payload = [{"mime": i.mime, "source": i.source, "trusted": i.trusted} for i in chunk]
            res = self.page.evaluate("([items, mode]) => window.__acpOracle.render(items, mode)", [payload, mode])
            self.pwned += res["pwned"]
            for item, r in zip(chunk, res["results"]):
                out.append(Verdict(item, r["findings"], r["text"], r["html"]))
        return out


def describe(v: Verdict) -> str:
    return (f"{v.item.label} {v.item.mime} trusted={v.item.trusted}: {v.findings[:3]}\n"
            f"  source: {json.dumps(v.item.source)[:1500]}\n  dom: {v.html[:1500]}")
