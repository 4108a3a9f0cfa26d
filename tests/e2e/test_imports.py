"""Imports on real processes: an API server, Celery workers (the production app, or the
crash tests' testkit.crashing_worker), the SQLite database and broker, and the tests'
moto S3 server (parts in a bucket of their own, the blob store on the same server).

- S3 parts import side by side on two workers into a dataset with the files' rows and
  non-zeros; its progress streams on /v1/imports/{id}/events; a dcd job trains on it;
- a worker SIGKILLed after its first part: the sweep's second attempt resumes at the
  next part (the first is not parsed again) and the dataset is whole;
- a running import cancelled with DELETE: cancelled, no dataset, no shard left;
- the values' layout (`dtype`) on S3 across two workers: float32 asked stores 8 bytes a
  non-zero, rounded; auto is float32 only when every part's values are, else every shard
  of every part is float64; `hinge import --dtype float32`.
"""

from __future__ import annotations

import gzip
import io
import json
import subprocess
import time
from pathlib import Path
from typing import Any

import boto3
import httpx
import numpy as np
import pytest

from solvers.svmlight import dump_svmlight, load_svmlight
from testkit import datagen
from testkit.crashing_worker import SLOW_IMPORT_ON
from testkit.service import S3_TEST_KEY
from tests.e2e.hinge_cli import cli_env, hinge_bin_dir
from tests.support import embedded_settings, read_sse, running_service, s3_overrides

FAST = {"job_lease_seconds": 2.0, "sweep_interval_seconds": 0.5,
        "requeue_after_seconds": 3.0, "max_attempts": 3, "import_shard_text_bytes": 8192,
        "progress_interval_seconds": 0.0}


