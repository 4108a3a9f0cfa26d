"""The `hinge` command line for daily use (issue 31) against a live service (the shared
service of tests/e2e/conftest.py, as a tenant of this module's own): ids by unique prefix,
lists, uploads that name an earlier copy, predict, the LIBLINEAR models, errors that name
what to set, model import and export, regression, the registry, instance weights. The
client and the CLI's commands and exit codes: tests/e2e/test_cli.py."""

from __future__ import annotations

import io
import json
import os
import re
import signal
import subprocess
import time
from collections.abc import Iterator

import pytest

from testkit import bundled
from tests.e2e.hinge_cli import Live, drain, spawn_in_pty
from tests.support import SharedService, wait_for_job


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory, shared_service: SharedService
         ) -> Iterator[Live]:
    with shared_service.tenant() as http:
        yield Live(http, tmp_path_factory.mktemp("cli-daily"))


TINY = b"1 1:1 2:0.5\n-1 1:-1 2:0.25\n1 1:0.8\n-1 2:-1\n"


@pytest.fixture(scope="module")
def trained(live: Live, cancer_bytes: bytes) -> dict[str, str]:
    """A cancer dataset, a dcd job on it and its model, made through the client."""
    path = live.tmp / "cancer-daily.txt"
    path.write_bytes(cancer_bytes)
    with live.client() as client:
        dataset = client.upload(path, "cancer-daily")["id"]
        job = client.wait(client.train(dataset, "dcd")["id"], timeout=120)
    assert job["status"] == "succeeded", job
    rows = b"\n".join(cancer_bytes.splitlines()[:4]) + b"\n"
    (live.tmp / "rows4.txt").write_bytes(rows)
    return {"dataset": dataset, "job": job["id"], "model": str(job["model_id"])}


def _ok(done: subprocess.CompletedProcess) -> str:
    assert done.returncode == 0, (done.returncode, done.stdout, done.stderr)
    return done.stdout.decode()


def test_cli_takes_a_unique_prefix_wherever_it_takes_an_id(live: Live,
                                                           trained: dict[str, str]) -> None:
    dataset, job_id, model_id = trained["dataset"], trained["job"], trained["model"]
    assert f"dataset {dataset} " in _ok(live.hinge("dataset", dataset[:8]))
    assert json.loads(_ok(live.hinge("job", job_id[:8])))["id"] == job_id
    assert json.loads(_ok(live.hinge("model", model_id[:8])))["id"] == model_id
    by_prefix = _ok(live.hinge("predict", model_id[:8], "rows4.txt"))
    assert by_prefix == _ok(live.hinge("predict", model_id, "rows4.txt"))
    assert len(by_prefix.splitlines()) == 4
    assert _ok(live.hinge("export", model_id[:8])).startswith("solver_type ")

    trained_again = _ok(live.hinge("train", dataset[:8], "--solver", "dcd", "--watch"))
    new_job = re.search(r"job ([0-9a-f]{32}) succeeded", trained_again)
    assert new_job, trained_again
    with live.client() as client:
        assert client.job(new_job.group(1))["dataset_id"] == dataset

    # a finished job's cancel reads as English
    refused = live.hinge("cancel", job_id[:8])
    assert refused.returncode == 1
    assert f"job '{job_id}' has already succeeded".encode() in refused.stderr

    evaluated = _ok(live.hinge("evaluate", model_id[:8], dataset[:8]))
    found = re.search(r"evaluation ([0-9a-f]{32}) (succeeded|queued)", evaluated)
    assert found, evaluated
    evaluation_id = found.group(1)
    listed = json.loads(_ok(live.hinge("evaluations", model_id[:8], "--json")))
    assert evaluation_id in [e["id"] for e in listed]
    assert evaluation_id[:8] in _ok(live.hinge("evaluations", model_id[:8]))
    shown = json.loads(_ok(live.hinge("evaluation", model_id[:8], evaluation_id[:8])))
    assert shown["id"] == evaluation_id and shown["dataset_id"] == dataset


