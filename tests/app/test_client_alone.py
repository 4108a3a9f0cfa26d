"""The Python client and the `hinge` command line (app.client) stand alone: they import
nothing of the server, so they can be installed and used without it."""

from __future__ import annotations

import subprocess
import sys

from app.client import TERMINAL
from app.domain.job_status import TERMINAL_STATUSES
from testkit.paths import REPO


def test_the_client_knows_the_servers_terminal_statuses() -> None:
    assert {status.value for status in TERMINAL_STATUSES} == TERMINAL


def test_importing_the_client_and_the_cli_loads_no_server_module() -> None:
    code = ("import sys, app.client, app.client.cli, app.client.sample; "
            "print(sorted(m for m in sys.modules if m.startswith('app.') and "
            "not m.startswith('app.client')))")
    loaded = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True,
                            text=True, check=True).stdout.strip()
    assert loaded == "[]"
    # and the check sees a server module when one is loaded
    code = code.replace("app.client.sample;", "app.client.sample, app.infra.db;")
    seen = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True,
                          text=True, check=True).stdout.strip()
    assert "app.infra.db" in seen
