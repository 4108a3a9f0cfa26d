"""solvers.grain: a solver's parallel grain is measured as the fit runs (probes of the
other mode back to back with the current one, given up as soon as they lose), not read
from the load average."""

from __future__ import annotations

import itertools

import pytest

from solvers import grain
from solvers.grain import GrainMeter

RUNNING, DONE = 0, 1


@pytest.fixture(autouse=True)
def probe_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The rules of the probes themselves: no wait before the first, no time budget
    (test_probes_keep_to_their_share_of_the_fit tests those)."""
    monkeypatch.setattr(grain, "PROBE_AFTER", 0.0)
    monkeypatch.setattr(grain, "PROBE_BUDGET", 1.0)


class FakeSolver:
    """`total` steps that take `cost[fine]` seconds each on a simulated clock."""

    def __init__(self, fine_cost: float, sequential_cost: float, total: int = 10**9) -> None:
        self.cost = {True: fine_cost, False: sequential_cost}
        self.left = total
        self.parts: list[tuple[bool, int]] = []
        self.now = 0.0

    def clock(self) -> float:
        return self.now

    def run_part(self, fine: bool, steps: int) -> tuple[int, int, float]:
        done = min(steps, self.left)
        self.left -= done
        self.parts.append((fine, done))
        self.now += done * self.cost[fine]
        return (DONE if self.left == 0 else RUNNING), done, float(done)


def test_one_thread_never_runs_the_parallel_loops() -> None:
    solver = FakeSolver(1e-6, 1e-6)
    meter = GrainMeter(1, solver.clock)
    for _ in range(5):
        meter.call(800, solver.run_part, RUNNING)
    assert solver.parts == [(False, 800)] * 5 and meter.share_fine() == 0.0


def test_a_faster_mode_must_win_twice_before_it_runs() -> None:
    solver = FakeSolver(1.7e-6, 2e-6)
    meter = GrainMeter(2, solver.clock)  # parallel 15% faster (ratio 0.85)
    meter.call(800, solver.run_part, RUNNING)
    # the call runs in the current (sequential) mode, then probes 1/8 in pieces 1, 2, 4..
    assert solver.parts[0] == (False, 700)
    assert [n for fine, n in solver.parts[1:]] == [1, 2, 4, 8, 16, 32, 37]
    assert all(fine for fine, _ in solver.parts[1:])
    assert not meter.fine  # one lucky probe does not switch
    meter.call(800, solver.run_part, RUNNING)
    assert meter.fine and meter.switches == 1
    solver.parts.clear()
    for _ in range(grain.PROBE_FIRST):
        meter.call(800, solver.run_part, RUNNING)
    assert solver.parts == [(True, 800)] * grain.PROBE_FIRST


def test_a_decisive_win_of_the_fine_loops_switches_at_once() -> None:
    """Parallel 10x faster: one probe won by more than DECISIVE switches (a lucky time
    slice helps the sequential mode, which waits for no thread, not the fine one)."""
    solver = FakeSolver(2e-6, 2e-5)
    meter = GrainMeter(2, solver.clock)
    meter.call(800, solver.run_part, RUNNING)
    assert meter.fine and meter.switches == 1 and meter.probes == 1
    solver.parts.clear()
    for _ in range(grain.PROBE_FIRST):
        meter.call(800, solver.run_part, RUNNING)
    assert solver.parts == [(True, 800)] * grain.PROBE_FIRST
    # back to sequential (now 10x faster) still takes two won probes
    solver.cost = {True: 2e-5, False: 2e-6}
    meter.call(800, solver.run_part, RUNNING)
    assert meter.fine and meter.wins == 1
    meter.call(800, solver.run_part, RUNNING)
    assert not meter.fine and meter.switches == 2


def test_a_long_first_call_probes_and_a_short_one_does_not(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A fit probes once it has run PROBE_AFTER seconds, counting the first part of the
    call it is in: a long first call (a large fit filling its kernel cache) probes at once;
    a short one runs its probe's share in the current mode."""
    monkeypatch.setattr(grain, "PROBE_AFTER", 0.05)
    slow = FakeSolver(2e-5, 1e-4)  # 700 sequential steps: 70 ms
    meter = GrainMeter(2, slow.clock)
    meter.call(800, slow.run_part, RUNNING)
    assert meter.probes == 1 and meter.fine
    fast = FakeSolver(2e-7, 1e-6)  # 700 steps: 0.7 ms
    meter = GrainMeter(2, fast.clock)
    meter.call(800, fast.run_part, RUNNING)
    assert fast.parts == [(False, 700), (False, 100)] and meter.probes == 0


