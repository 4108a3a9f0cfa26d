"""Float32 values read as stored (SolverSpec.reads_float32): the in-memory fit of dcd, tron,
logistic_dcd and ocas takes a compact dataset's float32 CSR values without a float64
copy; its objectives and certificate, on those values, are the float64 fit's of the same
(exactly float32) numbers; every other solver, and a fallback step to one, gets a float64
copy; the warm-up compiles the float32 specializations, so a fit compiles nothing."""

from __future__ import annotations

import importlib
import tracemalloc
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp

from solvers import fit
from solvers.backbone import LinearProblem
from solvers.certificate import bounds_at
from solvers.inputs import as_csr_arrays, as_float64
from solvers.params import SOLVERS
from solvers.train import solver_module

# (solver, params) that read float32; tol tight enough that the certificate decides
READERS = [("dcd", {"loss": "l1"}), ("dcd", {"loss": "l2"}), ("dcd", {"threads": 2}),
           ("tron", {"loss": "l2"}), ("tron", {"loss": "logistic"}),
           ("logistic_dcd", {}), ("logistic_dcd", {"threads": 2}), ("ocas", {})]


def _exact_float32_set(rows: int = 300, features: int = 40, density: float = 0.25,
                       seed: int = 3) -> tuple[sp.csr_matrix, np.ndarray]:
    """A sparse float32 set of unscaled-ish values (multiples of 1/64) and +-1 labels."""
    rng = np.random.default_rng(seed)
    X = sp.random(rows, features, density=density, random_state=seed, format="csr",
                  dtype=np.float64)
    X.data = (np.round(X.data * 64) / 64 - 0.25).astype(np.float32)
    X = X.astype(np.float32)
    y = np.where(X @ rng.normal(size=features) + 0.2 * rng.normal(size=rows) > 0, 1.0, -1.0)
    return X, y


def _problems_seen(monkeypatch: pytest.MonkeyPatch, name: str) -> list[LinearProblem]:
    """The problems `name`'s solve is called with (the module's own solve runs)."""
    seen: list[LinearProblem] = []
    module = solver_module(name)
    solve = module.solve

    def recording(problem: Any, params: dict[str, Any], monitor: Any) -> Any:
        seen.append(problem)
        return solve(problem, params, monitor)

    monkeypatch.setattr(module, "solve", recording)
    return seen


@pytest.mark.parametrize(("solver", "params"), READERS)
def test_the_solver_reads_the_stored_float32_values_themselves(
        monkeypatch: pytest.MonkeyPatch, solver: str, params: dict[str, Any]) -> None:
    X, y = _exact_float32_set()
    seen = _problems_seen(monkeypatch, solver)
    result = fit(X, y, solver=solver, tol=1e-6, **params)
    assert seen and all(p.X.data.dtype == np.float32 for p in seen)
    assert all(np.shares_memory(p.X.data, X.data) for p in seen)  # no copy of the values
    assert result.per_output[0]["value_dtype"] == "float32"
    assert result.converged


@pytest.mark.parametrize(("solver", "params"), [("dcd", {"loss": "l2"}), ("tron", {}),
                                                  ("logistic_dcd", {})])
def test_no_float64_array_of_the_values_size_is_allocated(
        solver: str, params: dict[str, Any]) -> None:
    # few rows, many non-zeros: a float64 copy of the values (8 bytes each) would be far
    # above everything else the fit allocates
    X, y = _exact_float32_set(rows=400, features=2000, density=0.25)
    fit(X, y, solver=solver, **params)  # compiled (or loaded) before tracing
    copy_bytes = 8 * X.nnz
    tracemalloc.start()
    try:
        result = fit(X, y, solver=solver, **params)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert result.converged
    assert peak < copy_bytes / 2, (peak, copy_bytes)


@pytest.mark.parametrize(("solver", "params"), READERS)
def test_the_float32_fit_is_the_float64_fit_of_the_same_values(
        solver: str, params: dict[str, Any]) -> None:
    X32, y = _exact_float32_set()
    X64 = X32.astype(np.float64)
    tol = 1e-6
    compact = fit(X32, y, solver=solver, tol=tol, **params)
    wide = fit(X64, y, solver=solver, tol=tol, **params)
    assert wide.per_output[0]["value_dtype"] == "float64"
    assert compact.converged and wide.converged
    assert compact.relative_gap <= tol
    # the same certified optimum; the deterministic (serial) solvers the same objective
    assert compact.primal_objective == pytest.approx(wide.primal_objective, rel=2 * tol)
    if solver in ("tron", "ocas") or params.get("threads", 1) == 1:
        assert compact.primal_objective == pytest.approx(wide.primal_objective, rel=1e-9)
    # the certificate holds on the float64 problem of the same numbers too
    defaults = {"dcd": "l2", "tron": "l2", "logistic_dcd": "logistic", "ocas": "l1"}
    loss = str(params.get("loss", defaults[solver]))
    arrays = as_csr_arrays(X64)
    problem = LinearProblem(arrays, y, np.ones(y.shape[0]), 1.0)
    w = np.append(compact.coef[0], compact.intercept[0])
    primal, bounds = bounds_at(problem, w, loss)
    assert primal == pytest.approx(compact.primal_objective, rel=1e-12)
    solver_dual = -np.inf if compact.dual_objective is None else compact.dual_objective
    assert primal - max(solver_dual, *bounds.values()) <= tol * primal * (1 + 1e-9)


