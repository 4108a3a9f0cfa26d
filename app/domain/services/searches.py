"""Searches: a cross-validated parameter search over many small worker tasks.

The API's side: `submit` validates every point of the space as a job spec (the same gate
as POST /v1/jobs: app/domain/services/jobs.py), refuses a search of more than
HINGE_MAX_SEARCH_FITS fits (413 with the number of fits), applies the queue caps of jobs
and at most HINGE_TENANT_MAX_QUEUED_JOBS active searches per tenant (429), and adds the
search with its tasks and their messages (task `hinge.search_task`) in the outbox: they
commit together and the messages are sent right after (app.domain.outbox).

Tasks: one task per fold and per combination of the non-C values, fitting its points in
increasing C, each fit warm-started from the previous one's dual solution (linear
solvers: as LIBLINEAR -C; smo: one gamma's C values, each fit continuing from the
previous one's alphas and kernel-column cache, solvers/smo/steps.SmoState.restart).
Tasks are claimed, leased, finished and swept by app/domain/lifecycle.py
(`SEARCH_TASKS`), as jobs are (a SIGKILLed worker's task is re-queued, capped attempts);
a task that fails (or runs out of attempts) fails its search. Each fit's result is
written as it is done, under a lock of the search's row, only while the task's attempt
holds its lease and the search is active, and at most once per (search, point, fold) (a
unique constraint too): a re-queued task
skips the fits already recorded, and no fit is counted twice.

The last result ends the search in the same transaction: `succeeded` with the best point,
and with `refit` a queued training job of the best point on every row of the dataset (a
normal job, its model a normal model: scale and probability as the search's params ask),
linked as `refit_job_id`, its message in the outbox (sent after the commit).

Successive halving (strategy "halving"; the rounds: app/search_space.halving_schedule): the
submit plans every round (`spec.halving`, the 413 counts the fits of all of them) and
creates round 0's points and tasks; each task fits its points on the round's stratified
subsample of the rows (seeded by strategy.seed, nested: a round's rows include the previous
round's) cut into the search's folds. The fit that completes a round, in the same
transaction, appends the next round's points (the best ceil(candidates / factor) of the
round by mean score, ties as for the best point; the same values, the next round's rows)
and their tasks, their messages in the outbox (sent after the commit). The last round uses
every row: its points are scored exactly as a grid search's, and the best point is chosen
among them.

The best point (`best_point`): the largest mean score (the smallest for log_loss); ties
go to the smallest C, then the smallest gamma, then the earliest point. With select
"one_std", every point whose mean is within one standard deviation (across folds, of the
best point) of the best mean ties, and the same order picks among them: the simplest
model that is not measurably worse.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from itertools import groupby
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from app.domain import lifecycle, outbox
from app.domain.errors import Conflict, Invalid, TooLarge
from app.domain.job_status import ACTIVE_STATUSES, TERMINAL_STATUSES, JobStatus, already
from app.domain.lifecycle import Claim
from app.domain.orm import Dataset, Search, SearchResult, SearchTask, new_id, utcnow
from app.domain.schemas import JobCreate
from app.domain.search_schemas import METRICS, CrossValidation, Holdout, SearchCreate
from app.domain.search_space import (
    Round,
    SpaceError,
    dimension_values,
    drawn_indices,
    grid_size,
    halving_schedule,
    point_at,
    points_count,
)
from app.domain.services.jobs import (
    check_dataset,
    check_queue_caps,
    queue,
    validated_params,
)
from app.domain.services.limits import (
    check_tenant_active,
    lock_dataset,
    lock_submissions,
)
from app.domain.services.search_results import (
    LOWER_IS_BETTER,
    best_point,
    get_search,
    point_table,
    simplicity,
    stored_rounds,
)

# reading a search lives in search_results; the routes find it here too
from app.domain.services.search_results import count_searches as count_searches
from app.domain.services.search_results import list_searches as list_searches
from app.domain.services.search_results import refit_model_id as refit_model_id
from app.domain.services.search_results import round_table as round_table
from app.domain.tasks import REGRESSION_METRICS
from app.infra.queue import SEARCH_TASK
from app.settings import Settings
from solvers.params import label_key, task_of

log = logging.getLogger("hinge.searches")

QUEUED, RUNNING = JobStatus.QUEUED, JobStatus.RUNNING
SUCCEEDED, FAILED, CANCELLED = JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.CANCELLED


# -- submit ------------------------------------------------------------------------------

def _points(spec: SearchCreate, settings: Settings, folds: int) -> list[dict[str, Any]]:
    """The search's points ({"values", "params"}), each a valid job spec; 413 when the
    search needs more fits than HINGE_MAX_SEARCH_FITS."""
    if spec.strategy.type == "random" and spec.strategy.n is None:
        raise Invalid("strategy 'random' needs n, the number of points to draw",
                      field="strategy.n")
    overlap = sorted(set(spec.space) & set(spec.params))
    if overlap:
        raise Invalid(f"space and params both set {', '.join(overlap)}; a parameter "
                      "is either searched or fixed", field=f"space.{overlap[0]}")
    try:
        values = {name: dimension_values(name, dim) for name, dim in spec.space.items()}
    except SpaceError as exc:
        raise Invalid(str(exc), field=exc.field) from None
    n_points = points_count(grid_size(values), spec.strategy)
    _check_fits(settings, n_points * folds, n_points, folds)  # halving: its first round
    points = []
    for number, index in enumerate(drawn_indices(grid_size(values), spec.strategy)):
        point = point_at(values, index)
        job = JobCreate(dataset_id=spec.dataset_id, solver=spec.solver,
                        params={**spec.params, **point})
        try:
            applied = validated_params(job, settings)
        except Invalid as exc:
            raise Invalid(f"point {number} {json.dumps(point)}: {exc.message}",
                          {**(exc.detail or {}), "point": number, "values": point}) from None
        points.append({"values": point, "params": applied})
    return points


def _check_fits(settings: Settings, fits: int, points: int, folds: int,
                rounds: list[Round] | None = None) -> None:
    if fits <= settings.max_search_fits:
        return
    detail: dict[str, Any] = {"fits": fits, "points": points, "folds": folds,
                              "limit": settings.max_search_fits}
    if rounds is None:
        shape = f"{points} points x {folds} folds"
    else:
        shape = (f"{' + '.join(str(r.candidates) for r in rounds)} points in "
                 f"{len(rounds)} halving rounds x {folds} folds")
        detail["rounds"] = [r.candidates for r in rounds]
    raise TooLarge(f"the search needs {fits} fits ({shape}), more than this "
                   f"service's limit of {settings.max_search_fits} "
                   "(HINGE_MAX_SEARCH_FITS)", detail)


def _halving(spec: SearchCreate, settings: Settings, points: list[dict[str, Any]],
             dataset: Dataset, folds: int) -> dict[str, Any]:
    """The rounds of a halving search (app/search_space.halving_schedule) on this dataset,
    413 when all of them together need too many fits; round 0's points are marked."""
    strategy = spec.strategy
    if isinstance(strategy.min_resources, int) and not (
            1 <= strategy.min_resources <= dataset.rows):
        raise Invalid(f"strategy.min_resources: {strategy.min_resources} rows; the "
                      f"dataset has {dataset.rows}",
                      field="strategy.min_resources")
    counts = ([dataset.rows] if dataset.task == "regression" else  # one stratum
              [int(dataset.class_counts[label_key(v)]) for v in sorted(dataset.labels)])
    first, rounds = halving_schedule(len(points), counts, folds, strategy.factor,
                                     strategy.min_resources)
    _check_fits(settings, sum(r.candidates for r in rounds) * folds, len(points), folds,
                rounds)
    for number, point in enumerate(points):
        point.update(round=0, n_rows=rounds[0].n_rows, candidate=number)
    return {"factor": strategy.factor, "min_resources": first,
            "rounds": [{"round": r.round, "candidates": r.candidates, "n_rows": r.n_rows}
                       for r in rounds]}


