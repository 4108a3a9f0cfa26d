"""`solver: "auto"`: which linear solver to run, from the shape of the data, the loss and C.

Pure Python (no NumPy), so that the registry (solvers/params.py) can quote the rule and
the API can document it without loading numerical code. `solvers.train.fit` measures the
data (`DataShape`), calls `choose`, runs the chosen solver with the fallback rule of
solvers/continuation.py, and records {"chosen", "reason"} in the result.
"""

from __future__ import annotations

from typing import NamedTuple

# thresholds of the rule (checked against the benchmark: bench/certified_bench.py)
LOW_DIMENSIONAL = 1000  # features
DENSE = 0.05  # fraction of nonzeros
LARGE_C = 100.0
UNSCALED = 10.0  # largest |x_ij| over the data; LIBSVM-scaled sets have <= 1
NEWTON_MAX_WEIGHTS = 2000  # solvers.dense_newton.MAX_WEIGHTS
GRAM_MAX_ROWS = 2000  # gram's Cholesky of n x n: ~0.3 s per iteration at 2000 (one core)

RULE = (
    "auto picks a solver from the data's shape, the loss and C, then the fallback rule "
    "applies (dual CD -> tron for l2 / ocas for l1 when not certified). Primal methods "
    "(tron for l2, ocas for l1), indifferent to feature scaling, when: C >= "
    f"{LARGE_C:g} (the dual CD needs many sweeps), or the largest |x_ij| exceeds "
    f"{UNSCALED:g} (unscaled features: the dual CD stalls; l2 with at most "
    f"{NEWTON_MAX_WEIGHTS} weights: newton, exact Newton steps; l1 with at most "
    f"{GRAM_MAX_ROWS} examples: gram, an interior-point method on the dual's Gram "
    "matrix; other l1: dcd, whose w then warm-starts ocas), or the data are dense "
    f"(density >= {DENSE:g}) and low-dimensional (d <= {LOW_DIMENSIONAL}) with n >= d "
    "(few features and many examples: a Newton step or a cutting plane costs one pass). "
    "Otherwise (sparse or high-dimensional, scaled) dcd, LIBLINEAR's default dual "
    "coordinate descent. The choice and its reason are recorded in the result's 'auto'."
)


class DataShape(NamedTuple):
    n: int  # rows
    d: int  # features (without the bias feature)
    nnz: int
    max_abs: float  # largest |x_ij|

    @property
    def density(self) -> float:
        return self.nnz / max(self.n * self.d, 1)


def choose(shape: DataShape, loss: str, C: float, bias: str | None) -> tuple[str, str]:
    """(solver, reason) for one linear fit; `bias` does not change the choice today."""
    primal = "tron" if loss == "l2" else "ocas"
    if loss == "l2" and shape.d + 1 <= NEWTON_MAX_WEIGHTS and shape.max_abs > UNSCALED:
        primal = "newton"
    facts = (f"n={shape.n}, d={shape.d}, density={shape.density:.3g}, "
             f"max|x|={shape.max_abs:.3g}, loss={loss}, C={C:g}")
    if C >= LARGE_C:
        return primal, f"large C ({facts}): the dual CD needs many sweeps"
    if shape.max_abs > UNSCALED:
        if loss == "l1" and shape.n <= GRAM_MAX_ROWS:  # madelon.t: dcd -> ocas crawls
            return "gram", (f"unscaled features, few examples ({facts}): gram, an "
                            "interior-point method on the dual, indifferent to scaling")
        if loss == "l1":  # ocas from a stalled dual CD's w beats a cold ocas (mushrooms-x5)
            return "dcd", (f"unscaled features ({facts}): dcd, then ocas from its w when "
                           "it stalls")
        return primal, f"unscaled features ({facts}): the dual CD stalls, {primal} does not"
    if shape.density >= DENSE and shape.d <= LOW_DIMENSIONAL and shape.n >= shape.d:
        return primal, f"dense and low-dimensional ({facts})"
    return "dcd", f"sparse or high-dimensional, scaled ({facts})"