def test_cli_says_which_ids_an_ambiguous_prefix_matches(live: Live) -> None:
    (live.tmp / "tiny.txt").write_bytes(TINY)
    by_digit: dict[str, list[str]] = {}
    with live.client() as client:
        for _ in range(17):  # 17 ids, 16 first digits: two share one
            ident = client.upload(live.tmp / "tiny.txt", "tiny")["id"]
            by_digit.setdefault(ident[0], []).append(ident)
    digit, mine = next((d, ids) for d, ids in by_digit.items() if len(ids) > 1)
    ambiguous = live.hinge("dataset", digit)
    assert ambiguous.returncode == 1 and ambiguous.stdout == b""
    stderr = ambiguous.stderr.decode()
    assert "422 ambiguous_id: dataset id prefix" in stderr, stderr
    assert all(ident in stderr for ident in mine), stderr
    assert "give more of the id" in stderr and "--wide" in stderr
    missing = live.hinge("job", "not-an-id")
    assert missing.returncode == 1 and b"404 not_found: job 'not-an-id' not found" in (
        missing.stderr)


def test_cli_lists_show_short_ids_whole_ones_with_wide_and_json(
        live: Live, trained: dict[str, str]) -> None:
    job_id, model_id, dataset = trained["job"], trained["model"], trained["dataset"]
    listed = _ok(live.hinge("jobs"))
    short = re.search(rf"\b({job_id[:8]}[0-9a-f]*)\b", listed)
    assert short and len(short.group(1)) < 32, listed
    assert job_id not in listed and "…" not in listed
    assert json.loads(_ok(live.hinge("job", short.group(1))))["id"] == job_id  # it resolves
    assert job_id in _ok(live.hinge("jobs", "--wide"))
    for args in (("jobs", "--json"), ("--json", "jobs")):
        rows = json.loads(_ok(live.hinge(*args)))
        assert job_id in [r["id"] for r in rows]
        assert all("fraction" not in (r["progress"] or {}) for r in rows)
    models = _ok(live.hinge("models"))
    assert model_id[:8] in models and model_id not in models
    assert model_id in _ok(live.hinge("models", "-w"))
    assert model_id in [m["id"] for m in json.loads(_ok(live.hinge("models", "--json")))]
    datasets = _ok(live.hinge("datasets"))
    assert dataset[:8] in datasets and dataset not in datasets
    assert dataset in _ok(live.hinge("datasets", "--wide"))
    assert dataset in [d["id"] for d in json.loads(_ok(live.hinge("datasets", "--json")))]
    assert json.loads(_ok(live.hinge("dataset", dataset[:8], "--json")))["id"] == dataset

    # a terminal of 80 columns: every id shown whole (short), none cut
    process, master = spawn_in_pty(["hinge", "jobs"], live.env | {"COLUMNS": "80",
                                                                   "LINES": "50"}, live.tmp)
    seen = bytearray()
    try:
        assert process.wait(timeout=60) == 0
        drain(master, seen)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        os.close(master)
    screen = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", seen.decode())  # no terminal codes
    assert short.group(1) in screen and "…" not in screen, screen
    with live.client() as client:
        for row in client.jobs():
            assert re.search(rf"\b{row['id'][:8]}[0-9a-f]*\b", screen), (row["id"], screen)
    assert max(len(line) for line in screen.splitlines()) <= 80, screen


def test_cli_upload_names_the_earlier_copy_and_reuses_it(live: Live) -> None:
    path = live.tmp / "unique.txt"
    path.write_bytes(TINY + f"1 3:{time.time_ns()}\n".encode())  # content no test sent
    first = live.hinge("upload", str(path), "--name", "first")
    first_id = re.search(rb"dataset ([0-9a-f]{32})", first.stdout).group(1).decode()  # type: ignore[union-attr]
    assert b"same content" not in first.stderr
    with live.client() as client:
        before = len(client.datasets(limit=1000))

    again = live.hinge("upload", str(path), "--name", "again")
    assert again.returncode == 0, again.stderr
    again_id = re.search(rb"dataset ([0-9a-f]{32})", again.stdout).group(1).decode()  # type: ignore[union-attr]
    assert again_id != first_id
    note = again.stderr.decode()
    assert f"the same content as dataset {first_id}, stored again" in note, note
    assert "hinge upload --reuse" in note

    reused = _ok(live.hinge("upload", str(path), "--reuse"))
    assert reused.startswith(f"reused dataset {first_id} \"first\"") and (
        "nothing stored") in reused
    as_json = json.loads(_ok(live.hinge("upload", str(path), "--reuse", "--json")))
    assert as_json["id"] == first_id and as_json["reused"] is True
    assert _ok(live.hinge("upload", str(path), "--reuse", "-q")) == first_id + "\n"
    stored = json.loads(_ok(live.hinge("upload", str(path), "--json", "-q")))
    assert stored["reused"] is False and sorted(stored["duplicate_of"]) == sorted(
        [first_id, again_id])
    with live.client() as client:
        assert len(client.datasets(limit=1000)) == before + 2  # "again" and the last one


