"""POST /v1/searches and its tasks: validation, the fan-out plan, every fit recorded once,
the best point and its refit, cancel, the sweep, the SSE stream.

The tasks run through the worker's own function (workers.search.run_search_task) in this
process; tests/e2e/test_searches.py runs them on real worker processes.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select, update

from app.domain.orm import SearchResult, SearchTask, utcnow
from app.domain.services import searches
from app.domain.sweep import sweep
from app.infra.db import session_scope
from app.infra.storage import blob_store, load_dataset
from app.settings import Settings
from tests.support import search_events
from workers.search import fold_of_rows, run_search_task, score
from workers.training import run_job

C_PATH = {"C": {"log2": [-5, 5, 2]}}  # 6 values


def _submit(client: TestClient, cancer_id: str, **body: Any) -> dict[str, Any]:
    response = client.post("/v1/searches", json={"dataset_id": cancer_id, **body})
    assert response.status_code == 202, response.text
    return response.json()


def _tasks(settings: Settings, search_id: str) -> list[SearchTask]:
    with session_scope(settings.database_url) as session:
        tasks = session.scalars(select(SearchTask).where(SearchTask.search_id == search_id)
                                .order_by(SearchTask.number)).all()
        session.expunge_all()
        return list(tasks)


def _run_all(settings: Settings, search_id: str) -> list[str]:
    return [run_search_task(settings, t.id, "test") for t in _tasks(settings, search_id)]


def _error(response: Any, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    return response.json()["error"]


# -- validation --------------------------------------------------------------------------

@pytest.mark.parametrize(("body", "field", "words"), [
    ({"space": {"C": {"log2": [-5, 15, -2]}}}, "space.C", "step"),
    ({"space": {"C": {"log2": [-5, 15, 0]}}}, "space.C", "step"),
    ({"space": {"C": []}}, "space.C", "empty"),
    ({"space": {"C": {"log2": [-5, 1e308, 1e-300]}}}, "space.C", "finite exponents"),
    ({"space": {"C": {"log2": [0, 5000, 1]}}}, "space.C", "finite exponents"),
    ({"space": {"C": [1, 1]}}, "space.C", "repeat"),
    ({"space": {"C": [1, -2]}}, "params.C", "point 1"),
    ({"space": {"kernel": ["rbf"]}, "solver": "dcd"}, "params.kernel", "point 0"),
    ({"space": {"C": [1]}, "params": {"C": 2}}, "space.C", "both"),
    ({"space": {"C": [1]}, "strategy": {"type": "random"}}, "strategy.n", "n"),
    ({"space": {"C": [1]}, "metric": "log_loss"}, "metric", "probability"),
    ({"space": {"C": [1]}, "solver": "nope"}, "solver", "unknown solver"),
    ({"space": {"C": [1]}, "cv": {"dataset_id": "f" * 32}}, "cv.dataset_id", "no dataset"),
    ({"space": {"C": [1]}, "params": {"max_seconds": 1e5}}, "params.max_seconds", "limit"),
])
def test_an_invalid_search_is_a_422_naming_the_point_and_the_field(
        client: TestClient, cancer_id: str, body: dict[str, Any], field: str, words: str
) -> None:
    error = _error(client.post("/v1/searches", json={"dataset_id": cancer_id, **body}), 422)
    assert error["detail"]["field"] == field, error
    assert words in error["message"], error


def test_min_resources_beyond_the_rows_is_a_422_naming_the_rows(
        client: TestClient, cancer_id: str) -> None:
    rows = client.get(f"/v1/datasets/{cancer_id}").json()["rows"]
    for too_many in (rows + 1, 10 * rows):
        error = _error(client.post("/v1/searches", json={
            "dataset_id": cancer_id, "space": {"C": [1]},
            "strategy": {"type": "halving", "min_resources": too_many}}), 422)
        assert error["detail"]["field"] == "strategy.min_resources", error
        assert f"{too_many} rows" in error["message"], error
        assert f"the dataset has {rows}" in error["message"], error
    accepted = client.post("/v1/searches", json={
        "dataset_id": cancer_id, "space": {"C": [1]},
        "strategy": {"type": "halving", "min_resources": rows}})
    assert accepted.status_code == 202, accepted.text


def test_a_bad_point_names_its_values(client: TestClient, cancer_id: str) -> None:
    error = _error(client.post("/v1/searches", json={
        "dataset_id": cancer_id, "space": {"C": [1, 2, -3]}}), 422)
    assert error["detail"]["point"] == 2
    assert error["detail"]["values"] == {"C": -3}


def test_body_shape_errors_are_422(client: TestClient, cancer_id: str) -> None:
    for body in ({"dataset_id": cancer_id}, {"dataset_id": cancer_id, "space": {}},
                 {"dataset_id": cancer_id, "space": {"C": {"log2": [1, 2]}}},
                 {"dataset_id": cancer_id, "space": {"C": [1]}, "metric": "f1"},
                 {"dataset_id": cancer_id, "space": {"C": [1]}, "cv": {"folds": 1}},
                 {"dataset_id": cancer_id, "space": {"C": [1]}, "extra": 1}):
        assert client.post("/v1/searches", json=body).status_code == 422, body


def test_an_unknown_dataset_is_a_422(client: TestClient) -> None:
    error = _error(client.post("/v1/searches", json={"dataset_id": "f" * 32,
                                                     "space": {"C": [1]}}), 422)
    assert error["detail"]["field"] == "dataset_id"


def test_a_too_large_search_is_a_413_with_the_number_of_fits(
        client: TestClient, cancer_id: str) -> None:
    # grid.py's default grid at 5 folds is 550 fits; this one is 21 x 19 x 10 x 5
    error = _error(client.post("/v1/searches", json={
        "dataset_id": cancer_id, "solver": "smo",
        "space": {"C": {"log2": [-5, 15, 1]}, "gamma": {"log2": [3, -15, -1]},
                  "coef0": list(range(10)), "degree": [1, 2, 3, 4, 5]},
    }), 413)
    assert error["detail"]["fits"] == 21 * 19 * 10 * 5 * 5
    assert str(21 * 19 * 10 * 5 * 5) in error["message"]
    assert error["detail"]["limit"] == 20_000


def test_roc_auc_needs_two_classes(client: TestClient) -> None:
    rows = b"".join(f"{k % 3} 1:{k}\n".encode() for k in range(30))
    three = client.post("/v1/datasets?name=three", content=rows).json()["id"]
    error = _error(client.post("/v1/searches", json={
        "dataset_id": three, "space": {"C": [1]}, "metric": "roc_auc"}), 422)
    assert error["detail"]["field"] == "metric"


# -- the plan ----------------------------------------------------------------------------

def test_tasks_are_c_paths_per_fold(
        client: TestClient, cancer_id: str, settings: Settings) -> None:
    linear = _submit(client, cancer_id, solver="dcd",
                     space={"C": [4.0, 0.25, 1.0], "loss": ["l1", "l2"]}, cv={"folds": 3})
    assert (linear["total"], linear["done"], linear["status"]) == (18, 0, "queued")
    tasks = _tasks(settings, linear["id"])
    assert len(tasks) == 2 * 3  # a path per loss and fold
    with session_scope(settings.database_url) as session:
        search = searches.get_search(session, "0" * 32, linear["id"]) if False else None
        del search
    body = client.get(f"/v1/searches/{linear['id']}").json()
    for task in tasks:
        cs = [body["points"][i]["values"]["C"] for i in task.point_indices]
        assert cs == sorted(cs) and len(cs) == 3  # increasing C: the warm-start order
        assert len({body["points"][i]["values"]["loss"] for i in task.point_indices}) == 1
    # smo: the C values of one gamma within one fold, increasing (the points: (2, 0.5),
    # (2, 0.1), (1, 0.5), (1, 0.1))
    kernel = _submit(client, cancer_id, solver="smo",
                     space={"C": [2.0, 1.0], "gamma": [0.5, 0.1]}, cv={"folds": 3})
    assert sorted((t.point_indices, t.fold) for t in _tasks(settings, kernel["id"])) == [
        ([2, 0], 0), ([2, 0], 1), ([2, 0], 2), ([3, 1], 0), ([3, 1], 1), ([3, 1], 2)]


def test_random_strategy_draws_n_points_of_the_grid_by_seed(
        client: TestClient, cancer_id: str) -> None:
    spec = {"space": {"C": {"log2": [-5, 15, 2]}, "loss": ["l1", "l2"]},
            "strategy": {"type": "random", "n": 5, "seed": 3}, "solver": "dcd"}
    first = client.get(f"/v1/searches/{_submit(client, cancer_id, **spec)['id']}").json()
    again = client.get(f"/v1/searches/{_submit(client, cancer_id, **spec)['id']}").json()
    values = [p["values"] for p in first["points"]]
    assert len(values) == 5 and len({json.dumps(v) for v in values}) == 5
    assert values == [p["values"] for p in again["points"]]
    other = {**spec, "strategy": {"type": "random", "n": 5, "seed": 4}}
    drawn = client.get(f"/v1/searches/{_submit(client, cancer_id, **other)['id']}").json()
    assert [p["values"] for p in drawn["points"]] != values


def test_log2_ranges_follow_grid_py() -> None:
    from app.domain.search_schemas import Log2Range
    from app.domain.search_space import dimension_values

    assert dimension_values("C", Log2Range(log2=(-5, 15, 2))) == [2.0 ** e for e in
                                                                  range(-5, 16, 2)]
    assert dimension_values("g", Log2Range(log2=(3, -15, -2))) == [2.0 ** e for e in
                                                                   range(3, -16, -2)]


def test_stratified_folds_deal_every_class_evenly() -> None:
    y = np.array([1.0] * 50 + [-1.0] * 23)
    fold = fold_of_rows(y, 5, True, 0)
    for label in (1.0, -1.0):
        counts = np.bincount(fold[y == label], minlength=5)
        assert counts.max() - counts.min() <= 1
    assert np.bincount(fold).max() - np.bincount(fold).min() <= 1
    assert np.array_equal(fold, fold_of_rows(y, 5, True, 0))
    assert not np.array_equal(fold, fold_of_rows(y, 5, True, 1))
    plain = fold_of_rows(y, 5, False, 0)
    assert sorted(np.bincount(plain)) == [14, 14, 15, 15, 15]


# -- running it --------------------------------------------------------------------------

def test_a_search_runs_to_its_best_point_and_refits_it(
        client: TestClient, cancer_id: str, settings: Settings) -> None:
    created = _submit(client, cancer_id, solver="dcd", space=C_PATH,
                      params={"loss": "l2", "scale": "minmax"}, cv={"folds": 5, "seed": 7})
    assert _run_all(settings, created["id"]) == ["succeeded"] * 5
    body = client.get(f"/v1/searches/{created['id']}").json()
    assert body["status"] == "succeeded" and body["done"] == body["total"] == 30
    points = body["points"]
    assert all(p["folds_done"] == 5 and p["converged"] for p in points)
    # each fold's path starts cold at the smallest C; a later C starts from the previous
    # fit's dual solution unless that fit ended in the fallback (tron: no dual solution)
    by_c = sorted(points, key=lambda p: p["values"]["C"])
    assert by_c[0]["warm_started"] == 0
    assert sum(p["warm_started"] for p in by_c[1:]) >= 20
    best = max(p["mean"] for p in points)
    assert body["best"]["mean"] == best
    tied = [p for p in points if p["mean"] == best]
    assert body["best"]["index"] == min(tied, key=lambda p: p["values"]["C"])["index"]
    # the scores are the fold models' accuracies (checked for the path's cold start)
    X, y = _cancer(settings, cancer_id)
    fold = fold_of_rows(y, 5, True, 7)
    from solvers import fit

    first = min(range(len(points)), key=lambda i: points[i]["values"]["C"])
    expected = []
    for k in range(5):
        result = fit(X[fold != k], y[fold != k], solver="dcd",
                     **points[first]["values"], loss="l2", scale="minmax")
        expected.append(score(result.model, X[fold == k], y[fold == k], "accuracy"))
    assert points[first]["scores"] == pytest.approx(expected)
    assert points[first]["mean"] == pytest.approx(float(np.mean(expected)))
    assert points[first]["std"] == pytest.approx(float(np.std(expected)))
    # the refit: a normal job of the best point on every row, its model linked
    job = client.get(f"/v1/jobs/{body['refit_job_id']}").json()
    assert job["status"] == "queued"
    assert job["params"]["C"] == body["best"]["values"]["C"]
    assert job["params"]["scale"] == "minmax"
    assert run_job(settings, job["id"], "test") == "succeeded"
    body = client.get(f"/v1/searches/{created['id']}").json()
    model = client.get(f"/v1/models/{body['model_id']}").json()
    assert model["job_id"] == job["id"] and model["params"]["scale"] == "minmax"


def test_an_l1_search_reports_the_non_zero_weights_against_c(
        client: TestClient, cancer_id: str, settings: Settings) -> None:
    """The regularisation path: every point of an L1 model's search carries the mean over
    its folds of the fold models' non-zero weights (refitted here on the same folds), in
    the table, the best point, the point events and the client's path; a dense model's
    points carry none."""
    from app.client import HingeClient
    from solvers import fit

    created = _submit(client, cancer_id, solver="auto",
                      params={"penalty": "l1", "loss": "l2", "scale": "minmax"},
                      space={"C": {"log2": [-9, 3, 4]}}, cv={"folds": 3, "seed": 3})
    assert _run_all(settings, created["id"]) == ["succeeded"] * 3
    body = client.get(f"/v1/searches/{created['id']}").json()
    points = sorted(body["points"], key=lambda p: p["values"]["C"])
    X, y = _cancer(settings, cancer_id)
    fold = fold_of_rows(y, 3, True, 3)
    for point in points:
        counts = [sum(o["nonzero_weights"] for o in fit(
            X[fold != k], y[fold != k], solver="auto", penalty="l1", loss="l2",
            scale="minmax", C=point["values"]["C"]).per_output) for k in range(3)]
        assert point["nonzero_weights"] == pytest.approx(float(np.mean(counts)))
    # C = 2^-9 leaves every weight at 0; C = 8 keeps more of cancer's 30 features
    assert points[0]["nonzero_weights"] == 0.0
    assert points[-1]["nonzero_weights"] > points[1]["nonzero_weights"]
    best = next(p for p in points if p["index"] == body["best"]["index"])
    assert body["best"]["nonzero_weights"] == best["nonzero_weights"]
    events = search_events(client, created["id"])
    sent = {e["data"]["index"]: e["data"]["nonzero_weights"] for e in events
            if e["event"] == "point"}
    assert sent == {p["index"]: p["nonzero_weights"] for p in points}
    api = HingeClient(str(client.base_url), transport=client._transport)
    api._http.headers.update(client.headers)
    path = api.regularisation_path(created["id"])
    assert [(p["C"], p["nonzero_weights"]) for p in path] == [
        (p["values"]["C"], p["nonzero_weights"]) for p in points]
    dense = _submit(client, cancer_id, solver="dcd", space={"C": [1.0]}, cv={"folds": 2})
    assert _run_all(settings, dense["id"]) == ["succeeded"] * 2
    point = client.get(f"/v1/searches/{dense['id']}").json()["points"][0]
    assert point["nonzero_weights"] is None


def test_a_kernel_search_with_probabilities_scores_log_loss(
        client: TestClient, cancer_id: str, settings: Settings) -> None:
    created = _submit(client, cancer_id, solver="smo",
                      space={"C": [0.5, 2.0], "gamma": {"log2": [-3, -5, -2]}},
                      params={"probability": True}, metric="log_loss", cv={"folds": 3},
                      select="one_std", refit=False)
    assert _run_all(settings, created["id"]) == ["succeeded"] * 6  # 2 gammas x 3 folds
    body = client.get(f"/v1/searches/{created['id']}").json()
    assert body["status"] == "succeeded" and body["refit_job_id"] is None
    assert all(p["warm_started"] == 0 for p in body["points"])  # probabilities: cold
    points = body["points"]
    top = min(points, key=lambda p: p["mean"])  # log_loss: lower is better
    within = [p for p in points if p["mean"] <= top["mean"] + top["std"] + 1e-12]
    chosen = min(within, key=lambda p: (p["values"]["C"], p["values"]["gamma"]))
    assert body["best"]["index"] == chosen["index"] and body["best"]["rule"] == "one_std"
    assert all(0 < p["mean"] < 1 for p in points)


def test_a_holdout_scores_every_point_once(client: TestClient, cancer_id: str,
                                           settings: Settings) -> None:
    parts = client.post(f"/v1/datasets/{cancer_id}/split", json={"test_fraction": 0.3}).json()
    created = _submit(client, parts["train"]["id"], solver="dcd", space={"C": [0.1, 1.0]},
                      cv={"dataset_id": parts["test"]["id"]}, metric="balanced_accuracy")
    assert created["folds"] == 1 and created["total"] == 2
    assert _run_all(settings, created["id"]) == ["succeeded"]
    body = client.get(f"/v1/searches/{created['id']}").json()
    assert body["status"] == "succeeded"
    assert all(p["std"] == 0.0 and 0.5 < p["mean"] <= 1.0 for p in body["points"])


def test_a_duplicate_delivery_does_nothing_and_a_retry_counts_no_fit_twice(
        client: TestClient, cancer_id: str, settings: Settings) -> None:
    created = _submit(client, cancer_id, solver="dcd", space=C_PATH, cv={"folds": 2})
    first, second = _tasks(settings, created["id"])
    assert run_search_task(settings, first.id, "test") == "succeeded"
    assert run_search_task(settings, first.id, "test") == "skipped"
    # the second task's worker dies after two of its fits: claim it, record two, go stale
    with session_scope(settings.database_url) as session:
        claim = searches.claim_task(session, second.id, "doomed")
    assert claim is not None
    assert (claim.kind, claim.id, claim.attempt) == (searches.SEARCH_TASKS, second.id, 1)
    for index, _params in claim.work.points[:2]:
        with session_scope(settings.database_url) as session:
            held = searches.record(session, settings, claim, [searches.FitOutcome(
                index, 1, 0.5, 0.01, True, "converged", 1, False)]).held
            assert held
    with session_scope(settings.database_url) as session:
        session.execute(update(SearchTask).where(SearchTask.id == second.id)
                        .values(heartbeat_at=utcnow() - timedelta(hours=1)))
    assert sweep(settings)["search_tasks_enqueued"] == 1
    with session_scope(settings.database_url) as session:  # the old attempt is out
        held = searches.record(session, settings, claim, [searches.FitOutcome(
            claim.work.points[2][0], 1, 0.5, 0.01, True, "converged", 1, False)]).held
        assert not held
    assert run_search_task(settings, second.id, "test") == "succeeded"
    body = client.get(f"/v1/searches/{created['id']}").json()
    assert body["status"] == "succeeded" and body["done"] == 12
    with session_scope(settings.database_url) as session:
        count = session.scalar(select(func.count()).select_from(SearchResult)
                               .where(SearchResult.search_id == created["id"]))
        seqs = session.scalars(select(SearchResult.seq)
                               .where(SearchResult.search_id == created["id"])).all()
    assert count == 12 and sorted(seqs) == list(range(1, 13))
    kept = [p["scores"][1] for p in body["points"] if p["index"] in
            [i for i, _ in claim.work.points[:2]]]
    assert kept == [0.5, 0.5]  # the dead attempt's fits were kept, not redone


def test_a_task_whose_workers_keep_dying_fails_the_search(
        client: TestClient, cancer_id: str, settings: Settings) -> None:
    created = _submit(client, cancer_id, solver="smo", space={"C": [1.0, 2.0]},
                      cv={"folds": 2})
    task = _tasks(settings, created["id"])[0]
    for attempt in range(1, settings.max_attempts + 1):
        with session_scope(settings.database_url) as session:
            assert searches.claim_task(session, task.id, "doomed") is not None
            session.execute(update(SearchTask).where(SearchTask.id == task.id)
                            .values(heartbeat_at=utcnow() - timedelta(hours=1)))
        sweep(settings)
        del attempt
    body = client.get(f"/v1/searches/{created['id']}").json()
    assert body["status"] == "failed" and "worker was lost" in body["error"]
    assert {t.status for t in _tasks(settings, created["id"])} == {"failed", "cancelled"}


def test_cancel_stops_every_task(client: TestClient, cancer_id: str,
                                 settings: Settings) -> None:
    created = _submit(client, cancer_id, solver="smo", space={"C": [1.0, 2.0, 4.0]})
    first = _tasks(settings, created["id"])[0]
    with session_scope(settings.database_url) as session:  # one task is running
        claim = searches.claim_task(session, first.id, "worker")
    assert claim is not None
    response = client.post(f"/v1/searches/{created['id']}/cancel")
    assert response.status_code == 202 and response.json()["status"] == "cancelled"
    assert {t.status for t in _tasks(settings, created["id"])} == {"cancelled"}
    with session_scope(settings.database_url) as session:  # the running one lost its lease
        assert not searches.holds(session, claim)
    assert _run_all(settings, created["id"]) == ["skipped"] * 5  # a C path per fold
    assert client.post(f"/v1/searches/{created['id']}/cancel").status_code == 409


def test_list_and_events(client: TestClient, cancer_id: str, settings: Settings) -> None:
    created = _submit(client, cancer_id, solver="dcd", space={"C": [0.5, 1.0, 2.0]},
                      cv={"folds": 2})
    listed = client.get("/v1/searches").json()
    assert listed["count"] == 1 and listed["data"][0]["id"] == created["id"]
    assert listed["data"][0]["points"] is None
    _run_all(settings, created["id"])
    events = search_events(client, created["id"])
    points = [e for e in events if e["event"] == "point"]
    assert sorted(e["data"]["index"] for e in points) == [0, 1, 2]
    assert [int(e["id"]) for e in points] == sorted(int(e["id"]) for e in points)
    assert events[-1]["event"] == "status" and events[-1]["data"]["status"] == "succeeded"
    resumed = search_events(client, created["id"], last_event_id=points[0]["id"])
    assert [e["data"]["index"] for e in resumed if e["event"] == "point"] == [
        e["data"]["index"] for e in points[1:]]
    assert client.get(f"/v1/searches/{'f' * 32}").status_code == 404
    assert client.get(f"/v1/searches/{'f' * 32}/events").status_code == 404


def test_idempotent_submission(client: TestClient, cancer_id: str) -> None:
    body = {"dataset_id": cancer_id, "space": {"C": [1.0]}}
    headers = {"Idempotency-Key": "search-1"}
    first = client.post("/v1/searches", json=body, headers=headers)
    again = client.post("/v1/searches", json=body, headers=headers)
    assert first.status_code == again.status_code == 202
    assert first.json()["id"] == again.json()["id"]
    assert client.get("/v1/searches").json()["count"] == 1
    other = client.post("/v1/searches", json={**body, "space": {"C": [2.0]}},
                        headers=headers)
    assert other.status_code == 422


def _cancer(settings: Settings, dataset_id: str) -> tuple[Any, np.ndarray]:
    from app.domain.orm import Dataset

    with session_scope(settings.database_url) as session:
        dataset = session.get(Dataset, dataset_id)
        assert dataset is not None
        return load_dataset(blob_store(settings), dataset.blob_path, dataset.features)