def _check_metric(spec: SearchCreate, points: list[dict[str, Any]], dataset: Dataset) -> None:
    """422 for a metric the points cannot be scored by: regression metrics for regression
    points, the others for classification (a regression dataset's default: neg_mse)."""
    task = task_of(spec.solver, points[0]["params"])
    if task == "outlier":
        raise Invalid("a search scores classification or regression models; one_class "
                      "has no metric to optimise", field="params.formulation")
    if task == "regression" and "metric" not in spec.model_fields_set:
        spec.metric = "neg_mse"
    if (spec.metric in REGRESSION_METRICS) != (task == "regression"):
        allowed = [m for m in METRICS if (m in REGRESSION_METRICS) == (task == "regression")]
        raise Invalid(f"metric {spec.metric} does not score a {task} model; use one of "
                      f"{', '.join(allowed)}", {"task": task, "metrics": allowed},
                      field="metric")
    if task == "regression" and isinstance(spec.cv, CrossValidation):
        spec.cv.stratified = False  # no classes to keep the shares of
    if spec.metric == "roc_auc" and len(dataset.labels) != 2:
        raise Invalid(f"metric roc_auc needs two classes; dataset {dataset.id!r} has "
                      f"{len(dataset.labels)}", field="metric")
    if spec.metric == "log_loss" and not all(p["params"].get("probability") for p in points):
        raise Invalid("metric log_loss needs probabilities: set params.probability "
                      "to true", field="metric")


