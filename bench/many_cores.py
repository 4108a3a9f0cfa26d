"""Issue 30's scaling table, regenerated on the machine it runs on (meant for 16+ cores).

    python bench/many_cores.py [--quick] [--threads 1 2 4 8 16] [--datasets ...]
                               [--no-linear] [--no-peers] [--no-libsvm] [--timeout 900]

Kernel rows (rbf, C = 1, gamma = 1/features, eps / tol 1e-3, cache 200 MB; one-vs-one for
letter): letter (letter.scale from the shared data when present, else the 15,000-row
26-class stand-in testkit.datagen.letter_like, 16 dense features), HIGGS 7k (the first
7,000 rows of HIGGS when the shared data has it, else a seeded 7,000 x 28 dense stand-in),
w8a, ijcnn1, a9a (../shared/data). Hinge's smo at every thread count of --threads (capped
at the cores), LIBSVM (scikit-learn's SVC: LIBSVM, one thread) and oneDAL (scikit-learn-
intelex's SVC; daal4py.daalinit(n)) at 1, 8 and 16 threads (those <= the cores);
--no-libsvm leaves LIBSVM out (one thread: the same on any machine, and the longest runs).
Linear rows: tron (L2 loss, C = 1, eps 0.01) on a generated 400,000 x 100,000 sparse set
of about 16M non-zeros (testkit.datagen.text_like, 40 per row) at every thread count, and
dcd (L1 loss, C = 1, eps 0.1; no threads yet: one run) on the same set.

Every run is a fresh process (`--worker SPEC`): it loads the data (not timed), warms up
(Hinge: its kernels from Numba's cache; oneDAL: a tiny fit), then times the training call
alone, wall clock; so no earlier fit's threads or load touch it. Reported beside the seconds: the
support vectors (Hinge's and the peers' must agree), Hinge's parallel grain and the share
of SMO steps its grain meter ran with the fine-grained loops, and the objective (the same
at every thread count within eps). The machine is named from lscpu (model, cores).

--quick (a smoke run here, a minute or two on 2 cores): threads 1 2, oneDAL 1 2, samples
of 3,000 rows of each kernel set, letter 100 rows per class, a 20,000 x 10,000 linear
set. Writes bench/results/many_cores.md (bench/results/quick/ with --quick; or
$HINGE_BENCH_RESULTS).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.paths import DATA_DIR, results_dir  # noqa: E402

RESULTS_NAME = "many_cores.md"
KERNEL_SETS = ("letter", "HIGGS 7k", "w8a", "ijcnn1", "a9a")
FULL_THREADS = (1, 2, 4, 8, 16)
PEER_THREADS = (1, 8, 16)
QUICK_ROWS = 3_000
LINEAR_SHAPE = (400_000, 100_000, 40.0)  # rows, features, non-zeros per row: ~16M nnz
QUICK_LINEAR_SHAPE = (20_000, 10_000, 40.0)


# --------------------------------------------------------------------------------------
# data


def _shared(name: str) -> Any:
    from solvers.svmlight import load_svmlight

    parsed = load_svmlight(DATA_DIR / f"{name}.xz")
    return parsed.to_csr(), parsed.y


def _sample(X: Any, y: np.ndarray, rows: int) -> tuple[Any, np.ndarray]:
    if X.shape[0] <= rows:
        return X, y
    keep = np.sort(np.random.default_rng(0).choice(X.shape[0], rows, replace=False))
    return X[keep], y[keep]


def kernel_data(name: str, quick: bool) -> tuple[Any, np.ndarray, str]:
    """(X, y, where it came from)."""
    import scipy.sparse as sp

    if name == "letter":
        if (DATA_DIR / "letter.scale.xz").exists():
            X, y = _shared("letter.scale")
            source = "letter.scale"
        else:
            from testkit.datagen import letter_like

            X, y = letter_like(rows_per_class=100 if quick else 577, n_classes=26)
            source = "letter_like stand-in"
    elif name == "HIGGS 7k":
        found = sorted(DATA_DIR.glob("HIGGS*.xz"))
        if found:
            X, y = _shared(found[0].name[:-3])
            X, y = X[:7000], y[:7000]
            source = found[0].name
        else:
            rng = np.random.default_rng(7)
            dense = rng.normal(size=(7000, 28))
            score = dense[:, :6] @ rng.normal(size=6) + 0.5 * np.sin(3 * dense[:, 6])
            y = np.where(score + rng.normal(scale=1.0, size=7000) > 0, 1.0, -1.0)
            X, source = sp.csr_matrix(dense), "seeded 7,000 x 28 dense stand-in"
    else:
        X, y = _shared(name)
        source = f"{name} (shared data)"
    if quick:
        X, y = _sample(X, y, QUICK_ROWS)
    return sp.csr_matrix(X, dtype=np.float64), np.asarray(y, dtype=np.float64), source


def linear_data(quick: bool) -> tuple[Any, np.ndarray]:
    from testkit.datagen import text_like

    rows, features, per_row = QUICK_LINEAR_SHAPE if quick else LINEAR_SHAPE
    X, y = text_like(rows, features, seed=0, nnz_per_row=per_row)
    return X, y


# --------------------------------------------------------------------------------------
# one run, in its own process


def worker(spec_path: str) -> None:
    spec = json.loads(Path(spec_path).read_text())
    engine, name, quick, threads = spec["engine"], spec["dataset"], spec["quick"], spec["threads"]
    result: dict[str, Any] = {}
    if name == "linear":
        X, y = linear_data(quick)
        result["data"] = f"generated {X.shape[0]:,} x {X.shape[1]:,}, {X.nnz:,} nnz"
        from solvers import fit
        from solvers.warmup import warmup

        warmup(("linear",))
        # dcd has no threads (issue 30: its parallel version is still to come)
        options: dict[str, Any] = ({"solver": "tron", "loss": "l2", "eps": 0.01,
                                    "threads": threads} if engine == "tron"
                                   else {"solver": "dcd", "loss": "l1", "eps": 0.1})
        fit(X[:200], y[:200], C=1.0, **options)  # dispatch warm-up
        started = time.perf_counter()
        fitted = fit(X, y, C=1.0, **options)
        result["seconds"] = time.perf_counter() - started
        result["objective"] = fitted.primal_objective
        result["exit"] = fitted.exit_reason
        Path(spec["result_path"]).write_text(json.dumps(result))
        return
    X, y, source = kernel_data(name, quick)
    result["data"] = f"{source}: {X.shape[0]:,} rows, {len(np.unique(y))} classes"
    gamma = 1.0 / X.shape[1]
    if engine == "hinge":
        from solvers import fit
        from solvers.warmup import warmup

        warmup(("smo", "smo-parallel"))
        started = time.perf_counter()
        fitted = fit(X, y, solver="smo", kernel="rbf", C=1.0, gamma=gamma, eps=1e-3,
                     cache_mb=200.0, threads=threads)
        result["seconds"] = time.perf_counter() - started
        result["n_sv"] = int(np.sum(fitted.n_support))
        result["objective"] = fitted.dual_objective
        result["grain"] = (f"{fitted.params['parallel_grain']}, fine "
                           f"{100 * fitted.params.get('fine_grained_share', 0.0):.0f}%")
    elif engine == "libsvm":
        from sklearn.svm import SVC

        svc = SVC(C=1.0, gamma=gamma, tol=1e-3, cache_size=200.0, kernel="rbf")
        started = time.perf_counter()
        svc.fit(X, y)
        result["seconds"] = time.perf_counter() - started
        result["n_sv"] = int(svc.support_.shape[0])
    else:
        import daal4py
        from sklearnex.svm import SVC as DalSVC

        daal4py.daalinit(threads)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            two = np.unique(y)[:2]
            few = np.concatenate([np.flatnonzero(y == label)[:20] for label in two])
            DalSVC(C=1.0, gamma=gamma).fit(X[few], y[few])
        svc = DalSVC(C=1.0, gamma=gamma, tol=1e-3, cache_size=200.0, kernel="rbf")
        started = time.perf_counter()
        svc.fit(X, y)
        result["seconds"] = time.perf_counter() - started
        result["n_sv"] = int(svc.support_.shape[0])
    Path(spec["result_path"]).write_text(json.dumps(result))


def run(engine: str, name: str, threads: int, quick: bool, timeout: float) -> dict[str, Any]:
    """One run in a fresh process; {"error": ...} when it fails or times out."""
    with tempfile.TemporaryDirectory() as directory:
        spec_path, result_path = Path(directory) / "spec.json", Path(directory) / "result.json"
        spec_path.write_text(json.dumps({"engine": engine, "dataset": name, "quick": quick,
                                         "threads": threads, "result_path": str(result_path)}))
        env = {**os.environ, "OMP_NUM_THREADS": "1" if engine == "libsvm" else str(threads)}
        try:
            done = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--worker",
                                   str(spec_path)], env=env, cwd=REPO, timeout=timeout,
                                  capture_output=True, text=True)
        except subprocess.TimeoutExpired:
            return {"error": f"over {timeout:.0f} s"}
        if done.returncode != 0 or not result_path.exists():
            last = (done.stderr.strip().splitlines() or ["no output"])[-1]
            return {"error": last[:120]}
        result: dict[str, Any] = json.loads(result_path.read_text())
        return result


# --------------------------------------------------------------------------------------
# the machine and the table


def machine() -> str:
    try:
        text = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
        facts = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
        model = facts.get("Model name", "").strip() or platform.processor()
        cpus = facts.get("CPU(s)", "").strip()
        cores = facts.get("Core(s) per socket", "").strip()
        sockets = facts.get("Socket(s)", "").strip()
        return (f"{model}; {cpus} logical CPUs, {cores} cores per socket x {sockets} "
                f"socket(s)")
    except (OSError, subprocess.CalledProcessError):
        return f"{platform.processor() or platform.machine()}; {os.cpu_count()} CPUs"


def _cell(result: dict[str, Any] | None) -> str:
    if result is None:
        return "—"
    if "error" in result:
        return f"failed ({result['error']})"
    return f"{result['seconds']:.2f}"


def main(quick: bool = False, threads: list[int] | None = None,
         datasets: list[str] | None = None, linear: bool = True, peers: bool = True,
         timeout: float = 900.0, with_libsvm: bool = True) -> Path:
    cores = os.cpu_count() or 1
    counts = [t for t in (threads or ([1, 2] if quick else list(FULL_THREADS))) if t <= cores]
    peer_counts = [t for t in ((1, 2) if quick else PEER_THREADS) if t <= cores]
    started = dt.datetime.now().astimezone()
    lines = ["# Many cores: issue 30's scaling table", "",
             f"Regenerated by `python bench/many_cores.py{' --quick' if quick else ''}` on "
             f"{started:%Y-%m-%d %H:%M %Z}.", "",
             f"- Machine: {machine()}; load average at the start "
             f"{os.getloadavg()[0]:.2f}.",
             "- Every run is a fresh process (no earlier fit's threads or load); wall-clock "
             "seconds of the training call alone. rbf, C = 1, gamma = 1/features, eps 1e-3, "
             "cache 200 MB. LIBSVM: scikit-learn's SVC (one thread); oneDAL: "
             "scikit-learn-intelex's SVC, daal4py.daalinit(threads).", ""]
    header = ["data", *(f"Hinge {t} t" for t in counts)]
    if peers:
        header += ["LIBSVM", *(f"oneDAL {t} t" for t in peer_counts)]
    header += ["SV (Hinge / LIBSVM)", "Hinge grain at the most threads", "same objective"]
    lines += ["## Kernel SVM (smo)", "", "| " + " | ".join(header) + " |",
              "|" + "---|" * len(header)]
    for name in datasets or KERNEL_SETS:
        ours = {t: run("hinge", name, t, quick, timeout) for t in counts}
        libsvm = run("libsvm", name, 1, quick, timeout) if peers and with_libsvm else None
        dal = {t: run("onedal", name, t, quick, timeout) for t in peer_counts} if peers else {}
        objectives = [r["objective"] for r in ours.values() if "objective" in r]
        same = (len(objectives) == len(ours) and
                max(objectives) - min(objectives) <= 1e-3 * max(1.0, abs(objectives[0])))
        first = ours[counts[0]]
        label = first.get("data", name)
        cells = [label, *(_cell(ours[t]) for t in counts)]
        if peers:
            cells += [_cell(libsvm), *(_cell(dal[t]) for t in peer_counts)]
        cells += [f"{first.get('n_sv', '?')} / "
                  f"{(libsvm or {}).get('n_sv', '—')}",
                  str(ours[counts[-1]].get("grain", "—")), "yes" if same else "**no**"]
        lines.append("| " + " | ".join(cells) + " |")
        print(lines[-1], flush=True)
    if linear:
        header = ["solver", *(f"{t} t" for t in counts), "objective at 1 t", "same objective"]
        lines += ["", "## Linear: tron (L2 loss, eps 0.01) and dcd (L1 loss, eps 0.1)", "",
                  "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        for engine in ("tron", "dcd"):
            found = {t: run(engine, "linear", t, quick, timeout)
                     for t in (counts if engine == "tron" else counts[:1])}
            objectives = [r["objective"] for r in found.values() if "objective" in r]
            same = (len(objectives) == len(found) and
                    max(objectives) - min(objectives) <= 1e-6 * max(1.0, abs(objectives[0])))
            data = next((r["data"] for r in found.values() if "data" in r), "")
            lines.append(f"| {engine} ({data}) | " + " | ".join(_cell(found.get(t))
                                                                for t in counts)
                         + f" | {found[counts[0]].get('objective', '—')} | "
                         f"{'yes' if same else '**no**'} |")
            print(lines[-1], flush=True)
    path = results_dir() / RESULTS_NAME
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return path


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--worker":
        worker(sys.argv[2])
        sys.exit(0)
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--threads", type=int, nargs="+")
    parser.add_argument("--datasets", nargs="+", choices=KERNEL_SETS)
    parser.add_argument("--no-linear", action="store_true")
    parser.add_argument("--no-peers", action="store_true")
    parser.add_argument("--no-libsvm", action="store_true")
    parser.add_argument("--timeout", type=float, default=900.0, help="per run, seconds")
    args = parser.parse_args()
    print(main(args.quick, args.threads, args.datasets, not args.no_linear, not args.no_peers,
               args.timeout, not args.no_libsvm))