def _parts(directory: Path, n_parts: int, rows: int = 150, seed: int = 11,
           float32_parts: tuple[int, ...] = ()) -> list[Path]:
    """Part files of a text-like set, the values with 6 decimals (none a float32) but in
    `float32_parts`, whose values are exactly float32."""
    X, y = datagen.text_like(rows * n_parts, 600, seed=seed, nnz_per_row=15)
    X.data = np.maximum(np.round(X.data, 6), 1e-6)
    exact = np.isin(np.repeat(np.arange(X.shape[0]) // rows, np.diff(X.indptr)),
                    float32_parts)
    X.data[exact] = X.data[exact].astype(np.float32).astype(np.float64)
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(n_parts):
        path = directory / f"part-{i:03d}.svm"
        dump_svmlight(X[i * rows:(i + 1) * rows], y[i * rows:(i + 1) * rows], path)
        paths.append(path)
    return paths


def _counts(paths: list[Path]) -> tuple[int, int]:
    files = [load_svmlight(p) for p in paths]
    return sum(f.n_samples for f in files), sum(f.nnz for f in files)


def _wait(client: httpx.Client, import_id: str, timeout: float = 120.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        body = client.get(f"/v1/imports/{import_id}").json()
        if body["status"] in ("succeeded", "failed", "cancelled"):
            return body
        assert time.monotonic() < deadline, body
        time.sleep(0.1)


def _s3(endpoint: str) -> Any:
    return boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                        aws_access_key_id=S3_TEST_KEY[0],
                        aws_secret_access_key=S3_TEST_KEY[1])


def _keys(client: Any, bucket: str, prefix: str) -> list[str]:
    found = client.list_objects_v2(Bucket=bucket, Prefix=prefix).get("Contents", [])
    return [item["Key"] for item in found]


@pytest.mark.s3
def test_s3_parts_import_side_by_side_train_and_keep_the_layout_asked(
        tmp_path: Path, s3_endpoint: str) -> None:
    overrides = s3_overrides(s3_endpoint)
    settings = embedded_settings(tmp_path / "home", **overrides, **FAST)
    paths = _parts(tmp_path / "parts", 4)
    s3 = _s3(s3_endpoint)
    s3.create_bucket(Bucket="corpus")
    for i, path in enumerate(paths):  # two of them gzipped
        data = path.read_bytes()
        s3.put_object(Bucket="corpus", Key=f"sets/yk/{path.name}{'.gz' if i % 2 else ''}",
                      Body=gzip.compress(data) if i % 2 else data)
    s3.put_object(Bucket="corpus", Key="sets/other.svm", Body=b"1 1:1\n")
    rows, nnz = _counts(paths)
    with running_service(settings, tmp_path, workers=2) as (client, workers):
        created = client.post("/v1/imports", json={"source": "s3://corpus/sets/yk/part-*",
                                                   "name": "yk"})
        assert created.status_code == 202, created.text
        import_id = created.json()["id"]
        assert created.json()["parts_total"] == 4
        with client.stream("GET", f"/v1/imports/{import_id}/events", timeout=120) as events:
            stream = read_sse(events)
        assert stream[-1]["event"] == "status", stream
        final = stream[-1]["data"]
        assert final["status"] == "succeeded", final
        assert final["rows_done"] == rows and final["nnz_done"] == nnz
        assert final["parts_done"] == 4 and final["bytes_done"] == final["bytes_total"]
        dataset = client.get(f"/v1/datasets/{final['dataset_id']}").json()
        assert (dataset["rows"], dataset["nnz"]) == (rows, nnz)
        shard_keys = _keys(s3, overrides["s3_bucket"], f"datasets/{final['dataset_id']}/")
        assert len(shard_keys) > 4 and all("/p0000" in k for k in shard_keys)
        logs = "".join(w.log() for w in workers)
        assert logs.count(f"import {import_id} part ") == 4, logs[-3000:]
        job = client.post("/v1/jobs", json={"dataset_id": final["dataset_id"],
                                            "solver": "dcd", "params": {"C": 1.0}})
        assert job.status_code == 202, job.text
        deadline = time.monotonic() + 120
        while (state := client.get(f"/v1/jobs/{job.json()['id']}").json())["status"] not in (
                "succeeded", "failed"):
            assert time.monotonic() < deadline, state
            time.sleep(0.2)
        assert state["status"] == "succeeded", state
        assert state["result"]["converged"] is True, state["result"]
        # it trained on every row: its training accuracy is its accuracy on all the parts
        text = b"".join(p.read_bytes() for p in paths)
        predicted = client.post(f"/v1/models/{state['model_id']}/predict", content=text,
                                headers={"content-type": "text/plain"})
        assert predicted.status_code == 200, predicted.text
        labels = np.asarray(predicted.json()["labels"])
        truth = np.concatenate([load_svmlight(p).y for p in paths])
        assert labels.shape == truth.shape == (rows,)
        assert state["result"]["train_accuracy"] == pytest.approx(
            float(np.mean(labels == truth)), abs=1e-12)
        # the same service, its two workers: imports that store the value layout asked
        _layouts_asked(client, s3, overrides["s3_bucket"], tmp_path)


def test_a_worker_sigkilled_mid_import_resumes_at_a_part_boundary(tmp_path: Path) -> None:
    roots = tmp_path / "roots"
    paths = _parts(roots / "set", 3, seed=12)
    rows, nnz = _counts(paths)
    settings = embedded_settings(tmp_path / "home", import_roots=[str(roots)],
                                 import_helpers=0, **FAST)
    with running_service(settings, tmp_path, kill_worker_on="doomed") as (client, workers):
        created = client.post("/v1/imports", json={"source": f"file://{roots}/set/*.svm",
                                                   "name": "doomed"})
        import_id = created.json()["id"]
        done = _wait(client, import_id)
        log = workers[0].log()
        assert "killing this worker process after part 0" in log, log[-4000:]
        assert done["status"] == "succeeded", (done, log[-4000:])
        assert done["attempt"] == 2, done
        assert (done["rows_done"], done["nnz_done"]) == (rows, nnz)
        # part 0 was parsed once, by the killed attempt; the second went on from part 1
        assert log.count(f"import {import_id} part 0:") == 1, log[-4000:]
        assert log.count(f"import {import_id} part 1:") == 1
        dataset = client.get(f"/v1/datasets/{done['dataset_id']}").json()
        assert (dataset["rows"], dataset["nnz"]) == (rows, nnz)


def test_a_running_import_is_cancelled_and_leaves_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SLOW_IMPORT_ON, "slow")  # 0.5 s before each part
    roots = tmp_path / "roots"
    _parts(roots / "set", 12, rows=40, seed=13)
    settings = embedded_settings(tmp_path / "home", import_roots=[str(roots)],
                                 import_helpers=0, **FAST)
    with running_service(settings, tmp_path, kill_worker_on="no import has this name"
                         ) as (client, _workers):
        import_id = client.post("/v1/imports", json={"source": f"file://{roots}/set/*",
                                                     "name": "slow"}).json()["id"]
        deadline = time.monotonic() + 60
        while (state := client.get(f"/v1/imports/{import_id}").json())["parts_done"] < 1:
            assert state["status"] in ("queued", "running") and time.monotonic() < deadline
            time.sleep(0.05)
        cancel = client.delete(f"/v1/imports/{import_id}")
        assert cancel.status_code == 202, cancel.text
        done = _wait(client, import_id)
        assert done["status"] == "cancelled" and done["dataset_id"] is None, done
        assert done["parts_done"] < 12
        assert client.get("/v1/datasets").json()["count"] == 0
        left = [p for p in (settings.home / "datasets").rglob("*") if p.is_file()]
        assert left == []
        # the command line: `hinge import` follows another import to its dataset
        paths = _parts(roots / "cli", 2, seed=14)
        rows, nnz = _counts(paths)
        bin_dir = hinge_bin_dir(tmp_path)
        ran = subprocess.run(["hinge", "import", f"file://{roots}/cli/part-*", "--name",
                               "from-cli", "--dtype", "float32", "--json"],
                              capture_output=True, text=True,
                              timeout=120, env=cli_env(str(client.base_url),
                                                       client.headers["Authorization"]
                                                       .removeprefix("Bearer "), bin_dir))
        assert ran.returncode == 0, ran.stderr
        answer = json.loads(ran.stdout)
        assert answer["status"] == "succeeded" and answer["dataset"]["name"] == "from-cli"
        assert answer["dtype"] == answer["dataset"]["value_dtype"] == "float32"
        assert (answer["dataset"]["rows"], answer["dataset"]["nnz"]) == (rows, nnz)
        outside = subprocess.run(["hinge", "import", "file:///etc/hostname"],
                                 capture_output=True, text=True, timeout=60,
                                 env=cli_env(str(client.base_url),
                                             client.headers["Authorization"]
                                             .removeprefix("Bearer "), bin_dir))
        assert outside.returncode == 1 and "HINGE_IMPORT_ROOTS" in outside.stderr


