"""Warm-up: compile (or load from Numba's on-disk cache) every solver kernel.

Compiling every kernel from an empty Numba cache costs about two minutes of CPU (SMO alone
over half of it), loading them from the on-disk cache seconds. The kernels are warmed in
groups, in this order: those of `auto`'s linear path (the default of a job: dcd, tron,
ocas, newton, gram, with the certificate), the svmlight parser, SMO's, then the rest. A
solver that reads float32 values as stored (SolverSpec.reads_float32: dcd, tron,
logistic_dcd, ocas) is also fitted on float32 values, one binary fit a variant, for the
float32 specializations of its kernels.
Numba's cache is a set of files, so several processes can fill it at once, each compiling
other groups (`compile_groups`): a group is compiled under a file lock beside the cache,
and a process that finds a group's lock taken goes on to the next one, coming back to it
(now a load from the cache) once the holder is done. The worker does this with helper
processes (workers.warmup.warm_up); `warmup()` does it all in the calling process.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import os
import platform
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import numpy as np
import scipy.sparse as sp

from solvers import workflow
from solvers.backbone import LinearProblem
from solvers.inputs import as_csr_arrays
from solvers.kernels import KernelModel
from solvers.objectives import margins
from solvers.params import SOLVERS
from solvers.result import FitResult
from solvers.train import fit, solver_module

# Entry points to warm: a solver's fits, "<solver>:<part>" its warm_<part>_kernels, "workflow"
# (scaling, calibration), "parser" (the svmlight parser: the API's first upload, which a
# helper compiles first, so that the API loads it from the cache rather than compiling it).
# A solver's group is its registry entry's warmup_group; SMO's parts have groups of their own;
# the registry's "other" solvers are split in two, these in "other-tasks".
_TASK_SOLVERS = ("crammer_singer", "linear_svr", "linear_one_class")


def _solvers_of(group: str) -> tuple[str, ...]:
    return tuple(name for name, spec in SOLVERS.items() if spec.warmup_group == group)


WARMUP_GROUPS: dict[str, tuple[str, ...]] = {
    "linear": ("margins", *_solvers_of("linear")),
    "parser": ("parser",),
    "smo": _solvers_of("smo"),
    "smo-parallel": ("smo:rare",),
    "smo-formulations": ("smo:formulation",),
    "smo-batched": ("smo:batched",),
    # the rest in two groups of about equal compile time (20-27 s of CPU each from an empty
    # cache), so that the processes of `make test`'s compile step share them out
    "other": tuple(name for name in _solvers_of("other") if name not in _TASK_SOLVERS),
    "other-tasks": (*(name for name in _solvers_of("other") if name in _TASK_SOLVERS),
                    "workflow", "out_of_core"),
}
# The groups longest first (CPU seconds from an empty cache on the 2-core machine: smo 40,
# linear 26, smo-batched 19, the two "other" groups about 20 each, smo-parallel 6,
# parser 3): the order of testkit.kernels' processes, which take the next free group, so
# that no process starts a long group while the other has nothing left (in
# WARMUP_GROUPS' order the last group, 34 s, ran alone for about 15 s).
LONGEST_FIRST: tuple[str, ...] = ("smo", "linear", "smo-batched", "other", "other-tasks",
                                  "smo-parallel", "parser", "smo-formulations")
# What `auto` (the job default) and `smo` use: a worker reports ready once these are loaded.
PRIORITY_GROUPS: tuple[str, ...] = ("linear", "smo", "smo-parallel")


def warmup(groups: tuple[str, ...] | None = None) -> float:
    """Compile (or load from the on-disk cache) every solver kernel and every prediction
    kernel (or those of `groups`, names of WARMUP_GROUPS) in this process; returns seconds
    taken. Another process compiling a group meanwhile is waited for, then its kernels are
    loaded from the cache instead of being compiled twice."""
    started = time.perf_counter()
    groups = tuple(WARMUP_GROUPS) if groups is None else groups
    compile_groups(groups)
    if set(groups) == set(WARMUP_GROUPS):
        mark_cache_complete()
    return time.perf_counter() - started


def compile_groups(groups: tuple[str, ...], wait: bool = True) -> list[str]:
    """Warm each group of `groups` in this process, in order; a group whose lock another
    process holds is skipped at first and, with `wait`, warmed after that process is done
    (then from the cache). Returns the groups warmed here, in the order they were."""
    unknown = set(groups) - set(WARMUP_GROUPS)
    if unknown:
        raise ValueError(f"unknown warm-up groups: {sorted(unknown)}")
    pending = list(groups)
    done: list[str] = []
    for blocking in (False, True) if wait else (False,):
        for group in list(pending):
            with _group_lock(group, blocking) as held:
                if held:
                    _warm_group(group)
                    pending.remove(group)
                    done.append(group)
    return done


def _warm_group(group: str) -> None:
    entries = WARMUP_GROUPS[group]
    if group == "other":  # and any registered solver that no group names
        named = {entry for entries in WARMUP_GROUPS.values() for entry in entries}
        entries += tuple(name for name in SOLVERS if name not in named)
    for entry in entries:
        _warm_entry(entry)


def _warm_entry(entry: str) -> None:
    X = sp.csr_matrix(np.round(np.random.default_rng(0).normal(size=(12, 3)), 2))
    y = np.array([1.0, 2.0, 3.0] * 4)
    if entry == "margins":
        problem = LinearProblem(as_csr_arrays(X), np.where(y == 1.0, 1.0, -1.0), np.ones(12),
                                1.0)
        margins(problem, np.zeros(problem.n_weights))
        return
    if entry == "workflow":
        workflow.warmup()
        return
    if entry == "out_of_core":  # block minimization and streaming tron (not registered)
        importlib.import_module("solvers.out_of_core").warmup()
        return
    if entry == "parser":
        from solvers.svmlight import parse_stream

        parse_stream([b"+1 1:0.5 3:1 # a comment\n-1 qid:2 2:1e-3 4:-2\n"])
        return
    name, _, part = entry.partition(":")
    module = solver_module(name)
    if part:
        getattr(module, f"warm_{part}_kernels")()
        return
    variants: tuple[dict[str, Any], ...] = getattr(module, "WARMUP_VARIANTS", ({},))
    binary = np.where(y == 1.0, 1.0, -1.0)
    for variant in variants:
        for labels in (y, binary):  # multi-class, binary
            result = fit(X, labels, solver=name, progress=lambda event: None, **variant)
            _check_warm_fit(name, result, X)
        if SOLVERS[name].reads_float32:  # its kernels' float32-values specializations
            compact = X.astype(np.float32)
            result = fit(compact, binary, solver=name, progress=lambda event: None,
                         **variant)
            _check_warm_fit(name, result, compact)
    if getattr(module, "warm_rare_kernels", None) is not None and f"{name}:rare" not in {
            e for entries in WARMUP_GROUPS.values() for e in entries}:
        cast(Any, module).warm_rare_kernels()


def cache_fingerprint() -> str:
    """What the kernels in the cache were compiled from: Numba's and Python's versions,
    the machine and the solvers' sources (`solvers.sources_digest`, the digest that also
    names the cache's folder: one fingerprint of the sources)."""
    import numba

    from solvers import sources_digest

    parts = [numba.__version__, platform.python_version(), platform.machine(),
             sources_digest()]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def cache_is_complete() -> bool:
    """True when a warm-up of every group has finished since the solvers last changed (a
    marker beside the locks; deleting the cache deletes it too)."""
    try:
        return (_lock_dir() / _COMPLETE).read_text().strip() == cache_fingerprint()
    except OSError:
        return False