def test_a_slow_probe_is_given_up_and_backs_off() -> None:
    """A fine step 100x slower than a sequential one (waiting for a descheduled thread):
    each probe stops after about its share of the call, and the probes thin out."""
    solver = FakeSolver(2e-4, 2e-6)
    meter = GrainMeter(4, solver.clock)
    calls = 300
    waits, probes = _waits_between_probes(meter, solver, calls)
    assert not meter.fine and meter.switches == 0
    assert waits[:4] == [4, 8, 16, 32] and set(waits[4:]) <= {grain.PROBE_MAX}
    fine_steps = meter.steps[True]
    # a probe gives up once past its share of the call (100 sequential steps): 1 + 2 fine
    # steps at most
    assert fine_steps <= 3 * probes
    assert fine_steps * 2e-4 < 0.05 * calls * 800 * 2e-6  # < 5% of the fit's time


def test_a_close_loss_keeps_probing_as_often() -> None:
    """A probe that loses by less than CLOSE (a step's cost varies along a fit: cache
    misses, the active set) does not put the next one off, as a clear loss does."""
    solver = FakeSolver(1.1e-6, 1e-6)
    meter = GrainMeter(2, solver.clock)
    waits, probes = _waits_between_probes(meter, solver, 40)
    assert not meter.fine and probes >= 10 and set(waits) == {2}
    assert meter.steps[True] == 100 * probes  # each probe ran its whole share
    solver.cost = {True: 1.5e-6, False: 1e-6}  # a clear loss: the probes thin out
    waits, _ = _waits_between_probes(meter, solver, 100)
    assert waits[:3] == [4, 8, 16]


def _waits_between_probes(meter: GrainMeter, solver: FakeSolver,
                          calls: int) -> tuple[list[int], int]:
    """The calls without a probe between two probes, over `calls` calls of 800 steps, and
    the number of probes."""
    probed = []
    for call in range(calls):
        before = len(solver.parts)
        meter.call(800, solver.run_part, RUNNING)
        if len(solver.parts) > before + 1:
            probed.append(call)
    return [b - a - 1 for a, b in itertools.pairwise(probed)], len(probed)


class WakingSolver(FakeSolver):
    """A FakeSolver whose first fine step after sequential ones also pays `wake` seconds
    (the parallel loops' threads fall asleep while the sequential steps run)."""

    def __init__(self, fine_cost: float, sequential_cost: float, wake: float) -> None:
        super().__init__(fine_cost, sequential_cost)
        self.wake = wake
        self.last = False

    def run_part(self, fine: bool, steps: int) -> tuple[int, int, float]:
        if fine and not self.last and steps > 0:
            self.now += self.wake
        self.last = fine
        return super().run_part(fine, steps)


def test_waking_the_threads_does_not_count_against_a_probe() -> None:
    """Fine steps 20% cheaper, but their first after sequential ones costs 30 steps more:
    a probe of 100 steps would lose (110 against 100) if the wake counted."""
    solver = WakingSolver(0.8e-6, 1e-6, 30e-6)
    meter = GrainMeter(2, solver.clock)
    for _ in range(4):
        meter.call(800, solver.run_part, RUNNING)
    assert meter.fine and meter.switches == 1


def test_the_meter_follows_a_change_of_load() -> None:
    solver = FakeSolver(1e-6, 4e-6)
    meter = GrainMeter(2, solver.clock)  # idle: parallel 4x faster
    for _ in range(10):
        meter.call(400, solver.run_part, RUNNING)
    assert meter.fine
    solver.cost = {True: 2e-5, False: 4e-6}  # then a neighbour takes a core
    for _ in range(10):
        meter.call(400, solver.run_part, RUNNING)
    assert not meter.fine and meter.switches == 2


