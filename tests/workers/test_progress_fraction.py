"""The progress fraction of a job (workers.training.ProgressRecorder.fraction): binary
problems done plus progress within the current one, never backwards, also for SMO, whose
violation m - M stays near its start for most of a run and may rise first."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from app.settings import Settings
from workers.training import ProgressRecorder


@pytest.fixture
def recorder(tmp_path: Path) -> ProgressRecorder:
    return ProgressRecorder(Settings(home=tmp_path), "job", 1, eps=1e-3)


def test_one_problem_moves_with_the_violation_and_never_back(recorder: ProgressRecorder
                                                             ) -> None:
    # SMO-like: rises from 2.16 to 2.46, then falls to eps
    violations = [2.16, 2.2, 2.46, 2.3, 1.27, 0.35, 0.5, 0.01, 0.0012]
    fractions = [recorder.fraction({"iteration": 256 * (i + 1), "violation": v})
                 for i, v in enumerate(violations)]
    assert fractions[:3] == [0.0] * 3  # rising: no progress yet
    assert fractions == sorted(fractions)  # the rise of 0.35 -> 0.5 does not go back
    # log(2.46 / 0.0012) / log(2.46 / 0.001): measured from the largest violation seen
    assert fractions[-1] == pytest.approx(math.log(2.46 / 0.0012) / math.log(2460), rel=1e-9)


def test_several_problems_count_the_ones_done(recorder: ProgressRecorder) -> None:
    def event(k: int, violation: float) -> dict[str, float]:
        return {"iteration": 500, "violation": violation, "class_index": k, "n_classes": 4}

    assert recorder.fraction(event(0, 1.0)) == 0.0
    assert recorder.fraction(event(0, 1e-3 * 1.0001)) == pytest.approx(0.25, abs=1e-4)
    # the next problem starts from its own violation, not the previous problem's
    assert recorder.fraction(event(1, 5.0)) == 0.25
    assert recorder.fraction(event(1, 5.0 ** 0.5 * 1e-3 ** 0.5)) == pytest.approx(0.375)
    assert recorder.fraction(event(3, 0.1)) == 0.75


def test_without_a_violation(recorder: ProgressRecorder) -> None:
    assert recorder.fraction({"iteration": 3}) is None  # one problem: nothing to say
    assert recorder.fraction({"iteration": 3, "class_index": 2, "n_classes": 4}) == 0.5


def test_smo_moves_with_the_kkt_violators_while_the_violation_stalls(
        recorder: ProgressRecorder) -> None:
    # the a9a trajectory: m - M stays near 2.2 while the violators fall from 31,285
    events = [(2.16, 31285), (2.2, 28803), (2.6, 24919), (2.3, 22035), (1.8, 10607),
              (0.06, 307), (0.0009, 0)]
    fractions = [recorder.fraction({"iteration": 256 * (i + 1), "violation": v,
                                    "kkt_violators": n})
                 for i, (v, n) in enumerate(events)]
    assert fractions == sorted(fractions)
    assert fractions[1] == pytest.approx(1 - 28803 / 31285, rel=1e-3)  # moves early
    assert fractions[3] == pytest.approx(1 - 22035 / 31285, rel=1e-3)
    assert fractions[-1] == 1.0
    # the next problem's count starts over
    assert recorder.fraction({"iteration": 1, "violation": 2.0, "kkt_violators": 100,
                              "class_index": 1, "n_classes": 2}) == 0.5


def test_a_job_with_a_calibration_never_falls_back_when_the_calibration_starts(
        tmp_path: Path) -> None:
    recorder = ProgressRecorder(Settings(home=tmp_path), "job", 1, eps=1e-3, calibrated=True)
    fit = [{"iteration": 500, "violation": v, "class_index": k, "n_classes": 3}
           for k in range(3) for v in (1.0, 1e-3 * 1.0001)]
    calibration = [{"phase": "calibration", "iteration": done, "class_index": done,
                    "n_classes": 15} for done in range(15)]
    fractions = [recorder.fraction(event) for event in fit + calibration]
    assert fractions == sorted(fractions)
    assert fractions[len(fit) - 1] == pytest.approx(ProgressRecorder.FIT_SHARE, abs=1e-3)
    assert fractions[len(fit)] == pytest.approx(ProgressRecorder.FIT_SHARE)  # no drop to 0
    assert fractions[-1] == pytest.approx(0.2 + 0.8 * 14 / 15)
    # the same events without a calibration phase: the fit alone goes to 1
    plain = ProgressRecorder(Settings(home=tmp_path), "job", 1, eps=1e-3)
    assert [plain.fraction(e) for e in fit][-1] == pytest.approx(1.0, abs=1e-3)