def _shard_values(s3: Any, bucket: str, dataset_id: str) -> list[np.ndarray]:
    """The `data` member of each of the dataset's shards in the blob store's bucket."""
    values = []
    for key in sorted(_keys(s3, bucket, f"datasets/{dataset_id}/")):
        body = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
        with np.load(io.BytesIO(body), allow_pickle=False) as blob:
            values.append(np.asarray(blob["data"]))
    return values


def _layouts_asked(client: httpx.Client, s3: Any, bucket: str, tmp_path: Path) -> None:
    """Three sets of parts in S3 imported with the value layout asked (float32, float64,
    auto): the layout each dataset reports and the values its shards store."""
    s3.create_bucket(Bucket="layouts")
    sets = {"decimals": _parts(tmp_path / "decimals", 4, seed=21),
            "exact": _parts(tmp_path / "exact", 4, seed=22, float32_parts=(0, 1, 2, 3)),
            "mixed": _parts(tmp_path / "mixed", 4, seed=23, float32_parts=(0, 1, 2))}
    for name, paths in sets.items():
        for path in paths:
            s3.put_object(Bucket="layouts", Key=f"{name}/{path.name}", Body=path.read_bytes())
    truth = {name: np.concatenate([load_svmlight(p).data for p in paths])
             for name, paths in sets.items()}

    def imported(name: str, **body: Any) -> tuple[dict[str, Any], dict[str, Any]]:
        created = client.post("/v1/imports", json={"source": f"s3://layouts/{name}/*",
                                                   **body})
        assert created.status_code == 202, created.text
        done = _wait(client, created.json()["id"])
        assert done["status"] == "succeeded", done
        dataset = client.get(f"/v1/datasets/{done['dataset_id']}").json()
        assert dataset["value_dtype"] == done["value_dtype"]
        return done, dataset

    done, compact = imported("decimals", dtype="float32")
    assert (done["dtype"], compact["value_dtype"]) == ("float32", "float32")
    _done, wide = imported("decimals", dtype="float64")
    assert wide["value_dtype"] == "float64"
    assert compact["nnz"] == wide["nnz"] == truth["decimals"].size
    saved = wide["stored_bytes"] - compact["stored_bytes"]
    assert abs(saved - 4 * compact["nnz"]) < 128 * compact["shards"], saved
    values = _shard_values(s3, bucket, compact["id"])
    assert {str(v.dtype) for v in values} == {"float32"}
    np.testing.assert_array_equal(np.concatenate(values),
                                  truth["decimals"].astype(np.float32))  # rounded
    _done, auto_decimals = imported("decimals")
    assert auto_decimals["value_dtype"] == "float64"
    _done, exact = imported("exact")
    assert exact["value_dtype"] == "float32"
    np.testing.assert_array_equal(np.concatenate(_shard_values(s3, bucket, exact["id"])),
                                  truth["exact"])  # exactly: nothing rounded
    # three parts exactly float32, one not: every shard of every part float64
    done, mixed = imported("mixed")
    assert (done["dtype"], mixed["value_dtype"]) == ("auto", "float64")
    values = _shard_values(s3, bucket, mixed["id"])
    assert len(values) == mixed["shards"] > 4
    assert {str(v.dtype) for v in values} == {"float64"}
    np.testing.assert_array_equal(np.concatenate(values), truth["mixed"])
    refused = client.post("/v1/imports", json={"source": "s3://layouts/exact/*",
                                               "dtype": "float16"})
    assert refused.status_code == 422, refused.text
