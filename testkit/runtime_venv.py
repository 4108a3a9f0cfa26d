"""The service as it ships: a clean virtualenv with `pip install .` and nothing else (no
dev extras, not editable), built the way the Dockerfile builds its image.

The deployment tests (tests/deploy) run the API, the workers and the migrations from it,
with a working directory outside the repository, so that only what `pip install .`
installed is importable. `python -m testkit.runtime_venv` (or `make runtime-venv`) builds
or refreshes it; the tests' session fixture does the same when it is missing or stale.

Then, as the Dockerfile does, it compiles every solver kernel into Numba's on-disk cache
(beside the installed package: `solvers/__pycache__/hinge-solvers-<hash of the solvers
sources>`, see solvers/__init__.py), so that no deployment test waits for a compiler.
Kernels already compiled in the checkout (the same folder of its own `solvers`, which the
dev suite fills) are copied there first, when the two hashes agree: Numba names a
kernel's folder in the cache after the absolute path of its source folder, so each is
copied to the name of the installed folder. Numba checks each cache index against its
source file, its own version and the CPU: an entry that does not apply is compiled
again, never used. The installed sources also get the repository files' modification
times back (pip stamps them with the install's time).

Staleness: the virtualenv records a fingerprint of what it was built from. When
pyproject.toml changed, it is made again from nothing (`python -m venv`, `pip install`),
so a dependency removed from pyproject.toml is gone from it too; when only the sources
changed, the package alone is installed again (`--no-deps --force-reinstall`). Either way
pip installs from a copy of exactly the files the Dockerfile copies (pyproject.toml,
README.md and the four packages, without caches), never from a stale `build/` folder.
pip's download cache is used as usual.

Standard library only: `make runtime-venv` may run it before the dev extras exist.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
VENV = Path(os.environ.get("HINGE_RUNTIME_VENV") or REPO / ".venv-runtime")
# what the Dockerfile copies before `pip install .` (alembic.ini is not installed)
PACKAGES = ("app", "workers", "solvers", "migrations")
FILES = ("pyproject.toml", "README.md")
STAMP = "hinge-build.json"
PENDING = "kernels_pending"  # in the stamp: installed, not yet seeded nor warmed
STEP_SECONDS = 1800  # pip's install, the kernels' compilation: each ends within this
SKIPPED = ("__pycache__", "*.pyc", "*.nbi", "*.nbc", "*.egg-info")


def python_of(venv: Path) -> Path:
    return venv / "bin" / "python"


def _source_files(repo: Path) -> Iterator[Path]:
    for name in FILES:
        yield repo / name
    for package in PACKAGES:
        for path in sorted((repo / package).rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts \
                    and path.suffix not in {".pyc", ".nbi", ".nbc"}:
                yield path


def fingerprints(repo: Path = REPO) -> dict[str, str]:
    """{"dependencies": hash of pyproject.toml, "sources": hash of every shipped file}."""
    sources = hashlib.sha256()
    for path in _source_files(repo):
        sources.update(str(path.relative_to(repo)).encode() + b"\0")
        sources.update(path.read_bytes() + b"\0")
    return {"dependencies": hashlib.sha256((repo / "pyproject.toml").read_bytes()).hexdigest(),
            "sources": sources.hexdigest()}


def _recorded(venv: Path) -> dict[str, str]:
    with contextlib.suppress(OSError, ValueError):
        recorded = json.loads((venv / STAMP).read_text())
        if isinstance(recorded, dict) and python_of(venv).exists():
            return recorded
    return {}


@contextlib.contextmanager
def _locked(venv: Path) -> Iterator[None]:
    """One builder at a time (pytest-xdist workers, a `make` beside a test run)."""
    venv.parent.mkdir(parents=True, exist_ok=True)
    with open(venv.parent / f"{venv.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _pip_install(python: Path, repo: Path, *options: str) -> None:
    with tempfile.TemporaryDirectory(prefix="hinge-ship-") as scratch:
        source = Path(scratch) / "hinge"
        source.mkdir()
        for name in FILES:
            shutil.copy2(repo / name, source / name)
        for package in PACKAGES:
            shutil.copytree(repo / package, source / package,
                            ignore=shutil.ignore_patterns(*SKIPPED))
        # --no-compile: the same files, without pip's bytecode of every module of every
        # dependency (16 CPU s, taken from the kernels' compile beside it in make test);
        # the service's processes write the bytecode of what they import, once
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--no-compile",
                        "--disable-pip-version-check", *options, str(source)],
                       check=True, cwd=scratch, env=_clean_env(), timeout=STEP_SECONDS)


def site_packages(venv: Path) -> Path:
    return next((venv / "lib").glob("python3*/site-packages"))


def _shipped_pairs(venv: Path, repo: Path) -> Iterator[tuple[Path, Path]]:
    """(installed file, its repository source) for every installed file of PACKAGES."""
    installed = site_packages(venv)
    for package in PACKAGES:
        for path in (installed / package).rglob("*"):
            source = repo / path.relative_to(installed)
            if path.is_file() and "__pycache__" not in path.parts and source.is_file():
                yield path, source


def _restore_times(venv: Path, repo: Path) -> None:
    for installed, source in _shipped_pairs(venv, repo):
        stat = source.stat()
        os.utime(installed, ns=(stat.st_atime_ns, stat.st_mtime_ns))


def _kernel_cache(python: Path, cwd: Path) -> Path | None:
    """The folder of Numba's cache that `python` uses for the `solvers` it imports from
    `cwd` (solvers/__init__.py chooses it), or None."""
    done = subprocess.run(
        [str(python), "-c", "import solvers; print(solvers.kernel_cache_dir() or '')"],
        cwd=cwd, env=_clean_env(), capture_output=True, text=True, timeout=60)
    return Path(done.stdout.strip()) if done.returncode == 0 and done.stdout.strip() else None


def _numba_subfolder(source_folder: Path) -> str:
    """Numba's name for the cache folder of the sources in `source_folder`, inside
    NUMBA_CACHE_DIR (numba.core.caching: get_suitable_cache_subpath)."""
    path = os.path.abspath(source_folder)
    return f"{os.path.basename(path)}_{hashlib.sha1(path.encode()).hexdigest()}"


def _seed_numba_cache(venv: Path, repo: Path) -> int:
    """Copy the checkout's compiled kernels into the virtualenv's cache folder (when both
    were compiled from the same sources); returns how many files were copied."""
    ours = _kernel_cache(Path(sys.executable), repo)
    theirs = _kernel_cache(python_of(venv), venv)
    if ours is None or theirs is None or ours.name != theirs.name:
        return 0
    installed = site_packages(venv)
    copied = 0
    for folder in [repo / "solvers", *sorted(p for p in (repo / "solvers").rglob("*")
                                               if p.is_dir() and p.name != "__pycache__")]:
        source = ours / _numba_subfolder(folder)
        if not source.is_dir():
            continue
        target = theirs / _numba_subfolder(installed / folder.relative_to(repo))
        target.mkdir(parents=True, exist_ok=True)
        for cached in source.glob("*.nb[ic]"):
            shutil.copy2(cached, target / cached.name)
            copied += 1
    return copied


def _warm_up(python: Path) -> str:
    """The Dockerfile's compile step, by the virtualenv's python, isolated (-I) in an
    empty folder; returns its line."""
    with tempfile.TemporaryDirectory(prefix="hinge-warmup-") as scratch:
        done = subprocess.run(
            [str(python), "-I", "-c", "from solvers.warmup import warmup; "
             "print(f'solver kernels compiled or loaded in {warmup():.1f} s')"],
            cwd=scratch, env=_clean_env(), check=True, stdout=subprocess.PIPE, text=True,
            timeout=STEP_SECONDS)
    return done.stdout.strip()


def _clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in {"PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PIP_REQUIRE_VIRTUALENV"}}
    return env


def ensure(venv: Path = VENV, repo: Path = REPO, log: bool = True,
           install_only: bool = False) -> Path:
    """The runtime-only virtualenv at `venv`, built or refreshed from `repo` when stale;
    returns its python. With `install_only`, only `pip install` (make test runs that
    beside the dev install, with the standard library's python, and the rest, the seed
    and the warm-up, once the checkout's kernels are compiled); the stamp then says that
    the kernels are still to come."""
    with _locked(venv):
        wanted = fingerprints(repo)
        recorded = _recorded(venv)
        if recorded == wanted:
            return python_of(venv)
        started = time.monotonic()
        pending = recorded.pop(PENDING, None) is not None and recorded == wanted
        if pending:
            what = "finished (installed ahead)"
        elif recorded.get("dependencies") != wanted["dependencies"]:
            what = "built"
            shutil.rmtree(venv, ignore_errors=True)
            # the interpreter that runs this (the Dockerfile's python:3.11 image: 3.11)
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True,
                           env=_clean_env())
            _pip_install(python_of(venv), repo)
        else:
            what = "refreshed (sources changed)"
            (venv / STAMP).unlink(missing_ok=True)
            _pip_install(python_of(venv), repo, "--no-deps", "--force-reinstall")
        installed_at = time.monotonic()
        if not pending:
            _restore_times(venv, repo)
            (venv / STAMP).write_text(json.dumps({**wanted, PENDING: True}))
        if install_only:
            if log:
                print(f"runtime virtualenv {venv} {what}, kernels to come: pip "
                      f"{installed_at - started:.1f} s", file=sys.stderr, flush=True)
            return python_of(venv)
        seeded = _seed_numba_cache(venv, repo)
        warmed = _warm_up(python_of(venv))
        (venv / STAMP).write_text(json.dumps(wanted))
        if log:
            print(f"runtime virtualenv {venv} {what}: pip {installed_at - started:.1f} s, "
                  f"{seeded} Numba cache files from the checkout, {warmed}; "
                  f"{time.monotonic() - started:.1f} s in all", file=sys.stderr, flush=True)
        return python_of(venv)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--venv", type=Path, default=VENV)
    parser.add_argument("--install-only", action="store_true",
                        help="pip install only; the seed and the warm-up on the next run")
    args = parser.parse_args(argv)
    print(ensure(args.venv, install_only=args.install_only))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
