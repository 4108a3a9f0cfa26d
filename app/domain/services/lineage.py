"""A model's lineage: the chain from its dataset to its evaluations, read from what is
stored already (the model's row and result, its job, the search whose refit trained it,
its dataset and evaluations, its registered versions)."""

from __future__ import annotations

import functools
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.domain.orm import Dataset, Evaluation, Job, Search
from app.domain.services import models, registry

# The keys of a model's result that certify it (workers/training.py: _summary).
CERTIFICATE_KEYS = ("exit_reason", "converged", "primal_objective", "dual_objective",
                    "duality_gap", "relative_gap", "tol", "violation", "iterations",
                    "train_seconds")


@functools.cache
def code_version() -> str:
    """This code's version: the package's, and the git commit of its source tree when it
    runs from a checkout (`hinge 0.1.0+g1a2b3c4`). Recorded with each trained model."""
    try:
        version = metadata.version("hinge")
    except metadata.PackageNotFoundError:
        version = "unknown"
    root = Path(__file__).resolve().parents[3]
    try:
        commit = subprocess.run(["git", "-C", str(root), "rev-parse", "--short=12", "HEAD"],
                                capture_output=True, text=True, timeout=5, check=True
                                ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        commit = ""
    return f"hinge {version}+g{commit}" if commit else f"hinge {version}"


def lineage(session: Session, tenant_id: str, model_id: str) -> dict[str, Any]:
    """The LineagePublic document of the tenant's model (404 when it has none)."""
    model = models.get_model(session, tenant_id, model_id)
    result = model.result or {}
    job = None if model.job_id is None else session.scalar(
        select(Job).where(Job.id == model.job_id, Job.tenant_id == tenant_id))
    search = None if model.job_id is None else session.scalar(
        select(Search).where(Search.refit_job_id == model.job_id,
                             Search.tenant_id == tenant_id))
    dataset_id = model.dataset_id or (job.dataset_id if job is not None else None)
    dataset = None if dataset_id is None else session.scalar(
        select(Dataset).where(Dataset.id == dataset_id, Dataset.tenant_id == tenant_id))
    evaluations = session.scalars(
        select(Evaluation).where(Evaluation.model_id == model.id,
                                 Evaluation.tenant_id == tenant_id)
        .order_by(Evaluation.created_at))
    return {
        "model_id": model.id,
        "created_at": model.created_at,
        "origin": model.origin,
        "dataset": _dataset(dataset, dataset_id),
        "job": None if job is None else {
            "id": job.id, "status": job.status, "solver": job.solver, "params": job.params,
            "attempt": job.attempt, "created_at": job.created_at,
            "finished_at": job.finished_at},
        "search": None if search is None else {
            "id": search.id, "status": search.status, "solver": search.solver,
            "folds": search.folds, "best": search.best},
        "solver": model.solver,
        "kind": model.kind,
        "params": model.params,
        "certificate": {key: result[key] for key in CERTIFICATE_KEYS if key in result},
        "path": result.get("path"),
        "code_version": result.get("code_version"),
        "evaluations": [{
            "id": e.id, "dataset_id": e.dataset_id, "dataset_name": e.dataset_name,
            "status": e.status, "accuracy": (e.report or {}).get("accuracy"),
            "created_at": e.created_at} for e in evaluations],
        "registered_versions": [
            {"name": name, "version": version}
            for name, version in registry.versions_of_model(session, tenant_id, model.id)],
    }


def _dataset(dataset: Dataset | None, dataset_id: str | None) -> dict[str, Any] | None:
    if dataset_id is None:
        return None
    if dataset is None:  # deleted since: the id is all that is left
        return {"id": dataset_id, "exists": False}
    return {"id": dataset.id, "exists": True, "name": dataset.name, "sha256": dataset.sha256,
            "rows": dataset.rows, "features": dataset.features,
            "source_format": dataset.source_format, "parent_id": dataset.parent_id,
            "split_part": dataset.split_part}
