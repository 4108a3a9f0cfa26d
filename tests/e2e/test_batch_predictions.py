"""Batch predictions through the API and a real worker (POST /v1/predictions): the output
equals the online predict of the same rows in every format, a cancel stops one, and a
worker SIGKILLed halfway is recovered by the sweep with one output.

Real API server and Celery worker processes on the embedded default (SQLite + SQLite
broker). Small blocks (HINGE_PREDICT_BLOCK_ROWS) so that a few thousand rows make many
blocks: the output is assembled from them.
"""

from __future__ import annotations

import csv
import io
import json
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from testkit import bundled
from testkit.crashing_worker import SLOW_PREDICTION_ON
from testkit.datagen import dense
from tests.e2e.hinge_cli import cli_env, hinge_bin_dir
from tests.support import embedded_settings, running_service, wait_for_job
from workers.training import run_job

FAST = {"job_lease_seconds": 2.0, "sweep_interval_seconds": 0.5,
        "requeue_after_seconds": 3.0, "max_attempts": 3}


def _wait(client: httpx.Client, prediction_id: str, timeout: float = 120.0
          ) -> dict[str, Any]:
    return wait_for_job(client.get, prediction_id, timeout, collection="predictions")


def _model(client: httpx.Client, name: str, payload: bytes, params: dict[str, Any],
           solver: str = "smo") -> tuple[str, str]:
    upload = client.post(f"/v1/datasets?name={name}", content=payload)
    assert upload.status_code == 201, upload.text
    dataset_id = upload.json()["id"]
    job = client.post("/v1/jobs", json={"dataset_id": dataset_id, "solver": solver,
                                        "params": params})
    assert job.status_code == 202, job.text
    done = wait_for_job(client.get, job.json()["id"], timeout=180)
    assert done["status"] == "succeeded", done
    return dataset_id, done["model_id"]


def _online(client: httpx.Client, model_id: str, payload: bytes) -> dict[str, Any]:
    answer = client.post(f"/v1/models/{model_id}/predict", content=payload,
                         headers={"Content-Type": "text/plain"})
    assert answer.status_code == 200, answer.text
    return answer.json()


def _npz(client: httpx.Client, prediction_id: str) -> dict[str, np.ndarray]:
    response = client.get(f"/v1/predictions/{prediction_id}/output?format=npz")
    assert response.status_code == 200, response.text
    with np.load(io.BytesIO(response.content), allow_pickle=False) as blob:
        return {name: blob[name] for name in blob.files}


def _assert_equals_online(stored: dict[str, np.ndarray], online: dict[str, Any]) -> None:
    np.testing.assert_array_equal(stored["labels"], online["labels"])
    np.testing.assert_allclose(stored["decision_values"], online["decision_values"],
                               rtol=1e-12, atol=1e-12)
    if online.get("probabilities") is not None:
        np.testing.assert_allclose(stored["probabilities"], online["probabilities"],
                                   rtol=1e-12, atol=1e-12)