def test_a_fallback_to_a_solver_that_reads_float64_gets_one_copy(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # dcd (l1) at its sweep limit on few wide rows: gram, which reads float64 values
    X, y = _exact_float32_set(rows=60, features=200, density=0.3)
    X = X.multiply(np.float32(64.0)).tocsr()  # unscaled: the dual CD crawls
    assert not SOLVERS["gram"].reads_float32
    seen_gram = _problems_seen(monkeypatch, "gram")
    seen_dcd = _problems_seen(monkeypatch, "dcd")
    result = fit(X, y, solver="dcd", loss="l1", max_iter=2, tol=1e-6)
    assert [step["solver"] for step in result.path][:2] == ["dcd", "gram"]
    assert seen_dcd[0].X.data.dtype == np.float32
    assert seen_gram and seen_gram[0].X.data.dtype == np.float64
    assert result.per_output[0]["value_dtype"] == "float64"  # what the last step read
    assert result.converged and result.relative_gap <= 1e-6


@pytest.mark.parametrize("solver", ["acf", "pegasos", "smo"])
def test_a_solver_that_reads_float64_trains_on_a_float32_set(solver: str) -> None:
    X32, y = _exact_float32_set(rows=120, features=20)
    compact = fit(X32, y, solver=solver)
    wide = fit(X32.astype(np.float64), y, solver=solver)
    assert compact.primal_objective == wide.primal_objective
    assert compact.dual_objective == wide.dual_objective
    np.testing.assert_array_equal(compact.decision_function(X32),
                                  wide.decision_function(X32))


def test_sample_weights_keep_the_float32_values() -> None:
    X, y = _exact_float32_set()
    weights = np.ones(y.shape[0])
    weights[::3] = 0.0  # rows of weight 0 are left out: a float32 subset of the rows
    kept = np.flatnonzero(weights > 0)
    weighted = fit(X, y, solver="tron", sample_weight=weights, tol=1e-8)
    subset = fit(X[kept].astype(np.float64), y[kept], solver="tron", tol=1e-8)
    assert weighted.per_output[0]["value_dtype"] == "float32"
    assert weighted.primal_objective == pytest.approx(subset.primal_objective, rel=1e-9)


def test_as_csr_arrays_keeps_float32_only_when_asked() -> None:
    X, _ = _exact_float32_set()
    assert as_csr_arrays(X).data.dtype == np.float64
    kept = as_csr_arrays(X, keep_float32=True)
    assert kept.data.dtype == np.float32 and np.shares_memory(kept.data, X.data)
    wide = as_float64(kept)
    assert wide.data.dtype == np.float64 and np.array_equal(wide.data, X.data)
    assert as_float64(wide) is wide
    assert as_csr_arrays(X.astype(np.float64), keep_float32=True).data.dtype == np.float64
    bad = X.copy()
    bad.data[5] = np.nan
    with pytest.raises(ValueError, match="NaN or infinity"):
        as_csr_arrays(bad, keep_float32=True)


def test_the_warm_up_compiles_the_float32_kernels_a_fit_uses() -> None:
    """After the warm-up entries of the float32 readers, their float32 fits (on other
    data, with the fallback path) compile no new signature."""
    from solvers import warmup
    from tests.solvers.test_train import _compiled_signatures

    readers = [name for name, spec in SOLVERS.items() if spec.reads_float32]
    assert set(readers) == {"dcd", "tron", "logistic_dcd", "ocas"}
    warmup._warm_group("linear")  # auto's path: the fallbacks' solvers too
    warmup._warm_entry("logistic_dcd")
    before = _compiled_signatures()
    X, y = _exact_float32_set(rows=200, features=30, seed=11)
    labels = np.where(y > 0, 2.0, 1.0)
    labels[::7] = 3.0  # three classes: one-vs-rest
    for solver, params in READERS:
        importlib.import_module(SOLVERS[solver].module)
        fit(X, labels, solver=solver, **params)
        fit(X, y, solver=solver, max_iter=2, **params)  # its fallback path
    assert _compiled_signatures() == before
