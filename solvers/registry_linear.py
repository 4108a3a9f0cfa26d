"""The registry's entries of the linear solvers: those of one binary problem (one-vs-rest
for several classes: the dual coordinate descents, the Newton methods, the interior
point, cutting planes, ALM, Pegasos, the L1-regularised CD), `auto`, which picks one of
its candidates, and LIBLINEAR's other linear problems (solvers/linear_tasks.py).
solvers.registry.SOLVERS holds them in this order, smo between the two parts. Pure
Python."""

from __future__ import annotations

from typing import Any

from solvers.auto import RULE as AUTO_RULE
from solvers.formulations import AUTO_FORMULATIONS, FORMULATIONS, L1R_PREFIX
from solvers.param_types import Param
from solvers.solver_spec import (
    _DUAL_CD_FALLBACK,
    _GAP_NOTE,
    _SEED,
    _SVR_EPSILON,
    SolverSpec,
    Step,
    _bias_params,
    _c_param,
    _class_weight,
    _common,
    _deterministic_tail,
    _eps_param,
    _limits,
    _loss,
    _penalty_param,
    _sweeps_param,
    _task_params,
    _threads,
    _tol_param,
    _weights_and_seed,
)


def _round_threads() -> Param:
    """The dual CD solvers' threads: dcd's asynchronous sweeps (solvers/_dcd_parallel.py),
    logistic_dcd's parallel rounds (solvers/_logistic_parallel.py). Auto does not pass a
    fit's threads on to them: on 2 cores they do not yet win back what sharing w costs
    (bench/results/serial_share.md, issue 46)."""
    return Param("threads", "int", 1, "Threads for the parallel sweeps of dual CD (1: "
                 "LIBLINEAR's sequential sweeps). Certified as at 1 thread; two fits on "
                 "several threads may differ within tol; auto never sets it.", minimum=1,
                 maximum=256, from_auto=False)


