"""Write tests/slowest.txt from a run's ``--durations=0`` report (on stdin).

    bash scripts/test.sh --durations=0 | python tests/slowest.py

The tests that took 5 s or more (setup, call and teardown together), slowest
first, one ``seconds node-id`` a line; tests/conftest.py starts them first, so
a run does not end on one worker waiting for one of them. Grouped tests are
left out: their groups are scheduled as a whole.
"""

from __future__ import annotations

import collections
import re
import sys
from pathlib import Path

OUT = Path(__file__).with_name("slowest.txt")
LINE = re.compile(r"^(\d+(?:\.\d+)?)s (?:setup|call|teardown) +(\S.*?)\s*$")


def main() -> None:
    took: collections.Counter[str] = collections.Counter()
    for line in sys.stdin:
        if len(line) > 2000:
            continue  # no test id is this long (the regex is quadratic in a line's length)
        if (m := LINE.match(line)) and "@" not in m.group(2).rsplit("]", 1)[-1]:
            took[m.group(2)] += float(m.group(1))
    rows = [f"{seconds:.1f} {nodeid}" for nodeid, seconds in took.most_common() if seconds >= 5]
    OUT.write_text("".join(row + "\n" for row in rows))
    print(f"{len(rows)} tests of 5 s or more written to {OUT}")


if __name__ == "__main__":
    main()
