"""Two real API processes on one database and one broker: both serve a model from their
own cache with identical answers, and a delete (or a key revocation) through one of them
reaches the other's cache: through the bus on Redis and RabbitMQ (the backstops turned
off, so only the bus can do it), through the one-second backstops on the embedded broker.
The two processes serve the module's tests on one broker; each test is a tenant of its own.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator

import httpx
import pytest

from app.settings import Settings
from tests.support import (
    BROKERS,
    bearer,
    broker_url_for,
    drop_queue,
    embedded_settings,
    make_key,
    migrate,
    start_api,
)
from workers.training import run_job

ROWS = "1:0.7 2:1 3:1 5:-0.2\n1:-0.2 3:0.1 9:1 10:-0.5 13:0.3\n"


@pytest.fixture(scope="module", params=BROKERS)
def api_processes(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
                  ) -> Iterator[tuple[Settings, str, str]]:
    """Two API processes on one database and `request.param`'s broker: the settings and
    the two base URLs."""
    broker_url = broker_url_for(request.param)
    backstops = ({} if request.param == "sqla" else
                 {"model_cache_check_seconds": 1e6, "key_cache_seconds": 1e6})
    log_dir = tmp_path_factory.mktemp(f"two-apis-{request.param}")
    settings = embedded_settings(log_dir / "home", broker_url=broker_url,
                                 sweep_interval_seconds=1e6, rate_per_second=0, **backstops)
    settings.ensure_dirs()
    migrate(settings.database_url)
    first, first_base = start_api(settings, log_dir)
    try:
        second, second_base = start_api(settings, log_dir)
        try:
            yield settings, first_base, second_base
        finally:
            second.stop()
    finally:
        first.stop()
        drop_queue(settings.broker_url, settings.queue)


@pytest.fixture
def two_apis(api_processes: tuple[Settings, str, str]
             ) -> Iterator[tuple[Settings, str, httpx.Client, httpx.Client]]:
    """The settings, an admin key of a new tenant, and a client of each API process."""
    settings, first_base, second_base = api_processes
    key = make_key(settings, tenant=f"t-{uuid.uuid4().hex[:12]}")
    with httpx.Client(base_url=first_base, headers=bearer(key), timeout=30) as one, \
            httpx.Client(base_url=second_base, headers=bearer(key), timeout=30) as two:
        yield settings, key, one, two


def _eventually(check: Callable[[], bool], timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.05)
    return False


def _predict(client: httpx.Client, model_id: str, **headers: str) -> httpx.Response:
    return client.post(f"/v1/models/{model_id}/predict", content=ROWS,
                       headers={"Content-Type": "text/plain", **headers})


def test_a_model_deleted_through_one_api_process_is_gone_from_the_other(
    two_apis: tuple[Settings, str, httpx.Client, httpx.Client], cancer_bytes: bytes
) -> None:
    settings, _key, one, two = two_apis
    uploaded = one.post("/v1/datasets?name=cancer", content=cancer_bytes)
    assert uploaded.status_code == 201, uploaded.text
    submitted = one.post("/v1/jobs", json={"dataset_id": uploaded.json()["id"], "solver": "dcd",
                                           "params": {"eps": 0.01}})
    assert submitted.status_code == 202, submitted.text
    job = submitted.json()
    assert run_job(settings, job["id"], "test-worker") == "succeeded"
    model_id = one.get(f"/v1/jobs/{job['id']}").json()["model_id"]
    answers = [_predict(client, model_id) for client in (one, two, one, two)]
    assert {a.status_code for a in answers} == {200}
    assert answers[0].json() == answers[1].json() == answers[2].json()  # cached = stored
    assert answers[0].headers["x-content-type-options"] == "nosniff"  # headers stay

    assert two.delete(f"/v1/models/{model_id}").status_code == 204
    assert _eventually(lambda: _predict(one, model_id).status_code == 404)
    assert _predict(two, model_id).status_code == 404


def test_a_key_revoked_through_one_api_process_stops_working_on_the_other(
    two_apis: tuple[Settings, str, httpx.Client, httpx.Client]
) -> None:
    settings, _key, one, two = two_apis
    reader = make_key(settings, scopes=("read",))
    assert one.get("/v1/models", headers=bearer(reader)).status_code == 200  # verified
    key_id = reader[3:15]
    assert two.post(f"/v1/admin/keys/{key_id}/revoke").status_code == 200
    assert two.get("/v1/models", headers=bearer(reader)).status_code == 401
    assert _eventually(lambda: one.get("/v1/models", headers=bearer(reader)
                                       ).status_code == 401)


def test_an_alias_moved_through_one_api_process_is_followed_by_both_under_load(
    two_apis: tuple[Settings, str, httpx.Client, httpx.Client], cancer_bytes: bytes
) -> None:
    """Predicts of `cancer@production` hammer both processes while the alias is promoted,
    rolled back and promoted again through either: no answer but 200, each names a version
    the alias held, and after the last move both answer by the new version (through the
    bus alone on Redis and RabbitMQ)."""
    settings, _key, one, two = two_apis
    dataset_id = one.post("/v1/datasets?name=cancer", content=cancer_bytes).json()["id"]
    model_ids = []
    for C in (0.01, 10.0):
        job = one.post("/v1/jobs", json={"dataset_id": dataset_id, "solver": "dcd",
                                         "params": {"C": C, "eps": 0.01}}).json()
        assert run_job(settings, job["id"], "test-worker") == "succeeded"
        model_ids.append(one.get(f"/v1/jobs/{job['id']}").json()["model_id"])
    assert one.post("/v1/registry/models", json={"name": "cancer"}).status_code == 201
    for model_id in model_ids:
        assert one.post("/v1/registry/models/cancer/versions",
                        json={"model_id": model_id}).status_code == 201
    ref = "cancer@production"

    def promote(client: httpx.Client, version: int) -> None:
        assert client.put("/v1/registry/models/cancer/aliases/production",
                          json={"version": version}).status_code == 200

    promote(one, 1)
    for client in (one, two):  # both resolve and cache version 1
        assert _predict(client, ref).json()["served_by"]["version"] == 1
    answers: list[tuple[int, int | None, str]] = []
    stop = threading.Event()

    def hammer(client: httpx.Client) -> None:
        while not stop.is_set():
            response = _predict(client, ref)
            body = response.json() if response.status_code == 200 else {}
            served = body.get("served_by") or {}
            answers.append((response.status_code, served.get("version"),
                            response.headers.get("Hinge-Model-Version", "")))
            if served and body["model_id"] != model_ids[served["version"] - 1]:
                answers.append((0, None, "a version answered by another's model"))

    threads = [threading.Thread(target=hammer, args=(c,)) for c in (one, two, one, two)]
    for thread in threads:
        thread.start()
    try:
        for client, version in ((two, 2), (one, 1), (two, 2)):
            time.sleep(0.3)
            promote(client, version)
        followed = _eventually(lambda: all(
            _predict(c, ref).json()["served_by"]["version"] == 2 for c in (one, two)))
        time.sleep(0.3)
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    assert followed
    assert len(answers) > 20
    assert {status for status, _, _ in answers} == {200}
    assert {version for _, version, _ in answers} <= {1, 2}
    assert all(header == f"cancer/versions/{v}" for _, v, header in answers)