def _check_holdout(session: Session, tenant_id: str, spec: SearchCreate,
                   dataset: Dataset) -> Dataset | None:
    if not isinstance(spec.cv, Holdout):
        return None
    holdout = lock_dataset(session, tenant_id, spec.cv.dataset_id)
    if holdout is None:
        raise Invalid(f"cv.dataset_id: no dataset {spec.cv.dataset_id!r}",
                      field="cv.dataset_id")
    if holdout.features > dataset.features:
        raise Invalid(f"cv.dataset_id: the holdout has {holdout.features} features, "
                      f"more than the training dataset's {dataset.features}",
                      field="cv.dataset_id")
    unknown = sorted(set(holdout.labels) - set(dataset.labels))
    if unknown:
        raise Invalid(f"cv.dataset_id: labels {', '.join(f'{v:g}' for v in unknown)} "
                      "are not in the training dataset", field="cv.dataset_id")
    return holdout


def plan_tasks(solver: str, points: list[dict[str, Any]], folds: int
               ) -> list[tuple[list[int], int | None]]:
    """(point indices in fitting order, fold) of each task: one per fold and per
    combination of the values other than C, its points in increasing C (linear solvers
    and smo alike: each fit starts from the previous one's solution)."""

    def rest(index: int) -> str:
        params = dict(points[index]["params"])
        params.pop("C")
        return json.dumps(params, sort_keys=True)

    ordered = sorted(range(len(points)), key=lambda i: (rest(i), points[i]["params"]["C"], i))
    paths = [list(group) for _, group in groupby(ordered, key=rest)]
    return [(path, fold) for path in paths for fold in range(folds)]


def submit(session: Session, settings: Settings, tenant_id: str, spec: SearchCreate) -> Search:
    """Validate and add a queued search with its tasks and their messages in the outbox;
    the caller commits (then the messages are sent: app.domain.outbox)."""
    holdout = isinstance(spec.cv, Holdout)
    folds = 1 if holdout else spec.cv.folds  # type: ignore[union-attr]
    points = _points(spec, settings, folds)
    lock_submissions(session)
    check_queue_caps(session, settings, tenant_id)
    check_tenant_active(session, settings, tenant_id, Search, "active searches")
    dataset = lock_dataset(session, tenant_id, spec.dataset_id)
    job = JobCreate(dataset_id=spec.dataset_id, solver=spec.solver, params={})
    for point in points:
        check_dataset(job, point["params"], dataset)
    assert dataset is not None  # check_dataset refused a missing one
    _check_metric(spec, points, dataset)
    holdout_dataset = _check_holdout(session, tenant_id, spec, dataset)
    if not holdout and min(dataset.class_counts.values(), default=1) < 1:
        raise Invalid("dataset has an empty class", field="dataset_id")
    if not holdout and dataset.rows < folds:
        raise Invalid(f"cv.folds: {folds} folds need at least {folds} rows; the "
                      f"dataset has {dataset.rows}", field="cv.folds")
    stored = spec.model_dump(mode="json")
    total = len(points) * folds
    if spec.strategy.type == "halving":
        stored["halving"] = _halving(spec, settings, points, dataset, folds)
        total = sum(r["candidates"] for r in stored["halving"]["rounds"]) * folds
    now = utcnow()
    search = Search(
        id=new_id(), tenant_id=tenant_id, dataset_id=dataset.id,
        holdout_dataset_id=holdout_dataset.id if holdout_dataset else None,
        solver=spec.solver, spec=stored, point_specs=points, folds=folds,
        total=total, done=0, status=QUEUED, cancel_requested=False, created_at=now,
    )
    session.add(search)
    session.flush()
    tasks = [SearchTask(id=new_id(), search_id=search.id, tenant_id=tenant_id, number=number,
                        point_indices=indices, fold=fold, status=QUEUED, attempt=0,
                        queued_at=now, created_at=now)
             for number, (indices, fold) in enumerate(plan_tasks(spec.solver, points, folds))]
    session.add_all(tasks)
    session.flush()
    for task in tasks:  # committed with the rows, sent right after (app.domain.outbox)
        outbox.post(session, settings, SEARCH_TASK, task.id)
    return search


