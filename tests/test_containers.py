"""docker-compose.yml and Dockerfile: the production stack is described completely.

No Docker engine runs on the build machines, so these check the files themselves, and run
`docker compose config` (or docker-compose v1) where a client is installed.
"""

from __future__ import annotations

import shutil
import subprocess

import pytest
import yaml

from tests.support import REPO


def _compose() -> dict:
    return yaml.safe_load((REPO / "docker-compose.yml").read_text())


def test_compose_has_the_whole_stack_and_workers_scale() -> None:
    services = _compose()["services"]
    assert {"postgres", "redis", "migrate", "api", "worker"} <= set(services)
    assert services["migrate"]["command"] == ["alembic", "upgrade", "head"]
    for name in ("api", "worker"):
        env = services[name]["environment"]
        assert env["HINGE_DATABASE_URL"].startswith("postgresql+psycopg://")
        assert env["HINGE_BROKER_URL"].startswith("redis://")
        assert services[name]["depends_on"]["migrate"]["condition"] == (
            "service_completed_successfully")
    worker = services["worker"]
    assert "container_name" not in worker and "ports" not in worker  # --scale worker=N
    assert worker["command"][:4] == ["celery", "-A", "workers.celery_app", "worker"]


def test_dockerfile_builds_one_image_for_api_and_worker() -> None:
    text = (REPO / "Dockerfile").read_text()
    for folder in ("app", "workers", "solvers", "migrations"):
        assert f"COPY {folder} ./{folder}" in text
    assert "USER hinge" in text
    assert "app.main:create_app" in text


@pytest.mark.parametrize("client", [["docker", "compose"], ["docker-compose"]])
def test_compose_config_validates(client: list[str]) -> None:
    if shutil.which(client[0]) is None:
        pytest.skip(f"{client[0]} is not installed")
    probe = subprocess.run([*client, "version"], capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip(f"{' '.join(client)} is not available: {probe.stderr.strip()[:200]}")
    result = subprocess.run([*client, "config", "-q"], cwd=REPO, capture_output=True,
                            text=True)
    assert result.returncode == 0, result.stderr
