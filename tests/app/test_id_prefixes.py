"""Ids the API takes may be unique prefixes (app/api/ids.py on
app.domain.services.owned.resolve_id), looked up among the caller's tenant's rows only; and
a job's answer has one progress fraction, its conflicts read as English.

(The authorization matrix, tests/app/test_authorization_matrix.py, still checks every
route's scope and the 404 for another tenant's whole id in the path.)"""

from __future__ import annotations

from collections import defaultdict

from fastapi.testclient import TestClient
from sqlalchemy import update

from app.domain.job_status import JobStatus
from app.domain.orm import Job
from app.infra.db import session_scope
from app.settings import Settings
from tests.support import bearer
from workers.training import run_job

TINY = b"1 1:1 2:0.5\n-1 1:-1 2:0.25\n1 1:0.8\n-1 2:-1\n"


def _tenant(client: TestClient, name: str) -> dict[str, str]:
    """A new tenant and the header of a train key of it."""
    tenant = client.post("/v1/admin/tenants", json={"name": name})
    assert tenant.status_code == 201, tenant.text
    key = client.post("/v1/admin/keys", json={"tenant_id": tenant.json()["id"],
                                              "scopes": ["train"]})
    assert key.status_code == 201, key.text
    return bearer(key.json()["key"])


def _upload(client: TestClient, headers: dict[str, str] | None = None) -> str:
    answer = client.post("/v1/datasets?name=tiny", content=TINY, headers=headers or {})
    assert answer.status_code == 201, answer.text
    return str(answer.json()["id"])


def test_a_unique_prefix_stands_for_the_whole_id_in_paths_and_bodies(
        client: TestClient, settings: Settings, cancer_id: str, cancer_bytes: bytes) -> None:
    submitted = client.post("/v1/jobs", json={"dataset_id": cancer_id[:10].upper(),
                                              "solver": "dcd"})
    assert submitted.status_code == 202, submitted.text
    job_id = submitted.json()["id"]
    assert submitted.json()["dataset_id"] == cancer_id  # stored whole
    assert run_job(settings, job_id, "test-worker") == "succeeded"

    job = client.get(f"/v1/jobs/{job_id[:8]}")
    assert job.status_code == 200 and job.json()["id"] == job_id
    model_id = job.json()["model_id"]
    assert client.get(f"/v1/datasets/{cancer_id[:6]}").json()["id"] == cancer_id
    assert client.get(f"/v1/models/{model_id[:7].upper()}").json()["id"] == model_id
    exported = client.get(f"/v1/models/{model_id[:8]}/export")
    assert exported.status_code == 200
    assert f'filename="{model_id}.model"' in exported.headers["content-disposition"]
    rows = b"\n".join(cancer_bytes.splitlines()[:2]) + b"\n"
    predicted = client.post(f"/v1/models/{model_id[:8]}/predict", content=rows,
                            headers={"content-type": "text/plain"})
    assert predicted.status_code == 200, predicted.text
    assert predicted.json()["model_id"] == model_id and len(predicted.json()["labels"]) == 2
    with client.stream("GET", f"/v1/jobs/{job_id[:8]}/events") as events:
        assert events.status_code == 200
        assert '"status": "succeeded"' in "".join(events.iter_text())

    evaluated = client.post(f"/v1/models/{model_id[:8]}/evaluations",
                            json={"dataset_id": cancer_id[:8]})
    assert evaluated.status_code in (201, 202), evaluated.text
    evaluation = evaluated.json()
    assert evaluation["model_id"] == model_id and evaluation["dataset_id"] == cancer_id
    listed = client.get(f"/v1/models/{model_id[:8]}/evaluations").json()["data"]
    assert [e["id"] for e in listed] == [evaluation["id"]]
    shown = client.get(f"/v1/models/{model_id[:8]}/evaluations/{evaluation['id'][:8]}")
    assert shown.status_code == 200 and shown.json()["id"] == evaluation["id"]

    # a finished job's cancel: a 409 that reads as English, with the job's whole id
    refused = client.post(f"/v1/jobs/{job_id[:8]}/cancel")
    assert refused.status_code == 409
    assert refused.json()["error"]["message"] == (
        f"job {job_id!r} has already succeeded: only a queued or running job can be "
        "cancelled")
    assert refused.json()["error"]["detail"] == {"status": "succeeded"}