def test_calls_too_short_to_split_probe_whole_and_switch() -> None:
    """Calls of one step (tron's conjugate-gradient steps on large data: each a call of its
    own): the first call measures the current mode, a whole call then probes the other
    against it, and two wins in a row switch; before, such a fit never probed and stayed
    on one thread (tron 400,000 x 100,000 at two threads: 1.89 s, forced fine 1.28)."""
    solver = FakeSolver(1e-3, 4e-3)  # parallel 4x faster
    meter = GrainMeter(2, solver.clock)
    for _ in range(3):
        meter.call(1, solver.run_part, RUNNING)
    assert solver.parts == [(False, 1), (True, 1), (True, 1)]
    assert meter.fine and meter.switches == 1 and meter.probes == 2
    for _ in range(10):
        meter.call(1, solver.run_part, RUNNING)
    assert meter.fine and meter.switches == 1  # the sequential probes lose


def test_whole_call_probes_that_lose_thin_out() -> None:
    solver = FakeSolver(8e-3, 1e-3)  # parallel 8x slower (a crowded machine)
    meter = GrainMeter(2, solver.clock)
    for _ in range(100):
        meter.call(1, solver.run_part, RUNNING)
    assert not meter.fine and meter.switches == 0
    probed = [k for k, (fine, _) in enumerate(solver.parts) if fine]
    assert probed == [1, 6, 15, 32, 65]  # the gap doubles: 4, 8, 16, 32 calls


def test_a_current_mode_that_took_no_measurable_time_is_not_beaten() -> None:
    solver = FakeSolver(1e-3, 0.0)  # a clock too coarse for the sequential calls
    meter = GrainMeter(2, solver.clock)
    for _ in range(20):
        meter.call(1, solver.run_part, RUNNING)
    assert not meter.fine and meter.switches == 0 and meter.probes >= 2


def test_a_fit_that_ends_inside_a_call_stops_there() -> None:
    solver = FakeSolver(1e-6, 1e-6, total=750)
    meter = GrainMeter(2, solver.clock)
    assert meter.call(800, solver.run_part, RUNNING) == DONE
    assert solver.parts == [(False, 700), (True, 1), (True, 2), (True, 4), (True, 8),
                            (True, 16), (True, 19)]
    assert meter.wins == 0 and meter.switches == 0


@pytest.mark.parametrize(("force", "modes"), [("fine", {True}), ("sequential", {False}),
                                              ("alternate", {True, False})])
def test_force_fixes_the_mode(monkeypatch: pytest.MonkeyPatch, force: str,
                              modes: set[bool]) -> None:
    monkeypatch.setattr(grain, "FORCE", force)
    solver = FakeSolver(1e-6, 1e-6)
    meter = GrainMeter(2, solver.clock)
    for _ in range(4):
        meter.call(100, solver.run_part, RUNNING)
    assert {fine for fine, _ in solver.parts} == modes and len(solver.parts) == 4


def test_probes_keep_to_their_share_of_the_fit(monkeypatch: pytest.MonkeyPatch) -> None:
    """A short fit never probes; on a crowded machine (one parallel step waits 20 ms for a
    CPU, a sequential one takes 20 us) the probes take at most PROBE_BUDGET of the fit
    and one probe more."""
    monkeypatch.setattr(grain, "PROBE_AFTER", 0.2)
    monkeypatch.setattr(grain, "PROBE_BUDGET", 0.03)
    solver = FakeSolver(0.02, 2e-5)
    meter = GrainMeter(2, solver.clock)
    while solver.now < 0.19:  # 2,500 steps a call: 50 ms
        meter.call(2500, solver.run_part, RUNNING)
    assert meter.probes == 0 and meter.steps[True] == 0
    while solver.now < 10.0:
        meter.call(2500, solver.run_part, RUNNING)
    assert meter.probes >= 2 and not meter.fine
    assert meter.probe_seconds <= 0.03 * solver.now + 0.02 * 3
