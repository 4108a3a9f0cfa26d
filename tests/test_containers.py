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
    assert {"postgres", "redis", "minio", "minio-bucket", "migrate", "api", "worker"} <= set(
        services)
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
    assert services["api"]["deploy"]["replicas"] >= 2
    assert "container_name" not in services["api"]


def test_compose_shares_nothing_but_the_servers() -> None:
    """API and workers keep blobs in MinIO (its bucket made by a one-shot service they
    wait for), mount no volume, and every API replica gets the same secret key."""
    services = _compose()["services"]
    for name in ("api", "worker"):
        service = services[name]
        env = service["environment"]
        assert env["HINGE_BLOB_BACKEND"] == "s3"
        assert env["HINGE_S3_ENDPOINT_URL"] == "http://minio:9000"
        assert "volumes" not in service, f"{name} mounts a volume"
        assert service["depends_on"]["minio-bucket"]["condition"] == (
            "service_completed_successfully")
        assert env["HINGE_SECRET_KEY"].startswith("${HINGE_SECRET_KEY:?")
    bucket = services["minio-bucket"]
    assert bucket["depends_on"]["minio"]["condition"] == "service_healthy"
    made = " ".join(bucket["command"])
    wanted = services["api"]["environment"]["HINGE_S3_BUCKET"]
    assert f"mc mb --ignore-existing store/{wanted}" in made
    minio = services["minio"]["environment"]
    assert services["api"]["environment"]["HINGE_S3_SECRET_ACCESS_KEY"] == (
        minio["MINIO_ROOT_PASSWORD"])


def test_dockerfile_builds_one_image_for_api_and_worker() -> None:
    text = (REPO / "Dockerfile").read_text()
    for folder in ("app", "workers", "solvers", "migrations"):
        assert f"COPY {folder} ./{folder}" in text
    assert "USER hinge" in text
    assert "app.api.main:create_app" in text


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
