"""`solver: "auto"`: which linear solver to run, from the shape of the data, the loss and C.

Pure Python (no NumPy), so that the registry (solvers/params.py) can quote the rule and
the API can document it without loading numerical code. `solvers.train.fit` measures the
data (`DataShape`), calls `choose`, runs the chosen solver with the fallback rule of
solvers/continuation.py, and records {"chosen", "reason"} in the result.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import NamedTuple

# thresholds of the rule (checked against the benchmark: bench/auto_bench.py)
LOW_DIMENSIONAL = 1000  # features
LARGE_C = 100.0
UNSCALED = 10.0  # largest |x_ij| over the data; LIBSVM-scaled sets have <= 1
NEWTON_MAX_WEIGHTS = 2000  # solvers.dense_newton.MAX_WEIGHTS
GRAM_MAX_ROWS = 2000  # gram's Cholesky of n x n: ~0.3 s per iteration at 2000 (one core)
WIDE = 4  # "wide": n <= WIDE * d (few examples per feature: gram's n x n system is cheap)
DUAL_CD_SWEEPS = 300  # auto's sweep limit of dcd on unscaled data before ocas / tron take over
SPARSE = 0.05  # density (nnz / (n d)) at or below which data counts as sparse
SPARSE_L1_SWEEPS = 5000  # auto's sweep limit of dcd, l1, on unscaled sparse high-dim data

RULE = (
    "auto picks a solver from the data's shape, the loss and C, then the fallback rule "
    "applies (dual CD -> tron for l2 / ocas for l1 when not certified). Unscaled features "
    f"(largest |x_ij| > {UNSCALED:g}): with at most {GRAM_MAX_ROWS} examples and n <= "
    f"{WIDE} d (wide, as madelon) gram, an interior-point method on the dual's Gram "
    "matrix, for both losses; otherwise l2 with at most "
    f"{NEWTON_MAX_WEIGHTS} weights newton (exact Newton steps; tron's conjugate gradient "
    f"crawls on some unscaled sets); high-dimensional (d > {LOW_DIMENSIONAL}) and sparse "
    f"(density <= {SPARSE:g}, as word counts: news20) dcd, l2 with its 1000 sweeps, l1 "
    f"with at most {SPARSE_L1_SWEEPS}, whose w then warm-starts tron (l2) or ocas (l1) if "
    "it is not certified (the dual CD mostly certifies within its sweeps; tron alone "
    "needs hundreds of Newton steps there and ocas crawls in cutting planes); other l2 "
    "tron; other l1 with at most "
    f"{GRAM_MAX_ROWS} examples ocas, more examples dcd for at most {DUAL_CD_SWEEPS} "
    "sweeps, whose w then warm-starts ocas. Scaled data: C >= "
    f"{LARGE_C:g} (the dual CD needs many sweeps) or "
    f"low-dimensional (d <= {LOW_DIMENSIONAL}) with n >= d, dense or sparse (a9a, w8a, "
    "ijcnn1: a Newton step or a cutting plane costs one pass, and few are needed): the "
    "primal methods tron (l2) or ocas (l1); otherwise (high-dimensional, as text) dcd, "
    "LIBLINEAR's default dual coordinate descent. Logistic loss: unscaled with at most "
    f"{NEWTON_MAX_WEIGHTS} weights newton; scaled, high-dimensional and sparse with C < "
    f"{LARGE_C:g} logistic_dcd (LIBLINEAR -s 7, then tron from its w if not certified); "
    "otherwise tron (-s 0). Penalty l1 (loss l2 or logistic): l1_cd (LIBLINEAR -s 5, -s "
    "6). Formulation crammer_singer: crammer_singer (LIBLINEAR -s 4); one_class: "
    "linear_one_class (-s 21); epsilon_svr: linear_svr, loss l1 by its dual CD (-s 13), "
    f"loss l2 by Newton on the primal (-s 11) when C >= {LARGE_C:g}, the features are "
    f"unscaled, or low-dimensional (d <= {LOW_DIMENSIONAL}) with n >= d, else by its dual "
    "CD (-s 12). The choice and its reason are recorded in the result's 'auto'."
)
# the formulations auto trains (solvers.params.FORMULATIONS), by LIBLINEAR's linear
# solvers, and the losses each takes; None: its own loss, no choice. The registry's
# candidates of auto (SolverSpec.auto_candidate) train exactly these (a test ties them).
FORMULATION_LOSSES: dict[str, tuple[str, ...] | None] = {
    "c_svc": ("l1", "l2", "logistic"), "crammer_singer": None,
    "epsilon_svr": ("l1", "l2"), "one_class": None}


class DataShape(NamedTuple):
    n: int  # rows
    d: int  # features (without the bias feature)
    nnz: int
    max_abs: float  # largest |x_ij|

    @property
    def density(self) -> float:
        return self.nnz / max(self.n * self.d, 1)


def gram_suits(n: int, d: int) -> bool:
    """Few examples, wide (madelon: 600 x 500): gram's n x n Cholesky costs less than
    Newton's (d + 1)^2 systems or cutting planes, which crawl there on unscaled data."""
    return n <= GRAM_MAX_ROWS and n <= WIDE * d


def sparse_high_dimensional(shape: DataShape) -> bool:
    """Text-like: many features, few of them nonzero per row (news20: 62,061 features,
    density 0.13%)."""
    return shape.d > LOW_DIMENSIONAL and shape.density <= SPARSE


def svr_primal(shape: DataShape, C: float) -> bool:
    """Whether the L2-loss SVR runs Newton on the primal (-s 11) rather than its dual CD
    (-s 12): as tron against dcd for classification (large C, unscaled features, or few
    features and more examples than features)."""
    return (C >= LARGE_C or shape.max_abs > UNSCALED
            or (shape.d <= LOW_DIMENSIONAL and shape.n >= shape.d))