def test_cli_predict_shows_probabilities(live: Live, trained: dict[str, str]) -> None:
    watched = _ok(live.hinge("train", trained["dataset"][:8], "--solver", "smo",
                             "-p", "probability=true", "--watch"))
    model_id = re.search(r"^model ([0-9a-f]{32})$", watched, re.M).group(1)  # type: ignore[union-attr]
    shown = _ok(live.hinge("predict", model_id[:8], "rows4.txt", "--probabilities"))
    with live.client() as client:
        answer = client.predict(model_id, (live.tmp / "rows4.txt").read_bytes())
    header, *lines = shown.splitlines()
    assert header == "labels\t-1 1"
    assert answer["probabilities"] is not None and len(lines) == 4
    for line, label, row in zip(lines, answer["labels"], answer["probabilities"],
                                strict=True):
        shown_label, values = line.split("\t")
        assert float(shown_label) == label
        assert [float(v) for v in values.split()] == pytest.approx(row, rel=1e-5)
        assert sum(float(v) for v in values.split()) == pytest.approx(1.0, abs=1e-4)
    as_json = json.loads(_ok(live.hinge("predict", model_id, "rows4.txt", "-b", "--json")))
    for got, expected in zip(as_json["probabilities"], answer["probabilities"], strict=True):
        assert got == pytest.approx(expected, rel=1e-12)

    refused = live.hinge("predict", trained["model"], "rows4.txt", "--probabilities")
    assert refused.returncode == 1 and refused.stdout == b""
    assert (f"model {trained['model']} has no probabilities: train it with "
            "-p probability=true").encode() in refused.stderr


def test_cli_trains_the_liblinear_models_and_shows_the_l1_path(
        live: Live, trained: dict[str, str]) -> None:
    """auto with penalty l1 (l1_cd: its non-zero weights), loss logistic (probabilities
    without probability=true), formulation crammer_singer; an L1 search's points with a
    non-zeros column."""
    dataset = trained["dataset"]
    sparse = _ok(live.hinge("train", dataset[:8], "-p", "penalty=l1", "-p", "C=0.05",
                            "--watch"))
    assert "auto chose l1_cd" in sparse and "converged" in sparse, sparse
    job_id = re.search(r"^job ([0-9a-f]{32}) succeeded", sparse, re.M).group(1)  # type: ignore[union-attr]
    with live.client() as client:
        counts = client.job(job_id)["result"]["nonzero_weights"]
    assert f"non-zero weights {counts[0]}," in sparse and 0 < counts[0] < 30  # of 30

    logistic = _ok(live.hinge("train", dataset[:8], "-p", "loss=logistic", "--watch"))
    model_id = re.search(r"^model ([0-9a-f]{32})$", logistic, re.M).group(1)  # type: ignore[union-attr]
    shown = _ok(live.hinge("predict", model_id[:8], "rows4.txt", "--probabilities"))
    assert shown.splitlines()[0] == "labels\t-1 1" and len(shown.splitlines()) == 5

    joint = _ok(live.hinge("train", dataset[:8], "-p", "formulation=crammer_singer",
                           "--watch"))
    assert "auto chose crammer_singer" in joint and "NOT converged" not in joint, joint

    with live.client() as client:
        search = client.create_search(dataset, {"C": {"log2": [-9, 3, 4]}}, "l1_cd",
                                      cv={"folds": 3}, refit=False)
        done = client.wait_search(search["id"], timeout=120)
    assert done["status"] == "succeeded", done
    table = _ok(live.hinge("points", search["id"][:8]))
    header, _rule, *rows = [line for line in table.splitlines() if line.strip()]
    assert header.split()[-3:] == ["non-zeros", "fit", "s"], header
    by_c = {p["values"]["C"]: p["nonzero_weights"] for p in done["points"]}
    assert len(rows) == len(by_c) == 4
    shown_path = sorted((float(row.split()[1].removeprefix("C=")), float(row.split()[-2]))
                        for row in rows)  # the last two cells: non-zeros, fit seconds
    expected = sorted(by_c.items())
    assert [c for c, _ in shown_path] == pytest.approx([c for c, _ in expected], rel=1e-5)
    assert [n for _, n in shown_path] == pytest.approx([n for _, n in expected], rel=1e-5)
    as_json = json.loads(_ok(live.hinge("points", search["id"], "--json")))
    assert [p["nonzero_weights"] for p in as_json] == [
        p["nonzero_weights"] for p in done["points"]]