def test_a_prefix_of_nothing_is_not_found_and_in_a_body_invalid(
        client: TestClient, cancer_id: str) -> None:
    other = next(c for c in "0123456789abcdef" if c != cancer_id[0])  # starts no dataset
    for ident in (other, other + "0123", "not-hex", "x" * 31, cancer_id + "0"):
        missing = client.get(f"/v1/datasets/{ident}")
        assert missing.status_code == 404, (ident, missing.text)
        assert missing.json()["error"]["message"] == f"dataset {ident!r} not found"
    refused = client.post("/v1/jobs", json={"dataset_id": other + "0123", "solver": "dcd"})
    assert refused.status_code == 422
    assert refused.json()["error"]["detail"]["field"] == "dataset_id"
    assert refused.json()["error"]["message"] == f"dataset_id: no dataset {other + '0123'!r}"
    assert client.get("/v1/jobs").json()["count"] == 0


def test_an_ambiguous_prefix_lists_the_callers_candidates_only(client: TestClient) -> None:
    by_digit: dict[str, list[str]] = defaultdict(list)
    for _ in range(17):  # 17 ids, 16 first digits: two share one
        ident = _upload(client)
        by_digit[ident[0]].append(ident)
    digit, mine = next((d, ids) for d, ids in by_digit.items() if len(ids) > 1)

    stranger = _tenant(client, "stranger")
    theirs = ""
    for _ in range(400):  # the other tenant's first id on that digit (1 in 16 a try)
        ident = _upload(client, stranger)
        if ident[0] == digit:
            theirs = ident
            break
    assert theirs, "no id of the other tenant starts with the digit"

    ambiguous = client.get(f"/v1/datasets/{digit}")
    assert ambiguous.status_code == 422, ambiguous.text
    error = ambiguous.json()["error"]
    assert error["code"] == "ambiguous_id"
    assert sorted(error["detail"]["candidates"]) == sorted(mine)
    assert error["detail"]["field"] == "dataset_id" and error["detail"]["more"] is False
    assert theirs not in error["message"] and all(i in error["message"] for i in mine)
    assert "give more of the id" in error["message"]
    # nothing is done on an ambiguous prefix
    assert client.delete(f"/v1/datasets/{digit}").status_code == 422
    assert all(client.get(f"/v1/datasets/{i}").status_code == 200 for i in mine)
    in_body = client.post("/v1/jobs", json={"dataset_id": digit, "solver": "dcd"})
    assert in_body.status_code == 422 and in_body.json()["error"]["code"] == "ambiguous_id"

    # the other tenant's own lookups: its one id on that digit, and never the caller's
    for ident in mine:  # (12 digits: another id shares them by a chance of 2**-48)
        assert client.get(f"/v1/datasets/{ident[:12]}", headers=stranger).status_code == 404
    assert client.get(f"/v1/datasets/{theirs[:12]}").status_code == 404  # not the caller's
    unique_for_them = _shortest_unique(theirs, client, stranger)
    found = client.get(f"/v1/datasets/{unique_for_them}", headers=stranger)
    assert found.status_code == 200 and found.json()["id"] == theirs


def _shortest_unique(ident: str, client: TestClient, headers: dict[str, str]) -> str:
    """The shortest prefix of `ident` that no other dataset of the tenant shares."""
    others = [d["id"] for d in client.get("/v1/datasets?limit=1000", headers=headers)
              .json()["data"] if d["id"] != ident]
    for length in range(1, 33):
        if not any(o.startswith(ident[:length]) for o in others):
            return ident[:length]
    return ident


