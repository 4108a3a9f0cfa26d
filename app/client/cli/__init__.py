"""`hinge`: Hinge's command line (Typer + Rich), on the Python client in app/client/__init__.py.

It reads HINGE_URL (default http://127.0.0.1:$HINGE_PORT, port 8000 by default) and
HINGE_API_KEY (or --url and --api-key). `hinge sample` writes a small dataset (app/client/sample.py)
without a server. Exit codes: 0 success; 1 an API or connection error (its message on stderr);
2 a usage error (a missing key or a malformed address included: the message names the
variable or flag to set); 3 a watched job that ended `failed` or `cancelled`; 130
interrupted by Ctrl-C (after asking whether to cancel the watched job, whatever the answer).

Every id argument may be a unique prefix (the server resolves it
among your own, an ambiguous one is an error listing the candidates). Lists show the
shortest unique prefix of each id (8 digits at least), `--wide` the whole ids; `--json`,
before or after the command, prints the API's JSON answers for scripts.
"""

from __future__ import annotations

# Each module registers its commands on `app` as it is imported: this order is the order of
# `hinge --help`'s commands (the `models` group comes after them all).
# isort: off
from app.client.cli import datasets  # noqa: F401
from app.client.cli import jobs  # noqa: F401
from app.client.cli import models  # noqa: F401
from app.client.cli import evaluations  # noqa: F401
from app.client.cli import searches  # noqa: F401
# isort: on
from app.client.cli.common import app, short_ids
from app.client.cli.jobs import SOLVER_NAMES, parse_param, watch_job

__all__ = ["SOLVER_NAMES", "app", "main", "parse_param", "short_ids", "watch_job"]


def main() -> None:
    """The console script `hinge`."""
    app()