def test_cli_errors_name_the_variable_or_flag_to_set(live: Live) -> None:
    def run(*args: str, **env: str | None) -> subprocess.CompletedProcess:
        changed = dict(live.env)
        for name, value in env.items():
            if value is None:
                changed.pop(name, None)
            else:
                changed[name] = value
        return subprocess.run(["hinge", *args], env=changed, cwd=live.tmp,
                              capture_output=True, timeout=120)

    no_key = run("jobs", HINGE_API_KEY=None)
    assert no_key.returncode == 2 and no_key.stdout == b""
    assert b"no API key: set HINGE_API_KEY=hk_... or pass --api-key hk_..." in no_key.stderr

    for args, where in ((("jobs",), "HINGE_API_KEY"), (("--api-key", "hk_x_y", "jobs"),
                                                       "--api-key")):
        wrong = run(*args, HINGE_API_KEY="hk_000000000000_wrong")
        assert wrong.returncode == 1
        text = wrong.stderr.decode()
        assert "401 unauthorized: a valid API key is required" in text, text
        assert "Authorization: Bearer hk_<id>_<secret>" in text and "HINGE_API_KEY" in text
        assert (f"the key (from {where}) was refused: set HINGE_API_KEY or pass --api-key"
                in text), text

    for args, env_url, where in ((("jobs",), "127.0.0.1:8000", "HINGE_URL"),
                                 (("--url", "localhost:8000", "jobs"), None, "--url")):
        malformed = run(*args, HINGE_URL=env_url)
        assert malformed.returncode == 2, malformed.stderr
        assert f"{where} is '".encode() in malformed.stderr
        assert b"set HINGE_URL or pass --url" in malformed.stderr

    unreachable = run("jobs", HINGE_URL="http://127.0.0.1:9")
    assert unreachable.returncode == 1
    assert b"cannot reach Hinge at http://127.0.0.1:9" in unreachable.stderr
    assert (b"The address comes from HINGE_URL: set HINGE_URL or pass --url"
            in unreachable.stderr)
    by_port = run("jobs", HINGE_URL=None, HINGE_PORT="9")
    assert by_port.returncode == 1
    assert b"the default address (HINGE_PORT, else port 8000)" in by_port.stderr