LINEAR: dict[str, SolverSpec] = {
    "dcd": SolverSpec(
        name="dcd",
        module="solvers.dcd",
        kind="linear", distributed_losses=("l1",),
        warm_start="dual", fallback=_DUAL_CD_FALLBACK, randomized=True, scale_sensitive=True,
        warmup_group="linear", auto_candidate=True, sample_weights=True, reads_float32=True,
        description="Dual coordinate descent with random permutation and shrinking "
        "(Hsieh et al. 2008); LIBLINEAR -s 3 (l1) / -s 1 (l2).",
        problem="min_w 1/2||w||^2 + sum_i C_i loss(1 - y_i w.x_i), loss = hinge (l1) or "
        "squared hinge (l2)",
        params=(*_common(0.1, _loss()),
                _sweeps_param(", its stop rule (the projected-gradient spread alone, as "
                              "LIBLINEAR before 2.42) and its order of the sums in Qbar_ii"),
                _round_threads()),
    ),
    "tron": SolverSpec(
        name="tron",
        module="solvers.tron",
        kind="linear", distributed_losses=("l2", "logistic"),
        losses=("l2", "logistic"), warm_start="primal", sample_weights=True,
        warmup_group="linear", auto_candidate=True, reads_float32=True,
        fallback=(Step(on=("max_iter", "stalled"), target="newton", losses=("l2", "logistic"),
                       size="few_weights", note="; few weights: exact Newton steps"),
                  Step(on=("converged",))),
        description="Truncated Newton method with preconditioned conjugate gradient on "
        "the primal (Lin, Weng & Keerthi 2008; Hsia, Chiang & Lin 2018; Galli & Lin 2021): "
        "a line search along the Newton direction as LIBLINEAR >= 2.40 -s 2, or the trust "
        "region of LIBLINEAR <= 2.30 (method). "
        "Indifferent to feature scaling. With loss='logistic' it also fits L2-regularised "
        "logistic regression (LIBLINEAR -s 0), sharing the same Newton machinery.",
        problem="min_w 1/2||w||^2 + sum_i C_i loss(y_i w.x_i), loss = squared hinge "
        "max(0, 1 - m)^2 (l2) or log(1 + exp(-m)) (logistic)",
        params=(
            _c_param(),
            Param("loss", "choice", "l2", "'l2' squared hinge loss (SVM) or 'logistic' "
                  "(logistic regression).", choices=("l2", "logistic")),
            Param("method", "choice", "line_search", "How far to step along the Newton "
                  "direction: 'line_search' (LIBLINEAR 2.40+, Galli & Lin 2021: the full CG "
                  "solution, halved until the objective drops enough) or 'trust_region' "
                  "(Lin, Weng & Keerthi 2008: CG cut at a trust-region radius; crawls in "
                  "tiny steps on unscaled word counts such as news20).",
                  choices=("line_search", "trust_region")),
            Param("fallback", "choice", True, "When tron ends without a certificate: exact "
                  "Newton steps (newton, few weights) after max_iter or a stall, tron with "
                  "eps / 10 after its own stop rule; recorded in the result's path. False: "
                  "neither, so max_iter caps the fit as LIBLINEAR's.", choices=(True, False)),
            *_deterministic_tail(
                _eps_param(0.01, "Inner stop rule (LIBLINEAR's): ||grad P(w)|| <= eps * "
                           "max(min(#pos, #neg), 1) / n * ||grad P(0)||, required together "
                           "with the gradient certificate ||grad P(w)||^2 <= 2 tol P(w): "
                           "LIBLINEAR's rule alone at eps 0.01 can leave P(w) 1e-3..0.7 "
                           "above the optimum (mushrooms)."),
                ("augment", "none"), "augment", 1000, "Newton iterations (line searches, or "
                "trust-region steps accepted or not)"),
        ),
    ),
    "newton": SolverSpec(
        name="newton",
        module="solvers.dense_newton",
        kind="linear",
        losses=("l2", "logistic"), warm_start="primal", sample_weights=True,
        warmup_group="linear", auto_candidate=True,
        description="Newton's method on the primal with the Newton system solved exactly "
        "(dense Cholesky; Keerthi & DeCoste 2005): for at most 2000 weights (features + "
        "bias). Indifferent to feature scaling where TRON's conjugate gradient stalls "
        "(unscaled data such as madelon).",
        problem="min_w 1/2||w||^2 + sum_i C_i loss(y_i w.x_i), loss = squared hinge "
        "max(0, 1 - m)^2 (l2) or log(1 + exp(-m)) (logistic)",
        params=(
            _c_param(),
            Param("loss", "choice", "l2", "'l2' squared hinge loss (SVM) or 'logistic'.",
                  choices=("l2", "logistic")),
            _tol_param(),
            *_bias_params(("augment", "none"), "augment"),
            *_limits(200, "Newton steps"),
            _class_weight(),
        ),
    ),
    "gram": SolverSpec(
        name="gram",
        module="solvers.gram",
        kind="linear",
        dense_gram=True, warmup_group="linear", auto_candidate=True,
        description="Primal-dual interior-point method (Mehrotra predictor-corrector) on "
        "the SVM dual with the full Gram matrix in memory: for at most 5000 examples (n^2 "
        "doubles, 200 MB at 5000, plus one copy per Cholesky). Each iteration solves one "
        "n x n system by Cholesky (about 0.02 s at n = 1000, seconds at 5000; typically "
        "15..40 iterations), nearly indifferent to feature scaling where dcd, acf and ocas "
        "crawl (unscaled data such as madelon). BLAS runs on one thread.",
        problem="min_w 1/2||w||^2 + sum_i C_i loss(1 - y_i w.x_i), loss = hinge (l1) or "
        "squared hinge (l2)",
        params=(
            _c_param(),
            _loss(),
            _eps_param(1e-5, "Inner stop rule: the relative duality gap of the interior "
                       "point (a feasible dual point and w(a)) is <= min(eps, tol / 10); "
                       "whether the model is converged is decided by tol (the certificate "
                       "recomputed at the returned w)."),
            _tol_param(),
            *_bias_params(("augment", "none"), "augment"),
            *_limits(200, "interior-point iterations"),
            _class_weight(),
        ),
    ),
    "acf": SolverSpec(
        name="acf",
        module="solvers.acf",
        kind="linear",
        warm_start="dual", fallback=_DUAL_CD_FALLBACK, randomized=True, scale_sensitive=True,
        description="Dual coordinate descent with adaptive coordinate frequencies "
        "(Glasmachers & Dogan 2013); fastest at large C.",
        problem="min_w 1/2||w||^2 + sum_i C_i loss(1 - y_i w.x_i), loss = hinge (l1) or "
        "squared hinge (l2)",
        params=_common(0.1, _loss(), "Inner stop rule of ACF: the largest projected-"
                       "gradient violation of a sweep < eps, confirmed by a sweep with "
                       "uniform preferences (a bound on the dual's optimality conditions, "
                       "not on the objective); whether the model is converged is decided "
                       "by tol."),
    ),
    "ocas": SolverSpec(
        name="ocas",
        module="solvers.ocas",
        kind="linear",
        losses=("l1",), warm_start="primal", warmup_group="linear", auto_candidate=True,
        reads_float32=True, distributed_losses=("l1",),
        fallback=(Step(on=("max_iter", "stalled"), target="gram", size="few_rows",
                       note="; few examples: interior point on the dual's Gram matrix"),
                  Step(on=("converged", "stalled"))),
        description="Optimized cutting planes (Franc & Sonnenburg 2008); strong on dense, "
        "low-dimensional data.",
        problem="min_w 1/2||w||^2 + sum_i C_i max(0, 1 - y_i w.x_i)",
        params=(
            _c_param(),
            _eps_param(1e-3, "Relative stop: F(w_best) - F_t(w_t) <= eps * |F(w_best)|, "
                             "a relative duality gap (F_t(w_t) <= P*), the same quantity as "
                             "tol."),
            _tol_param(),
            Param("eps_abs", "float", None,
                  "Absolute stop: F(w_best) - F_t(w_t) <= eps_abs (null: off).",
                  minimum=0.0, exclusive_minimum=True, maximum=1e12, nullable=True),
            Param("fallback", "choice", True, "When ocas ends without a certificate: the "
                  "interior point on the dual's Gram matrix (gram, few examples) after "
                  "max_iter or a stall, ocas with eps / 10 after its own stop rule; "
                  "recorded in the result's path. False: neither, so max_iter caps the "
                  "fit.", choices=(True, False)),
            *_bias_params(("augment", "none"), "augment"),
            *_limits(10_000, "cutting-plane iterations"),
            _class_weight(),
            _threads(),
        ),
    ),
    "alm": SolverSpec(
        name="alm",
        module="solvers.alm",
        kind="linear",
        losses=("l1", "l2", "lp"),
        description="Inexact augmented-Lagrangian primal solver for the Lp-loss SVM "
        "(Nie et al. 2014), free bias.",
        problem="min_{w,b} 1/2||w||^2 + sum_i C_i max(0, 1 - y_i (w.x_i + b))^p",
        params=(
            _c_param(),
            Param("p", "float", 2.0, "Exponent of the loss (1 = hinge, 2 = squared hinge).",
                  minimum=1.0, maximum=10.0),
            *_deterministic_tail(
                _eps_param(0.01, "Inner stop: p > 1, ||grad P|| <= eps ||grad P(0)|| and "
                           "relative gap <= eps / 10; p = 1, relative gap <= eps / 10; or "
                           "exit 'stalled' when the objective stops changing (relative "
                           "1e-4). Converged is decided by tol, from a feasible dual "
                           "point built from the slacks or the multipliers."),
                ("free", "none"), "free", 10_000, "ALM iterations"),
        ),
    ),
    "pegasos": SolverSpec(
        name="pegasos",
        module="solvers.pegasos",
        kind="linear",
        losses=("l1",), randomized=True, scale_sensitive=True,
        description="Stochastic sub-gradient descent (Shalev-Shwartz et al. 2007), the "
        "approximate baseline; reports the primal objective it reaches. It has no stop "
        "rule (exit 'epochs_done'): its default 10 epochs end 4e-2..3e-1 above the "
        "optimum on scaled data, so it reports converged false with a warning unless the "
        "certificate (a dual point from its w) happens to hold.",
        problem="min_w 1/2||w||^2 + sum_i C_i max(0, 1 - y_i w.x_i), lambda = 1/(C n)",
        params=(
            _c_param(),
            Param("epochs", "int", 10, "Passes over the data (n / batch_size steps each).",
                  minimum=1, maximum=100_000),
            Param("batch_size", "int", 1, "Examples per sub-gradient step (k).",
                  minimum=1, maximum=1_000_000),
            _tol_param(),
            *_bias_params(("augment", "none"), "none"),
            *_limits(100_000_000, "sub-gradient steps"),
            *_weights_and_seed("Seed of the example sampling"),
        ),
    ),
    "logistic_dcd": SolverSpec(
        name="logistic_dcd",
        module="solvers.logistic_dual",
        kind="linear",
        losses=("logistic",), warm_start="dual", randomized=True, scale_sensitive=True,
        sample_weights=True, auto_candidate=True, reads_float32=True,
        liblinear_types=(("logistic", "L2R_LR_DUAL"),),  # LIBLINEAR -s 7
        fallback=(Step(on=("converged",)),
                  Step(target="tron", losses=("logistic",), note=_GAP_NOTE)),
        description="Dual coordinate descent for L2-regularised logistic regression (Yu, "
        "Huang & Lin 2011); LIBLINEAR -s 7. Its dual value is the certificate; when it "
        "ends uncertified at its sweep limit, tron (-s 0) continues from its w, as "
        "LIBLINEAR does. Probabilities come with the model (sigma of the decision value).",
        problem="min_w 1/2||w||^2 + sum_i C_i log(1 + exp(-y_i w.x_i)); dual min_a "
        "1/2||w(a)||^2 + sum_i a_i log a_i + (C_i - a_i) log(C_i - a_i), 0 < a_i < C_i",
        params=(*_common(0.1, Param("loss", "choice", "logistic", "'logistic' (the only "
                                    "loss of this solver).", choices=("logistic",)),
                         "Inner stop rule (LIBLINEAR's): the largest derivative of a "
                         "sweep's one-variable sub-problems < eps; whether the model is "
                         "converged is decided by tol."),
                _sweeps_param(" and its order of the sums in ||x_i||^2"), _round_threads()),
    ),
    "l1_cd": SolverSpec(
        name="l1_cd",
        module="solvers.l1_linear",
        kind="linear",
        losses=(L1R_PREFIX + "l2", L1R_PREFIX + "logistic"), warm_start="primal",
        randomized=True, sample_weights=True, fallback=(Step(on=("converged",)),),
        auto_candidate=True,
        description="L1-regularised linear classification for sparse models: coordinate "
        "descent with a line search for the L2-loss SVM (Chang, Hsieh & Lin 2008; LIBLINEAR "
        "-s 5) and newGLMNET for logistic regression (Yuan, Ho & Lin 2012; LIBLINEAR -s "
        "6). The result reports the non-zero weights of each output; the certificate is "
        "a scaled feasible dual point.",
        problem="min_w ||w||_1 + sum_i C_i loss(y_i w.x_i), loss = squared hinge "
        "max(0, 1 - m)^2 (l2) or log(1 + exp(-m)) (logistic)",
        params=(
            _c_param(),
            _penalty_param(("l1",), "l1"),
            Param("loss", "choice", "l2", "'l2' squared hinge loss (LIBLINEAR -s 5) or "
                  "'logistic' (-s 6).", choices=("l2", "logistic")),
            _eps_param(0.01, "Inner stop rule (LIBLINEAR's): the 1-norm of the minimum-"
                       "norm subgradient <= eps * max(min(#pos, #neg), 1) / n times its "
                       "value at the first iteration; whether the model is converged is "
                       "decided by tol."),
            _tol_param(),
            *_bias_params(("augment", "none"), "augment"),
            *_limits(10_000, "sweeps over the features (l2) or Newton iterations "
                     "(logistic); LIBLINEAR stops at 1000 and 100, short of the optimum of "
                     "-s 5 on some sets (breast_cancer)"),
            *_weights_and_seed(), _sweeps_param(),
        ),
    ),
    "auto": SolverSpec(
        name="auto",
        module="solvers.auto",
        kind="linear",
        # its choice continues from an earlier fit's dual point when it is a dual CD
        warm_start="dual", randomized=True, chooses=True, sample_weights=True,
        warmup_group="linear",
        formulations=AUTO_FORMULATIONS,  # its candidates' (a test ties them)
        tasks=(),  # its candidates' (below)
        description="The default for linear jobs: " + AUTO_RULE,
        problem="min_w R(w) + sum_i C_i loss(y_i w.x_i), R = 1/2||w||^2 (penalty l2) or "
        "||w||_1 (l1), loss = hinge (l1), squared hinge (l2) or logistic (formulation "
        "c_svc; see `formulation` for the others)",
        params=(
            Param("formulation", "choice", "c_svc",
                  "The problem: 'c_svc' binary / one-vs-rest classification (loss and "
                  "penalty below), 'crammer_singer' the multi-class SVM of Crammer and "
                  "Singer, 'epsilon_svr' linear regression (loss l1 or l2, epsilon), "
                  "'one_class' outlier detection (nu; +1 inlier, -1 outlier). " + " ".join(
                      f"{f}: {FORMULATIONS[f].problem}." for f in AUTO_FORMULATIONS
                      if f != "c_svc"), choices=AUTO_FORMULATIONS),
            _c_param(),
            Param("loss", "choice", "l2", "'l1' hinge loss, 'l2' squared hinge loss or "
                  "'logistic' (logistic regression: the model gives probabilities).",
                  choices=("l1", "l2", "logistic")),
            _penalty_param(("l2", "l1"), "l2"),
            Param("epsilon", "float", 0.1, "Width of the insensitive tube of epsilon_svr "
                  "(LIBLINEAR -p).", minimum=0.0, maximum=1e12),
            Param("nu", "float", 0.5, "nu of one_class (LIBLINEAR -n): an upper bound on "
                  "the fraction of outliers.", minimum=0.0, exclusive_minimum=True,
                  maximum=1.0),
            _tol_param(),
            *_bias_params(("augment", "none"), "augment"),
            Param("max_iter", "int", None, "Iteration limit of the chosen solver, in its "
                  "own unit (null: its default).", minimum=1, maximum=100_000_000,
                  nullable=True),
            _limits(1)[1],
            *_weights_and_seed(),
            _threads(),
        ),
    ),
}