class Choice(NamedTuple):
    """auto's choice for one linear fit: the solver, why, and the parameters auto sets for
    it unless the fit gives them (the SVR's method, a sweep limit of the dual CD)."""

    solver: str
    reason: str
    settings: Mapping[str, int | str] = MappingProxyType({})


def choose(shape: DataShape, loss: str, C: float, bias: str | None,
           penalty: str = "l2", formulation: str = "c_svc") -> Choice:
    """auto's Choice for one linear fit; `bias` does not change the choice today.

    The settings: the dual CD on unscaled data gets a sweep limit. Not sparse and
    high-dimensional: DUAL_CD_SWEEPS (its w only warm-starts ocas there; 1000 sweeps cost
    more than they save). Sparse and high-dimensional (news20), where a sweep is cheap and
    the dual CD certifies most outputs by itself: l2 keeps dcd's 1000 sweeps before tron
    (LIBLINEAR's -s 1 limit; after 300, tron from its w still ended two outputs at
    max_iter); l1 gets SPARSE_L1_SWEEPS (news20, 20 outputs: at 300 sweeps at least five
    went to ocas, 34-75 s CPU each; at 1000 at least four; at 5000 two, 33 and 37 s, the
    other 18 certified by the dual CD itself within 2449 sweeps, 14 s CPU for all 18).
    linear_svr: its method, 'primal' (-s 11) or 'dual' (-s 12, 13)."""
    facts = (f"n={shape.n}, d={shape.d}, density={shape.density:.3g}, "
             f"max|x|={shape.max_abs:.3g}, loss={loss}, C={C:g}")
    if formulation == "crammer_singer":
        return Choice("crammer_singer", "formulation crammer_singer: one weight vector per "
                      "class trained jointly (LIBLINEAR -s 4)")
    if formulation == "one_class":
        return Choice("linear_one_class", "formulation one_class: the linear one-class SVM "
                      "(LIBLINEAR -s 21)")
    if formulation == "epsilon_svr":
        if loss == "l1":
            return Choice("linear_svr", f"epsilon_svr, loss l1 ({facts}): dual coordinate "
                          "descent (LIBLINEAR -s 13)", {"method": "dual"})
        if svr_primal(shape, C):
            return Choice("linear_svr", f"epsilon_svr, loss l2, large C, unscaled or few "
                          f"features ({facts}): Newton on the primal (LIBLINEAR -s 11)",
                          {"method": "primal"})
        return Choice("linear_svr", f"epsilon_svr, loss l2, high-dimensional and scaled "
                      f"({facts}): dual coordinate descent (LIBLINEAR -s 12)",
                      {"method": "dual"})
    if penalty == "l1":
        return Choice("l1_cd", f"penalty l1 ({facts}): coordinate descent for the sparse "
                      f"model (LIBLINEAR -s {5 if loss == 'l2' else 6})")
    if loss == "logistic":
        return _choose_logistic(shape, C, facts)
    if shape.max_abs > UNSCALED:
        if gram_suits(shape.n, shape.d):
            return Choice("gram", f"unscaled features, few examples and wide ({facts}): "
                          "gram, an interior-point method on the dual, indifferent to "
                          "scaling")
        if loss == "l2" and shape.d + 1 <= NEWTON_MAX_WEIGHTS:
            return Choice("newton", f"unscaled features, few weights ({facts}): exact "
                          "Newton steps, indifferent to scaling")
        if loss in ("l1", "l2") and sparse_high_dimensional(shape):
            follow = "tron" if loss == "l2" else "ocas"
            return Choice("dcd", f"unscaled features, high-dimensional and sparse ({facts}): "
                          f"dcd, then {follow} from its w if not certified",
                          {"max_iter": SPARSE_L1_SWEEPS} if loss == "l1" else {})
        if loss == "l2":
            return Choice("tron", f"unscaled features ({facts}): the dual CD stalls, tron "
                          "does not")
        if shape.n <= GRAM_MAX_ROWS:
            return Choice("ocas", f"unscaled features, few examples ({facts}): cutting "
                          "planes")
        return Choice("dcd", f"unscaled features ({facts}): dcd for at most "
                      f"{DUAL_CD_SWEEPS} sweeps, then ocas from its w",
                      {"max_iter": DUAL_CD_SWEEPS})
    primal = "tron" if loss == "l2" else "ocas"
    if C >= LARGE_C:
        return Choice(primal, f"large C ({facts}): the dual CD needs many sweeps")
    if shape.d <= LOW_DIMENSIONAL and shape.n >= shape.d:
        return Choice(primal, f"low-dimensional, more examples than features ({facts})")
    return Choice("dcd", f"high-dimensional, scaled ({facts})")


def _choose_logistic(shape: DataShape, C: float, facts: str) -> Choice:
    """L2-regularised logistic regression: Newton on the primal, or the dual CD on
    scaled text-like data (Yu, Huang & Lin 2011: the dual CD is fastest there)."""
    if shape.max_abs > UNSCALED:
        if shape.d + 1 <= NEWTON_MAX_WEIGHTS:
            return Choice("newton", f"logistic, unscaled features, few weights ({facts}): "
                          "exact Newton steps")
        return Choice("tron", f"logistic, unscaled features ({facts}): Newton on the primal")
    if sparse_high_dimensional(shape) and C < LARGE_C:
        return Choice("logistic_dcd", f"logistic, high-dimensional and sparse, scaled "
                      f"({facts}): dual coordinate descent, then tron from its w if not "
                      "certified")
    return Choice("tron", f"logistic ({facts}): Newton on the primal (LIBLINEAR -s 0)")
