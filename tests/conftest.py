from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.api.main import create_app
from app.settings import Settings
from testkit import bundled
from tests.support import (
    IN_CI,
    SHARED_DATA,
    bearer,
    embedded_settings,
    make_key,
    migrate,
    moto_server,
    s3_overrides,
    unavailable,
)

PARITY_REASON = (
    f"parity test: the shared LIBSVM data sets are not at {SHARED_DATA} "
    "(../shared/data beside the clone, or $HINGE_SHARED_DATA)"
)


def pytest_runtest_setup(item: pytest.Item) -> None:
    """A `parity` test compares with LIBSVM or LIBLINEAR on their own data sets: without
    the shared folder it is skipped, all with this one reason (under CI=true it fails)."""
    if item.get_closest_marker("parity") is not None and not SHARED_DATA.is_dir():
        if IN_CI:
            pytest.fail(PARITY_REASON + " (CI=true: the shared data must be there)")
        pytest.skip(PARITY_REASON)


# Under pytest-xdist's --dist loadfile --no-loadscope-reorder (`make test`; without the
# flag, xdist hands out the files with the most tests first) the files are handed out in
# collection order, one at a time to whichever process is free: a long file handed out last
# runs alone at the end while the other processes have nothing left. So the longest files
# go first, longest first (LONGEST: the files over 20 s of test time in a fresh clone's
# `make test`, measured at 759fce0), then the other end-to-end and deployment files (live
# servers and processes), and the unit files (seconds each) fill the end. In that run
# tests/workers/test_training.py (56 s) and bench/tests/test_run.py (48 s) were handed out
# last, and the third process sat idle for their last minute. A single-process run keeps
# the order of the tree.
LONGEST = (
    "tests/e2e/test_lifecycle.py", "tests/e2e/test_searches.py", "tests/e2e/test_cli_daily.py",
    "tests/deploy/test_shipped_install.py", "tests/e2e/test_dashboard_every_page.py",
    "tests/workers/test_training.py", "tests/e2e/test_batch_predictions.py",
    "tests/e2e/test_imports.py", "tests/e2e/test_share_nothing.py", "bench/tests/test_run.py",
    "tests/e2e/test_make_run.py", "tests/e2e/test_search_dashboard.py",
    "tests/e2e/test_dashboard_explains.py", "tests/e2e/test_out_of_core_jobs.py",
    "tests/e2e/test_leases.py", "tests/app/test_onnx_export.py",
    "tests/solvers/test_certificates.py", "tests/hinge/test_gallery.py",
    "tests/solvers/test_tron.py", "tests/app/test_model_import.py",
    "tests/solvers/test_linear_formulations_lr_l1.py", "tests/e2e/test_predict_cache.py",
    "tests/solvers/test_svmlight.py", "tests/app/test_jobs.py",
)
LONG_FILES_FIRST = ("tests/e2e/", "tests/deploy/")


def _handed_out(item: pytest.Item) -> tuple[int, int]:
    path = item.nodeid.split("::", 1)[0]
    if path in LONGEST:
        return 0, LONGEST.index(path)
    return (1 if path.startswith(LONG_FILES_FIRST) else 2), 0


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    if os.environ.get("PYTEST_XDIST_WORKER"):
        items.sort(key=_handed_out)  # stable: a file's tests stay in their order


@pytest.fixture(scope="session", autouse=True)
def kernels_compiled_once_across_workers() -> None:
    """Under pytest-xdist (`make test`), each worker process first warms every solver
    kernel (solvers.warmup.warmup): on a fresh clone the processes share the compiling out
    by warm-up group (a file lock per group) and then load from Numba's on-disk cache, where
    otherwise each would compile, at once, whatever its first tests call (three processes
    compiling SMO's kernels side by side on two cores took minutes). A single-process run
    compiles lazily, as a developer running one file expects."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        from solvers.warmup import warmup

        warmup()


@pytest.fixture(scope="session")
def cancer_bytes() -> bytes:
    """scikit-learn's breast_cancer, scaled to [-1, 1], as svmlight (testkit.bundled):
    569 rows, 30 features, labels -1/+1."""
    return bundled.svmlight_bytes("cancer")


@pytest.fixture(scope="session")
def s3_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A local S3-compatible server (moto's, a child process on loopback) for the session."""
    with contextlib.ExitStack() as stack:
        try:
            endpoint = stack.enter_context(moto_server(tmp_path_factory.mktemp("moto")))
        except Exception as exc:
            unavailable("the moto S3 server (pip install 'moto[server]')", exc)
        yield endpoint


@pytest.fixture
def blob_backend() -> str:
    """local; a module that overrides this fixture with params=BLOB_BACKENDS runs on s3 too."""
    return "local"


@pytest.fixture
def blob_overrides(request: pytest.FixtureRequest, blob_backend: str) -> dict[str, Any]:
    """Settings of the blob backend: nothing for local, a fresh bucket for s3."""
    if blob_backend == "local":
        return {}
    return s3_overrides(request.getfixturevalue("s3_endpoint"))


@pytest.fixture(scope="session")
def migrated_sqlite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite database file that alembic migrated to head, once per test process: each
    test's `settings` starts from a copy (the file that alembic makes, in a millisecond
    instead of the 0.2-0.4 s of CPU that running every migration again takes, a
    thousand times in the suite). The migrations seed no rows, so copies share nothing."""
    configured = embedded_settings(tmp_path_factory.mktemp("migrated") / "home")
    configured.ensure_dirs()
    migrate(configured.database_url)
    path = Path(configured.database_url.removeprefix("sqlite:///"))
    leftovers = [p.name for p in path.parent.glob(path.name + "-*")]
    assert path.is_file() and not leftovers, leftovers  # no WAL left beside the file
    return path


@pytest.fixture
def settings(tmp_path: Path, blob_overrides: dict[str, Any], migrated_sqlite: Path) -> Settings:
    """The embedded default (SQLite database + SQLite broker) in a fresh HINGE_HOME, with
    blobs on the `blob_backend`; its database is a copy of `migrated_sqlite`."""
    configured = embedded_settings(tmp_path / "home", **blob_overrides)
    configured.ensure_dirs()
    if configured.database_url.startswith("sqlite:///"):  # a fresh home: no file yet
        shutil.copyfile(migrated_sqlite, configured.database_url.removeprefix("sqlite:///"))
    else:
        migrate(configured.database_url)
    return configured


@pytest.fixture
def admin_key(settings: Settings) -> str:
    """An admin key of tenant "default"."""
    return make_key(settings)


@pytest.fixture
def client(settings: Settings, admin_key: str) -> Iterator[TestClient]:
    """The app on the embedded default, called with `admin_key`."""
    with TestClient(create_app(settings), headers=bearer(admin_key)) as test_client:
        yield test_client

