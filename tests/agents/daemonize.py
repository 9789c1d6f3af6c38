"""Start a daemon the classic way: fork, ``setsid``, fork again, parent exits.

Usage: ``python daemonize.py PIDFILE [hold]``

The grandchild (a session of its own, re-parented once its parent exits)
writes its pid to PIDFILE (atomically) and sleeps 300 s. Without ``hold`` its
stdio is ``/dev/null``, as a well-behaved daemon's; with ``hold`` it keeps
the stdout it inherited (e.g. an agent's wire). The first process exits once
the daemon runs and PIDFILE is written, so a caller that waits for it can read
the file at once. Stdlib only.
"""

from __future__ import annotations

import os
import sys
import time


def main() -> None:
    path = sys.argv[1]
    hold = "hold" in sys.argv[2:]
    r, w = os.pipe()
    middle = os.fork()
    if middle == 0:
        os.close(r)
        os.setsid()
        if os.fork() == 0:
            if not hold:
                null = os.open(os.devnull, os.O_RDWR)
                for fd in (0, 1, 2):
                    os.dup2(null, fd)
            tmp = f"{path}.tmp"
            with open(tmp, "w") as f:
                f.write(str(os.getpid()))
            os.rename(tmp, path)
            os.write(w, b"x")
            os.close(w)
            time.sleep(300)
            os._exit(0)
        os._exit(0)
    os.close(w)
    os.read(r, 1)  # the daemon wrote the file
    os.waitpid(middle, 0)


if __name__ == "__main__":
    main()
