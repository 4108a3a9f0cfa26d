"""The Python client (app/client/__init__.py) and the `hinge` command line
(app/client/cli/) against a live service: a real API server process and a real Celery
worker process on SQLite (the shared service of tests/e2e/conftest.py). The CLI for daily
use (ids by prefix, lists, registry, ...): tests/e2e/test_cli_daily.py."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.client import HingeClient, HingeError
from testkit import bundled
from tests.e2e.hinge_cli import Live, drain, entry_point, read_until, spawn_in_pty
from tests.e2e.long_fit import long_fit_bytes, long_job
from tests.support import SharedService

# a fit that runs until cancelled, 60 s at most should nobody cancel it (long_fit.py)
LONG_JOB = long_job(60.0)
LONG_ARGS = [f"-p{k}={json.dumps(v)}" for k, v in LONG_JOB.items()]  # values as JSON


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory, shared_service: SharedService
         ) -> Iterator[Live]:
    """The shared service (tests/e2e/conftest.py), as a tenant of this module's own."""
    with shared_service.tenant() as http:
        yield Live(http, tmp_path_factory.mktemp("cli"))


@pytest.fixture(scope="module")
def long_file(live: Live) -> Path:
    path = live.tmp / "long.txt"
    path.write_bytes(long_fit_bytes())
    return path


def _shape(name: str) -> tuple[int, int]:
    rows, features = bundled.load(name)[0].shape
    return rows, features


def test_the_console_script_is_declared() -> None:
    assert entry_point() == "app.client.cli:main"


def test_client_upload_train_events_predict_export(live: Live, cancer_bytes: bytes) -> None:
    path = live.tmp / "cancer.txt"
    path.write_bytes(cancer_bytes)
    seen: list[tuple[int, int | None]] = []
    with live.client() as client:
        dataset = client.upload(path, progress=lambda sent, total: seen.append((sent, total)))
        assert dataset["name"] == "cancer.txt" and dataset["rows"] == _shape("cancer")[0]
        assert seen and seen[-1] == (len(cancer_bytes), len(cancer_bytes))
        assert [s for s, _ in seen] == sorted(s for s, _ in seen)
        assert dataset["id"] in [d["id"] for d in client.datasets()]
        assert client.dataset(dataset["id"])["sha256"] == dataset["sha256"]

        job = client.train(dataset["id"], "dcd", {"C": 1, "loss": "l1"})
        assert job["status"] == "queued" and job["params"]["C"] == 1.0
        events = list(client.events(job["id"], timeout=120))
        kinds = [e.kind for e in events]
        assert kinds[-1] == "status" and events[-1].data["status"] == "succeeded"
        assert events[-1].is_terminal and not any(e.is_terminal for e in events[:-1])
        assert "running" in [e.data.get("status") for e in events if e.kind == "status"]
        stored = [e.id for e in events if e.id is not None]
        assert stored == sorted(stored) and len(set(stored)) == len(stored)
        # resuming after the first stored event repeats nothing before it
        resumed = list(client.events(job["id"], last_event_id=stored[0], timeout=60))
        assert [e.id for e in resumed if e.id is not None] == stored[1:]

        finished = client.job(job["id"])
        assert finished["status"] == "succeeded" and finished["model_id"]
        assert client.wait(job["id"])["model_id"] == finished["model_id"]
        assert job["id"] in [j["id"] for j in client.jobs(status="succeeded")]
        model = client.model(finished["model_id"])
        assert model["kind"] == "linear" and model["labels"] == [-1.0, 1.0]
        assert finished["model_id"] in [m["id"] for m in client.models()]

        rows = b"\n".join(cancer_bytes.splitlines()[:3]) + b"\n"
        by_text = client.predict(model["id"], rows)
        assert len(by_text["labels"]) == 3 and set(by_text["labels"]) <= {-1.0, 1.0}
        # the same first row as a JSON instance
        first = rows.split(b"\n")[0].split()[1:]
        instance = {"indices": [int(p.split(b":")[0]) for p in first],
                    "values": [float(p.split(b":")[1]) for p in first]}
        by_json = client.predict(model["id"], [instance])
        assert by_json["labels"][0] == by_text["labels"][0]
        assert by_json["decision_values"][0] == pytest.approx(by_text["decision_values"][0])
        exported = client.export(model["id"], "liblinear")
        assert exported.startswith("solver_type L2R_L1LOSS_SVC_DUAL\n")


