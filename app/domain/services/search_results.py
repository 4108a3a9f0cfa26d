"""Reading a search: the searches of a tenant, a search's table of points (mean and
spread of each point's fold scores), its halving rounds, its best point and its refit
model. app.domain.services.searches imports these for its routes and its worker side."""

from __future__ import annotations

import math
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.domain.orm import Job, Search, SearchResult
from app.domain.services.owned import get_owned

LOWER_IS_BETTER = {"log_loss"}


def stored_rounds(search: Search) -> list[dict[str, Any]]:
    """A halving search's rounds ({"round", "candidates", "n_rows"}); [] otherwise."""
    halving = search.spec.get("halving")
    return list(halving["rounds"]) if halving else []


def get_search(session: Session, tenant_id: str, search_id: str) -> Search:
    return get_owned(session, Search, "search", tenant_id, search_id)


def list_searches(session: Session, tenant_id: str, *, limit: int = 100, offset: int = 0
                  ) -> list[Search]:
    """Newest first."""
    return list(session.scalars(select(Search).where(Search.tenant_id == tenant_id)
                                .order_by(Search.created_at.desc()).limit(limit)
                                .offset(offset)))


def count_searches(session: Session, tenant_id: str) -> int:
    return session.scalar(select(func.count()).select_from(Search)
                          .where(Search.tenant_id == tenant_id)) or 0


def refit_model_id(session: Session, search: Search) -> str | None:
    if search.refit_job_id is None:
        return None
    return session.scalar(select(Job.model_id).where(Job.id == search.refit_job_id))


def point_table(session: Session, search: Search) -> list[dict[str, Any]]:
    """Every point with its folds' scores: mean, std (ddof 0), mean fit time, convergence;
    each with `completed_seq`, the seq of its last fold once every fold is in."""
    results = session.scalars(select(SearchResult).where(SearchResult.search_id == search.id)
                              .order_by(SearchResult.point, SearchResult.fold)).all()
    by_point: dict[int, list[SearchResult]] = {}
    for result in results:
        by_point.setdefault(result.point, []).append(result)
    return [_summary(index, point, by_point.get(index, []), search.folds)
            for index, point in enumerate(search.point_specs)]


def _summary(index: int, point: dict[str, Any], results: list[SearchResult], folds: int
             ) -> dict[str, Any]:
    scores = [r.score for r in results]
    finite = [s for s in scores if s is not None and math.isfinite(s)]
    complete = len(results) == folds
    sparse = [r.nonzero_weights for r in results if r.nonzero_weights is not None]
    mean = std = None
    if complete and len(finite) == folds:
        mean = sum(finite) / folds
        std = math.sqrt(sum((s - mean) ** 2 for s in finite) / folds)
    return {
        "index": index, "values": point["values"], "params": point["params"],
        "folds_done": len(results), "mean": mean, "std": std, "scores": scores,
        "fit_seconds": sum(r.fit_seconds for r in results) / len(results) if results else 0.0,
        "converged": all(r.converged for r in results) if results else None,
        "exit_reasons": sorted({r.exit_reason for r in results}),
        "warm_started": sum(r.warm_start for r in results),
        "nonzero_weights": sum(sparse) / len(sparse) if sparse else None,
        "completed_seq": max(r.seq for r in results) if complete else None,
        "round": point.get("round", 0), "n_rows": point.get("n_rows"),
        "candidate": point.get("candidate"),
    }


def round_table(search: Search) -> list[dict[str, Any]] | None:
    """A halving search's rounds with the indices of their points (None: not halving)."""
    rounds = stored_rounds(search)
    if not rounds:
        return None
    members: dict[int, list[int]] = {}
    for index, point in enumerate(search.point_specs):
        members.setdefault(point.get("round", 0), []).append(index)
    return [{**r, "points": members.get(r["round"], [])} for r in rounds]


def best_point(table: list[dict[str, Any]], metric: str, select_rule: str
               ) -> dict[str, Any] | None:
    """The chosen point (see the module docstring), or None if no point has a mean."""
    scored = [p for p in table if p["mean"] is not None]
    if not scored:
        return None
    sign = -1.0 if metric in LOWER_IS_BETTER else 1.0
    top = max(scored, key=lambda p: (sign * p["mean"], -p["index"]))
    margin = top["std"] if select_rule == "one_std" else 0.0
    tied = [p for p in scored if sign * p["mean"] >= sign * top["mean"] - margin - 1e-12]
    chosen = min(tied, key=simplicity)
    return {"index": chosen["index"], "values": chosen["values"], "mean": chosen["mean"],
            "std": chosen["std"], "params": chosen["params"], "metric": metric,
            "rule": select_rule, "round": chosen["round"], "n_rows": chosen["n_rows"],
            **({"nonzero_weights": chosen["nonzero_weights"]}
               if chosen.get("nonzero_weights") is not None else {})}


def simplicity(point: dict[str, Any]) -> tuple[float, float, int]:
    gamma = point["params"].get("gamma")
    return (float(point["params"].get("C", 0.0)),
            float(gamma) if gamma is not None else 0.0, point["index"])
