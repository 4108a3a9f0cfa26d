"""tron above parallel.MAX_CHUNKS threads: as many row chunks (and accumulator groups) as
threads asked for; up to MAX_CHUNKS the fit is bit-identical to one thread, above it the
same within the rounding of the chunk boundaries (solvers/tron.py, "Scaling past 8
threads")."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from solvers import parallel, tron
from solvers.objectives import LinearProblem
from solvers.train import ProgressMonitor, as_csr_arrays
from testkit.datagen import text_like


def run(problem: LinearProblem, **params: Any) -> Any:
    return tron.solve(problem, {**tron.DEFAULTS, **params}, ProgressMonitor(None, None))


@pytest.fixture(scope="module")
def problem() -> LinearProblem:
    X, y = text_like(4_000, 1_000, seed=5)
    return LinearProblem(as_csr_arrays(X), y, np.full(X.shape[0], 1.0), 1.0)


def test_chunks_follow_the_threads_above_max_chunks(problem: LinearProblem) -> None:
    size = problem.X.n_features + 1
    default = parallel.chunk_bounds(problem.X.indptr, size, accumulators=2)
    assert default.shape[0] - 1 == parallel.MAX_CHUNKS
    many = parallel.chunk_bounds(problem.X.indptr, size, accumulators=2, max_chunks=12)
    assert many.shape[0] - 1 == 12 and many[0] == 0 and many[-1] == problem.X.n_rows
    assert np.all(np.diff(many) > 0)
    nnz = np.diff(problem.X.indptr[many])
    assert nnz.max() <= 1.2 * nnz.min()  # about equal work


@pytest.mark.parametrize("loss", ["l2", "logistic"])
def test_many_threads_agree_with_one_within_the_rounding(problem: LinearProblem,
                                                         loss: str) -> None:
    one = run(problem, loss=loss, eps=1e-10, tol=1e-12, threads=1)
    eight = run(problem, loss=loss, eps=1e-10, tol=1e-12, threads=parallel.MAX_CHUNKS)
    twelve = run(problem, loss=loss, eps=1e-10, tol=1e-12, threads=12)
    assert np.array_equal(one.w, eight.w)  # up to MAX_CHUNKS: the same chunks, same bits
    for result in (one, twelve):
        assert result.exit_reason == "converged"
    assert abs(one.primal - twelve.primal) <= 1e-9 * one.primal
    assert np.allclose(one.w, twelve.w, rtol=0, atol=1e-6)