def test_client_errors_carry_the_api_error_body(live: Live, cancer_bytes: bytes) -> None:
    with live.client() as client:
        with pytest.raises(HingeError) as missing:
            client.job("0" * 32)
        assert missing.value.status_code == 404 and missing.value.code == "not_found"
        assert missing.value.body["error"]["message"] == missing.value.message
        assert "not found" in missing.value.message

        (live.tmp / "cancer.txt").write_bytes(cancer_bytes)
        dataset = client.upload(live.tmp / "cancer.txt")
        with pytest.raises(HingeError) as invalid:
            client.train(dataset["id"], "dcd", {"C": -1})
        assert invalid.value.status_code == 422 and "C" in invalid.value.message

        job = client.wait(client.train(dataset["id"], "dcd")["id"])
        with pytest.raises(HingeError) as finished:
            client.cancel(job["id"])
        assert finished.value.status_code == 409 and finished.value.code == "conflict"

    with HingeClient(live.base, "hk_000000000000_wrong") as stranger, \
            pytest.raises(HingeError) as refused:
        stranger.datasets()
    assert refused.value.status_code == 401
    with HingeClient("http://127.0.0.1:9", live.key) as nowhere, \
            pytest.raises(HingeError) as unreachable:
        nowhere.datasets()
    assert unreachable.value.status_code == 0 and "cannot reach" in unreachable.value.message


