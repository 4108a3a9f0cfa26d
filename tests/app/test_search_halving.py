"""Successive halving (strategy "halving"): the rounds' schedule, validation (the 413
counts every round), the rounds run through the worker's own task function (round by
round: each round's last fit creates the next round's tasks), the survivors, the best
point on every row, determinism by seed, and cancel between rounds.
tests/e2e/test_searches.py runs one on real worker processes."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from app.domain.orm import Dataset, SearchTask
from app.domain.search_space import halving_schedule, stratified_counts
from app.infra.db import session_scope
from app.infra.storage import blob_store, load_dataset
from app.settings import Settings
from tests.support import search_events
from workers.search import fold_of_rows, run_search_task, score, subsample_rows

GRID = {"C": {"log2": [-5, 15, 4]}, "gamma": {"log2": [3, -15, -4]}}  # 6 x 5 candidates
HALVING = {"type": "halving", "seed": 1}


def _submit(client: TestClient, dataset_id: str, **body: Any) -> dict[str, Any]:
    response = client.post("/v1/searches", json={"dataset_id": dataset_id, **body})
    assert response.status_code == 202, response.text
    return dict(response.json())


def _queued(settings: Settings, search_id: str) -> list[str]:
    with session_scope(settings.database_url) as session:
        return list(session.scalars(select(SearchTask.id).where(
            SearchTask.search_id == search_id, SearchTask.status == "queued")
            .order_by(SearchTask.number)))


def _run_rounds(settings: Settings, search_id: str) -> list[list[str]]:
    """Run the queued tasks until none is left: the outcomes, one list per round."""
    rounds = []
    while tasks := _queued(settings, search_id):
        rounds.append([run_search_task(settings, task, "test") for task in tasks])
    return rounds


def _cancer(settings: Settings, dataset_id: str) -> tuple[Any, np.ndarray]:
    with session_scope(settings.database_url) as session:
        dataset = session.get(Dataset, dataset_id)
        assert dataset is not None
        return load_dataset(blob_store(settings), dataset.blob_path, dataset.features)


def _class_counts(settings: Settings, dataset_id: str) -> list[int]:
    """Rows per class, in label order (what the service plans the rounds with)."""
    _, y = _cancer(settings, dataset_id)
    return [int(n) for n in np.unique(y, return_counts=True)[1]]


def _ranked(points: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Best first, ties to the smaller C, then gamma, then the earlier point."""
    return sorted(points, key=lambda p: (-p["mean"], p["values"]["C"],
                                         p["values"].get("gamma", 0), p["index"]))


# -- the schedule ------------------------------------------------------------------------

def test_the_schedule_follows_halving_grid_search_cv() -> None:
    # scikit-learn's HalvingGridSearchCV, 27 candidates, 1000 rows, factor 3, 'exhaust':
    # n_resources 37, 111, 333, 999 and 27, 9, 3, 1 candidates; our last round takes
    # every row
    first, rounds = halving_schedule(27, [500, 500], 5, 3.0, "exhaust")
    assert first == 37
    assert [(r.candidates, r.n_rows) for r in rounds] == [(27, 37), (9, 111), (3, 333),
                                                           (1, 1000)]
    # two classes of 150 and 120 rows, 30 candidates: 'exhaust' would start below the
    # smallest sensible subsample (2 x 2 classes x 5 folds = 20 rows), so it starts there
    # and the rows run out after three rounds: 30, 10, 4 candidates
    first, rounds = halving_schedule(30, [150, 120], 5, 3.0, "exhaust")
    assert first == 20
    assert [(r.candidates, r.n_rows) for r in rounds] == [(30, 20), (10, 60), (4, 270)]
    assert halving_schedule(30, [150, 120], 5, 3.0, "smallest")[1] == rounds
    _, rounds = halving_schedule(30, [150, 120], 5, 2.0, 50)
    assert [(r.candidates, r.n_rows) for r in rounds] == [(30, 50), (15, 100), (8, 270)]
    # one candidate: a single round on every row (a grid search)
    assert [(r.candidates, r.n_rows) for r in halving_schedule(1, [150, 120], 5, 3.0,
                                                                "exhaust")[1]] == [(1, 270)]


def test_a_stratified_subsample_keeps_the_class_shares_and_is_nested() -> None:
    assert stratified_counts([150, 120], 20, 5) == [11, 9]
    assert stratified_counts([990, 10], 100, 5) == [99, 5]  # every fold sees the rare class
    assert stratified_counts([150, 120], 500, 5) == [150, 120]
    y = np.array([1.0] * 150 + [-1.0] * 120)
    small = subsample_rows(y, 20, 5, seed=3)
    large = subsample_rows(y, 60, 5, seed=3)
    assert sorted(np.unique(y[small], return_counts=True)[1]) == [9, 11]
    assert set(small) <= set(large) and large.shape == (60,)
    assert np.array_equal(small, subsample_rows(y, 20, 5, seed=3))
    assert not np.array_equal(small, subsample_rows(y, 20, 5, seed=4))
    assert np.array_equal(subsample_rows(y, 270, 5, seed=3), np.arange(270))