def test_cli_imports_a_libsvm_model_and_exports_it_as_onnx(live: Live, trained: dict[str, str],
                                                           cancer_bytes: bytes) -> None:
    """`hinge models import` serves a model trained by LIBSVM (what svm_predict gives), and
    `hinge export -f onnx -o FILE` writes a graph that onnxruntime runs to the same labels."""
    onnxruntime = pytest.importorskip("onnxruntime", reason="the dev extras install it")
    from libsvm import svmutil
    from sklearn.datasets import load_svmlight_file

    X, y = load_svmlight_file(io.BytesIO(cancer_bytes))
    reference = svmutil.svm_train(y.tolist(), X, "-s 0 -t 2 -c 1 -q")
    model_file = live.tmp / "cancer.libsvm"
    svmutil.svm_save_model(str(model_file), reference)
    shown = _ok(live.hinge("models", "import", str(model_file), "--n-features",
                           str(X.shape[1])))
    model_id = re.search(r"^model ([0-9a-f]{32}) \(kernel, 2 classes", shown, re.M)
    assert model_id, shown
    expected, _accuracy, _values = svmutil.svm_predict(y.tolist()[:4], X[:4], reference, "-q")
    lines = _ok(live.hinge("predict", model_id.group(1)[:8], "rows4.txt")).splitlines()
    assert [float(line.split("\t")[0]) for line in lines] == expected

    graph = live.tmp / "cancer.onnx"
    _ok(live.hinge("export", model_id.group(1), "-f", "onnx", "-o", str(graph)))
    session = onnxruntime.InferenceSession(str(graph))
    labels = session.run(["label"], {"input": X[:4].toarray()})[0]
    assert labels.tolist() == expected
    bad = live.tmp / "bad.libsvm"
    bad.write_text(model_file.read_text().replace("nr_class 2", "nr_class two"))
    refused = live.hinge("models", "import", str(bad))
    assert refused.returncode == 1 and b"line " in refused.stderr, refused.stderr


def test_cli_trains_evaluates_and_exports_a_regression_model(live: Live) -> None:
    """A regression set of 20,000 distinct targets through the CLI: upload (a regression
    dataset: far more distinct labels than the class limit), an epsilon-SVR job, predict,
    evaluate and export (svm_type epsilon_svr)."""
    import numpy as np
    from sklearn.datasets import dump_svmlight_file

    from testkit.datagen import smooth_regression

    X, y = smooth_regression(20_000, seed=7)
    path = live.tmp / "wave.txt"
    with path.open("wb") as handle:
        dump_svmlight_file(X, y, handle, zero_based=False)
    uploaded = _ok(live.hinge("upload", str(path), "--name", "wave"))
    assert "20,000 rows, 4 features" in uploaded and "regression targets" in uploaded
    assert "20,000 distinct" in uploaded
    dataset = re.search(r"dataset ([0-9a-f]{32})", uploaded).group(1)  # type: ignore[union-attr]
    listed = json.loads(_ok(live.hinge("datasets", "--json")))
    assert [d["task"] for d in listed if d["id"] == dataset] == ["regression"]
    watched = _ok(live.hinge("train", dataset, "--solver", "smo", "-p",
                             "formulation=epsilon_svr", "-p", "epsilon=0.3", "-p",
                             "gamma=0.5", "--watch"))
    assert re.search(r"job [0-9a-f]{32} succeeded: regression, exit converged", watched)
    assert "train r2 " in watched
    model_id = re.search(r"^model ([0-9a-f]{32})$", watched, re.M).group(1)  # type: ignore[union-attr]
    models = json.loads(_ok(live.hinge("models", "--json")))
    assert [m["task"] for m in models if m["id"] == model_id] == ["regression"]
    assert "regression" in _ok(live.hinge("models", "--wide"))  # the classes cell

    (live.tmp / "wave5.txt").write_bytes(b"".join(path.read_bytes().splitlines(True)[:5]))
    predicted = _ok(live.hinge("predict", model_id, "wave5.txt")).split()
    with live.client() as client:
        answer = client.predict(model_id, (live.tmp / "wave5.txt").read_bytes())
    assert answer["task"] == "regression"
    assert [float(v) for v in predicted] == pytest.approx(answer["labels"], rel=1e-5)
    assert np.max(np.abs(np.array(answer["labels"]) - y[:5])) < 0.5

    evaluated = _ok(live.hinge("evaluate", model_id, dataset))
    mse = float(re.search(r"mse ([0-9.]+)", evaluated).group(1))  # type: ignore[union-attr]
    assert "squared correlation" in evaluated and 0 < mse < 0.1
    exported = _ok(live.hinge("export", model_id))
    assert exported.startswith("svm_type epsilon_svr\n")


