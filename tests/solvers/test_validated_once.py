"""A spec is validated once, where it enters (the API, or `fit`'s keyword parameters):
`fit(applied=...)` takes validate_params' output as it is (the worker's stored spec), and
the workflow's inner fits do not validate it again (issue 42)."""

from __future__ import annotations

from typing import Any

import pytest

from solvers import train
from solvers.params import ParamError, validate_params
from testkit import bundled


@pytest.fixture
def validations(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    calls: list[str] = []
    real = train.validate_params

    def counted(solver: str, params: Any) -> dict[str, Any]:
        calls.append(solver)
        return real(solver, params)

    monkeypatch.setattr(train, "validate_params", counted)
    return calls


def test_a_validated_spec_is_taken_as_it_is(validations: list[str]) -> None:
    X, y = bundled.load("cancer")
    applied = validate_params("tron", {"C": 0.5})
    result = train.fit(X, y, solver="tron", applied=applied)
    assert validations == []
    assert result.params["C"] == 0.5 and result.converged


def test_a_parameter_added_since_the_spec_was_stored_takes_its_default(
        validations: list[str]) -> None:
    X, y = bundled.load("cancer")
    stored = validate_params("tron", {})
    del stored["method"]  # as a spec stored before tron had `method`
    result = train.fit(X, y, solver="tron", applied=stored)
    assert result.params["method"] == "line_search" and validations == []


def test_applied_and_params_together_are_refused() -> None:
    X, y = bundled.load("cancer")
    with pytest.raises(TypeError, match="not both"):
        train.fit(X, y, solver="tron", applied=validate_params("tron", {}), C=2.0)


def test_keyword_params_are_validated_once_also_through_the_workflow(
        validations: list[str]) -> None:
    X, y = bundled.load("cancer")
    train.fit(X, y, solver="tron", scale="maxabs", probability=True)
    assert validations == ["tron"]
    with pytest.raises(ParamError):
        train.fit(X, y, solver="tron", C=-1.0)
