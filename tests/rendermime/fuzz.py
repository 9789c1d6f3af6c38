"""The differential fuzz: generated agent text -> acp_kernel.safe -> JupyterLab's renderers.

:func:`fuzz` renders every output of every input (deduplicated: many inputs
come out of ``safe`` the same) and keeps what the oracle found live;
:func:`shrink` cuts a failing input down to a minimal one that still fails the
same way. :func:`session` starts what the oracle needs outside pytest (a
JupyterLab and Chromium), for ``python -m tests.rendermime.run``.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import importlib
import multiprocessing
import os
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Iterator

from .generator import cases
from .oracle import Item, Oracle, Verdict, describe
from .outputs import items_for

FINDINGS_FILE = Path(os.environ.get("ACP_FUZZ_FINDINGS", "/tmp/rendermime-findings.txt"))
#: Inputs handed to ``safe`` and then to the page at a time.
CHUNK = 500


#: Kinds of finding, worst first (the first word of each finding from oracle.js).
SEVERITY = ("handler", "element", "link", "attribute", "tag", "render", "math")


def worst(verdict: Verdict) -> str:
    kinds = {f.split(" ", 1)[0] for f in verdict.findings}
    return next((k for k in SEVERITY if k in kinds), min(kinds))


@dataclass
class Failure:
    index: int
    text: str
    verdict: Verdict
    minimal: str = ""
    minimal_verdict: Verdict | None = None

    def kind(self) -> tuple:
        return (self.verdict.item.label, self.verdict.item.mime, self.verdict.item.trusted, worst(self.verdict))

    def report(self, seed: Any) -> str:
        shown = self.minimal_verdict or self.verdict
        return (f"seed={seed} index={self.index} {self.kind()}\n"
                f"  input:   {self.text!r}\n  minimal: {(self.minimal or self.text)!r}\n  {describe(shown)}")


@dataclass
class Report:
    seed: Any
    inputs: int
    rendered: int = 0
    seconds: float = 0.0
    page_seconds: float = 0.0  # of ``seconds``: waiting on the page (the rest: on ``safe`` in the worker)
    failures: list[Failure] = field(default_factory=list)
    pwned: list[str] = field(default_factory=list)

    def kinds(self) -> dict[tuple, int]:
        out: dict[tuple, int] = {}
        for f in self.failures:
            out[f.kind()] = out.get(f.kind(), 0) + 1
        return out

    def inputs_with(self, pred: Callable[[Failure], bool] = lambda f: True) -> int:
        return len({f.index for f in self.failures if pred(f)})

    def summary(self) -> str:
        return (f"seed={self.seed} inputs={self.inputs} renders={self.rendered} in {self.seconds:.1f} s "
                f"({self.page_seconds:.1f} s in the page): "
                f"{self.inputs_with()} inputs with live or typeset output "
                f"({self.inputs_with(lambda f: f.kind()[3] != 'math')} live HTML, "
                f"{self.inputs_with(lambda f: f.kind()[3] == 'math')} math; "
                f"{self.inputs_with(lambda f: f.kind()[1] != 'text/plain')} outside text/plain), "
                f"{len(self.failures)} failing renders, kinds={self.kinds()}, payloads ran={len(self.pwned)}")


def _build(safe_name: str, safe_path: str, seed: Any, first: int, n: int) -> tuple[list[str], list[list[Item]]]:
    """Inputs ``first``..``first+n`` and their outputs (run in a worker process)."""
    safe = _load_safe(safe_name, safe_path)
    texts = cases(seed, first, n)
    return texts, [items_for(safe, text) for text in texts]


def _load_safe(name: str, path: str) -> ModuleType:
    if path and path not in sys.path:
        sys.path.insert(0, path)
    return importlib.import_module(name)


def fuzz(oracle: Oracle, safe: ModuleType, seed: Any, count: int, start: int = 0,
         progress: Callable[[Report], None] | None = None, safe_path: str = "") -> Report:
    """Inputs ``start``..``start+count`` of ``seed`` through ``safe`` and the oracle.
    A worker process builds the next chunk's outputs while the page renders this one."""
    report = Report(seed, count)
    seen: set[int] = set()
    began = time.monotonic()
    firsts = list(range(start, start + count, CHUNK))
    spawn = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=spawn) as pool:
        jobs = [pool.submit(_build, safe.__name__, safe_path, seed, first, min(CHUNK, start + count - first))
                for first in firsts[:2]]
        for n, first in enumerate(firsts):
            texts, built = jobs[n].result()
            if n + 2 < len(firsts):
                nxt = firsts[n + 2]
                jobs.append(pool.submit(_build, safe.__name__, safe_path, seed, nxt, min(CHUNK, start + count - nxt)))
            items: list[Item] = []
            owners: list[int] = []
            for k, outputs in enumerate(built):
                for item in outputs:
                    key = hash((item.mime, item.source, item.trusted))
                    if key in seen:
                        continue
                    seen.add(key)
                    items.append(item)
                    owners.append(k)
            before = len(oracle.pwned)
            judging = time.monotonic()
            verdicts = oracle.judge(items)
            report.page_seconds += time.monotonic() - judging
            for verdict, k in zip(verdicts, owners):
                if verdict.findings:
                    report.failures.append(Failure(first + k, texts[k], verdict))
            report.pwned += oracle.pwned[before:]
            report.rendered += len(items)
            report.seconds = time.monotonic() - began
            if progress:
                progress(report)
    return report