def test_a_jobs_answer_has_one_progress_fraction_in_every_state(
        client: TestClient, settings: Settings, cancer_id: str) -> None:
    queued = client.post("/v1/jobs", json={"dataset_id": cancer_id, "solver": "dcd"}).json()
    assert queued["progress"] is None and queued["progress_fraction"] is None

    # running: the stored latest event's fraction, once, as progress_fraction
    event = {"iteration": 512, "gap": 0.25, "fraction": 0.4}
    _store(settings, queued["id"], status=JobStatus.RUNNING, progress=event)
    running = client.get(f"/v1/jobs/{queued['id'][:8]}").json()
    assert running["progress_fraction"] == 0.4
    assert running["progress"] == {"iteration": 512, "gap": 0.25}

    # the worker's run: whatever its last event said (the issue saw 0.0), a converged
    # job's one fraction is 1.0, and its progress has none
    _store(settings, queued["id"], status=JobStatus.QUEUED, progress=None)
    assert run_job(settings, queued["id"], "test-worker") == "succeeded"
    _store(settings, queued["id"], progress={"iteration": 3, "fraction": 0.0})
    done = client.get(f"/v1/jobs/{queued['id']}").json()
    assert done["result"]["converged"] is True
    assert done["progress"] == {"iteration": 3} and done["progress_fraction"] == 1.0
    listed = next(j for j in client.get("/v1/jobs").json()["data"] if j["id"] == queued["id"])
    assert listed["progress"] == {"iteration": 3} and listed["progress_fraction"] == 1.0

    # stopped short of convergence (pegasos has no certificate): its last event's fraction
    stopped = client.post("/v1/jobs", json={"dataset_id": cancer_id,
                                            "solver": "pegasos"}).json()
    assert run_job(settings, stopped["id"], "test-worker") == "succeeded"
    _store(settings, stopped["id"], progress={"iteration": 9, "fraction": 0.75})
    job = client.get(f"/v1/jobs/{stopped['id']}").json()
    assert job["result"]["converged"] is False
    assert job["progress"] == {"iteration": 9} and job["progress_fraction"] == 0.75

    # cancelled while running: where it stopped
    _store(settings, stopped["id"], status=JobStatus.CANCELLED,
           progress={"iteration": 1, "fraction": 0.125})
    cancelled = client.get(f"/v1/jobs/{stopped['id']}").json()
    assert cancelled["progress"] == {"iteration": 1} and cancelled["progress_fraction"] == 0.125
    refused = client.post(f"/v1/jobs/{stopped['id']}/cancel")
    assert refused.status_code == 409 and refused.json()["error"]["message"].startswith(
        f"job {stopped['id']!r} was already cancelled: ")


def _store(settings: Settings, job_id: str, **values: object) -> None:
    """Set columns of the job's row, as a worker would have left them."""
    with session_scope(settings.database_url) as session:
        session.execute(update(Job).where(Job.id == job_id).values(**values))


def test_a_search_is_found_and_cancelled_by_a_prefix(client: TestClient, cancer_id: str
                                                     ) -> None:
    created = client.post("/v1/searches", json={
        "dataset_id": cancer_id[:8], "solver": "smo", "space": {"C": [1.0, 2.0]},
        "cv": {"dataset_id": cancer_id[:9]}})
    assert created.status_code == 202, created.text
    search = created.json()
    assert search["dataset_id"] == cancer_id and search["holdout_dataset_id"] == cancer_id
    shown = client.get(f"/v1/searches/{search['id'][:8]}")
    assert shown.status_code == 200 and shown.json()["id"] == search["id"]
    cancelled = client.post(f"/v1/searches/{search['id'][:8]}/cancel")
    assert cancelled.status_code == 202 and cancelled.json()["status"] == "cancelled"
    again = client.post(f"/v1/searches/{search['id'][:8]}/cancel")
    assert again.status_code == 409
    assert again.json()["error"]["message"] == (
        f"search {search['id']!r} was already cancelled: only a queued or running search "
        "can be cancelled")
    with client.stream("GET", f"/v1/searches/{search['id'][:8]}/events") as events:
        assert events.status_code == 200
        assert '"status": "cancelled"' in "".join(events.iter_text())
    unknown = client.post("/v1/searches", json={
        "dataset_id": cancer_id, "space": {"C": [1.0]}, "cv": {"dataset_id": "zz"}})
    assert unknown.status_code == 422
    assert unknown.json()["error"]["detail"]["field"] == "cv.dataset_id"