def test_a_batch_prediction_equals_the_online_predict_in_every_format(tmp_path: Path
                                                                     ) -> None:
    settings = embedded_settings(tmp_path / "home", predict_block_rows=50)
    payload = bundled.svmlight_bytes("wine")  # 178 rows, 3 classes: 4 blocks
    with running_service(settings, tmp_path) as (client, _workers):
        dataset_id, model_id = _model(client, "wine", payload, {"C": 1.0,
                                                                "probability": True})
        created = client.post("/v1/predictions", json={"model_id": model_id,
                                                       "dataset_id": dataset_id})
        assert created.status_code == 202, created.text
        assert created.json()["status"] == "queued"
        prediction_id = created.json()["id"]
        done = _wait(client, prediction_id)
        assert done["status"] == "succeeded", done
        assert done["rows_done"] == done["rows"] == 178
        online = _online(client, model_id, payload)
        stored = _npz(client, prediction_id)
        assert stored["probabilities"].shape == (178, 3)
        _assert_equals_online(stored, online)

        text = client.get(f"/v1/predictions/{prediction_id}/output?format=csv")
        assert text.status_code == 200 and text.headers["content-type"].startswith("text/csv")
        rows = list(csv.reader(io.StringIO(text.text)))
        width = len(online["decision_values"][0])
        assert rows[0] == ["row", "label", *[f"decision_value_{i}" for i in range(width)],
                           *[f"probability_{c:g}" for c in online["classes"]]]
        table = np.array(rows[1:], dtype=np.float64)
        np.testing.assert_array_equal(table[:, 0], np.arange(178))
        _assert_equals_online({"labels": table[:, 1], "decision_values": table[:, 2:2 + width],
                               "probabilities": table[:, 2 + width:]}, online)

        lines = client.get(f"/v1/predictions/{prediction_id}/output?format=jsonl")
        assert lines.status_code == 200
        parsed = [json.loads(line) for line in lines.text.splitlines()]
        assert [p["row"] for p in parsed] == list(range(178))
        _assert_equals_online({name: np.array([p[key] for p in parsed])
                               for name, key in (("labels", "label"),
                                                 ("decision_values", "decision_values"),
                                                 ("probabilities", "probabilities"))}, online)

        listed = client.get("/v1/predictions").json()
        assert listed["count"] == 1 and listed["data"][0]["id"] == prediction_id
        events = client.get(f"/v1/predictions/{prediction_id}/events")
        assert events.status_code == 200 and "event: status" in events.text
        assert client.post(f"/v1/predictions/{prediction_id}/cancel").status_code == 409

        # the CLI: a second batch run, followed, its CSV written where --out says
        key = client.headers["Authorization"].removeprefix("Bearer ")
        out = tmp_path / "scores.csv"
        ran = subprocess.run(["hinge", "predict", "--model", model_id, "--dataset",
                              dataset_id, "--out", str(out)], capture_output=True, text=True,
                             env=cli_env(str(client.base_url), key, hinge_bin_dir(tmp_path)),
                             timeout=120)
        assert ran.returncode == 0, ran.stderr
        assert "178 rows ->" in ran.stdout
        assert out.read_text() == text.text
        assert client.get("/v1/predictions").json()["count"] == 2


def _rows(n: int) -> bytes:
    X, y = dense(n, n_features=10, seed=3)
    return bundled.dump_svmlight(X, y)


def test_a_queued_batch_prediction_is_cancelled_and_has_no_output(tmp_path: Path) -> None:
    """No worker runs, so the prediction stays queued; its model is trained in this
    process, by the worker's own run_job (one service start, not two)."""
    settings = embedded_settings(tmp_path / "home")
    with running_service(settings, tmp_path, workers=0) as (client, _workers):
        upload = client.post("/v1/datasets?name=dense", content=_rows(200))
        assert upload.status_code == 201, upload.text
        dataset_id = upload.json()["id"]
        job = client.post("/v1/jobs", json={"dataset_id": dataset_id, "solver": "dcd",
                                            "params": {"C": 1.0}})
        assert job.status_code == 202, job.text
        assert run_job(settings, job.json()["id"], "test-worker") == "succeeded"
        model_id = client.get(f"/v1/jobs/{job.json()['id']}").json()["model_id"]
        assert model_id
        created = client.post("/v1/predictions", json={"model_id": model_id,
                                                       "dataset_id": dataset_id,
                                                       "outputs": ["labels"]})
        assert created.status_code == 202, created.text
        prediction_id = created.json()["id"]
        cancel = client.post(f"/v1/predictions/{prediction_id}/cancel")
        assert cancel.status_code == 202, cancel.text
        assert cancel.json()["status"] == "cancelled"
        output = client.get(f"/v1/predictions/{prediction_id}/output")
        assert output.status_code == 409, output.text
        assert client.post(f"/v1/predictions/{prediction_id}/cancel").status_code == 409