def test_registry_through_the_client_and_the_cli(live: Live, cancer_bytes: bytes) -> None:
    """Register two versions, promote, roll back (the CLI and the client), and predict by
    the alias: the answer names the version that served it."""
    path = live.tmp / "cancer-registry.txt"
    path.write_bytes(cancer_bytes)
    rows = b"\n".join(cancer_bytes.splitlines()[:3]) + b"\n"
    with live.client() as client:
        dataset = client.upload(path)
        model_ids = [client.wait(client.train(dataset["id"], "dcd", {"C": c})["id"],
                                 timeout=120)["model_id"] for c in (0.1, 10.0)]
        first = live.hinge("models", "register", model_ids[0][:8], "--name", "cancer-svm",
                           "-d", "C=0.1", "-t", "team=risk")
        assert first.returncode == 0, first.stderr.decode()
        assert first.stdout.decode().strip() == f"cancer-svm/versions/1 is model {model_ids[0]}"
        assert client.register("cancer-svm", model_ids[1])["version"] == 2
        promoted = live.hinge("models", "promote", "cancer-svm", "production", "2")
        assert promoted.returncode == 0, promoted.stderr.decode()
        assert "cancer-svm@production -> version 2" in promoted.stdout.decode()
        answer = client.predict("cancer-svm@production", rows)
        assert answer["model_id"] == model_ids[1]
        assert answer["served_by"] == {"name": "cancer-svm", "version": 2,
                                       "alias": "production"}
        client.promote("cancer-svm", "production", 1)  # roll back
        predicted = live.hinge("--json", "predict", "cancer-svm@production", str(path))
        assert predicted.returncode == 0, predicted.stderr.decode()
        assert json.loads(predicted.stdout)["served_by"]["version"] == 1
        assert [m["to_version"] for m in client.alias_history("cancer-svm")] == [1, 2]
        assert client.lineage("cancer-svm@production")["dataset"]["sha256"] == \
            dataset["sha256"]
    listed = live.hinge("--json", "models", "versions", "cancer-svm")
    assert listed.returncode == 0, listed.stderr.decode()
    versions = json.loads(listed.stdout)
    assert [(v["version"], v["aliases"], v["tags"]) for v in versions] == [
        (2, [], {}), (1, ["production"], {"team": "risk"})]
    table = live.hinge("models", "versions", "cancer-svm")
    assert table.returncode == 0 and "production" in table.stdout.decode()
    missing = live.hinge("models", "promote", "cancer-svm", "production", "9")
    assert missing.returncode != 0 and "no version 9" in missing.stderr.decode()


def test_cli_uploads_and_trains_with_instance_weights(live: Live) -> None:
    """--weight-column at upload (the summary line gives the weights), a weighted job by
    default, --unweighted to ignore them; the client's sample_weight list does the same as
    the stored weights."""
    X, y = bundled.load("iris")
    weights = [0.5 + (i % 4) / 2 for i in range(X.shape[0])]
    header = "label," + ",".join(f"f{j}" for j in range(X.shape[1])) + ",w"
    lines = [header] + [f"{float(t)!r}," + ",".join(repr(float(v)) for v in row) + f",{w!r}"
                        for row, t, w in zip(X.toarray(), y, weights, strict=True)]
    path = live.tmp / "weighted.csv"
    path.write_text("\n".join(lines) + "\n")
    uploaded = _ok(live.hinge("upload", str(path), "--weight-column", "w"))
    mean = sum(weights) / len(weights)
    assert "4 features" in uploaded and f"weights 0.5 to 2, mean {mean:.4g}, 0 zero" in uploaded
    dataset = re.search(r"dataset ([0-9a-f]{32})", uploaded).group(1)  # type: ignore[union-attr]
    objectives = []
    for extra in ([], ["--unweighted"]):
        job = json.loads(_ok(live.hinge("train", dataset, "--solver", "smo", "-p", "C=2",
                                        *extra, "--watch", "--json")))
        assert job["status"] == "succeeded", job
        assert ("sample_weight" in job["params"]) == (not extra)
        objectives.append(job["result"]["dual_objective"])
    assert objectives[0] != objectives[1]
    with live.client() as client:
        listed = client.train(dataset, "smo", {"C": 2}, sample_weight=weights)
    final = wait_for_job(live.http.get, listed["id"])
    assert final["result"]["dual_objective"] == pytest.approx(objectives[0], rel=1e-12)
