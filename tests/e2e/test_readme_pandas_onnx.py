"""The README's "From pandas to ONNX" example runs as written against a live service (a
real API server and a real Celery worker on SQLite): a pandas frame saved as CSV, uploaded,
trained, exported as ONNX and run in onnxruntime. The comment lines that end the block are
what it prints, checked against what it really prints."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.support import REPO

pytest.importorskip("onnxruntime", reason="the dev extras install onnxruntime")
pytest.importorskip("pandas", reason="the dev extras install pandas")

SECTION = "From pandas to ONNX"


def readme_example() -> tuple[str, list[str]]:
    """The section's python block, and the comment lines that end it (its output)."""
    text = (REPO / "README.md").read_text()
    start = text.index(f"\n## {SECTION}\n")
    end = text.find("\n## ", start + 1)
    match = re.search(r"```python\n(.*?)\n```", text[start:end if end >= 0 else None], re.S)
    assert match, f"no python block in {SECTION!r}"
    lines = match.group(1).splitlines()
    shown: list[str] = []
    while lines and lines[-1].startswith("# "):
        shown.insert(0, lines.pop()[2:])
    assert shown, "the block ends with the output it prints, as comment lines"
    return "\n".join(lines) + "\n", shown


def test_the_pandas_to_onnx_example_runs_as_written(tenant: httpx.Client, tmp_path: Path
                                                   ) -> None:
    code, shown = readme_example()
    # the shared service (tests/e2e/conftest.py), as a tenant of this test's own
    env = dict(os.environ, HINGE_URL=str(tenant.base_url).rstrip("/"),
               HINGE_API_KEY=tenant.headers["Authorization"].removeprefix("Bearer "),
               PYTHONPATH=str(REPO))
    work = tmp_path / "work"
    work.mkdir()
    (work / "example.py").write_text(code)
    done = subprocess.run([sys.executable, "example.py"], cwd=work, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.splitlines() == shown
