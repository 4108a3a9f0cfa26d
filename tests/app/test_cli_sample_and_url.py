"""`hinge sample` (app/client/sample.py) writes a dataset a fresh clone can train on, and the
client and the CLI find the server at HINGE_URL, else at HINGE_PORT's address (the README's
walk-through relies on both: tests/e2e/test_readme.py)."""

from __future__ import annotations

import http.server
import json
import os
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from app.client import HingeClient, default_url
from app.client.sample import _ATTRIBUTES, DEFAULT_ROWS, sample
from solvers.svmlight import ParseLimits, parse_stream
from solvers.train import fit
from testkit.paths import REPO
from testkit.service import free_port


def _parsed(text: str) -> tuple[sp.csr_matrix, np.ndarray]:
    parsed = parse_stream([text.encode()], ParseLimits(max_classes=None))
    X = sp.csr_matrix((parsed.data, parsed.indices, parsed.indptr),
                      shape=(parsed.n_samples, parsed.n_features))
    return X, parsed.y


def test_a_binary_sample_is_a9a_like_and_the_same_for_the_same_seed() -> None:
    text = sample("binary", 2000, seed=0)
    assert text == sample("binary", 2000, seed=0)
    assert text != sample("binary", 2000, seed=1)
    X, y = _parsed(text)
    assert X.shape[0] == 2000 and set(np.unique(y)) == {-1.0, 1.0}
    assert set(np.unique(X.data)) == {1.0}  # one-hot: every stored value is 1
    per_row = np.diff(X.indptr)
    assert per_row.max() <= _ATTRIBUTES and per_row.mean() > _ATTRIBUTES - 0.5
    for row in text.splitlines()[:50]:  # 1-based, increasing indices, "+1"/"-1" labels
        label, *features = row.split()
        assert label in ("+1", "-1")
        indices = [int(f.split(":")[0]) for f in features]
        assert indices == sorted(indices) and indices[0] >= 1
    assert 0.15 < float(np.mean(y == 1.0)) < 0.4  # a minority of +1, as in a9a


def test_a_sample_of_another_seed_is_a_test_set_of_the_same_problem() -> None:
    X, y = _parsed(sample("binary", 3000, seed=0))
    X_test, y_test = _parsed(sample("binary", 1000, seed=1))
    width = max(X.shape[1], X_test.shape[1])
    X.resize((X.shape[0], width))
    X_test.resize((X_test.shape[0], width))
    model = fit(X, y, solver="dcd", C=1.0).model
    accuracy = float(np.mean(model.predict(X_test)[0] == y_test))
    majority = max(np.mean(y_test == 1.0), np.mean(y_test == -1.0))
    assert accuracy > majority + 0.1, (accuracy, majority)  # learnt, not guessed


def test_a_multiclass_sample_has_three_classes() -> None:
    X, y = _parsed(sample("multiclass", 1500, seed=0))
    counts = Counter(y.tolist())
    assert sorted(counts) == [1.0, 2.0, 3.0] and min(counts.values()) > 150
    assert set(np.unique(X.data)) == {1.0}
    with pytest.raises(ValueError, match="kind"):
        sample("ranking", 10)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="rows"):
        sample("binary", 0)


def test_a_regression_sample_has_real_valued_targets_a_model_learns() -> None:
    text = sample("regression", 2000, seed=0)
    assert text == sample("regression", 2000, seed=0)
    X, y = _parsed(text)
    X_test, y_test = _parsed(sample("regression", 500, seed=1))
    assert np.unique(y).shape[0] > 1000 and not np.all(np.mod(y, 1) == 0)
    width = max(X.shape[1], X_test.shape[1])
    X.resize((X.shape[0], width))
    X_test.resize((X_test.shape[0], width))
    model = fit(X, y, solver="smo", formulation="epsilon_svr", C=4.0, epsilon=0.5).model
    residual = model.predict(X_test)[0] - y_test
    assert np.mean(residual**2) < 0.2 * np.var(y_test)  # learnt: R^2 > 0.8


def _hinge(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None
           ) -> subprocess.CompletedProcess[str]:
    """The CLI as a real process (`python -m app.client.cli`, the `hinge` script's module)."""
    return subprocess.run([sys.executable, "-m", "app.client.cli", *args], capture_output=True,
                          text=True, timeout=120, cwd=cwd or REPO,
                          env=env if env is not None else dict(os.environ))


def test_hinge_sample_writes_a_file_or_standard_output(tmp_path: Path) -> None:
    done = _hinge("sample", "--out", str(tmp_path / "sample.svm"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "sample.svm").read_text() == sample("binary", DEFAULT_ROWS, 0)
    assert f"wrote {DEFAULT_ROWS:,} binary rows" in done.stderr
    done = _hinge("sample", "--kind", "multiclass", "--rows", "5", "--seed", "3")
    assert done.returncode == 0 and done.stdout == sample("multiclass", 5, 3)
    done = _hinge("sample", "--kind", "ranking")
    assert done.returncode == 2 and "binary, multiclass, regression" in done.stderr


def test_the_default_address_is_hinge_url_else_hinge_port(monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    monkeypatch.delenv("HINGE_URL", raising=False)
    monkeypatch.delenv("HINGE_PORT", raising=False)
    assert default_url() == "http://127.0.0.1:8000"
    monkeypatch.setenv("HINGE_PORT", "8123")
    assert default_url() == "http://127.0.0.1:8123"
    assert HingeClient().url == "http://127.0.0.1:8123"
    monkeypatch.setenv("HINGE_URL", "http://hinge.example:9000/")
    assert HingeClient().url == "http://hinge.example:9000"
    assert HingeClient("http://other:1").url == "http://other:1"


@pytest.fixture
def listener() -> Iterator[tuple[int, list[str]]]:
    """A real HTTP server on loopback that answers GET /v1/datasets with no dataset and records
    the paths it was asked for."""
    paths: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            paths.append(self.path)
            body = json.dumps({"data": []}).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1], paths
    finally:
        server.shutdown()
        server.server_close()


def test_the_cli_calls_hinge_port_without_hinge_url_and_hinge_url_first(
        listener: tuple[int, list[str]]) -> None:
    port, paths = listener
    env = {k: v for k, v in os.environ.items() if k not in ("HINGE_URL", "HINGE_PORT")}
    env["HINGE_API_KEY"] = "hk_000000000000_any"  # (without one the CLI calls nothing)
    done = _hinge("datasets", "-q", env={**env, "HINGE_PORT": str(port)})
    assert done.returncode == 0, done.stderr
    assert [p.split("?")[0] for p in paths] == ["/v1/datasets"]
    # HINGE_URL wins over HINGE_PORT (here a port where nothing listens)
    done = _hinge("datasets", "-q", env={**env, "HINGE_PORT": str(free_port()),
                                         "HINGE_URL": f"http://127.0.0.1:{port}"})
    assert done.returncode == 0, done.stderr
    assert [p.split("?")[0] for p in paths] == ["/v1/datasets"] * 2
    done = _hinge("datasets", "-q", env={**env, "HINGE_PORT": str(free_port())})
    assert done.returncode == 1 and len(paths) == 2  # nothing there: an error, exit 1
    assert "the default address (HINGE_PORT, else port 8000)" in done.stderr
    # without a key: a usage error that names the variable and the flag, and no call
    keyless = {k: v for k, v in env.items() if k != "HINGE_API_KEY"}
    done = _hinge("datasets", "-q", env={**keyless, "HINGE_PORT": str(port)})
    assert done.returncode == 2 and len(paths) == 2, done.stderr
    assert "set HINGE_API_KEY=hk_... or pass --api-key" in done.stderr