def fails_alike(oracle: Oracle, safe: ModuleType, like: Verdict, texts: list[str]) -> list[Verdict | None]:
    """For each text: its verdict if the same output fails with the same first kind of finding."""
    want = worst(like)
    items: list[Item] = []
    owners: list[int] = []
    for k, text in enumerate(texts):
        try:
            built = items_for(safe, text, (like.item.label,))
        except Exception:  # noqa: BLE001 - a candidate safe cannot build is not a smaller failure
            continue
        for item in built:
            if item.mime == like.item.mime and item.trusted == like.item.trusted:
                items.append(item)
                owners.append(k)
    out: list[Verdict | None] = [None] * len(texts)
    for verdict, k in zip(oracle.judge(items), owners):
        if any(f.split(" ", 1)[0] == want for f in verdict.findings):
            out[k] = verdict
    return out


def shrink(oracle: Oracle, safe: ModuleType, failure: Failure, rounds: int = 200) -> Failure:
    """Delta debugging: drop chunks (halves down to single characters) while the failure stays."""
    text, verdict = failure.text, failure.verdict
    size = max(1, len(text) // 2)
    for _ in range(rounds):
        candidates = [text[:i] + text[i + size:] for i in range(0, len(text), size)]
        candidates = [c for c in candidates if c and c != text][:CHUNK]
        found = next(((c, v) for c, v in zip(candidates, fails_alike(oracle, safe, verdict, candidates)) if v), None)
        if found:
            text, verdict = found
            size = min(size, max(1, len(text) // 2))
        elif size > 1:
            size //= 2
        else:
            break
    failure.minimal, failure.minimal_verdict = text, verdict
    return failure


def shrink_some(oracle: Oracle, safe: ModuleType, report: Report, per_kind: int = 2) -> list[Failure]:
    """Minimal inputs for the first few failures of each kind (also appended to FINDINGS_FILE)."""
    done: list[Failure] = []
    counts: dict[tuple, int] = {}
    for f in report.failures:
        if counts.get(f.kind(), 0) >= per_kind:
            continue
        counts[f.kind()] = counts.get(f.kind(), 0) + 1
        done.append(shrink(oracle, safe, f))
        record(f.report(report.seed))
    return done


def record(text: str) -> None:
    with contextlib.suppress(OSError), FINDINGS_FILE.open("a") as out:
        out.write(time.strftime("%H:%M:%S ") + text + "\n\n")


@contextlib.contextmanager
def session(timeout_ms: int = 180_000) -> Iterator[Oracle]:
    """A JupyterLab (app exposed in the page) and Chromium, outside pytest."""
    from .conftest import LAB_ARGS, serve

    base = Path(tempfile.mkdtemp(prefix="rendermime-"))
    servers = serve(base, LAB_ARGS)
    lab = next(servers)
    try:
        with Oracle.in_chromium(lab.url("/lab"), timeout_ms) as oracle:
            yield oracle
    finally:
        with contextlib.suppress(StopIteration):
            next(servers)