# -- validation --------------------------------------------------------------------------

def test_the_413_counts_the_fits_of_every_round(client: TestClient, cancer_id: str,
                                                settings: Settings) -> None:
    # 61 x 50 = 3050 candidates: 15250 fits in round 0 (under the 20000 limit), but with
    # the later rounds (3050 / 3^r candidates, until the rows run out) they are more
    space = {"C": {"log2": [-15, 15, 0.5]}, "gamma": {"log2": [-30, 19, 1]}}
    _, schedule = halving_schedule(3050, _class_counts(settings, cancer_id), 5, 3.0,
                                   "exhaust")
    candidates = [r.candidates for r in schedule]
    assert candidates[:3] == [3050, 1017, 339]  # ceil(n / 3) each round
    fits = sum(candidates) * 5
    assert 3050 * 5 <= 20_000 < fits
    response = client.post("/v1/searches", json={
        "dataset_id": cancer_id, "solver": "smo", "space": space, "strategy": "halving"})
    assert response.status_code == 413, response.text
    error = response.json()["error"]
    assert error["detail"]["fits"] == fits
    assert error["detail"]["rounds"] == candidates
    assert f"{len(candidates)} halving rounds" in error["message"]
    assert str(fits) in error["message"]


@pytest.mark.parametrize(("strategy", "field"), [
    ({"type": "halving", "factor": 1}, "strategy.factor"),
    ({"type": "halving", "min_resources": "most"}, "strategy.min_resources"),
    ({"type": "halving", "min_resources": 0}, "strategy.min_resources"),
])
def test_invalid_halving_settings_are_422(client: TestClient, cancer_id: str,
                                          strategy: dict[str, Any], field: str) -> None:
    response = client.post("/v1/searches", json={"dataset_id": cancer_id, "space": GRID,
                                                 "solver": "smo", "strategy": strategy})
    assert response.status_code == 422, response.text
    assert field.split(".")[-1] in response.text


# -- running it --------------------------------------------------------------------------

