"""bench/formulations_bench.py: a fit of a few milliseconds is timed over a block of fits
(one time slice would otherwise decide a row), a longer one alone."""

from __future__ import annotations

import time

from bench import formulations_bench as fb


def test_a_short_fit_is_timed_in_a_block_and_a_long_one_alone() -> None:
    calls = []

    def quick(*args: object) -> int:
        calls.append(args)
        time.sleep(0.005)
        return len(calls)

    block = fb._block(quick, 1, 2)
    # about BLOCK_SECONDS (0.1 s) of fits of 5 ms or more: at most 20, and several even
    # where a loaded machine stretches each sleep (8 at load 5 on a fresh clone)
    assert 2 <= block <= 20
    calls.clear()
    cpu, wall, output = fb._timed(quick, 1, 2, times=block)
    assert len(calls) == block and output == block
    assert 0.004 < wall < 0.02 and cpu < wall  # per fit; sleeping costs no CPU

    def slow(*args: object) -> None:
        time.sleep(fb.BLOCK_SECONDS * 1.2)

    assert fb._block(slow) == 1
