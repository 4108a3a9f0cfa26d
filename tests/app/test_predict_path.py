"""The predict path: vectorised row parsing equals the row-by-row check, a model and a key
are read without SQLite's write lock (a cache miss while a writer holds it still answers),
metrics and security headers stay on every answer, and HINGE_API_WORKERS reaches uvicorn.
"""

from __future__ import annotations

import sqlite3
import threading

import numpy as np
import pytest
from fastapi.testclient import TestClient

from app.domain.predict import _rows_one_by_one, linear_few_rows, rows_from_instances
from app.domain.schemas import Instance
from app.domain.services import models as model_service
from app.domain.services import tenants
from app.run import api_command
from app.settings import Settings
from tests.support import bearer, make_key
from workers.training import run_job


def _random_instances(rng: np.random.Generator, rows: int, n_features: int
                      ) -> list[Instance]:
    made = []
    for _ in range(rows):
        width = int(rng.integers(0, 8))
        indices = [int(i) for i in rng.integers(1, n_features + 6, size=width)]  # some
        values = [float(v) for v in rng.normal(size=width)]  # beyond, some repeated
        made.append(Instance(indices=indices, values=values))
    return made


def test_vectorised_rows_equal_the_row_by_row_parse() -> None:
    rng = np.random.default_rng(7)
    for rows in (0, 1, 2, 5, 40):
        for _ in range(20):
            instances = _random_instances(rng, rows, n_features=10)
            fast = rows_from_instances(instances, 10, 1000)
            slow = _rows_one_by_one(instances, 10)
            assert fast.shape == slow.shape
            assert np.array_equal(fast.toarray(), slow.toarray())
    huge = [Instance(indices=[2**70, 3], values=[1.0, 2.0])]  # beyond int64: dropped
    assert rows_from_instances(huge, 10, 10).toarray()[0, 2] == 2.0


@pytest.mark.parametrize(("instances", "message"), [
    ([Instance(indices=[1], values=[1.0]), Instance(indices=[1, 2], values=[1.0])],
     "instances[1]: 2 indices but 1 values"),
    ([Instance(indices=[1, 0], values=[1.0, 1.0])], "instances[0]: feature index 0 < 1"),
    ([Instance(indices=[3], values=[float("inf")])], "instances[0]: value inf for feature 3"),
])
def test_refused_rows_name_the_row_and_value(instances: list[Instance], message: str
                                             ) -> None:
    with pytest.raises(Exception, match=message.replace("[", r"\[").replace("]", r"\]")):
        rows_from_instances(instances, 10, 10)


