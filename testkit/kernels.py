"""`make test`'s compile step: every solver kernel compiled into Numba's on-disk cache by a
few processes side by side, before the test processes start.

solvers.warmup shares the groups out between the processes (a file lock per group: a
process that finds a group taken compiles another, then loads the taken one from the
cache), longest first (solvers.warmup.LONGEST_FIRST). Run by make beside the lint, whose
one busy core leaves the other free, this takes the compile (about 130 s of CPU from an
empty cache, SMO's kernels 40 s of it) off the test run: every test process then loads
the kernels from the cache in about 2 s, where on a fresh clone each waited about 100 s
for its share of the compile. With the cache already filled it takes seconds.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time

WARM = ("from solvers.warmup import LONGEST_FIRST, warmup; "
        "print(f'solver kernels compiled or loaded in {warmup(LONGEST_FIRST):.1f} s', "
        "flush=True)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=2)
    args = parser.parse_args(argv)
    started = time.monotonic()
    helpers = [subprocess.Popen([sys.executable, "-c", WARM])
               for _ in range(max(1, args.processes))]
    codes = [helper.wait() for helper in helpers]
    print(f"kernel cache ready in {time.monotonic() - started:.1f} s "
          f"({len(helpers)} processes)", flush=True)
    return max(codes)


if __name__ == "__main__":
    raise SystemExit(main())