# -- cancel ------------------------------------------------------------------------------

def _end_search(session: Session, search_id: str, to_status: JobStatus,
                except_task: str | None = None, **values: Any) -> bool:
    """queued/running -> a terminal status; the search's unfinished tasks (but
    `except_task`, the one ending it) are cancelled (a running one loses its lease: its
    worker stops at its next check)."""
    ended = session.execute(
        update(Search).where(Search.id == search_id, Search.status.in_(ACTIVE_STATUSES))
        .values(status=to_status, finished_at=utcnow(), **values)
        .execution_options(synchronize_session=False))
    if ended.rowcount != 1:  # type: ignore[attr-defined]
        return False
    session.execute(update(SearchTask)
                    .where(SearchTask.search_id == search_id,
                           SearchTask.status.in_(ACTIVE_STATUSES),
                           SearchTask.id != (except_task or ""))
                    .values(status=CANCELLED, finished_at=utcnow())
                    .execution_options(synchronize_session=False))
    return True


def cancel(session: Session, tenant_id: str, search_id: str) -> Search:
    """Stops every task (queued ones at once, running ones at their next check: within a
    fit's progress interval); a finished search is a 409."""
    search = get_search(session, tenant_id, search_id)
    if not _end_search(session, search_id, CANCELLED, cancel_requested=True):
        session.refresh(search)
        raise Conflict(f"search {search_id!r} {already(search.status)}: only a queued or "
                       "running search can be cancelled",
                       {"status": search.status.value})
    session.flush()
    session.refresh(search)
    return search


# -- the worker's side -------------------------------------------------------------------

@dataclass(frozen=True)
class TaskWork:
    """What a claimed search task fits (its `lifecycle.Claim`'s work)."""

    search_id: str
    tenant_id: str
    solver: str
    points: list[tuple[int, dict[str, Any]]]  # (index, params) in fitting order
    fold: int | None  # None: every fold
    folds: int
    cv: dict[str, Any]
    metric: str
    blob_path: str | None
    features: int
    holdout: bool  # scored on a holdout dataset (fold 0) instead of cross-validation
    holdout_blob_path: str | None  # None: no holdout, or it was deleted
    done: frozenset[tuple[int, int]]  # (point, fold) already recorded
    n_rows: int | None = None  # halving: the round's stratified subsample of the rows
    subsample_seed: int = 0  # halving: the seed of the subsamples (strategy.seed)
    shards: list[dict[str, Any]] | None = None  # the dataset's row shards (None: one blob)
    holdout_shards: list[dict[str, Any]] | None = None


def claim_task(session: Session, task_id: str, worker: str) -> Claim[TaskWork] | None:
    """queued -> running; None if the task is not queued, or its search is over."""
    attempt = lifecycle.claim(session, SEARCH_TASKS, task_id, worker)
    if attempt is None:
        return None
    task = session.get(SearchTask, task_id)
    assert task is not None
    search = session.get(Search, task.search_id)
    if search is None or search.status in TERMINAL_STATUSES:
        lifecycle.finish(session, SEARCH_TASKS, task_id, attempt, CANCELLED)
        return None
    if search.status == QUEUED:
        session.execute(update(Search).where(Search.id == search.id, Search.status == QUEUED)
                        .values(status=RUNNING, started_at=utcnow())
                        .execution_options(synchronize_session=False))
    dataset = session.get(Dataset, search.dataset_id) if search.dataset_id else None
    holdout = (session.get(Dataset, search.holdout_dataset_id)
               if search.holdout_dataset_id else None)
    done = session.execute(select(SearchResult.point, SearchResult.fold)
                           .where(SearchResult.search_id == search.id)).all()
    return Claim(SEARCH_TASKS, task_id, attempt, TaskWork(
        search_id=search.id, tenant_id=search.tenant_id, solver=search.solver,
        points=[(i, dict(search.point_specs[i]["params"])) for i in task.point_indices],
        fold=task.fold, folds=search.folds, cv=dict(search.spec["cv"]),
        metric=search.spec["metric"],
        blob_path=dataset.blob_path if dataset else None,
        features=dataset.features if dataset else 0,
        holdout="dataset_id" in search.spec["cv"],
        holdout_blob_path=holdout.blob_path if holdout else None,
        done=frozenset((p, f) for p, f in done),
        n_rows=search.point_specs[task.point_indices[0]].get("n_rows"),
        subsample_seed=int(search.spec.get("strategy", {}).get("seed", 0)),
        shards=dataset.shards if dataset else None,
        holdout_shards=holdout.shards if holdout else None,
    ))