def test_a_worker_sigkilled_halfway_is_recovered_with_one_output(tmp_path: Path) -> None:
    settings = embedded_settings(tmp_path / "home", predict_block_rows=50, **FAST)
    payload = _rows(1000)
    with running_service(settings, tmp_path, kill_worker_on="doomed") as (client, workers):
        _dataset_id, model_id = _model(client, "train", payload, {"C": 1.0}, "dcd")
        upload = client.post("/v1/datasets?name=doomed", content=payload)
        assert upload.status_code == 201, upload.text
        created = client.post("/v1/predictions", json={"model_id": model_id,
                                                       "dataset_id": upload.json()["id"]})
        prediction_id = created.json()["id"]
        done = _wait(client, prediction_id, timeout=120)
        log = workers[0].log()
        assert "killing this worker process halfway" in log, log[-4000:]
        assert done["status"] == "succeeded", (done, log[-4000:])
        assert done["attempt"] == 2, done
        _assert_equals_online(_npz(client, prediction_id), _online(client, model_id, payload))
        left = sorted(p.name for p in (settings.home / "predictions").iterdir())
        assert left == [f"{prediction_id}.npz"], left


def test_a_running_batch_prediction_is_cancelled_leaves_no_output_and_frees_the_worker(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # blocks of 10 rows over 2,000 rows, each followed by 50 ms of sleep on the dataset
    # named "slow" (testkit.crashing_worker): the prediction runs ~10 s, long enough to
    # be cancelled while it runs
    monkeypatch.setenv(SLOW_PREDICTION_ON, "slow")
    settings = embedded_settings(tmp_path / "home", predict_block_rows=10)
    with running_service(settings, tmp_path, kill_worker_on="no dataset has this name"
                         ) as (client, _workers):
        dataset_id, model_id = _model(client, "dense", _rows(200), {"C": 1.0}, "dcd")
        upload = client.post("/v1/datasets?name=slow", content=_rows(2000))
        assert upload.status_code == 201, upload.text
        created = client.post("/v1/predictions", json={"model_id": model_id,
                                                       "dataset_id": upload.json()["id"]})
        assert created.status_code == 202, created.text
        prediction_id = created.json()["id"]
        deadline = time.monotonic() + 120
        while True:
            state = client.get(f"/v1/predictions/{prediction_id}").json()
            if state["status"] == "running" and state["rows_done"] > 0:
                break
            assert state["status"] in ("queued", "running"), state
            assert time.monotonic() < deadline, state
            time.sleep(0.02)
        running = client.delete(f"/v1/predictions/{prediction_id}")
        assert running.status_code == 409, running.text
        assert client.post(f"/v1/predictions/{prediction_id}/cancel").status_code == 202
        done = _wait(client, prediction_id)
        assert done["status"] == "cancelled", done
        assert 0 < done["rows_done"] < 2000, done
        assert client.get(f"/v1/predictions/{prediction_id}/output").status_code == 409
        outputs = settings.home / "predictions"
        assert sorted(p.name for p in outputs.iterdir()) == [], "no partial output is kept"
        # the worker is free: the next prediction runs to its end
        again = client.post("/v1/predictions", json={"model_id": model_id,
                                                     "dataset_id": dataset_id,
                                                     "outputs": ["labels"]})
        assert _wait(client, again.json()["id"])["status"] == "succeeded"
        assert sorted(p.name for p in outputs.iterdir()) == [f"{again.json()['id']}.npz"]
        # deleting a prediction removes its output
        assert client.delete(f"/v1/predictions/{again.json()['id']}").status_code == 204
        assert client.get(f"/v1/predictions/{again.json()['id']}").status_code == 404
        assert sorted(p.name for p in outputs.iterdir()) == []
        assert client.delete(f"/v1/predictions/{prediction_id}").status_code == 204
