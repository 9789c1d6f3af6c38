"""Run the differential fuzz outside pytest (measurements, nightly-sized runs, old copies of safe).

    python -m tests.rendermime.run --inputs 20000 --seed 1
    python -m tests.rendermime.run --safe-path /tmp/old --safe-module acp_kernel_head.safe

``--safe-path``/``--safe-module`` judge another copy of ``safe.py`` (for
instance ``git show <commit>:acp_kernel/safe.py`` saved with its
``termsafe.py`` as a package under that path).
"""

from __future__ import annotations

import argparse
import importlib
import sys

from .fuzz import fuzz, session, shrink_some


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--inputs", type=int, default=20000)
    ap.add_argument("--seed", default="1")
    ap.add_argument("--start", type=int, default=0)
    ap.add_argument("--safe-path", default="")
    ap.add_argument("--safe-module", default="acp_kernel.safe")
    ap.add_argument("--shrink", type=int, default=2, help="minimal inputs per kind of failure")
    args = ap.parse_args(argv)
    if args.safe_path:
        sys.path.insert(0, args.safe_path)
    safe = importlib.import_module(args.safe_module)
    print(f"judging {safe.__file__}", flush=True)
    with session() as oracle:
        print(f"renderers: {oracle.info}", flush=True)
        report = fuzz(oracle, safe, args.seed, args.inputs, args.start, safe_path=args.safe_path,
                      progress=lambda r: print("  " + r.summary(), flush=True))
        print(report.summary(), flush=True)
        for failure in shrink_some(oracle, safe, report, args.shrink):
            print(failure.report(args.seed), flush=True)
    return 1 if report.failures else 0


if __name__ == "__main__":
    sys.exit(main())