def test_halving_rounds_keep_the_best_third_and_pick_the_best_on_every_row(
        client: TestClient, cancer_id: str, settings: Settings) -> None:
    X, y = _cancer(settings, cancer_id)
    # the rounds of 30 candidates on these rows by the rule tested above: at least three,
    # the last on every row
    _, schedule = halving_schedule(30, _class_counts(settings, cancer_id), 5, 3.0, "exhaust")
    assert len(schedule) >= 3 and schedule[-1].n_rows == y.shape[0]
    assert [r.candidates for r in schedule][:3] == [30, 10, 4]
    last = len(schedule) - 1
    fits = sum(r.candidates for r in schedule) * 5
    created = _submit(client, cancer_id, solver="smo", space=GRID, strategy=HALVING)
    assert (created["total"], created["done"]) == (fits, 0)
    assert len(_queued(settings, created["id"])) == 5 * 5  # round 0: a C path per gamma
    outcomes = _run_rounds(settings, created["id"])  # and fold
    assert len(outcomes) == len(schedule)
    assert all(o == "succeeded" for r in outcomes for o in r)
    body = client.get(f"/v1/searches/{created['id']}").json()
    assert body["status"] == "succeeded" and body["done"] == body["total"] == fits
    starts = np.cumsum([0] + [r.candidates for r in schedule]).tolist()
    assert body["rounds"] == [
        {"round": r.round, "candidates": r.candidates, "n_rows": r.n_rows,
         "points": list(range(starts[r.round], starts[r.round + 1]))} for r in schedule]
    points = body["points"]
    assert all(p["folds_done"] == 5 and p["mean"] is not None for p in points)
    assert sum(p["warm_started"] for p in points) > 0  # smo along the C values of a gamma
    for r in schedule:
        this = [p for p in points if p["round"] == r.round]
        assert {p["n_rows"] for p in this} == {r.n_rows}
        if r.round < last:  # the next round evaluates this round's best ceil(n / 3) again
            survivors = [p["candidate"] for p in _ranked(this)[:-(-len(this) // 3)]]
            following = [p for p in points if p["round"] == r.round + 1]
            assert sorted(survivors) == [p["candidate"] for p in following]
            assert all(p["values"] == points[p["candidate"]]["values"] for p in following)
    final = [p for p in points if p["round"] == last]
    assert body["best"]["index"] == _ranked(final)[0]["index"]
    assert body["best"]["round"] == last and body["best"]["n_rows"] == y.shape[0]
    # breast_cancer's best CV accuracy with an rbf kernel is about 0.97
    assert body["best"]["mean"] > 0.9

    # round 0 scored CV on the seeded stratified subsample, the last round on every row
    from solvers import fit

    for point, keep in ((points[0], subsample_rows(y, schedule[0].n_rows, 5, 1)),
                        (final[0], np.arange(y.shape[0]))):
        X_part, y_part = X[keep], y[keep]
        fold = fold_of_rows(y_part, 5, True, 0)
        expected = []
        for k in range(5):
            result = fit(X_part[fold != k], y_part[fold != k], solver="smo",
                         **point["values"])
            expected.append(score(result.model, X_part[fold == k], y_part[fold == k],
                                  "accuracy"))
        assert point["scores"] == pytest.approx(expected)

    # the refit trains the best point
    job = client.get(f"/v1/jobs/{body['refit_job_id']}").json()
    assert (job["params"]["C"], job["params"]["gamma"]) == (
        body["best"]["values"]["C"], body["best"]["values"]["gamma"])

    # the stream has every point, with its round and rows
    events = search_events(client, created["id"])
    streamed = [e["data"] for e in events if e["event"] == "point"]
    assert sorted(e["index"] for e in streamed) == list(range(len(points)))
    assert {(e["round"], e["n_rows"]) for e in streamed} == {
        (r.round, r.n_rows) for r in schedule}
    assert events[-1]["event"] == "status"


def test_halving_is_deterministic_by_seed_and_plans_c_paths_for_linear_solvers(
        client: TestClient, cancer_id: str, settings: Settings) -> None:
    spec = {"solver": "dcd", "space": {"C": {"log2": [-7, 9, 2]}},  # 9 candidates
            "cv": {"folds": 3}, "params": {"loss": "l2"}, "refit": False,
            "strategy": {"type": "halving", "seed": 5, "min_resources": "smallest"}}
    runs = []
    for _ in range(2):
        created = _submit(client, cancer_id, **spec)
        assert len(_queued(settings, created["id"])) == 3  # one C path per fold
        _run_rounds(settings, created["id"])
        runs.append(client.get(f"/v1/searches/{created['id']}").json())
    first, again = runs
    assert first["status"] == "succeeded"
    # 2 x 2 classes x 3 folds = 12 rows, then 36, then every row: 9, 3, 1 candidates
    rows = sum(_class_counts(settings, cancer_id))
    assert [(r["candidates"], r["n_rows"]) for r in first["rounds"]] == [
        (9, 12), (3, 36), (1, rows)]
    assert sum(p["warm_started"] for p in first["points"]) > 0  # the C path warm starts
    keys = ("values", "round", "n_rows", "scores")
    assert [{k: p[k] for k in keys} for p in first["points"]] == [
        {k: p[k] for k in keys} for p in again["points"]]
    assert first["best"] == again["best"]
    other = _submit(client, cancer_id, **{**spec, "strategy": {**spec["strategy"],
                                                              "seed": 6}})
    _run_rounds(settings, other["id"])
    reseeded = client.get(f"/v1/searches/{other['id']}").json()
    assert [p["scores"] for p in reseeded["points"][:9]] != [
        p["scores"] for p in first["points"][:9]]


def test_cancel_between_rounds_stops_the_next_round(
        client: TestClient, cancer_id: str, settings: Settings) -> None:
    created = _submit(client, cancer_id, solver="smo", space=GRID, strategy=HALVING)
    assert all(run_search_task(settings, task, "test") == "succeeded"
               for task in _queued(settings, created["id"]))
    next_round = _queued(settings, created["id"])
    body = client.get(f"/v1/searches/{created['id']}").json()
    gammas = {p["values"]["gamma"] for p in body["points"] if p["round"] == 1}
    assert len(next_round) == len(gammas) * 5 and body["rounds"][1]["candidates"] == 10
    assert client.post(f"/v1/searches/{created['id']}/cancel").status_code == 202
    assert _queued(settings, created["id"]) == []
    assert {run_search_task(settings, task, "test") for task in next_round} == {"skipped"}
    body = client.get(f"/v1/searches/{created['id']}").json()
    assert body["status"] == "cancelled" and body["done"] == 150
    assert body["best"] is None and body["refit_job_id"] is None


def test_halving_draws_n_candidates_and_works_with_a_holdout(
        client: TestClient, cancer_id: str, settings: Settings) -> None:
    drawn = _submit(client, cancer_id, solver="smo", space=GRID, refit=False,
                    strategy={"type": "halving", "n": 7, "seed": 3})
    assert [r["candidates"] for r in drawn["rounds"]] == [7, 3]
    assert len(client.get(f"/v1/searches/{drawn['id']}").json()["points"]) == 7
    parts = client.post(f"/v1/datasets/{cancer_id}/split", json={"test_fraction": 0.3}).json()
    train_rows = parts["train"]["rows"]
    created = _submit(client, parts["train"]["id"], solver="dcd", refit=False,
                      space={"C": {"log2": [-7, 9, 2]}}, strategy={"type": "halving"},
                      cv={"dataset_id": parts["test"]["id"]})
    # 2 x 2 classes x max(1 fold, 2) = 8 rows first; rows / 3^2 is more
    assert [(r["candidates"], r["n_rows"]) for r in created["rounds"]] == [
        (9, train_rows // 9), (3, 3 * (train_rows // 9)), (1, train_rows)]
    _run_rounds(settings, created["id"])
    body = client.get(f"/v1/searches/{created['id']}").json()
    assert body["status"] == "succeeded" and body["done"] == body["total"] == 13
    assert body["best"]["round"] == 2 and 0.5 < body["best"]["mean"] <= 1.0
