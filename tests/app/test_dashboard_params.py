"""The job and model pages show the parameters the fit used, not the spec's nulls
(issue 31): gamma 1/features, the service's time limit, booleans as JSON writes them."""

from __future__ import annotations

from app.api.routes.dashboard import params_used, path_text
from solvers.params import validate_params


def test_smo_defaults_read_as_the_values_used() -> None:
    shown = dict(params_used(validate_params("smo", {"probability": True}), 16, 3600.0))
    assert shown["gamma"] == "0.0625 (1/16 features)"
    assert shown["max_seconds"] == "3600 s (the service's limit)"
    assert shown["class_weight"] == "1 for every class"
    assert shown["seed"] == "0"
    assert shown["probability"] == "true" and shown["C"] == "1"
    assert not any(text in ("null", "None", "True", "False") for text in shown.values())


def test_auto_and_explicit_values() -> None:
    params = validate_params("auto", {"max_seconds": 2.5, "class_weight": {"1": 2.0}})
    shown = dict(params_used(params, None, None))
    assert shown["max_seconds"] == "2.5 s"
    assert shown["max_iter"] == "the solver's default"
    assert shown["class_weight"] == "1: 2"
    assert shown["probability"] == "false"
    # a kernel spec without a known feature count says nothing it cannot know
    assert dict(params_used(validate_params("smo", {}), None))["gamma"] == "—"


def test_a_path_reads_once_per_way_not_once_per_output() -> None:
    same = [{"solver": s, "exit": e, "output": k} for k in range(10)
            for s, e in (("dcd", "max_iter"), ("tron", "converged"))]
    assert path_text(same) == "dcd (max_iter) → tron (converged), each of the 10 outputs"
    mixed = [{"solver": "tron", "exit": "converged", "output": k} for k in range(3)] + [
        {"solver": "dcd", "exit": "max_iter", "output": 3},
        {"solver": "tron", "exit": "converged", "output": 3}]
    assert path_text(mixed) == "tron (converged) × 3 → dcd (max_iter) → tron (converged)"
    assert path_text([{"solver": "tron", "exit": "converged"}]) == "tron (converged)"
    assert path_text(None) == ""
