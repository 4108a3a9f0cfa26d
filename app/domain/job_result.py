"""The one result type of a training job, shared by the worker that writes it and the
API that answers it (pydantic only: the workers import it from app.domain as they import
the services)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class JobResult(BaseModel):
    """A training job's `result` (also its model's metadata): what the worker writes
    (workers.training._summary builds it through this type) is what GET /v1/jobs/{id}
    answers. Keys it does not declare (written by a newer worker, or stored before a key
    was declared) pass through unchanged."""

    model_config = ConfigDict(extra="allow")

    primal_objective: float | None = None
    dual_objective: float | None = None
    duality_gap: float | None = None
    iterations: int | None = None
    train_seconds: float | None = None
    exit_reason: str | None = None
    converged: bool | None = Field(
        None, description="Linear models: true only when the relative duality gap at the "
        "returned model is <= tol (a certificate); kernel models: SMO's stop rule held")
    train_accuracy: float | None = Field(None, description="Classification models")
    train_metrics: dict[str, Any] | None = Field(
        None, description="Regression and outlier models: an evaluation's figures on the "
        "training rows (see EvaluationPublic)")
    n_support: int | None = None
    relative_gap: float | None = Field(
        None, description="Certified (P - lower bound) / P; one-vs-rest: the sum of the "
        "outputs' gaps over the sum of their primal values")
    tol: float | None = None
    warnings: list[str] = Field(default_factory=list,
                                description="Why the model is not converged, if it is not")
    path: list[dict[str, Any]] = Field(
        default_factory=list, description="What ran, in order: solver, exit, iterations, "
        "seconds, relative_gap, reason (and output for one-vs-rest)")
    auto: dict[str, Any] | None = Field(None, description="solver 'auto': chosen, reason, and "
                                         "settings (what it set for its choice: the SVR's "
                                         "method, a sweep limit), when it set any")
    nonzero_weights: list[int] | None = Field(
        None, description="L1-regularised models (penalty l1): the number of non-zero "
        "feature weights of each output")
    violation: float | None = Field(
        None, description="Kernel jobs with one binary problem: its final KKT violation "
        "m - M (SMO's stop rule: converged below eps)")
    problems: list[dict[str, Any]] | None = Field(
        None, description="Kernel jobs with several binary problems (one-vs-one pairs, "
        "one-vs-rest classes; up to 2,000 listed): per problem its pair (negative_class "
        "null for one-vs-rest), exit_reason, iterations, final KKT violation, "
        "dual_objective and end_s (seconds since the solver started, the progress "
        "events' clock)")
    threads: int | None = Field(
        None, description="The Numba threads the solver ran with (the job's `threads`, "
        "capped by the worker)")
    code_version: str | None = Field(
        None, description="The version of the code that trained the model (its lineage)")
    data_plan: dict[str, Any] | None = Field(
        None, description="How the worker planned to read the training data, where it "
        "made a plan")


def result_keys() -> frozenset[str]:
    """The keys a job's result declares."""
    return frozenset(JobResult.model_fields)