def test_predict_and_key_reads_never_wait_for_the_sqlite_write_lock(
    client: TestClient, settings: Settings, cancer_id: str
) -> None:
    job = client.post("/v1/jobs", json={"dataset_id": cancer_id, "solver": "dcd"}).json()
    assert run_job(settings, job["id"], "test-worker") == "succeeded"
    model_id = client.get(f"/v1/jobs/{job['id']}").json()["model_id"]
    reader = make_key(settings, scopes=("read",))  # never verified by this process yet
    model_service.forget_model(model_id)  # a cache miss: the model is read from the file
    tenants.verified_keys.clear()
    writer = sqlite3.connect(settings.database_url.removeprefix("sqlite:///"),
                             isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")  # another process writing, and taking its time
    answers: list[int] = []
    try:
        request = threading.Thread(target=lambda: answers.append(client.post(
            f"/v1/models/{model_id}/predict", content="1:0.5 3:-1\n",
            headers={"Content-Type": "text/plain", **bearer(reader)}).status_code))
        request.start()
        request.join(timeout=10)  # a read that took the write lock would wait 30 s
        assert answers == [200]
    finally:
        writer.execute("ROLLBACK")
        writer.close()
    assert model_service.cached_model(tenants.verified_keys.get(reader).tenant_id,
                                      model_id) is not None


def test_predict_is_counted_in_the_metrics_and_carries_the_security_headers(
    client: TestClient, settings: Settings, cancer_id: str
) -> None:
    job = client.post("/v1/jobs", json={"dataset_id": cancer_id, "solver": "dcd"}).json()
    assert run_job(settings, job["id"], "test-worker") == "succeeded"
    model_id = client.get(f"/v1/jobs/{job['id']}").json()["model_id"]
    answer = client.post(f"/v1/models/{model_id}/predict",
                         json={"instances": [{"indices": [1], "values": [0.5]}]})
    assert answer.status_code == 200 and answer.headers["content-type"] == "application/json"
    assert answer.headers["x-content-type-options"] == "nosniff"
    assert answer.headers["content-security-policy"].startswith("default-src 'none'")
    assert set(answer.json()) == {"model_id", "task", "labels", "decision_values", "classes",
                                  "probabilities", "sigma", "warnings"}
    metrics = client.get("/metrics").text
    assert ('hinge_http_requests_total{method="POST",route="/v1/models/{model_id}/predict",'
            'status="200"}') in metrics
    assert client.get("/v1/nothing-here").status_code == 404
    assert 'route="unmatched",status="404"' in client.get("/metrics").text


def test_api_workers_run_that_many_uvicorn_processes() -> None:
    assert "--workers" not in api_command(Settings(api_workers=1))
    command = api_command(Settings(api_workers=3))
    assert command[command.index("--workers") + 1] == "3"


def test_the_api_writes_an_access_log_only_when_asked() -> None:
    assert "--no-access-log" in api_command(Settings())
    assert "--no-access-log" not in api_command(Settings(access_log=True))


@pytest.mark.parametrize("steps", [0, 3])
def test_make_run_starts_its_worker_that_much_nicer(steps: int) -> None:
    import os
    import subprocess
    import sys

    from app.run import worker_priority

    child = subprocess.run([sys.executable, "-c", "import os; print(os.nice(0))"],
                           capture_output=True, text=True, check=True,
                           preexec_fn=worker_priority(Settings(worker_nice=steps)))
    assert int(child.stdout) == min(19, os.nice(0) + steps)
    assert Settings().worker_nice == 10


def test_predict_takes_the_bearer_scheme_in_any_case_and_refuses_anything_else(
    client: TestClient, settings: Settings, cancer_model_id: str
) -> None:
    """The predict route reads its key without FastAPI's dependency solver (PredictRoute):
    the same answers as every other route for each kind of Authorization header."""
    url = f"/v1/models/{cancer_model_id}/predict"
    body = {"instances": [{"indices": [1], "values": [0.5]}]}
    reader = make_key(settings, scopes=("read",))
    for header, status in ((f"bearer {reader}", 200), (f"BEARER  {reader} ", 200),
                           (f"Basic {reader}", 401), ("Bearer", 401), ("Bearer ", 401),
                           (f"Bearer {reader}x", 401)):
        answer = client.post(url, json=body, headers={"Authorization": header})
        assert answer.status_code == status, (header, answer.text)
        if status == 401:
            assert answer.headers["www-authenticate"] == "Bearer"
    missing = client.post(f"/v1/models/{'0' * 32}/predict", json=body,
                          headers=bearer(reader))
    assert missing.status_code == 404


def test_every_predict_is_counted_once(client: TestClient, cancer_model_id: str) -> None:
    """The request series are kept per (method, route, status), not looked up each time:
    each answer still adds one."""
    url = f"/v1/models/{cancer_model_id}/predict"
    line = ('hinge_http_requests_total{method="POST",route="/v1/models/{model_id}/predict",'
            'status="200"} ')

    def count() -> float:
        found = [row for row in client.get("/metrics").text.splitlines()
                 if row.startswith(line)]
        return float(found[0].removeprefix(line)) if found else 0.0

    before = count()
    for _ in range(3):
        assert client.post(url, json={"instances": [{"indices": [1], "values": [0.5]}]}
                           ).status_code == 200
    assert count() == before + 3


@pytest.mark.parametrize("outputs", [1, 3])
def test_few_rows_on_a_linear_model_equal_the_sparse_product_bit_for_bit(outputs: int
                                                                          ) -> None:
    from solvers.models import LinearModel

    rng = np.random.default_rng(outputs)
    n_features = 12
    classes = np.arange(max(2, outputs), dtype=np.float64)
    for _ in range(200):
        model = LinearModel(coef=rng.normal(size=(outputs, n_features)) * 10.0 ** float(
            rng.integers(-3, 4)), intercept=rng.normal(size=outputs), classes=classes)
        instances = _random_instances(rng, int(rng.integers(1, 17)), n_features)
        few = linear_few_rows(model, instances)
        assert few is not None
        labels, values = model.predict(rows_from_instances(instances, n_features, 100))
        assert np.array_equal(few[0], labels)
        assert few[1].shape == values.shape and few[1].tobytes() == values.tobytes()
    many = _random_instances(rng, 17, n_features)
    assert linear_few_rows(model, many) is None  # more rows: the sparse product


def test_the_app_freezes_the_collector_only_while_it_runs(settings: Settings) -> None:
    """Start-up moves what exists out of the collector's sight (gc.freeze: no long full
    collections under predict); shutdown gives it back, or a process that runs one app
    after another (the test processes) would never collect what each left in cycles:
    sockets, database connections, file descriptors."""
    import gc

    from app.api.main import create_app

    gc.unfreeze()
    assert gc.get_freeze_count() == 0
    with TestClient(create_app(settings)) as client:
        assert client.get("/healthz").status_code == 200
        assert gc.get_freeze_count() > 0
    assert gc.get_freeze_count() == 0