def mark_cache_complete() -> None:
    with contextlib.suppress(OSError):
        (_lock_dir() / _COMPLETE).write_text(cache_fingerprint() + "\n")


_COMPLETE = "hinge-kernels-complete"


def _lock_dir() -> Path:
    """Where the group locks live: beside Numba's cache (NUMBA_CACHE_DIR, else this
    package's __pycache__), or a temporary folder if that one is not writable."""
    from numba.core import config

    chosen = str(getattr(config, "CACHE_DIR", "") or "")  # NUMBA_CACHE_DIR
    base = Path(chosen) if chosen else Path(__file__).parent / "__pycache__"
    with contextlib.suppress(OSError):
        base.mkdir(parents=True, exist_ok=True)
        if os.access(base, os.W_OK):
            return base
    digest = hashlib.sha256(str(base).encode()).hexdigest()[:12]
    fallback = Path(tempfile.gettempdir()) / f"hinge-kernels-{digest}"
    fallback.mkdir(parents=True, exist_ok=True)
    return fallback


@contextlib.contextmanager
def _group_lock(group: str, blocking: bool) -> Iterator[bool]:
    """An exclusive lock on a warm-up group (fcntl.flock: released when the process ends,
    however it ends); yields False when not blocking and another process holds it."""
    try:
        import fcntl
    except ImportError:  # no flock (Windows): every process warms every group itself
        yield True
        return
    with open(_lock_dir() / f"hinge-warm-{group}.lock", "a+b") as file:
        try:
            fcntl.flock(file, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
            return
        yield True  # closing the file releases the lock


def _check_warm_fit(name: str, result: FitResult, X: Any) -> None:
    model = result.model
    if isinstance(model, KernelModel):
        model.predict(X, threads=1)
    _, values = model.predict(X)
    if not np.all(np.isfinite(values)):
        raise RuntimeError(f"warm-up fit of solver {name!r} gave non-finite decision values")