def holds(session: Session, claim: Claim[TaskWork]) -> bool:
    """Renew the task's lease; False when this attempt lost it (the search was cancelled
    or failed, or the sweep gave the task to another attempt)."""
    return lifecycle.renew(session, SEARCH_TASKS, claim.id, claim.attempt)


@dataclass(frozen=True)
class FitOutcome:
    point: int
    fold: int
    score: float | None
    fit_seconds: float
    converged: bool
    exit_reason: str
    iterations: int
    warm_start: bool
    nonzero_weights: int | None = None  # L1 models: summed over the outputs


@dataclass(frozen=True)
class Recorded:
    """What `record` did: `held` (False: this attempt lost the task, nothing written), and
    what to enqueue once committed: the refit job, a halving search's next round."""

    held: bool
    refit_job_id: str | None = None
    task_ids: tuple[str, ...] = ()


def record(session: Session, settings: Settings, claim: Claim[TaskWork],
           outcomes: list[FitOutcome]) -> Recorded:
    """Store fits' results (under the search's row lock) while this attempt holds the
    task. The last result of a halving round starts the next round; the last result of
    the search ends it. The messages of what that queues (the next round's tasks, the
    refit job) go through the outbox: they commit with the results and are sent right
    after (app.domain.outbox)."""
    search = session.scalar(select(Search).where(Search.id == claim.work.search_id)
                            .with_for_update().execution_options(populate_existing=True))
    if search is None or search.status != RUNNING:
        return Recorded(False)
    if not session.scalar(select(func.count()).select_from(SearchTask).where(
            *claim.leased())):
        return Recorded(False)
    recorded = {(point, fold) for point, fold in session.execute(
        select(SearchResult.point, SearchResult.fold).where(
            SearchResult.search_id == search.id,
            SearchResult.point.in_(sorted({o.point for o in outcomes}))))}
    for outcome in outcomes:
        if (outcome.point, outcome.fold) in recorded:
            continue  # recorded by an earlier attempt: never counted twice
        recorded.add((outcome.point, outcome.fold))
        search.done += 1
        session.add(SearchResult(
            search_id=search.id, point=outcome.point, fold=outcome.fold, seq=search.done,
            score=outcome.score, fit_seconds=outcome.fit_seconds,
            converged=outcome.converged, exit_reason=outcome.exit_reason[:32],
            iterations=outcome.iterations, warm_start=outcome.warm_start,
            nonzero_weights=outcome.nonzero_weights, created_at=utcnow()))
    session.flush()
    if search.done < search.total:
        result = Recorded(True, None, tuple(_next_round(session, search)))
    else:
        result = Recorded(True, _complete(session, settings, search, claim.id))
    for task_id in result.task_ids:
        outbox.post(session, settings, SEARCH_TASK, task_id)
    return result


def _final_round(search: Search) -> int:
    return max(0, len(stored_rounds(search)) - 1)


def _rank_key(point: dict[str, Any], metric: str) -> tuple[Any, ...]:
    """Best first: a mean before none, the better mean, then the simpler point (smallest
    C, then gamma, then the earliest)."""
    sign = -1.0 if metric in LOWER_IS_BETTER else 1.0
    mean = point["mean"]
    return (mean is None, -sign * mean if mean is not None else 0.0, *simplicity(point))


