"""How finely a solver on several threads splits its work, measured as it runs (never
read from the load average).

A solver whose parallel loops give the same arithmetic on one thread as on many (SMO's
per-step loops, tron's Hessian-vector products: the work is split by the data, never by the
thread count) can run them in parallel - "fine" - or all on the calling thread -
"sequential", the work of a one-thread fit. Which is faster depends on the problem, on the
thread count and on what else the cores run: a parallel region that waits for a
descheduled thread costs milliseconds on a busy machine, microseconds on an idle one.

`GrainMeter.call` runs a call of `steps` steps (the solvers size calls to tens of
milliseconds) in the current mode; now and then it then probes the other mode with a
share of them (1 / PROBE_SHARE), in pieces of 1, 2, 4, ... steps, and gives the probe up
as soon as it has taken CLOSE times longer than its steps took in the current mode: a
lost probe costs about one probe's time, however slow the other mode is (a fine step
that waits a time slice for a descheduled thread is a hundred times slower than a
sequential one). Both parts run back to back, so the load hits both alike; their cost
per unit of work is compared. A call of fewer than PROBE_SHARE steps (tron's on large
data: one conjugate-gradient step, a Hessian-vector product, is a whole call) cannot be
split: such a call probes whole, against the current mode's cost in its last call (the
only way a fit of such calls can ever leave the sequential mode). The other mode takes
over after it has won CONFIRM probes in a row by MARGIN (one lucky time slice does not
switch a fit), the fine loops after one probe of a split call won by DECISIVE (a lucky
slice favours the mode that waits for no other thread, the sequential one; and a fit's
first calls, which fill the kernel cache, are its slowest: nu-SVR on pendigits at two
threads took 0.65-0.76 s with two wins needed, 0.53-0.56 s with one, 0.52 forced fine);
each lost probe doubles
the calls until the next (from 4 up to PROBE_MAX), except a close loss (within CLOSE),
which keeps the gap: a step's cost varies along a fit, and a near tie must not put the
next probe off. A call probes once the fit, its own first part included, has run
PROBE_AFTER seconds: a fit whose first call is that long probes in it, a shorter fit never
probes (it has little to gain; its call runs the probe's share in the current mode), and a
probe starts only while the probes so far cost at most
PROBE_BUDGET of the fit's time beyond what the current mode would have taken: on a
crowded machine even one parallel step can wait tens of milliseconds for a CPU, and the
probes then thin out to keep their cost a few per cent.

`FORCE` (tests, benchmarks): None measures; "fine" or "sequential" fixes the mode;
"alternate" switches at every call (a test that switching changes nothing).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import cast

PROBE_SHARE = 8  # a probe runs up to this fraction (1 / PROBE_SHARE) of a call's steps
PROBE_FIRST = 3  # calls between probes after a switch
PROBE_MAX = 64  # at most this many calls between probes
PROBE_AFTER = 0.05  # seconds of the fit (the current call's first part included) before a probe
PROBE_BUDGET = 0.03  # a probe starts only while the probes took <= this share of the fit
MARGIN = 0.92  # the other mode must cost less than MARGIN x the current one
DECISIVE = 0.8  # ... or, for the fine loops, less than DECISIVE x in one split-call probe
CLOSE = 1.25  # a probe that lost by less (cost ratio < CLOSE) does not back off
CONFIRM = 2  # ... in this many probes in a row
FORCE: str | None = None

# run_part(fine, steps) -> (status, steps done, work done): one compiled call in a mode
RunPart = Callable[[bool, int], tuple[int, int, float]]


class GrainMeter:
    """Chooses, call by call, between a solver's fine-grained parallel loops and
    sequential loops (see the module docstring)."""

    def __init__(self, threads: int, clock: Callable[[], float] = time.perf_counter) -> None:
        self.clock = clock  # seconds (tests give a simulated one)
        self.parallel = threads > 1
        self.fine = False  # start like one thread: the fine loops must prove themselves
        self.every = 0  # calls until the next probe (0: the next call probes)
        self.wins = 0
        self.gap = 2  # calls between probes, doubled by each lost probe
        self.steps = {True: 0, False: 0}  # steps run in each mode
        self.probes = 0
        self.switches = 0
        self.elapsed = 0.0  # seconds of the fit's calls so far
        self.probe_seconds = 0.0  # what the probes cost beyond the current mode
        # the current mode's seconds per unit of work and per step in its last call (None
        # before one in this mode): what a call too short to split probes against
        self.rate: float | None = None
        self.step_seconds = 0.0

    def call(self, steps: int, run_part: RunPart, running: int) -> int:
        """Up to `steps` steps through `run_part`; `running` is the status of a call that
        used its budget (the solver goes on). Returns the last part's status."""
        if not self.parallel or FORCE is not None:
            fine = FORCE == "fine" if self.parallel else False
            if self.parallel and FORCE == "alternate":
                self.fine = fine = not self.fine
            status, done, _ = run_part(fine, steps)
            self.steps[fine] += done
            return status
        probe = steps // PROBE_SHARE
        whole = probe < 1  # too short to split: the whole call probes
        started = self.clock()
        if (self.every > 0 or (whole and self.rate is None)
                or (whole and self.elapsed < PROBE_AFTER)
                or self.probe_seconds > PROBE_BUDGET * self.elapsed):
            self.every -= 1
            status, done, work = run_part(self.fine, steps)
            seconds = self.clock() - started
            self.steps[self.fine] += done
            self.elapsed += seconds
            self._measured(seconds, done, work)
            return status
        if whole:
            seconds, rate = 0.0, cast(float, self.rate)
            status, probe_seconds, probe_work, measured = self._probe(
                steps, self.step_seconds * steps, run_part, running)
        else:
            status, done, work = run_part(self.fine, steps - probe)
            seconds = self.clock() - started
            self.steps[self.fine] += done
            if status != running or done <= 0 or work <= 0:
                self.elapsed += seconds
                return status  # finished (or nothing measurable): probe at the next call
            self._measured(seconds, done, work)
            if self.elapsed + seconds < PROBE_AFTER:
                # a fit this short so far: the rest of the call in the same mode, no probe
                status, more, _ = run_part(self.fine, probe)
                self.steps[self.fine] += more
                self.elapsed += self.clock() - started
                return status
            rate = seconds / work
            status, probe_seconds, probe_work, measured = self._probe(
                probe, seconds * probe / done, run_part, running)
        self.elapsed += seconds + probe_seconds
        # 0: given up or finished, not compared; inf: the current mode took no measurable
        # time, it cannot be beaten
        ratio = (0.0 if probe_work <= 0 else math.inf if rate <= 0
                 else (measured / probe_work) / rate)
        # what the probe cost beyond the current mode's time for its work (all of it when
        # given up): a close loss costs a few per cent of its time, not all of it
        self.probe_seconds += (max(probe_seconds * (1.0 - 1.0 / ratio), 0.0)
                               if probe_work > 0 and ratio > 0 else probe_seconds)
        self.probes += 1
        if probe_work > 0 and ratio < MARGIN:
            self.wins += 1
            if self.wins >= CONFIRM or (not self.fine and not whole and ratio < DECISIVE):
                self.fine, self.wins, self.switches = not self.fine, 0, self.switches + 1
                self.gap = self.every = PROBE_FIRST
                self.rate = None  # the old mode's: the next call measures the new one
            else:
                self.every = 0  # confirm at the next call
        elif probe_work > 0 and ratio < CLOSE:
            # a close loss: the cost of a step varies along a fit (cache misses, the
            # active set), so a near tie says little - probe again as soon, no back-off
            self.wins = 0
            self.every = self.gap
        elif probe_work >= 0:  # lost (or given up); < 0: finished inside, nothing learnt
            self.wins = 0
            self.gap = min(2 * self.gap, PROBE_MAX)
            self.every = self.gap
        return status

    def _measured(self, seconds: float, done: int, work: float) -> None:
        """Keep the current mode's cost from a call of it (what a whole-call probe is
        compared with)."""
        if done > 0 and work > 0:
            self.rate, self.step_seconds = seconds / work, seconds / done

    def _probe(self, steps: int, allowed: float, run_part: RunPart,
               running: int) -> tuple[int, float, float, float]:
        """Up to `steps` steps in the other mode, in pieces of 1, 2, 4, ...; given up once
        slower than CLOSE x `allowed` seconds. (status, seconds, work: 0 given up, -1
        finished, and the seconds of that work). The work and its seconds leave out the
        first piece when more follow: its step also wakes the other mode (the parallel
        loops' threads, asleep after a while of sequential steps: a hundred microseconds,
        as much as a step), which the mode does not pay once it runs."""
        other = not self.fine
        piece, left, seconds, work = 1, steps, 0.0, 0.0
        first_seconds, first_work = 0.0, 0.0
        status = running
        while left > 0:
            started = self.clock()
            status, done, did = run_part(other, min(piece, left))
            seconds += self.clock() - started
            self.steps[other] += done
            work += did
            left -= min(piece, left)
            if status != running:
                return status, seconds, -1.0, seconds
            if seconds > CLOSE * allowed:  # lost beyond a close call: stop here
                return status, seconds, 0.0, seconds
            if piece == 1 and left > 0:
                first_seconds, first_work = seconds, work
            piece *= 2
        return status, seconds, work - first_work, seconds - first_seconds

    def share_fine(self) -> float:
        """The share of the steps run with the fine-grained parallel loops."""
        total = self.steps[True] + self.steps[False]
        return self.steps[True] / total if total else 0.0
