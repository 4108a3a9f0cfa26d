"""The client and the `hinge` command line install alone (issue 25): `pip install
./app/client` into an empty virtualenv gives a working `hinge` that trains a job on a live
server, and brings in nothing of the server (no FastAPI, Starlette, SQLAlchemy, Celery or
Numba, and no `app` module besides app.client)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from testkit.paths import REPO
from testkit.service import embedded_settings, running_service

# slow: its virtualenv comes from PyPI (a minute to five here, by the index's latency)
pytestmark = [pytest.mark.timeout(600, func_only=True), pytest.mark.slow]

SERVER_ONLY = ("fastapi", "starlette", "sqlalchemy", "celery", "numba", "alembic", "kombu",
               "uvicorn", "solvers", "workers", "app.api", "app.domain", "app.infra")


@pytest.fixture(scope="module")
def client_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An empty virtualenv with the client distribution installed from a copy of
    app/client (so the build leaves nothing in the checkout). uv rather than pip: it
    fetches the index pages side by side, a minute instead of pip's five here."""
    tmp = tmp_path_factory.mktemp("client-install")
    source = tmp / "source"
    shutil.copytree(REPO / "app" / "client", source,
                    ignore=shutil.ignore_patterns("__pycache__", "build", "*.egg-info"))
    home = tmp / "venv"
    uv = shutil.which("uv", path=str(Path(sys.executable).parent)) or "uv"
    subprocess.run([uv, "venv", "--quiet", "--python", sys.executable, str(home)],
                   check=True, timeout=120)
    subprocess.run([uv, "pip", "install", "--quiet", str(source)], check=True, timeout=540,
                   env=_clean_env(VIRTUAL_ENV=str(home)))
    return home


def _clean_env(**extra: str) -> dict[str, str]:
    """The environment of a user's shell: no PYTHONPATH pointing at this checkout."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(NO_COLOR="1", COLUMNS="200", **extra)
    return env


def test_the_client_distribution_holds_the_client_and_nothing_of_the_server(
        client_venv: Path, tmp_path: Path) -> None:
    code = ("import importlib.util, json, app.client, app.client.cli, app.client.sample\n"
            f"names = {SERVER_ONLY!r}\n"
            "def found(name):\n"
            "    try:\n"
            "        return importlib.util.find_spec(name) is not None\n"
            "    except ModuleNotFoundError:\n"
            "        return False\n"
            "print(json.dumps({'client': app.client.__file__,\n"
            "                  'server': [n for n in names if found(n)]}))\n")
    # run outside the checkout, so that only what pip installed can be imported
    answer = subprocess.run([str(client_venv / "bin" / "python"), "-c", code], cwd=tmp_path,
                            env=_clean_env(), capture_output=True, text=True, check=True)
    seen = json.loads(answer.stdout)
    assert seen["server"] == []
    assert Path(seen["client"]).is_relative_to(client_venv)
    # the check can fail: the dev environment that runs this test has the server
    here = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True,
                          text=True, check=True)
    assert "fastapi" in json.loads(here.stdout)["server"]


def test_the_installed_hinge_command_trains_and_predicts_on_a_live_server(
        client_venv: Path, tmp_path: Path) -> None:
    hinge = str(client_venv / "bin" / "hinge")
    settings = embedded_settings(tmp_path / "home")
    with running_service(settings, tmp_path) as (http, _workers):
        key = http.headers["Authorization"].removeprefix("Bearer ")
        env = _clean_env(HINGE_URL=str(http.base_url).rstrip("/"), HINGE_API_KEY=key)

        def run(*args: str) -> str:
            done = subprocess.run([hinge, *args], cwd=tmp_path, env=env, capture_output=True,
                                  text=True, timeout=300)
            assert done.returncode == 0, (args, done.stdout, done.stderr)
            return done.stdout

        run("sample", "--rows", "400", "--out", "train.txt")
        dataset = run("upload", "train.txt", "--quiet").strip()
        job = json.loads(run("--json", "train", dataset, "--solver", "dcd", "--watch"))
        assert job["status"] == "succeeded", job
        model = job["model_id"]
        lines = run("predict", model, "train.txt").splitlines()
        assert len(lines) == 400
        assert {line.split("\t")[0] for line in lines} <= {"-1", "1"}
