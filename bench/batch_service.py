"""Batch predictions through a live service (the done-when run of issue 29), used by
bench/batch_predict_bench.py.

A real API server (uvicorn) and Celery worker on the embedded default (SQLite database
and broker, tests' testkit.service.running_service). The worker is the crash tests' app
(testkit.crashing_worker): the production code, plus a SIGKILL halfway through a
prediction of a dataset named "doomed" (first attempt only). On `rows` dense rows (10
features, testkit.datagen.dense) uploaded through POST /v1/datasets (the per-dataset
limits raised for it: HINGE_MAX_DATASET_NNZ 50M, HINGE_MAX_DATASET_BYTES 1 GiB) and a linear model
(dcd, C=1) trained through POST /v1/jobs on 20,000 of them:

1. POST /v1/predictions over all rows, to `succeeded`: rows/s (POST to succeeded), and the
   peak memory of the worker's pool process and of the API process from the POST to the
   end of the output's download (VmHWM reset through /proc/<pid>/clear_refs before the
   POST; RssAnon and RssFile sampled every 50 ms: anonymous memory is the process's own,
   file pages are the mapped dataset, shared and reclaimable);
2. the output, downloaded as .npz, against the in-process `model.predict` of every row
   (labels equal, decision values within 1e-12) and 1,000 rows through POST
   /v1/models/{id}/predict (the online route);
3. the same rows posted through the predict route, 1,000 per request, one client and
   four: rows/s (on min(rows, 200,000) rows);
4. the same prediction on a copy of the dataset named "doomed": the worker SIGKILLs itself
   halfway, the sweep re-queues it, the second attempt finishes; one output file.
"""

from __future__ import annotations

import io
import os
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import numpy as np

STATUS_FIELDS = ("VmHWM", "VmRSS", "RssAnon", "RssFile", "RssShmem")
ROUTE_BATCH = 1000
ROUTE_ROWS = 200_000


def status(pid: int) -> dict[str, int]:
    """/proc/<pid>/status memory figures, bytes."""
    figures = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in STATUS_FIELDS:
            figures[name] = int(value.split()[0]) * 1024
    return figures


class Peaks:
    """The highest RssAnon, RssFile and VmRSS of some processes, sampled in a thread."""

    def __init__(self, pids: dict[str, int]) -> None:
        self.pids = pids
        self.peak: dict[str, dict[str, int]] = {name: {} for name in pids}
        self.before: dict[str, dict[str, int]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Peaks:
        for name, pid in self.pids.items():
            self.before[name] = status(pid)
            Path(f"/proc/{pid}/clear_refs").write_text("5")  # resets VmHWM
        self._thread.start()
        return self

    def _sample(self) -> None:
        for name, pid in self.pids.items():
            try:
                now = status(pid)
            except (FileNotFoundError, ProcessLookupError):
                continue
            for field, value in now.items():
                self.peak[name][field] = max(self.peak[name].get(field, 0), value)

    def _run(self) -> None:
        while not self._stop.is_set():
            self._sample()
            time.sleep(0.05)

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()


def _wait(client: httpx.Client, path: str, timeout: float) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        body = client.get(path).json()
        if body["status"] in ("succeeded", "failed", "cancelled"):
            return body
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path}: {body}")
        time.sleep(0.05)


def _upload(client: httpx.Client, name: str, payload: bytes) -> str:
    response = client.post(f"/v1/datasets?name={name}", content=payload, timeout=600)
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


def _route_rate(base_url: str, headers: dict[str, str], model_id: str,
                bodies: list[bytes], clients: int) -> float:
    def post(chunk: list[bytes]) -> None:
        with httpx.Client(base_url=base_url, headers=headers, timeout=60) as http:
            for body in chunk:
                answer = http.post(f"/v1/models/{model_id}/predict", content=body,
                                   headers={"Content-Type": "text/plain"})
                assert answer.status_code == 200, answer.text
    chunks = [bodies[i::clients] for i in range(clients)]
    started = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        list(pool.map(post, chunks))
    return len(bodies) * ROUTE_BATCH / (time.perf_counter() - started)