def _task_solver(name: str, formulation: str, **fields: Any) -> SolverSpec:
    """A solver of solvers/linear_tasks.py: one formulation, instance weights, one of
    auto's candidates; the other fields as given."""
    return SolverSpec(name=name, module="solvers.linear_tasks", kind="linear",
                      formulations=(formulation,), sample_weights=True, auto_candidate=True,
                      **fields)


# the solvers of solvers/linear_tasks.py (after smo in SOLVERS)
LINEAR_TASK_SOLVERS: dict[str, SolverSpec] = {
    "crammer_singer": _task_solver(
        name="crammer_singer", formulation="crammer_singer",
        losses=("l1",), tasks=("binary", "multiclass_joint"), randomized=True,
        description="Crammer-Singer multi-class SVM by the sequential dual method (Keerthi "
        "et al. 2008; LIBLINEAR -s 4): one weight vector per class (also for two classes), "
        "predicts the class of the largest score.",
        problem=FORMULATIONS["crammer_singer"].problem,
        params=_task_params("crammer_singer", (
            _c_param(),
            _eps_param(0.1, "Inner rule: the largest sub-problem violation of a sweep <= "
                       "eps, then the certificate is checked (tightened by 10 while it "
                       "fails); converged is decided by tol."),
            *_bias_params(("augment", "none"), "augment"), _class_weight(), _SEED,
            _sweeps_param()),
            100_000, "sweeps"),
    ),
    "linear_svr": _task_solver(
        name="linear_svr", formulation="epsilon_svr",
        losses=("l1", "l2"), tasks=("single_output",), randomized=True,
        description="Linear epsilon-SVR (Ho & Lin 2012): dual coordinate descent with "
        "shrinking (LIBLINEAR -s 13 l1, -s 12 l2) or, method 'primal' (l2), Newton steps "
        "with conjugate gradient (-s 11). Predicts the value.",
        problem="min_w 1/2||w||^2 + sum_i C_i max(0, |w.x_i - y_i| - epsilon)^p, p = 1 (l1) "
        "or 2 (l2)",
        params=_task_params("epsilon_svr", (
            _c_param(), _SVR_EPSILON, _loss(("l1", "l2"), "l2"),
            Param("method", "choice", "dual", "'dual' coordinate descent (l1, l2) or "
                  "'primal' Newton (l2 only).", choices=("dual", "primal")),
            _eps_param(0.1, "Inner rule of the dual CD: the sum of the projected-gradient "
                       "violations of a sweep <= eps times the first sweep's; converged is "
                       "decided by tol."),
            *_bias_params(("augment", "none"), "augment"), _SEED, _sweeps_param()),
            1000, "sweeps (dual) or Newton steps (primal)"),
    ),
    "linear_one_class": _task_solver(
        name="linear_one_class", formulation="one_class",
        losses=("l1",), tasks=("single_output",),
        description="Linear one-class SVM (LIBLINEAR -s 21, 2.42+): pair updates of the "
        "most violating pairs; +1 inlier, -1 outlier.",
        problem="min_{w,rho} 1/2||w||^2 - rho nu sum_i U_i + sum_i U_i max(0, rho - w.x_i), "
        "U_i the sample weight",
        params=_task_params("one_class", (
            Param("nu", "float", 0.5, "Upper bound on the fraction of outliers, lower bound "
                  "on the fraction of support vectors (LIBLINEAR -n).", minimum=0.0,
                  exclusive_minimum=True, maximum=1.0),
            _eps_param(0.01, "Inner rule: max -G over I_up minus min -G over I_low < eps; "
                       "converged is decided by tol.")),
            1000, "outer iterations"),
    ),
}
