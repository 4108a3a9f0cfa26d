"""Benchmark our DCD solver against LIBLINEAR's dual CD (-s 3 l1, -s 1 l2).

Same problem for both: C = 1, bias feature of value 1 (LIBLINEAR -B 1 = our
bias="augment", bias_scale=1), single thread. Parsing and Numba compilation are excluded
(we warm up first; cold-compile and cache-load times are measured in fresh subprocesses
and reported separately). Engines alternate within every repetition; times are medians of
the process CPU time (both engines run single-threaded in this process, and CPU time is
much less disturbed than wall-clock time by other work on a shared machine).

Reported per data set and loss:
- eps = 0.1 (both defaults): time, iterations, exit, primal objective and its relative
  suboptimality against a tight reference optimum P* (the best primal value any run
  reached; our tight run's dual value certifies it). LIBLINEAR 2.50 caps its dual CD at 300
  sweeps (then -s 1 switches to its primal Newton solver, -s 3 stops); our max_iter
  default is 1000, so we also run ours with max_iter=300.
- time to reach 1e-2 and 1e-3 relative primal suboptimality: each engine runs a ladder of
  eps values; the time of the cheapest rung that reaches the target is reported (and every
  rung is drawn in dcd.png: suboptimality against time, as Hsieh et al. 2008 draw it).
- a generated text-like set (testkit.datagen.text_like, 500k x 100k; 20k x 10k with --quick),
  cached as .npz in bench/scratch/dcd/, at eps = 0.1 beside LIBLINEAR.
- LIBLINEAR-multicore (`-n 1`, `-n 2`, wall-clock time) beside ours and LIBLINEAR, through a
  helper process in its own virtualenv bench/.venv-multicore (created on demand: the
  package also installs a module named `liblinear`), which loads the same arrays (.npz).

Usage: python bench/dcd_bench.py [--quick] [--reps 5] [--datasets a9a w8a ijcnn1]
       (or python -m bench.run --only dcd). Writes bench/results/dcd.md and dcd.png.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import datetime  # noqa: E402
import functools  # noqa: E402
import json  # noqa: E402
import lzma  # noqa: E402
import math  # noqa: E402
import platform  # noqa: E402
import shutil  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402
import scipy.sparse as sp  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.paths import DATA_DIR, results_dir, smaller  # noqa: E402

RESULTS = results_dir() / "dcd.md"
SCRATCH = REPO / "bench" / "scratch" / "dcd"
MULTICORE_VENV = REPO / "bench" / ".venv-multicore"
LIBLINEAR_SOLVER = {"l1": 3, "l2": 1}
EPS_LADDER = (3.0, 2.0, 1.4, 1.0, 0.7, 0.5, 0.35, 0.25, 0.18, 0.13, 0.1, 0.07, 0.05, 0.035,
              0.025, 0.018, 0.013, 0.01, 0.005, 0.002, 0.001, 3e-4, 1e-4)
QUICK_LADDER = (1.0, 0.25, 0.05, 0.01, 0.003, 0.001, 1e-4)  # --quick: 7 rungs (full: 23)
TARGETS = (1e-2, 1e-3)


@dataclass
class Run:
    seconds: float
    primal: float
    iterations: int | None = None
    exit_reason: str | None = None


@dataclass
class Setting:
    """What one invocation measures (the CLI and main() both build one)."""

    reps: int
    datasets: list[str]
    generated: tuple[int, int] | None
    generated_reps: int
    ladder: tuple[float, ...]
    multicore: bool = True
    output: Path = RESULTS
    quick: bool = False
    cap300: bool = True  # also run ours with LIBLINEAR's 300-sweep cap
    multicore_on_shared: bool = True  # multicore also on the shared data sets (not only
    # the generated one)
    multicore_losses: tuple[str, ...] = ("l1", "l2")
    notes: list[str] = field(default_factory=list)

    @classmethod
    def defaults(cls, quick: bool) -> Setting:
        if quick:  # a smoke run (make bench-quick, 5 minutes in all): one repetition
            return cls(reps=1, datasets=["a9a"],
                       generated=(smaller(20_000, 3_000), smaller(10_000, 2_000)),
                       generated_reps=1,
                       ladder=QUICK_LADDER, quick=True, cap300=False,
                       multicore_on_shared=False, multicore_losses=("l1",))
        return cls(reps=5, datasets=["a9a", "w8a", "ijcnn1"], generated=(500_000, 100_000),
                   generated_reps=3, ladder=EPS_LADDER)


def load(name: str) -> tuple[sp.csr_matrix, np.ndarray]:
    from sklearn.datasets import load_svmlight_file

    with lzma.open(DATA_DIR / f"{name}.xz") as handle:
        X, y = load_svmlight_file(handle)
    X = sp.csr_matrix(X)
    X.sort_indices()
    return X, y


def save_arrays(path: Path, X: sp.csr_matrix, y: np.ndarray) -> None:
    """X, y as an uncompressed .npz (written through a .partial file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial")
    with open(partial, "wb") as handle:
        np.savez(handle, data=X.data, indices=X.indices, indptr=X.indptr,
                 shape=np.array(X.shape, dtype=np.int64), y=y)
    partial.replace(path)


def load_arrays(path: Path) -> tuple[sp.csr_matrix, np.ndarray]:
    with np.load(path) as z:
        X = sp.csr_matrix((z["data"], z["indices"], z["indptr"]), shape=tuple(z["shape"]))
        return X, z["y"]


def generated(rows: int, features: int, seed: int = 0
              ) -> tuple[str, sp.csr_matrix, np.ndarray, Path]:
    """The text-like set, generated once and cached in bench/scratch/dcd/ as .npz."""
    from testkit.datagen import VERSION, text_like

    path = SCRATCH / f"text-{rows}x{features}-v{VERSION}-seed{seed}.npz"
    name = f"text {rows // 1000}k x {features // 1000}k"
    if path.exists():
        X, y = load_arrays(path)
    else:
        print(f"generating {name} (once; cached in {path.relative_to(REPO)})", flush=True)
        X, y = text_like(rows, features, seed=seed)
        X.sort_indices()
        save_arrays(path, X, y)
    return name, X, y, path


class Engines:
    """Both solvers on one data set, reporting primal objectives with OUR objective."""

    def __init__(self, X: sp.csr_matrix, y: np.ndarray) -> None:
        from liblinear import liblinearutil

        from solvers.inputs import as_csr_arrays
        from solvers.objectives import LinearProblem

        self.liblinear = liblinearutil
        self.X, self.y = X, y
        self.prob = liblinearutil.problem(y, X, bias=1)
        arrays = as_csr_arrays(X)
        classes = np.unique(y)
        self.positive = int(classes[1])
        self.problem = LinearProblem(arrays, np.where(y == classes[1], 1.0, -1.0),
                                     np.ones(X.shape[0]), 1.0)

    def primal(self, w_aug: np.ndarray, loss: str) -> float:
        from solvers.objectives import primal_objective

        return primal_objective(self.problem, w_aug, loss)

    def ours(self, loss: str, eps: float, max_iter: int = 1000,
             clock: Callable[[], float] = time.process_time) -> Run:
        from solvers.train import fit

        started = clock()
        result = fit(self.X, self.y, loss=loss, eps=eps, C=1.0, max_iter=max_iter)
        seconds = clock() - started
        return Run(seconds, result.primal_objective, result.iterations, result.exit_reason)

    def theirs(self, loss: str, eps: float, clock: Callable[[], float] = time.process_time
               ) -> Run:
        options = f"-s {LIBLINEAR_SOLVER[loss]} -c 1 -e {eps:g} -B 1 -q"
        started = clock()
        model = self.liblinear.train(self.prob, options)
        seconds = clock() - started
        # LIBLINEAR's label order: decision function of labels[0]; ours is +1 for classes[1]
        w, b = model.get_decfun(model.get_labels().index(self.positive))
        return Run(seconds, self.primal(np.append(w, b), loss))


def median_runs(reps: int, makers: dict[str, Callable[[], Run]]) -> dict[str, Run]:
    """Alternate the engines `reps` times; median time, last run's other facts."""
    times: dict[str, list[float]] = {name: [] for name in makers}
    last: dict[str, Run] = {}
    for _ in range(reps):
        for name, make in makers.items():
            run = make()
            times[name].append(run.seconds)
            last[name] = run
    return {name: Run(statistics.median(times[name]), last[name].primal,
                      last[name].iterations, last[name].exit_reason) for name in makers}


def reference_optimum(engines: Engines, loss: str, ours_eps: float = 1e-5,
                      theirs_eps: float = 1e-6, max_iter: int = 200_000) -> tuple[float, float]:
    """(P*, certified lower bound): our tight run and LIBLINEAR's tightest run."""
    from solvers.train import fit

    tight = fit(engines.X, engines.y, loss=loss, eps=ours_eps, C=1.0, max_iter=max_iter)
    liblinear_tight = engines.theirs(loss, theirs_eps)
    assert tight.dual_objective is not None
    return min(tight.primal_objective, liblinear_tight.primal), tight.dual_objective


Curve = list[tuple[float, float, float]]  # (seconds, suboptimality, eps)


def time_to_targets(engines: Engines, loss: str, optimum: float, reps: int,
                    ladder: tuple[float, ...] = EPS_LADDER
                    ) -> tuple[dict[str, dict[float, tuple[float, float] | None]],
                               dict[str, Curve]]:
    """For each engine and target: (median seconds, eps) of the cheapest rung reaching it.

    Also returns every rung run (seconds, suboptimality, eps) per engine, for the plot.
    """
    reached: dict[str, dict[float, tuple[float, float] | None]] = {
        "ours": dict.fromkeys(TARGETS), "liblinear": dict.fromkeys(TARGETS)}
    curves: dict[str, Curve] = {"ours": [], "liblinear": []}
    for eps in ladder:
        pending = {name for name, got in reached.items() if any(v is None for v in got.values())}
        if not pending:
            break
        makers: dict[str, Callable[[], Run]] = {}
        if "ours" in pending:
            makers["ours"] = functools.partial(engines.ours, loss, eps)
        if "liblinear" in pending:
            makers["liblinear"] = functools.partial(engines.theirs, loss, eps)
        runs = median_runs(reps, makers)
        for name, run in runs.items():
            suboptimality = (run.primal - optimum) / optimum
            curves[name].append((run.seconds, suboptimality, eps))
            for target in TARGETS:
                if reached[name][target] is None and suboptimality <= target:
                    reached[name][target] = (run.seconds, eps)
    return reached, curves


def warm_dcd() -> None:
    """Compile (or load from the Numba cache) the DCD kernels and the objective kernels.

    Only DCD's: the other solvers' kernels are no part of this benchmark (the worker's
    warm-up of every solver is timed by bench/service_bench.py).
    """
    import solvers.dcd
    from solvers.inputs import as_csr_arrays
    from solvers.objectives import LinearProblem, primal_objective
    from solvers.train import fit

    X = sp.csr_matrix(np.array([[1.0, 0.0], [0.0, 2.0], [1.0, 1.0], [-1.0, 0.5]]))
    y = np.array([1.0, -1.0, 1.0, -1.0])
    problem = LinearProblem(as_csr_arrays(X), y, np.ones(4), 1.0)
    for variant in getattr(solvers.dcd, "WARMUP_VARIANTS", ({},)):
        for loss in ("l1", "l2"):
            result = fit(X, y, solver="dcd", progress=lambda event: None,
                         **{**variant, "loss": loss})
            primal_objective(problem, np.append(result.coef[0], 0.0), loss)


def compile_seconds(cold: bool = True) -> tuple[float, float, float]:
    """(import, cold-compile warm_dcd(), cache-load warm_dcd()) seconds, fresh interpreters.
    Without `cold` (--quick): one process on the project's own cache, the cold compile NaN."""
    code = ("import time; t0 = time.perf_counter(); import solvers.dcd; "
            "from bench.dcd_bench import warm_dcd; t1 = time.perf_counter(); warm_dcd(); "
            "print(t1 - t0, time.perf_counter() - t1)")
    with tempfile.TemporaryDirectory() as cache_dir:
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        if cold:
            env["NUMBA_CACHE_DIR"] = cache_dir
        runs = [subprocess.run([sys.executable, "-c", code], env=env, check=True, cwd=REPO,
                               capture_output=True, text=True).stdout.split()
                for _ in range(2 if cold else 1)]
    return (float(runs[-1][0]), float(runs[0][1]) if cold else math.nan,
            float(runs[-1][1]))


def fmt_time(entry: tuple[float, float] | None) -> str:
    return "not reached" if entry is None else f"{entry[0]:.3f} s (eps {entry[1]:g})"


# --------------------------------------------------------------------------------------
# LIBLINEAR-multicore in its own virtualenv, driven through a helper process

MULTICORE_CHILD = r"""
import json, sys, time
import numpy as np, scipy.sparse as sp
from liblinear import liblinearutil as ll
prob = None
for line in sys.stdin:
    cmd = json.loads(line)
    try:
        if cmd["cmd"] == "quit":
            break
        if cmd["cmd"] == "load":
            prob = None
            with np.load(cmd["path"]) as z:
                X = sp.csr_matrix((z["data"], z["indices"], z["indptr"]),
                                  shape=tuple(z["shape"]))
                y = np.array(z["y"])
            prob = ll.problem(y, X, bias=1)
            reply = {"ok": True}
        elif cmd["cmd"] == "train":
            started = time.perf_counter()
            model = ll.train(prob, cmd["options"])
            seconds = time.perf_counter() - started
            w, b = model.get_decfun(model.get_labels().index(cmd["positive"]))
            np.save(cmd["w_path"], np.append(w, b))
            reply = {"seconds": seconds}
        else:
            reply = {"error": "unknown command " + cmd["cmd"]}
    except Exception as exc:
        reply = {"error": type(exc).__name__ + ": " + str(exc)}
    sys.stdout.write(json.dumps(reply) + "\n")
    sys.stdout.flush()
"""

MULTICORE_CHECK = ("import importlib.metadata as m, liblinear.liblinearutil; "
                   "print(m.version('liblinear-multicore'))")


def ensure_multicore() -> tuple[Path | None, str]:
    """(python of bench/.venv-multicore, version) or (None, why it is unavailable).

    Creates the virtualenv and installs liblinear-multicore (with NumPy and SciPy) on first
    use; a broken virtualenv is rebuilt once.
    """
    python = MULTICORE_VENV / "bin" / "python"

    def check() -> str | None:
        if not python.exists():
            return None
        done = subprocess.run([str(python), "-c", MULTICORE_CHECK], capture_output=True,
                              text=True, timeout=120)
        return done.stdout.strip() if done.returncode == 0 else None

    version = check()
    if version:
        return python, version
    if MULTICORE_VENV.exists():
        shutil.rmtree(MULTICORE_VENV)
    print(f"creating {MULTICORE_VENV} and installing liblinear-multicore "
          "(once)", flush=True)
    steps = [
        [sys.executable, "-m", "venv", str(MULTICORE_VENV)],
        [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
         "liblinear-multicore", "numpy", "scipy"],
    ]
    for step in steps:
        try:
            done = subprocess.run(step, capture_output=True, text=True, timeout=600)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return None, f"`{' '.join(step[-4:])}` failed: {type(exc).__name__}: {exc}"
        if done.returncode != 0:
            tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
            return None, f"`{' '.join(step[-4:])}` exited {done.returncode}: {tail[0][:200]}"
    version = check()
    if not version:
        return None, "liblinear-multicore installed but `import liblinear` fails in its venv"
    return python, version


class MulticoreChild:
    """A helper process of bench/.venv-multicore: loads .npz arrays, trains, times."""

    def __init__(self, python: Path) -> None:
        self._errors = tempfile.TemporaryFile()  # noqa: SIM115 - closed in close()
        self.process = subprocess.Popen([str(python), "-c", MULTICORE_CHILD],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=self._errors, text=True, bufsize=1)
        self.w_path = SCRATCH / f"multicore-w-{os.getpid()}.npy"

    def ask(self, **command: Any) -> dict[str, Any]:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(json.dumps(command) + "\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        if not line:
            self._errors.seek(0)
            raise RuntimeError("the LIBLINEAR-multicore helper exited: "
                               + self._errors.read().decode(errors="replace")[-1000:])
        reply = json.loads(line)
        if "error" in reply:
            raise RuntimeError(f"LIBLINEAR-multicore helper: {reply['error']}")
        return reply

    def load(self, path: Path) -> None:
        self.ask(cmd="load", path=str(path))

    def train(self, engines: Engines, loss: str, eps: float, threads: int) -> Run:
        options = f"-s {LIBLINEAR_SOLVER[loss]} -c 1 -e {eps:g} -B 1 -n {threads} -q"
        reply = self.ask(cmd="train", options=options, positive=engines.positive,
                         w_path=str(self.w_path))
        return Run(float(reply["seconds"]), engines.primal(np.load(self.w_path), loss))

    def close(self) -> None:
        if self.process.poll() is None:
            with_stdin = self.process.stdin
            try:
                if with_stdin is not None:
                    with_stdin.write(json.dumps({"cmd": "quit"}) + "\n")
                    with_stdin.close()
                self.process.wait(timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                self.process.kill()
                self.process.wait()
        self._errors.close()
        self.w_path.unlink(missing_ok=True)


# --------------------------------------------------------------------------------------


def row(metric: str, hinge: float, reference: float, target: str = "<= 1.0",
        met: bool | None = None) -> dict[str, Any]:
    """A summary row; met=None: compare ratio with the target ("<= 1.0"), or none ("—")."""
    ratio = hinge / reference if reference and math.isfinite(reference) else math.nan
    if met is None:
        met = target.startswith("<=") and math.isfinite(ratio) and (
            ratio <= float(target.split()[-1]))
    return {"experiment": "dcd", "metric": metric, "hinge": float(hinge),
            "reference": float(reference), "ratio": float(ratio), "target": target,
            "met": bool(met)}


def target_row(name: str, loss: str, target: float, ours: tuple[float, float] | None,
               theirs: tuple[float, float] | None) -> dict[str, Any]:
    metric = f"{name} {loss}: CPU s to {target:g} suboptimality"
    if ours is None:
        return row(metric, math.nan, theirs[0] if theirs else math.nan, met=False)
    if theirs is None:  # LIBLINEAR never got there (within the ladder); ours did
        return row(metric, ours[0], math.nan, met=True)
    return row(metric, ours[0], theirs[0])


class Report:
    """Table rows, plot curves and summary rows gathered while the benchmark runs."""

    def __init__(self) -> None:
        self.main_rows: list[str] = []
        self.target_rows: list[str] = []
        self.multicore_rows: list[str] = []
        self.curves: dict[tuple[str, str], dict[str, Curve]] = {}
        self.optimum: dict[tuple[str, str], float] = {}  # P* per (data set, loss)
        self.summary: list[dict[str, Any]] = []


def main(quick: bool = False, reps: int | None = None, datasets: list[str] | None = None,
         output: Path = RESULTS, generated_shape: tuple[int, int] | None = None,
         multicore: bool = True) -> list[dict[str, Any]]:
    """Run the DCD benchmark, write bench/results/dcd.md (+ dcd.png), return summary rows."""
    setting = Setting.defaults(quick)
    if reps:
        setting.reps = reps
        setting.generated_reps = min(reps, setting.generated_reps)
    setting.datasets = datasets or setting.datasets
    if generated_shape is not None:  # (0, 0): no generated set
        setting.generated = generated_shape if all(generated_shape) else None
    setting.multicore, setting.output = multicore, output
    if quick:
        setting.notes.append("quick mode (a functional run): `ours@300` is not run, and "
                             "LIBLINEAR-multicore runs on the generated set, l1-loss, only.")

    imports, cold, cached = compile_seconds(cold=not quick)  # quick: no cold compile
    warm_dcd()
    print(f"import {imports:.2f} s; DCD kernels: cold {cold:.2f} s, cached {cached:.2f} s",
          flush=True)

    report = Report()
    child: MulticoreChild | None = None
    multicore_version = ""
    if setting.multicore:
        python, multicore_version = ensure_multicore()
        if python is None:
            setting.notes.append(f"LIBLINEAR-multicore unavailable: {multicore_version}")
            report.multicore_rows.append(
                f"| all | - | not measured: {multicore_version} | | | | | | |")
            report.summary.append(row("LIBLINEAR-multicore -n 2: not measured "
                                      f"({multicore_version})", math.nan, math.nan, "—"))
        else:
            child = MulticoreChild(python)
    try:
        for name in setting.datasets:
            X, y = load(name)
            npz = SCRATCH / f"{name}.npz"
            if child is not None and not npz.exists():
                save_arrays(npz, X, y)
            bench_dataset(setting, report, name, Engines(X, y), child, npz, big=False)
        if setting.generated:
            name, X, y, npz = generated(*setting.generated)
            bench_dataset(setting, report, name, Engines(X, y), child, npz, big=True)
    finally:
        if child is not None:
            child.close()

    report.summary += [
        row("Numba compile of the DCD kernels (cold cache, s, one-off)"
            + (" (not measured with --quick)" if quick else ""), cold, math.nan, "—"),
        row("DCD kernels loaded from the Numba cache (s, every process start)", cached,
            math.nan, "—"),
    ]
    plot(report.curves, setting.output.with_suffix(".png"))
    write_report(setting, (imports, cold, cached), report, multicore_version)
    return report.summary


def bench_dataset(setting: Setting, report: Report, name: str, engines: Engines,
                  child: MulticoreChild | None, npz: Path, big: bool) -> None:
    reps = setting.generated_reps if big else setting.reps
    for loss in ("l1", "l2"):
        bench_one(setting, report, engines, name, loss, reps, big)
    if child is None or not (big or setting.multicore_on_shared):
        return
    try:
        child.load(npz)
        for loss in setting.multicore_losses:
            bench_multicore(report, engines, child, name, loss, reps)
    except RuntimeError as exc:  # the helper failed: say so, keep the rest of the run
        message = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
        report.multicore_rows.append(f"| {name} | - | failed: {message} | | | | | | |")
        report.summary.append(row(f"{name}: LIBLINEAR-multicore failed ({message})",
                                  math.nan, math.nan, "—"))


def bench_one(setting: Setting, report: Report, engines: Engines, name: str, loss: str,
              reps: int, big: bool) -> None:
    """The table rows of one data set and loss."""
    if big:  # a tight reference on 500k x 100k would dominate the run: eps 1e-3 for both
        optimum, lower = reference_optimum(engines, loss, 1e-3, 1e-3, 1000)
    else:
        optimum, lower = reference_optimum(engines, loss)
    makers: dict[str, Callable[[], Run]] = {
        "ours": lambda: engines.ours(loss, 0.1),
        "ours300": lambda: engines.ours(loss, 0.1, max_iter=300),
        "liblinear": lambda: engines.theirs(loss, 0.1),
    }
    if not setting.cap300:
        del makers["ours300"]
    runs = median_runs(reps, makers)
    ours, theirs = runs["ours"], runs["liblinear"]
    ours300 = runs.get("ours300")
    report.optimum[(name, loss)] = optimum

    def sub(run: Run) -> str:
        return f"{(run.primal - optimum) / optimum:.1e}"

    capped = (f"{ours300.seconds:.3f} | {ours300.seconds / theirs.seconds:.2f} | "
              f"{ours300.iterations} {ours300.exit_reason}" if ours300 else "— | — | —")
    main_row = (
        f"| {name} | {loss} (-s {LIBLINEAR_SOLVER[loss]}) | {theirs.seconds:.3f} | "
        f"{ours.seconds:.3f} | {ours.seconds / theirs.seconds:.2f} | "
        f"{ours.iterations} {ours.exit_reason} | {capped} | "
        f"{optimum:.6g} | {(optimum - lower) / optimum:.0e} | "
        f"{sub(theirs)} | {sub(ours)} | {sub(ours300) if ours300 else '—'} | "
        f"{(ours.primal - theirs.primal) / theirs.primal:+.1e} | {reps} |")
    print(main_row, flush=True)
    report.main_rows.append(main_row)
    report.summary.append(row(f"{name} {loss} (-s {LIBLINEAR_SOLVER[loss]}), eps 0.1: CPU s",
                              ours.seconds, theirs.seconds))
    if big:
        return
    reached, curves = time_to_targets(engines, loss, optimum, reps, setting.ladder)
    report.curves[(name, loss)] = curves
    cells = []
    for target in TARGETS:
        a, b = reached["ours"][target], reached["liblinear"][target]
        ratio = f"{a[0] / b[0]:.2f}" if a and b else "-"
        cells += [fmt_time(b), fmt_time(a), ratio]
        report.summary.append(target_row(name, loss, target, a, b))
    line = f"| {name} | {loss} | " + " | ".join(cells) + " |"
    print(line, flush=True)
    report.target_rows.append(line)


def bench_multicore(report: Report, engines: Engines, child: MulticoreChild, name: str,
                    loss: str, reps: int) -> None:
    """Wall-clock time at eps 0.1: ours, LIBLINEAR, LIBLINEAR-multicore -n 1 and -n 2."""
    optimum = report.optimum[(name, loss)]
    runs = median_runs(reps, {
        "ours": lambda: engines.ours(loss, 0.1, clock=time.perf_counter),
        "liblinear": lambda: engines.theirs(loss, 0.1, clock=time.perf_counter),
        "n1": lambda: child.train(engines, loss, 0.1, 1),
        "n2": lambda: child.train(engines, loss, 0.1, 2),
    })

    def sub(run: Run) -> str:
        return f"{(run.primal - optimum) / optimum:.1e}"

    ours, theirs, n1, n2 = runs["ours"], runs["liblinear"], runs["n1"], runs["n2"]
    line = (f"| {name} | {loss} (-s {LIBLINEAR_SOLVER[loss]}) | {ours.seconds:.3f} | "
            f"{theirs.seconds:.3f} | {n1.seconds:.3f} | {n2.seconds:.3f} | "
            f"{ours.seconds / n2.seconds:.2f} | {n1.seconds / n2.seconds:.2f} | "
            f"{sub(ours)} / {sub(theirs)} / {sub(n1)} / {sub(n2)} |")
    print(line, flush=True)
    report.multicore_rows.append(line)
    report.summary.append(row(
        f"{name} {loss}, eps 0.1: wall s, ours (1 thread) vs LIBLINEAR-multicore -n 2",
        ours.seconds, n2.seconds, "—"))


def plot(curves: dict[tuple[str, str], dict[str, Curve]], path: Path) -> None:
    """Relative primal suboptimality against CPU time, one panel per data set and loss."""
    if not curves:
        return
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = sorted({name for name, _ in curves}, key=[n for n, _ in curves].index)
    fig, axes = plt.subplots(len(names), 2, figsize=(8, 2.6 * len(names)), squeeze=False)
    for i, name in enumerate(names):
        for j, loss in enumerate(("l1", "l2")):
            ax = axes[i][j]
            for engine, style in (("liblinear", "s--"), ("ours", "o-")):
                # ladder order (eps decreasing): each point is a separate run
                points = sorted(curves.get((name, loss), {}).get(engine, []),
                                key=lambda point: -point[2])
                if points:
                    ax.plot([p[0] for p in points], [max(p[1], 1e-10) for p in points], style,
                            markersize=3, label="LIBLINEAR" if engine == "liblinear" else
                            "Hinge dcd")
            for target in TARGETS:
                ax.axhline(target, color="grey", linewidth=0.5, linestyle=":")
            ax.set_yscale("log")
            ax.set_title(f"{name}, {loss}-loss (-s {LIBLINEAR_SOLVER[loss]})", fontsize=9)
            ax.set_xlabel("CPU seconds", fontsize=8)
            ax.set_ylabel("(P - P*) / P*", fontsize=8)
            ax.tick_params(labelsize=7)
            ax.legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)


def write_report(setting: Setting, compile_times: tuple[float, float, float], report: Report,
                 multicore_version: str) -> None:
    imports, cold, cached = compile_times
    import numba

    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    load_avg = os.getloadavg() if hasattr(os, "getloadavg") else (float("nan"),) * 3
    ladder = setting.ladder
    generated_note = ""
    if setting.generated:
        rows, features = setting.generated
        generated_note = (
            f" The generated set is `testkit.datagen.text_like({rows}, {features}, seed=0)` "
            "(power-law feature frequencies, 60 words drawn per row, ~44 distinct, unit-norm "
            "rows, labels "
            "of a noisy sparse teacher), cached in `bench/scratch/dcd/`; its P* is the best "
            "of our eps = 1e-3 run and LIBLINEAR's (a tight reference would dominate the run), "
            f"and it runs {setting.generated_reps} repetitions.")
    lines = [
        "# DCD vs LIBLINEAR",
        "",
        f"Generated by `bench/dcd_bench.py`{' --quick' if setting.quick else ''} on "
        f"{datetime.date.today().isoformat()}: "
        f"{cpu}, {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"Numba {numba.__version__}, liblinear-official 2.50 (Python binding), "
        f"{setting.reps} alternating repetitions, medians of process CPU time (single thread). "
        f"Load average at the end: {load_avg[0]:.2f} (it counts this benchmark's own "
        "processes; README.md gives the CPU other processes used, which would still slow "
        "both engines through caches and memory bandwidth); compare ratios, not absolute "
        "times.",
        "",
        "Problem: C = 1, bias feature 1 (-B 1), single thread. Our time is the whole "
        "`solvers.fit` call on a parsed CSR matrix (validation included); LIBLINEAR's is "
        "`liblinearutil.train` on a prebuilt `problem`. Primal objectives of both are "
        "computed by `solvers.objectives.primal_objective`. Compilation excluded: "
        "warming the DCD and objective kernels (both losses, every DCD warm-up variant) takes "
        + (f"{cold:.2f} s with an empty Numba cache (first run ever) and "
           if not math.isnan(cold) else "(the cold compile is not measured with --quick) ")
        + f"{cached:.2f} s loading "
        f"the cache (every later process start), after {imports:.2f} s of importing "
        "`solvers.dcd` (NumPy, SciPy, Numba). (A worker's warm-up of every solver is in "
        "`service.md`.)",
        "",
        *(f"**Note:** {note}" for note in setting.notes),
        "",
        "## Default tolerance eps = 0.1",
        "",
        "LIBLINEAR 2.50 stops its dual CD after 300 sweeps (for -s 1 it then switches to its "
        "primal Newton solver); our `max_iter` default is 1000, so `ours@300` runs the same "
        "cap. Suboptimality = (P - P*) / P*, P* the best primal value any run reached; 'cert.' "
        "is P*'s relative duality gap against our tight run's dual value. Target: ratio "
        f"<= 1.0.{generated_note}",
        "",
        "| data | loss | LIBLINEAR s | ours s | ratio | ours iter / exit | ours@300 s | ratio "
        "| iter / exit | P* | cert. | LIBLINEAR subopt | ours subopt | ours@300 subopt "
        "| ours vs LIBLINEAR | runs |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
        *report.main_rows,
        "",
        "## Time to reach a relative primal suboptimality",
        "",
        f"Each engine runs eps in {', '.join(f'{e:g}' for e in ladder)} (our max_iter "
        "1000); the cheapest rung whose primal is within the target is reported. Every rung "
        "run is a point of `dcd.png` (suboptimality against CPU time, as in Hsieh et al. "
        "2008, Figure 1). Target: ratio <= 1.0. At a loose eps where each engine ends "
        "depends on its shuffling order (ours: seed 0; LIBLINEAR: its fixed rand() "
        "sequence), both a single sample: a target that falls between two rungs can cost "
        "one engine a whole rung, so the 1e-2 column is the noisier one.",
        "",
        "| data | loss | LIBLINEAR 1e-2 | ours 1e-2 | ratio | LIBLINEAR 1e-3 | ours 1e-3 "
        "| ratio |",
        "|---|---|---|---|---|---|---|---|",
        *report.target_rows,
        "",
        f"![suboptimality against time]({setting.output.with_suffix('.png').name})",
        "",
        "## LIBLINEAR-multicore (-n 2)",
        "",
        f"`liblinear-multicore` {multicore_version or '(not installed)'} in its own virtualenv "
        "`bench/.venv-multicore` (it installs a module named `liblinear` too), driven through "
        "a helper process that loads the same arrays from `.npz` and times `train()` itself; "
        "the four engines alternate within every repetition. Wall-clock medians at eps = "
        "0.1 (CPU time would add up both threads of `-n 2`). Ours is single-threaded (DCD is "
        "sequential); on a 2-core machine shared with other work `-n 2` competes for the "
        "second core, so its figure is the most load-sensitive one here.",
        "",
        "| data | loss | ours s | LIBLINEAR s | multicore -n 1 s | multicore -n 2 s "
        "| ours / -n 2 | -n 1 / -n 2 | subopt ours / LIBLINEAR / -n 1 / -n 2 |",
        "|---|---|---|---|---|---|---|---|---|",
        *report.multicore_rows,
        "",
    ]
    setting.output.parent.mkdir(parents=True, exist_ok=True)
    setting.output.write_text("\n".join(lines))
    print(f"wrote {setting.output}")


def _cli() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--reps", type=int, default=None)
    parser.add_argument("--datasets", nargs="+", default=None)
    parser.add_argument("--output", type=Path, default=RESULTS)
    parser.add_argument("--generated", type=int, nargs=2, metavar=("ROWS", "FEATURES"),
                        default=None)
    parser.add_argument("--no-multicore", action="store_true")
    args = parser.parse_args()
    main(quick=args.quick, reps=args.reps, datasets=args.datasets, output=args.output,
         generated_shape=tuple(args.generated) if args.generated else None,
         multicore=not args.no_multicore)


if __name__ == "__main__":
    _cli()