def run(rows: int) -> dict[str, Any]:
    from app.domain.services.models import servable_model
    from app.infra.db import read_sessionmaker_for
    from solvers.models import predictions as model_predictions
    from testkit import bundled
    from testkit.datagen import dense
    from testkit.service import child_pids, embedded_settings, running_service

    X, y = dense(rows, n_features=10, seed=7)
    payload = bundled.dump_svmlight(X, y)
    lines = payload.splitlines(keepends=True)
    facts: dict[str, Any] = {"rows": rows, "upload_mib": len(payload) / 2**20}
    with tempfile.TemporaryDirectory() as tmp:
        settings = embedded_settings(Path(tmp) / "home", job_lease_seconds=3.0,
                                     sweep_interval_seconds=0.5, requeue_after_seconds=5.0,
                                     max_attempts=3, rate_per_second=0.0)
        # the per-dataset limits, raised for a 1M-row upload (the service processes
        # inherit this environment)
        os.environ["HINGE_MAX_DATASET_NNZ"] = "50000000"
        os.environ["HINGE_MAX_DATASET_BYTES"] = str(1 << 30)
        with running_service(settings, Path(tmp), kill_worker_on="doomed") as (client,
                                                                               workers):
            train_id = _upload(client, "train", b"".join(lines[:20_000]))
            job = client.post("/v1/jobs", json={"dataset_id": train_id, "solver": "dcd",
                                                "params": {"C": 1.0}})
            model_id = _wait(client, f"/v1/jobs/{job.json()['id']}", 300)["model_id"]
            dataset_id = _upload(client, "large", payload)
            doomed_id = _upload(client, "doomed", payload)
            api_pid = _api_pid(workers)
            pool = child_pids(workers[0].process.pid)[0]
            with Peaks({"worker": pool, "api": api_pid}) as peaks:
                started = time.perf_counter()
                created = client.post("/v1/predictions", json={
                    "model_id": model_id, "dataset_id": dataset_id,
                    "outputs": ["labels", "decision_values"]})
                done = _wait(client, f"/v1/predictions/{created.json()['id']}", 1800)
                facts["batch_seconds"] = time.perf_counter() - started
                assert done["status"] == "succeeded", done
                download_started = time.perf_counter()
                response = client.get(f"/v1/predictions/{done['id']}/output?format=npz",
                                      timeout=600)
                facts["download_seconds"] = time.perf_counter() - download_started
                assert response.status_code == 200, response.text
            facts["peaks"] = peaks.peak
            facts["before"] = peaks.before
            facts["vmhwm"] = {"worker": status(pool)["VmHWM"], "api": status(api_pid)["VmHWM"]}
            with np.load(io.BytesIO(response.content), allow_pickle=False) as blob:
                output = {name: blob[name] for name in blob.files}
            with read_sessionmaker_for(settings.database_url)() as session:
                model = servable_model(session, settings, model_id)
            model.predict(X[:1000])
            started = time.perf_counter()
            model.predict(X)
            facts["in_process_rows_per_s"] = rows / (time.perf_counter() - started)
            labels, values, _probabilities = model_predictions(model, X)
            facts["labels_equal"] = bool(np.array_equal(output["labels"], labels))
            facts["max_value_diff"] = float(np.max(np.abs(
                output["decision_values"] - np.asarray(values).reshape(
                    output["decision_values"].shape))))
            rng = np.random.default_rng(0)
            sample = np.sort(rng.choice(rows, size=1000, replace=False))
            online = client.post(f"/v1/models/{model_id}/predict",
                                 content=b"".join(lines[i] for i in sample),
                                 headers={"Content-Type": "text/plain"}).json()
            facts["online_sample_equal"] = bool(
                np.array_equal(np.asarray(online["labels"]), output["labels"][sample])
                and np.allclose(np.asarray(online["decision_values"]),
                                output["decision_values"][sample], rtol=0, atol=1e-12))
            count = min(rows, ROUTE_ROWS) // ROUTE_BATCH
            bodies = [b"".join(lines[i * ROUTE_BATCH:(i + 1) * ROUTE_BATCH])
                      for i in range(count)]
            headers = dict(client.headers)
            base = str(client.base_url)
            facts["route_rows_per_s"] = {clients: _route_rate(base, headers, model_id,
                                                              bodies, clients)
                                         for clients in (1, 4)}
            killed = client.post("/v1/predictions", json={
                "model_id": model_id, "dataset_id": doomed_id,
                "outputs": ["labels", "decision_values"]})
            recovered = _wait(client, f"/v1/predictions/{killed.json()['id']}", 1800)
            log = workers[0].log()
            facts["killed"] = "killing this worker process halfway" in log
            facts["recovered"] = recovered
            again = client.get(f"/v1/predictions/{recovered['id']}/output?format=npz",
                               timeout=600)
            with np.load(io.BytesIO(again.content), allow_pickle=False) as blob:
                facts["recovered_equal"] = bool(
                    np.array_equal(blob["labels"], output["labels"])
                    and np.array_equal(blob["decision_values"], output["decision_values"]))
            facts["output_files"] = sorted(p.name for p in
                                           (settings.home / "predictions").iterdir())
            facts["dataset_mib"] = (X.data.nbytes + X.indices.nbytes
                                    + X.indptr.nbytes) / 2**20
    return facts


def _api_pid(workers: list[Any]) -> int:
    """The uvicorn process: the child of this process that is not a worker."""
    import os

    from testkit.service import child_pids

    mine = {w.process.pid for w in workers}
    for pid in child_pids(os.getpid()):
        if pid not in mine and "uvicorn" in Path(f"/proc/{pid}/cmdline").read_text():
            return pid
    raise RuntimeError("no API process")
