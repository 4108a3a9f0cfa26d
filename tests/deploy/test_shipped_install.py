"""The service as it ships: `pip install .` into a clean virtualenv (no dev extras, not
editable; testkit.runtime_venv), run from a folder outside the repository so that only the
installed package is importable, on every deployment the README documents.

Each deployment runs one job end to end (upload, train, the job's SSE stream to its end,
predict) with the migration, the API and a worker all started by the runtime
virtualenv's python. A runtime dependency missing from pyproject.toml fails here: kombu's
Redis transport imports `packaging`, which only the dev extras brought, and every job
submitted to Redis answered 503 (issue 23).
"""

from __future__ import annotations

import contextlib
import io
import json
import lzma
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from sklearn.datasets import load_svmlight_file

from testkit import bundled
from testkit.runtime_venv import PACKAGES, fingerprints
from testkit.service import process_env
from tests.support import (
    REPO,
    ServiceProcess,
    child_pids,
    drop_queue,
    embedded_settings,
    postgres_schema,
    read_sse,
    require_rabbitmq,
    require_redis,
    running_service,
    s3_overrides,
)

# the runtime virtualenv compiled its kernels when it was built (as the Dockerfile does)
JOB_SECONDS = 120
# the test itself, not its fixtures: the first test's setup may build the virtualenv (pip,
# 2.5 min on a quiet 2-core machine; its steps have their own time limits) and compile the
# checkout's kernels (tests/e2e does the same)
pytestmark = pytest.mark.timeout(300, func_only=True)