def test_client_reads_its_address_and_key_from_the_environment(
        live: Live, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HINGE_URL", live.base)
    monkeypatch.setenv("HINGE_API_KEY", live.key)
    with HingeClient() as client:
        assert client.url == live.base
        assert isinstance(client.datasets(), list)


def test_cli_commands_and_exit_codes(live: Live, cancer_bytes: bytes, long_file: Path
                                    ) -> None:
    path = live.tmp / "cancer.txt"
    path.write_bytes(cancer_bytes)
    rows, features = _shape("cancer")
    uploaded = live.hinge("upload", str(path), "--name", "cancer")
    assert uploaded.returncode == 0, uploaded.stderr
    match = re.search(rf'dataset ([0-9a-f]{{32}}) "cancer": {rows} rows, {features} features'
                      .encode(), uploaded.stdout)
    assert match, uploaded.stdout
    dataset = match.group(1).decode()
    assert b"uploading" in uploaded.stderr  # the progress bar (on stderr)

    quiet = live.hinge("upload", str(path), "-q")
    assert quiet.returncode == 0 and re.fullmatch(rb"[0-9a-f]{32}\n", quiet.stdout)
    # names are printed as they are, never read as Rich markup
    marked = live.hinge("upload", str(path), "--name", "[red]cancer[/red]")
    assert f'"[red]cancer[/red]": {rows} rows'.encode() in marked.stdout, marked.stdout
    listed = live.hinge("datasets", "--wide")
    assert listed.returncode == 0 and dataset.encode() in listed.stdout
    assert b"[red]cancer[/red]" in listed.stdout
    # a CSV whose label column is not named 'label': --label-column (and --format)
    table = live.tmp / "table.csv"
    table.write_text("f1,target,f2\n0.5,1,0\n0,-1,2\n")
    refused = live.hinge("upload", str(table))
    assert refused.returncode != 0 and b"label_column" in refused.stderr + refused.stdout
    csv_upload = live.hinge("--json", "upload", str(table), "--label-column", "target",
                            "--format", "csv")
    assert csv_upload.returncode == 0, csv_upload.stderr
    read = json.loads(csv_upload.stdout)
    assert (read["source_format"], read["feature_names"], read["rows"], read["nnz"]) \
        == ("csv", ["f1", "f2"], 2, 2)

    trained = live.hinge("train", dataset, "--solver", "dcd", "--param", "C=1",
                         "-p", "loss=l1", "--watch")
    assert trained.returncode == 0, trained.stderr
    out = trained.stdout.decode()
    job_id = re.search(r"job ([0-9a-f]{32}) queued \(dcd\)", out).group(1)  # type: ignore[union-attr]
    assert f"job {job_id} succeeded: exit converged, converged" in out
    model_id = re.search(r"^model ([0-9a-f]{32})$", out, re.M).group(1)  # type: ignore[union-attr]
    with live.client() as client:
        job = client.job(job_id)
        assert job["model_id"] == model_id and job["params"]["loss"] == "l1"

    jobs = live.hinge("jobs", "--wide")
    assert jobs.returncode == 0 and job_id.encode() in jobs.stdout
    shown = live.hinge("job", job_id)
    assert shown.returncode == 0 and b'"status": "succeeded"' in shown.stdout
    models = live.hinge("models", "--wide")
    assert models.returncode == 0 and model_id.encode() in models.stdout

    head = b"\n".join(cancer_bytes.splitlines()[:4]) + b"\n"
    (live.tmp / "rows.txt").write_bytes(head)
    predicted = live.hinge("predict", model_id, "rows.txt")
    assert predicted.returncode == 0, predicted.stderr
    with live.client() as client:
        answer = client.predict(model_id, head)
    lines = predicted.stdout.decode().splitlines()
    assert len(lines) == 4
    for line, label, value in zip(lines, answer["labels"], answer["decision_values"],
                                  strict=True):
        shown_label, shown_value = line.split("\t")
        assert float(shown_label) == label and float(shown_value) == pytest.approx(value,
                                                                                  rel=1e-5)
    from_stdin = live.hinge("predict", model_id, "-", stdin=head)
    assert from_stdin.stdout == predicted.stdout

    exported = live.hinge("export", model_id, "--format", "liblinear", "-o", "cancer.model")
    assert exported.returncode == 0
    assert (live.tmp / "cancer.model").read_text().startswith("solver_type L2R_L1LOSS_SVC_DUAL")

    # 1: an API error, its message on stderr
    missing = live.hinge("job", "f" * 32)
    assert missing.returncode == 1 and missing.stdout == b""
    assert b"404 not_found: job 'ffff" in missing.stderr
    bad_param = live.hinge("train", dataset, "--solver", "dcd", "--param", "C=-1")
    assert bad_param.returncode == 1 and b"422 invalid_input" in bad_param.stderr
    # 2: a usage error
    usage = live.hinge("train", dataset, "--param", "C")
    assert usage.returncode == 2 and b"NAME=VALUE" in usage.stderr
    # 3: a watched job that did not succeed (cancelled by someone else)
    with live.client() as client:
        long_id = client.upload(long_file, "long")["id"]
        watcher = subprocess.Popen(
            ["hinge", "train", long_id, "--solver", "dcd",
             *LONG_ARGS, "--watch"],
            env=live.env, cwd=live.tmp, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            job_id = client.jobs(dataset_id=long_id)[0]["id"] if _listed(client, long_id) else ""
            _wait_progress(live, job_id)
            client.cancel(job_id)
            stdout, stderr = watcher.communicate(timeout=60)
        finally:
            if watcher.poll() is None:
                watcher.kill()
                watcher.wait()
    assert watcher.returncode == 3, stderr
    assert f"job {job_id} cancelled".encode() in stdout


def _listed(client: HingeClient, dataset_id: str, timeout: float = 30) -> bool:
    deadline = time.monotonic() + timeout
    while not client.jobs(dataset_id=dataset_id):
        assert time.monotonic() < deadline, "the job was not submitted"
        time.sleep(0.1)
    return True


def _wait_progress(live: Live, job_id: str) -> None:
    deadline = time.monotonic() + 120
    with live.client() as client:
        while not (client.job(job_id).get("progress") or {}).get("iteration"):
            assert time.monotonic() < deadline, client.job(job_id)
            time.sleep(0.1)


@pytest.mark.parametrize("answer", [b"y", b"n"])
def test_ctrl_c_while_watching_asks_whether_to_cancel(live: Live, long_file: Path,
                                                      answer: bytes) -> None:
    with live.client() as client:
        dataset = client.upload(long_file, "long")["id"]
    process, master = spawn_in_pty(
        ["hinge", "train", dataset, "--solver", "dcd", *LONG_ARGS, "--watch"],
        live.env | {"NO_COLOR": "1"}, live.tmp)
    seen = bytearray()
    try:
        read_until(master, b" queued (dcd)", seen, 60)
        job_id = re.search(rb"job ([0-9a-f]{32}) queued", seen).group(1).decode()  # type: ignore[union-attr]
        _wait_progress(live, job_id)
        os.write(master, b"\x03")  # Ctrl-C at the keyboard
        read_until(master, f"Cancel job {job_id}?".encode(), seen, 30)
        os.write(master, answer + b"\r")
        assert process.wait(timeout=30) == 130, seen.decode()
        drain(master, seen)
        with live.client() as client:
            if answer == b"y":
                job = client.wait(job_id, timeout=60)
                assert job["status"] == "cancelled" and job["model_id"] is None, job
            else:
                job = client.job(job_id)
                assert not job["cancel_requested"] and job["status"] == "running", job
                assert f"job {job_id} keeps running" in seen.decode()
                client.cancel(job_id)  # free the worker for the next test
                assert client.wait(job_id, timeout=60)["status"] == "cancelled"
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        os.close(master)
