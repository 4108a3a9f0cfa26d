"""The registry's entry of the kernel solver (SMO, LIBSVM's five formulations).
solvers.registry.SOLVERS holds it after `auto`. Pure Python."""

from __future__ import annotations

from solvers.formulations import FORMULATIONS, LIBSVM_FORMULATIONS
from solvers.param_types import Param
from solvers.solver_spec import SolverSpec, _c_param, _class_weight, _eps_param, _limits, _threads

# working_set "batched" (solvers/smo/batched.py): LIBSVM's Solver with y in {-1, +1} on one
# set of rows; the nu formulations (Solver_NU) and the regressions (2n variables) are not
BATCHED_FORMULATIONS = ("c_svc", "one_class")

KERNEL: dict[str, SolverSpec] = {
    "smo": SolverSpec(
        name="smo",
        module="solvers.smo",
        kind="kernel",
        losses=("l1",), tasks=("binary", "multiclass_ovo", "multiclass_ovr"),
        certificate="kkt", warm_start="state", scale_sensitive=True,
        formulations=LIBSVM_FORMULATIONS, sample_weights=True, warmup_group="smo",
        description="Sequential minimal optimization for kernel SVMs (Platt 1998) with "
        "second-order working-set selection, shrinking and a kernel cache; LIBSVM's C-SVC, "
        "nu-SVC, one-class SVM, epsilon-SVR and nu-SVR (Solver_NU for the nu variants).",
        problem="min_a 1/2 a'Qa - e'a, 0 <= a_i <= C_i, y'a = 0, Q_ij = y_i y_j K(x_i, x_j) "
        "(formulation c_svc; see `formulation` for the others)",
        params=(
            Param("formulation", "choice", "c_svc",
                  "The problem (LIBSVM's svm_type): 'c_svc' and 'nu_svc' classification, "
                  "'one_class' outlier detection (+1 inlier, -1 outlier), 'epsilon_svr' and "
                  "'nu_svr' regression. " + " ".join(
                      f"{f}: {FORMULATIONS[f].problem}." for f in LIBSVM_FORMULATIONS),
                  choices=LIBSVM_FORMULATIONS),
            _c_param(),
            Param("nu", "float", 0.5, "nu of nu_svc, one_class and nu_svr (LIBSVM -n): a "
                  "lower bound on the fraction of support vectors and an upper bound on "
                  "the fraction of margin errors (outliers).", minimum=0.0,
                  exclusive_minimum=True, maximum=1.0),
            Param("epsilon", "float", 0.1, "Width of the insensitive tube of epsilon_svr "
                  "(LIBSVM -p).", minimum=0.0, maximum=1e12),
            Param("kernel", "choice", "rbf", "Kernel function.",
                  choices=("linear", "rbf", "poly", "sigmoid")),
            Param("gamma", "float", None, "Kernel coefficient of rbf/poly/sigmoid (null: "
                  "1/features).", minimum=0.0, exclusive_minimum=True, maximum=1e6,
                  nullable=True),
            Param("degree", "int", 3, "Degree of the poly kernel.", minimum=1, maximum=20),
            Param("coef0", "float", 0.0, "Constant term of poly/sigmoid.",
                  minimum=-1e6, maximum=1e6),
            _eps_param(1e-3, "Stop when the maximal violating pair m(a) - M(a) <= eps."),
            Param("cache_mb", "float", 200.0, "Kernel-column cache size in MB.",
                  minimum=1.0, maximum=16384.0),
            Param("working_set", "choice", "pair", "'pair': LIBSVM's two-variable steps "
                  "over the whole active set (its solution to the digit); 'batched': "
                  "ThunderSVM's working sets of up to 512 variables, their kernel columns "
                  "computed in one pass and the gradient updated once per set - more of the "
                  "work on all the threads, LIBSVM's solution to the same eps (c_svc and "
                  "one_class).", choices=("pair", "batched")),
            Param("multiclass", "choice", "ovo", "'ovo' one-vs-one with voting (as LIBSVM) "
                  "or 'ovr' one-vs-rest.", choices=("ovo", "ovr")),
            *_limits(10_000_000, "SMO steps"),
            _class_weight(),
            _threads(),
        ),
    ),
}