def test_the_shipped_install_has_every_module_the_service_imports(
        runtime_python: str, tmp_path: Path) -> None:
    """testkit/runtime_imports.py in the runtime virtualenv, isolated (-I): every module of
    the four packages imports, the brokers' transports, the PostgreSQL dialect and boto3
    load, every third-party module the sources import is installed and declared."""
    settings = embedded_settings(tmp_path / "home")
    done = subprocess.run([runtime_python, "-I", str(REPO / "testkit" / "runtime_imports.py")],
                          cwd=tmp_path, env=process_env(settings, runtime_python),
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert Path(report["prefix"]) == Path(runtime_python).parents[1]
    assert report["outside"] == {}, report
    assert report["import_errors"] == {}, report["import_errors"]
    assert report["missing"] == {}, report["missing"]
    assert report["undeclared"] == {}, (
        "imported but not in pyproject.toml's [project.dependencies]", report["undeclared"])
    shipped = sum(1 for package in PACKAGES for path in (REPO / package).rglob("*.py")
                  if "__pycache__" not in path.parts)
    assert report["modules"] == shipped  # the install holds every module, versions too


DEPLOYMENTS = [
    "embedded",
    pytest.param("postgres-redis", marks=[pytest.mark.postgres, pytest.mark.redis]),
    pytest.param("postgres-rabbitmq", marks=[pytest.mark.postgres, pytest.mark.rabbitmq]),
    pytest.param("s3", marks=pytest.mark.s3),
]


@pytest.fixture(params=DEPLOYMENTS)
def deployment(request: pytest.FixtureRequest, tmp_path: Path, runtime_python: str
               ) -> Iterator[tuple[httpx.Client, list[ServiceProcess]]]:
    """The service of the runtime virtualenv on one documented deployment: the embedded
    default (SQLite, kombu's SQLAlchemy broker, local blobs), PostgreSQL + Redis,
    PostgreSQL + RabbitMQ, or the embedded default with blobs in an S3-compatible store."""
    kind = request.param
    overrides: dict[str, Any] = {}
    with contextlib.ExitStack() as stack:
        if kind == "s3":
            overrides = s3_overrides(request.getfixturevalue("s3_endpoint"))
        elif kind.startswith("postgres"):
            broker = require_redis() if kind == "postgres-redis" else require_rabbitmq()
            overrides = {"database_url": stack.enter_context(postgres_schema()),
                         "broker_url": broker}
        settings = embedded_settings(tmp_path / "home", **overrides)
        if settings.broker_url.startswith(("redis", "amqp")):
            stack.callback(drop_queue, settings.broker_url, settings.queue)
        elsewhere = tmp_path / "srv"  # not the repository: its sources must not shadow
        elsewhere.mkdir()
        yield stack.enter_context(running_service(
            settings, tmp_path, python=runtime_python, cwd=elsewhere, ready_timeout=180))


def test_one_job_end_to_end(deployment: tuple[httpx.Client, list[ServiceProcess]],
                            tmp_path: Path) -> None:
    client, workers = deployment
    data = bundled.write_xz("cancer", tmp_path)
    X, y = bundled.load("cancer")
    upload = client.post("/v1/datasets", files={"file": (data.name, data.read_bytes())},
                         data={"name": "cancer"})
    assert upload.status_code == 201, upload.text
    dataset = upload.json()
    assert (dataset["rows"], dataset["features"]) == X.shape

    started = time.monotonic()
    submitted = client.post("/v1/jobs", json={"dataset_id": dataset["id"]})
    assert submitted.status_code == 202, submitted.text  # 503 without kombu's `packaging`
    job_id = submitted.json()["id"]
    with client.stream("GET", f"/v1/jobs/{job_id}/events",
                       timeout=JOB_SECONDS) as response:
        events = read_sse(response)
    terminal = events[-1]
    assert (terminal["event"], terminal["data"]["status"]) == ("status", "succeeded"), events
    job = client.get(f"/v1/jobs/{job_id}").json()
    assert job["status"] == "succeeded" and job["attempt"] == 1, job
    print(f"\njob trained in {time.monotonic() - started:.1f} s "
          f"({job['result'].get('solver')}, {len(events)} events)")
    pid = int(job["worker"].rpartition(" pid ")[2])  # the runtime virtualenv's worker
    assert pid in child_pids(workers[0].process.pid), (job["worker"], workers[0].log())

    text = lzma.decompress(data.read_bytes())
    predicted = client.post(f"/v1/models/{job['model_id']}/predict", content=text,
                            headers={"content-type": "text/plain"})
    assert predicted.status_code == 200, predicted.text
    _, labels = load_svmlight_file(io.BytesIO(text), n_features=X.shape[1])
    np.testing.assert_array_equal(labels, y)
    accuracy = float(np.mean(np.asarray(predicted.json()["labels"]) == labels))
    # the served model predicts its training rows as the worker scored them
    assert accuracy == pytest.approx(job["result"]["train_accuracy"], abs=1e-12), (
        accuracy, job["result"])


def test_make_runtime_venv_builds_it_with_the_interpreter_make_run_uses() -> None:
    plan = subprocess.run(["make", "-n", "runtime-venv"], cwd=REPO, capture_output=True,
                          text=True, check=True).stdout
    assert "-m testkit.runtime_venv" in plan and "python3.11" in plan, plan


def test_an_install_ahead_is_finished_by_the_next_build_with_the_kernels_only(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """make test's two steps: `--install-only` (pip, beside the dev install and the
    compile) leaves the stamp saying the kernels are to come; the next build seeds and
    warms the kernels without installing again, and the one after that does nothing."""
    import testkit.runtime_venv as rv
    repo, venv, steps = tmp_path / "repo", tmp_path / "venv", []
    (repo / "app").mkdir(parents=True)
    for name in ("pyproject.toml", "README.md"):
        (repo / name).write_text(name)

    def pip(python: Path, *_: object) -> None:
        steps.append("pip")
        python.parent.mkdir(parents=True, exist_ok=True)
        python.touch()
    monkeypatch.setattr(rv.subprocess, "run", lambda *a, **k: steps.append("venv"))
    monkeypatch.setattr(rv, "_pip_install", pip)
    monkeypatch.setattr(rv, "_restore_times", lambda *a: steps.append("times"))
    monkeypatch.setattr(rv, "_seed_numba_cache", lambda *a: steps.append("seed") or 0)
    monkeypatch.setattr(rv, "_warm_up", lambda *a: steps.append("warm") or "")
    rv.ensure(venv, repo, log=False, install_only=True)
    assert steps == ["venv", "pip", "times"]
    assert json.loads((venv / rv.STAMP).read_text())[rv.PENDING] is True
    rv.ensure(venv, repo, log=False, install_only=True)  # still pending: nothing to do
    rv.ensure(venv, repo, log=False)
    assert steps == ["venv", "pip", "times", "seed", "warm"]
    assert json.loads((venv / rv.STAMP).read_text()) == fingerprints(repo)
    rv.ensure(venv, repo, log=False)
    assert len(steps) == 5


def test_the_virtualenv_is_rebuilt_when_dependencies_change_refreshed_when_sources_do(
        tmp_path: Path) -> None:
    """testkit.runtime_venv's fingerprints: pyproject.toml (a new virtualenv from nothing,
    so a removed dependency is gone) and every shipped file (the package reinstalled);
    caches beside the sources change neither."""
    repo = tmp_path / "repo"
    for name in ("pyproject.toml", "README.md"):
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(name)
    for package in PACKAGES:
        (repo / package / "__pycache__").mkdir(parents=True)
        (repo / package / "__init__.py").write_text("")
    first = fingerprints(repo)
    (repo / "solvers" / "__pycache__" / "smo._steps-1.py311.nbi").write_bytes(b"cache")
    (repo / "app" / "__pycache__" / "__init__.cpython-311.pyc").write_bytes(b"bytecode")
    assert fingerprints(repo) == first
    (repo / "app" / "templates").mkdir()
    (repo / "app" / "templates" / "page.html").write_text("<p>")
    changed = fingerprints(repo)
    assert changed["dependencies"] == first["dependencies"]
    assert changed["sources"] != first["sources"]
    (repo / "pyproject.toml").write_text('dependencies = ["redis"]')
    assert fingerprints(repo)["dependencies"] != changed["dependencies"]
