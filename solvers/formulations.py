"""The problems a solver trains (`Formulation`, LIBSVM's svm_type and LIBLINEAR's
linear problems), the tasks and the vocabulary of the registry's capabilities (warm
starts, certificates, sizes). Pure Python."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from solvers.auto import FORMULATION_LOSSES

WarmStart = Literal["dual", "primal", "state"]
Certificate = Literal["duality_gap", "kkt"]
Size = Literal["any", "few_weights", "few_rows", "few_wide_rows"]
# "multiclass_joint": all classes in one problem (Crammer-Singer); "single_output": one
# problem whatever y is (regression, outlier detection)
Task = Literal["binary", "multiclass_ovr", "multiclass_ovo", "multiclass_joint",
               "single_output"]
LINEAR_TASKS: tuple[Task, ...] = ("binary", "multiclass_ovr")
L1_LOSSES = ("l2", "logistic")  # the losses of penalty "l1" (LIBLINEAR -s 5, 6)
L1R_PREFIX = "l1r_"  # problem_loss of an L1-regularised problem: "l1r_" + its loss


TaskName = Literal["classification", "regression", "outlier"]


@dataclass(frozen=True)
class Formulation:
    """A problem a solver can train (LIBSVM's svm_type): its task, the parameters it
    reads, and what LIBSVM adds to it. The service derives a job's task from the
    formulation in its params (`task_of`), never from a solver name."""

    name: str  # LIBSVM's svm_type: c_svc, nu_svc, one_class, epsilon_svr, nu_svr
    task: TaskName
    problem: str  # the dual as LIBSVM solves it
    reads: tuple[str, ...]  # of C, nu, epsilon, class_weight
    probability: Literal["platt", "laplace", "density"] | None  # what probability true fits


FORMULATIONS: dict[str, Formulation] = {
    "c_svc": Formulation(
        "c_svc", "classification",
        "min_a 1/2 a'Qa - e'a, 0 <= a_i <= C_i, y'a = 0, Q_ij = y_i y_j K(x_i, x_j)",
        ("C", "class_weight"), "platt"),
    "nu_svc": Formulation(
        "nu_svc", "classification",
        "min_a 1/2 a'Qa, 0 <= a_i <= w_i, y'a = 0, e'a = nu sum_i w_i (LIBSVM -s 1, "
        "Solver_NU; the model is rescaled by 1/r)", ("nu", "class_weight"), "platt"),
    "one_class": Formulation(
        "one_class", "outlier",
        "min_a 1/2 a'Ka, 0 <= a_i <= w_i, e'a = nu sum_i w_i (LIBSVM -s 2); decision "
        "value > 0: inlier (+1), else outlier (-1)", ("nu",), "density"),
    "epsilon_svr": Formulation(
        "epsilon_svr", "regression",
        "min 1/2 (a - a*)'K(a - a*) + epsilon e'(a + a*) - y'(a - a*), 0 <= a_i, a*_i <= "
        "C_i, e'(a - a*) = 0 (LIBSVM -s 3)", ("C", "epsilon"), "laplace"),
    "nu_svr": Formulation(
        "nu_svr", "regression",
        "min 1/2 (a - a*)'K(a - a*) - y'(a - a*), 0 <= a_i, a*_i <= C_i, e'(a - a*) = 0, "
        "e'(a + a*) = C nu sum_i w_i (LIBSVM -s 4, Solver_NU; epsilon = -r)",
        ("C", "nu"), "laplace"),
    "crammer_singer": Formulation(
        "crammer_singer", "classification",
        "min_a 1/2 sum_m ||sum_i a_i^m x_i||^2 + sum_{i, m != y_i} a_i^m, sum_m a_i^m = 0, "
        "a_i^m <= C_i [m = y_i] (LIBLINEAR -s 4; one weight vector per class, trained "
        "jointly)", ("C", "class_weight"), None),
}
LIBSVM_FORMULATIONS = ("c_svc", "nu_svc", "one_class", "epsilon_svr", "nu_svr")
# the formulations auto trains, by LIBLINEAR's linear solvers (its rule: solvers.auto)
AUTO_FORMULATIONS = tuple(FORMULATION_LOSSES)
