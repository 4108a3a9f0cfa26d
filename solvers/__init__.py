"""Hinge's numerical core: svmlight parsing, CSR data, and one module per SVM solver.

Imports only NumPy, SciPy and Numba. `fit` is the single entry point:

    from solvers import fit
    result = fit(X_csr, y, solver="dcd", C=1.0, loss="l2", eps=0.1)

returns a `solvers.result.FitResult` whose `model` (solvers/models.py: LinearModel or
KernelModel) is what the worker stores and the API serves. Layout: backbone.py (types,
progress monitor, driver loop), inputs.py (validation), params.py (the registry), train.py
(fit, warmup), one module per solver (smo/ a package), objectives.py, kernels.py,
models.py, formats.py (LIBLINEAR / LIBSVM files), svmlight.py (the parser).

Training modules are imported lazily, so that `solvers.params`, `solvers.models`,
`solvers.formats` and `solvers.svmlight` (used by the API) never load a solver.

The compiled kernels' cache: Numba's on-disk cache (`njit(cache=True)`) checks a kernel
against its own source file only, not against the helpers of other files that it inlines
(solvers/_kernel_helpers.py, solvers/smo/). So before any kernel module is imported,
`use_kernel_cache` points Numba's cache (NUMBA_CACHE_DIR, and Numba's config when Numba
is already imported) at a folder named after a hash of every solvers source,
`<base>/hinge-solvers-<hash>`: a kernel is only ever loaded by the sources it was
compiled from. `<base>` is NUMBA_CACHE_DIR as given (the Dockerfile's /tmp/numba-cache;
child processes inherit it with HINGE_NUMBA_CACHE_BASE, which says it was given), else
this package's `__pycache__` (a checkout, a writable install), else ~/.cache/hinge-numba,
else a folder of this user in the temporary directory: the first one that is writable.
Older folders in it are removed once a new one is made, the newest few kept. Standard
library only: importing `solvers` loads no NumPy and no Numba.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from solvers.result import FitResult


def fit(X: Any, y: Any, solver: str = "dcd", progress: Any = None, **params: Any) -> FitResult:
    from solvers.train import fit as _fit

    return _fit(X, y, solver=solver, progress=progress, **params)


_ROOT = Path(__file__).resolve().parent
_CACHE_PREFIX = "hinge-solvers-"
_CACHE_NAME = re.compile(re.escape(_CACHE_PREFIX) + "[0-9a-f]{16}")
_BASE_ENV = "HINGE_NUMBA_CACHE_BASE"  # NUMBA_CACHE_DIR as the user gave it (see _given_base)
_CACHES_KEPT = 4  # cache folders of other sources kept beside the current one


def sources_digest(root: Path = _ROOT) -> str:
    """A hash of every Python source below `root` (names and contents)."""
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py"), key=lambda p: p.relative_to(root).as_posix()):
        name = path.relative_to(root)
        if "__pycache__" not in name.parts:
            digest.update(name.as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def _given_base() -> Path | None:
    """NUMBA_CACHE_DIR as the user gave it, also when a parent process replaced it by its
    folder in it (it then says so in HINGE_NUMBA_CACHE_BASE). A folder that a parent
    process chose by default (the __pycache__ of its own sources, which may be another
    install) is not the user's: this process chooses its own."""
    given = os.environ.get("NUMBA_CACHE_DIR", "")
    if not given:
        return None
    path = Path(given)
    if not _CACHE_NAME.fullmatch(path.name):
        return path
    if os.environ.get(_BASE_ENV) == str(path.parent):
        return path.parent
    return None


def _cache_bases() -> Iterator[Path]:
    given = _given_base()
    if given is not None:
        yield given
    yield _ROOT / "__pycache__"
    try:
        home: Path | None = Path.home()
    except RuntimeError:  # no home directory
        home = None
    if home is not None:
        yield home / ".cache" / "hinge-numba"
    user = os.getuid() if hasattr(os, "getuid") else "user"
    yield Path(tempfile.gettempdir()) / f"hinge-numba-{user}"


def kernel_cache_dir() -> Path | None:
    """The folder of this version's compiled kernels (made when missing), or None when no
    candidate is writable (then Numba's own locations are used)."""
    name = _CACHE_PREFIX + sources_digest()
    for base in _cache_bases():
        folder = base / name
        try:
            made = not folder.is_dir()
            folder.mkdir(parents=True, exist_ok=True)
            if not os.access(folder, os.W_OK):
                continue
            os.utime(folder)  # the newest use: what pruning keeps
        except OSError:
            continue
        if made:
            _prune(base, folder)
        return folder
    return None


def _prune(base: Path, current: Path) -> None:
    """Remove all but the `_CACHES_KEPT` most recently used cache folders of other sources."""
    others = []
    for path in base.iterdir():
        if path != current and _CACHE_NAME.fullmatch(path.name):
            try:
                others.append((path.stat().st_mtime, path))
            except OSError:
                continue
    for _, path in sorted(others, reverse=True)[_CACHES_KEPT:]:
        shutil.rmtree(path, ignore_errors=True)


def use_kernel_cache() -> Path | None:
    """Point Numba's on-disk cache at `kernel_cache_dir()`; returns it."""
    given = _given_base()
    folder = kernel_cache_dir()
    if folder is not None:
        os.environ["NUMBA_CACHE_DIR"] = str(folder)  # what Numba's config reload reads
        if folder.parent == given:
            os.environ[_BASE_ENV] = str(given)
        else:
            os.environ.pop(_BASE_ENV, None)
        config = sys.modules.get("numba.core.config")
        if config is not None:  # Numba already imported: it read the environment then
            config.CACHE_DIR = str(folder)  # type: ignore[attr-defined]
    return folder


# Numba's thread pool: OpenMP first. Numba prefers TBB whenever libtbb can be loaded
# (another package in the process may bring it: scikit-learn-intelex does), and SMO's
# per-step parallel loops, a few microseconds each, run slower on TBB than on OpenMP: a
# fit's threads must not depend on what else the process imported. A layer or an order
# given in the environment wins.
_LAYERS = "omp tbb workqueue"


def prefer_openmp() -> None:
    """Numba's threading-layer order: OpenMP, TBB, workqueue, unless the environment
    gives one (NUMBA_THREADING_LAYER_PRIORITY; NUMBA_THREADING_LAYER overrides any order)."""
    if "NUMBA_THREADING_LAYER_PRIORITY" in os.environ:
        return
    os.environ["NUMBA_THREADING_LAYER_PRIORITY"] = _LAYERS  # what a config reload reads
    config = sys.modules.get("numba.core.config")
    if config is not None:
        config.THREADING_LAYER_PRIORITY = _LAYERS.split()  # type: ignore[attr-defined]


use_kernel_cache()
prefer_openmp()

__all__ = ["fit", "kernel_cache_dir", "prefer_openmp", "sources_digest", "use_kernel_cache"]
