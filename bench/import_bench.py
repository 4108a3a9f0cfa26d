"""A multi-part import (POST /v1/imports) of a yahoo-korea-shaped set through a live
service: API and Celery worker processes (testkit.service), part files under
HINGE_IMPORT_ROOTS.

    python -m bench.import_bench [--scale 0.05] [--parts 8] [--workers 2]

The set has the shape of yahoo-korea in Hsieh et al. 2008 (460,554 rows x 3,052,939
features, about 339 non-zeros a row; here --scale of its rows), Zipf feature frequencies
(testkit.datagen.text_like), written as `--parts` svmlight part files, each part from a
seed of its own, values to 6 decimals. Reported: the import's wall time (from its
creation to its end, as the service records them), text MB/s, and beside it one process
parsing every part in turn
with the same parser (solvers.svmlight.load_svmlight): what a single core does. The
dataset's rows and non-zeros are checked against the files'. Results go to
bench/results/imports.md (a loaded shared machine makes every figure noisy).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

YAHOO_KOREA = (460_554, 3_052_939, 339.0)  # rows, features, non-zeros a row


def write_part(directory: Path, rows: int, part: int) -> Path:
    """Part `part` of the set: `rows` rows from seed 1000 + part, values to 6 decimals."""
    from solvers.svmlight import dump_svmlight
    from testkit.datagen import text_like

    _rows, features, per_row = YAHOO_KOREA
    X, y = text_like(rows, features, seed=1000 + part, nnz_per_row=per_row, n_topics=4)
    X.data = np.round(X.data, 6)  # values as a data set's text has them, not repr()'s
    path = directory / f"part-{part:05d}.svm"
    partial = path.with_suffix(".tmp")
    dump_svmlight(X, y, partial)
    partial.rename(path)  # a part on disk is a whole part (--data-dir reuses them)
    return path


def write_parts(directory: Path, rows: int, parts: int, jobs: int = 1) -> list[Path]:
    """`parts` part files of rows // parts rows each, `jobs` processes writing them side
    by side (the generator and the writer are one core's Python each); parts already in
    `directory` (a kept --data-dir) are not written again."""
    directory.mkdir(parents=True, exist_ok=True)
    wanted = [directory / f"part-{part:05d}.svm" for part in range(parts)]
    missing = [part for part, path in enumerate(wanted) if not path.exists()]
    if jobs <= 1:
        for part in missing:
            write_part(directory, rows // parts, part)
    else:
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(jobs) as pool:
            list(pool.map(write_part, [directory] * len(missing),
                          [rows // parts] * len(missing), missing))
    return wanted


# Stored non-zeros a generated row has (text_like sums a row's repeated Zipf draws: 339
# drawn, about 232.4 distinct), measured on this generator's parts; --nnz sizes by it.
STORED_PER_ROW = 232.4


class PeakRss:
    """Peak resident memory of Celery workers, sampled every `interval` seconds by a thread:
    each worker is its process and its children (the pool process); `peak` is the largest
    one worker reached, `peak_sum` the largest all of them together."""

    def __init__(self, pids: list[int], interval: float = 0.5) -> None:
        import threading

        self.pids, self.interval = pids, interval
        self.peak = self.peak_sum = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    @staticmethod
    def _rss(pid: int) -> int:
        try:
            fields = Path(f"/proc/{pid}/statm").read_text().split()
        except OSError:
            return 0
        return int(fields[1]) * os.sysconf("SC_PAGE_SIZE")

    def _run(self) -> None:
        from testkit.service import child_pids

        while not self._stop.wait(self.interval):
            each = [self._rss(p) + sum(self._rss(c) for c in child_pids(p))
                    for p in self.pids]
            self.peak = max(self.peak, *each)
            self.peak_sum = max(self.peak_sum, sum(each))

    def stop(self) -> str:
        self._stop.set()
        self._thread.join()
        return (f"{self.peak / 1e6:.0f} MB (one worker: its process and pool process), "
                f"{self.peak_sum / 1e6:.0f} MB summed over the workers")


def upload_to_s3(endpoint: str, paths: list[Path], bucket: str, prefix: str) -> float:
    """Put the part files into `bucket` of the S3 server at `endpoint`; seconds taken."""
    import boto3

    from testkit.service import S3_TEST_KEY

    s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                      aws_access_key_id=S3_TEST_KEY[0], aws_secret_access_key=S3_TEST_KEY[1])
    s3.create_bucket(Bucket=bucket)
    started = time.perf_counter()
    for path in paths:
        s3.upload_file(str(path), bucket, f"{prefix}/{path.name}")
    return time.perf_counter() - started


def file_counts(paths: list[Path], single: bool) -> tuple[tuple[int, int], float | None]:
    """The parts' rows and non-zeros: by parsing each with load_svmlight in one process
    (timed: what one core does) when `single`, else by counting lines and colons."""
    from solvers.svmlight import load_svmlight

    started = time.perf_counter()
    if single:
        rows = nnz = 0
        for path in paths:
            parsed = load_svmlight(path)
            rows, nnz = rows + parsed.n_samples, nnz + parsed.nnz
            del parsed
        return (rows, nnz), time.perf_counter() - started
    rows = nnz = 0
    for path in paths:
        with open(path, "rb") as handle:
            while chunk := handle.read(64 << 20):
                rows, nnz = rows + chunk.count(b"\n"), nnz + chunk.count(b":")
    return (rows, nnz), None


def train(client: Any, dataset_id: str, params: dict[str, Any], workers: list[Any],
          timeout: float) -> tuple[dict[str, Any], str]:
    """A dcd job on the dataset; the finished job and the workers' peak summed RSS."""
    from testkit.service import wait_for_job

    peak = PeakRss([w.process.pid for w in workers])
    try:
        submitted = client.post("/v1/jobs", json={"dataset_id": dataset_id, "solver": "dcd",
                                                  "params": params})
        assert submitted.status_code == 202, submitted.text
        job = wait_for_job(client.get, submitted.json()["id"], timeout=timeout)
    finally:
        rss = peak.stop()
    return job, rss


def main(scale: float, parts: int, workers: int, *, nnz: float | None = None,
         jobs: int = 1, data_dir: Path | None = None, s3: bool = False,
         train_params: dict[str, Any] | None = None, memory_bytes: int = 0,
         single: bool = True, train_timeout: float = 3600.0,
         logs: Path | None = None, dtype: str = "auto") -> str:
    from testkit.service import S3_TEST_KEY, embedded_settings, moto_server, running_service

    if nnz is not None:
        rows = max(parts, int(np.ceil(nnz / STORED_PER_ROW / parts)) * parts)
        label = f"{nnz:.3g}-non-zero, yahoo-korea-shaped rows"
    else:
        rows = max(parts, int(YAHOO_KOREA[0] * scale))
        label = f"yahoo-korea-shaped x{scale:g}"
    notes: list[str] = []
    with contextlib.ExitStack() as stack:
        scratch = Path(stack.enter_context(tempfile.TemporaryDirectory(
            prefix="hinge-import-bench-")))
        if logs is not None:  # the service's logs, copied out before the scratch goes
            logs.mkdir(parents=True, exist_ok=True)
            stack.callback(lambda: [shutil.copy(f, logs) for f in scratch.glob("*.log")])
        root = data_dir.parent if data_dir else scratch / "roots"
        part_dir = data_dir or root / "yk"
        kept = len(list(part_dir.glob("part-*.svm"))) if part_dir.exists() else 0
        started = time.perf_counter()
        paths = write_parts(part_dir, rows, parts, jobs)
        generated = time.perf_counter() - started
        text = sum(p.stat().st_size for p in paths)
        notes.append(f"{parts - kept} parts written in {generated:.0f} s ({jobs} processes)"
                     + (f", {kept} already in --data-dir used as they were" if kept else ""))
        want, single_s = file_counts(paths, single)
        overrides: dict[str, Any] = {"tenant_max_stored_bytes": 1 << 40}
        if memory_bytes:
            overrides["worker_memory_bytes"] = memory_bytes
        if s3:
            endpoint = stack.enter_context(moto_server(scratch))
            put = upload_to_s3(endpoint, paths, "corpus", "sets/yk")
            notes.append(f"put into the moto server in {put:.0f} s")
            source = "s3://corpus/sets/yk/part-*"
            # the blob store stays local; the S3 settings reach the service processes
            # through the environment (testkit passes them only for the s3 blob backend)
            os.environ.update({"HINGE_S3_ENDPOINT_URL": endpoint,
                               "HINGE_S3_ACCESS_KEY_ID": S3_TEST_KEY[0],
                               "HINGE_S3_SECRET_ACCESS_KEY": S3_TEST_KEY[1]})
        else:
            source = f"file://{part_dir}/*.svm"
            overrides["import_roots"] = [str(root)]
        settings = embedded_settings(scratch / "home", **overrides)
        client, started_workers = stack.enter_context(
            running_service(settings, scratch, workers=workers))
        peak = PeakRss([w.process.pid for w in started_workers])
        created = client.post("/v1/imports", json={"source": source, "name": label,
                                                   "dtype": dtype})
        assert created.status_code == 202, created.text
        import_id = created.json()["id"]
        while (state := client.get(f"/v1/imports/{import_id}").json())["status"] in (
                "queued", "running"):
            time.sleep(0.5)
        import_rss = peak.stop()
        assert state["status"] == "succeeded", state
        assert (state["rows_done"], state["nnz_done"]) == want, (state, want)
        dataset = client.get(f"/v1/datasets/{state['dataset_id']}").json()
        assert (dataset["rows"], dataset["nnz"]) == want, (dataset, want)
        wall = (datetime.fromisoformat(state["finished_at"])
                - datetime.fromisoformat(state["created_at"])).total_seconds()
        stored = sum(f.stat().st_size for f in (scratch / "home").rglob("*")
                     if f.is_file() and "datasets" in f.parts)
        notes.append(f"stored: {dataset['value_dtype']} layout, "
                     f"{dataset['stored_bytes']:,} "
                     f"bytes in {dataset['shards']} shards (the dataset's), {stored:,} bytes "
                     f"of files under the blob store's datasets/; workers' peak summed RSS "
                     f"during the import "
                     f"{import_rss}")
        if train_params is not None:
            job, rss = train(client, state["dataset_id"], train_params, started_workers,
                             train_timeout)
            result = job.get("result") or {}
            notes.append(
                f"dcd {train_params}: {job['status']}, train_seconds "
                f"{result.get('train_seconds')} (job {job.get('started_at')} to "
                f"{job.get('finished_at')}), exit {result.get('exit_reason')}, iterations "
                f"{result.get('iterations')}, converged {result.get('converged')}, relative "
                f"gap {result.get('relative_gap')}, train accuracy "
                f"{result.get('train_accuracy')}, data plan {result.get('data_plan')}, "
                f"error {job.get('error')}; workers' peak RSS during the job {rss}")
    mb = text / 1e6
    single_cells = (f"{single_s:.1f} s | {mb / single_s:.0f}" if single_s else "- | -")
    table = (
        f"| set | parts | workers | text | rows, non-zeros | import (wall) | import MB/s "
        f"| one process, load_svmlight in turn | MB/s |\n|---|---:|---:|---:|---|---:|---:|"
        f"---:|---:|\n| {label}{' (from S3)' if s3 else ''} | {parts} | {workers} | "
        f"{mb:.0f} MB | {want[0]:,}, {want[1]:,} | {wall:.1f} s | {mb / wall:.0f} | "
        f"{single_cells} |\n")
    return table + "".join(f"\n- {note}" for note in notes) + "\n"


HEADER = ("# Imports (bench/import_bench.py)\n\nMeasured on a loaded, shared 2-core machine: "
          "the figures are noisy and compare with nothing outside one run.\n\n")


def write_results(out: Path, table: str, append: bool) -> None:
    """The quick run's table replaces the file's first one; the sections after it (from
    its first "## " heading: the large runs' figures) stay. `append`: after them."""
    old = out.read_text() if out.exists() else ""
    if append and old:
        out.write_text(old + "\n" + table)
        return
    sections = old.find("\n## ")
    out.write_text(HEADER + table + (old[sections:] if sections >= 0 else ""))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", type=float, default=0.05)
    parser.add_argument("--parts", type=int, default=8)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--nnz", type=float, default=None,
                        help="size the set by its non-zeros (e.g. 1e9) instead of --scale")
    parser.add_argument("--jobs", type=int, default=1, help="processes writing the parts")
    parser.add_argument("--data-dir", type=Path, default=None,
                        help="keep the parts here (its parent is the import root) and reuse "
                        "those already written")
    parser.add_argument("--s3", action="store_true",
                        help="import the parts from a moto S3 server instead of files")
    parser.add_argument("--train", action="store_true",
                        help="then train a dcd job (L1 loss, C = 1) on the dataset")
    parser.add_argument("--max-seconds", type=float, default=None,
                        help="the training job's max_seconds")
    parser.add_argument("--memory-bytes", type=float, default=0,
                        help="the workers' HINGE_WORKER_MEMORY_BYTES (0: the default)")
    parser.add_argument("--no-single", action="store_true",
                        help="count the files' rows and non-zeros without the timed "
                        "one-process parse")
    parser.add_argument("--logs", type=Path, default=None,
                        help="copy the service's logs (API, workers, moto) here")
    parser.add_argument("--append", action="store_true",
                        help="append to bench/results/imports.md instead of replacing it")
    parser.add_argument("--dtype", default="auto", choices=("auto", "float32", "float64"),
                        help="the import's layout (float32: 8 bytes a non-zero, rounded)")
    args = parser.parse_args()
    params: dict[str, Any] | None = None
    if args.train:
        params = {"C": 1.0, "loss": "l1"}
        if args.max_seconds:
            params["max_seconds"] = args.max_seconds
    table = main(args.scale, args.parts, args.workers, nnz=args.nnz, jobs=args.jobs,
                 data_dir=args.data_dir, s3=args.s3, train_params=params,
                 memory_bytes=int(args.memory_bytes), single=not args.no_single, logs=args.logs,
                 dtype=args.dtype)
    print(table)
    write_results(Path(__file__).parent / "results" / "imports.md", table, args.append)