def _next_round(session: Session, search: Search) -> list[str]:
    """When the fits of a halving round are all in (done reaches the round's cumulative
    fits: earlier rounds are complete), its best `candidates of the next round` points
    (`_rank_key`) are evaluated again on the next round's rows: new points and tasks,
    committed with the last fit; the new task ids."""
    rounds = stored_rounds(search)
    current = max((p.get("round", 0) for p in search.point_specs), default=0)
    if current + 1 >= len(rounds):
        return []
    through = sum(r["candidates"] for r in rounds[:current + 1]) * search.folds
    if search.done != through:
        return []
    table = [p for p in point_table(session, search) if p["round"] == current]
    keep = rounds[current + 1]["candidates"]
    survivors = sorted(sorted(table, key=lambda p: _rank_key(p, search.spec["metric"]))[:keep],
                       key=lambda p: p["index"])
    start = len(search.point_specs)
    added = [{"values": p["values"], "params": p["params"], "round": current + 1,
              "n_rows": rounds[current + 1]["n_rows"], "candidate": p["candidate"]}
             for p in survivors]
    search.point_specs = [*search.point_specs, *added]
    numbered = session.scalar(select(func.count()).select_from(SearchTask)
                              .where(SearchTask.search_id == search.id)) or 0
    now = utcnow()
    tasks = [SearchTask(id=new_id(), search_id=search.id, tenant_id=search.tenant_id,
                        number=numbered + k, point_indices=[start + i for i in indices],
                        fold=fold, status=QUEUED, attempt=0, queued_at=now, created_at=now)
             for k, (indices, fold) in enumerate(plan_tasks(search.solver, added,
                                                             search.folds))]
    session.add_all(tasks)
    session.flush()
    return [task.id for task in tasks]


def _complete(session: Session, settings: Settings, search: Search, task_id: str
              ) -> str | None:
    """Every fit is in: the best point, the search succeeded, and the refit job queued in
    the same transaction (its id returned; jobs.queue posts its message)."""
    final = _final_round(search)
    best = best_point([p for p in point_table(session, search) if p["round"] == final],
                      search.spec["metric"], search.spec.get("select", "best"))
    if best is None:
        _end_search(session, search.id, FAILED, except_task=task_id,
                    error="no point gave a finite score on every fold")
        return None
    refit_job_id = None
    if search.spec.get("refit", True) and search.dataset_id is not None:
        refit_job_id = queue(session, settings, search.tenant_id, search.dataset_id,
                             search.solver, best["params"], search_id=search.id).id
    _end_search(session, search.id, SUCCEEDED, except_task=task_id, best=best,
                refit_job_id=refit_job_id)
    return refit_job_id


def finish_task(session: Session, claim: Claim[TaskWork], error: str | None = None) -> bool:
    """running -> succeeded, or failed with its search (a task that cannot be done makes
    the search's result incomplete)."""
    if error is None:
        return claim.finish(session, SUCCEEDED)
    if not claim.fail(session, error):
        return False
    _end_search(session, claim.work.search_id, FAILED, error=f"a task failed: {error}"[:2000])
    return True


# -- the sweep ---------------------------------------------------------------------------

def _search_lost(session: Session, settings: Settings, task_id: str) -> None:
    """A task failed for lost workers fails its search."""
    search_id = session.scalar(select(SearchTask.search_id).where(SearchTask.id == task_id))
    if search_id is not None:
        _end_search(session, search_id, FAILED,
                    error=f"task {task_id}: the worker was lost {settings.max_attempts} "
                          "times")


def _idle_searches_tasks(session: Session, settings: Settings, now: datetime) -> list[str]:
    """The search tasks' `waiting` rule (app.domain.lifecycle): queued tasks of searches that
    made no progress for requeue_after_seconds (no task claimed, beating or finished):
    their messages may be lost. (A search's queued tasks normally wait behind its running
    ones; re-enqueueing them on their age alone, as for jobs, would flood the queue with
    duplicates.)"""
    idle_before = now - timedelta(seconds=settings.requeue_after_seconds)
    waiting = session.execute(
        select(SearchTask.search_id, func.min(SearchTask.queued_at))
        .where(SearchTask.status == QUEUED).group_by(SearchTask.search_id)).all()
    to_enqueue: list[str] = []
    for search_id, oldest in waiting:
        if oldest is None or _as_utc(oldest) >= idle_before:
            continue
        latest = session.execute(
            select(func.max(SearchTask.heartbeat_at), func.max(SearchTask.finished_at))
            .where(SearchTask.search_id == search_id)).one()
        if any(t is not None and _as_utc(t) >= idle_before for t in latest):
            continue
        to_enqueue += session.scalars(select(SearchTask.id).where(
            SearchTask.search_id == search_id, SearchTask.status == QUEUED
        ).order_by(SearchTask.queued_at, SearchTask.id))
    return to_enqueue


def _as_utc(value: datetime) -> datetime:
    """Aggregates (max, min) bypass the column type: SQLite gives naive UTC datetimes."""
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


SEARCH_TASKS = lifecycle.WorkKind(
    name="search task", plural="search_tasks", table=SearchTask, task=SEARCH_TASK,
    in_main_queue=False, waiting=_idle_searches_tasks, on_lost=_search_lost)
