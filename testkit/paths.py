"""Where the repository and the shared LIBSVM data sets are (tests and bench both use it)."""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# the shared LIBSVM data sets (../shared/data beside the repository; MANIFEST.md there)
DATA_DIR = Path(os.environ.get("HINGE_SHARED_DATA") or REPO.parent / "shared" / "data")
