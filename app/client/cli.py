"""`hinge`: Hinge's command line (Typer + Rich), on the Python client in app/client/__init__.py.

It reads HINGE_URL (default http://127.0.0.1:$HINGE_PORT, port 8000 by default) and
HINGE_API_KEY (or --url and --api-key). `hinge sample` writes a small dataset (app/client/sample.py)
without a server. Exit codes: 0 success; 1 an API or connection error (its message on stderr);
2 a usage error; 3 a watched job that ended `failed` or `cancelled`; 130 interrupted by
Ctrl-C (after asking whether to cancel the watched job, whatever the answer).
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TaskProgressColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)
from rich.prompt import Confirm
from rich.table import Table
from rich.text import Text

from app.client import Dataset, HingeClient, HingeError, Job
from app.client import sample as samples

EXIT_OK = 0
EXIT_API_ERROR = 1
EXIT_JOB_NOT_SUCCEEDED = 3
EXIT_INTERRUPTED = 130

app = typer.Typer(name="hinge", help="Train SVMs on a Hinge server and use the models "
                  "(HINGE_URL, HINGE_API_KEY).", no_args_is_help=True,
                  add_completion=False, pretty_exceptions_enable=False)
# markup off: names, messages and warnings are printed as they are, never as Rich markup
out = Console(markup=False)
if not out.is_terminal:  # piped or captured: full ids in tables, not a cut at 80 columns
    out.width = max(out.width, 200)
err = Console(stderr=True, soft_wrap=True, markup=False)


@dataclass
class Options:
    url: str | None
    api_key: str | None
    as_json: bool

    def client(self) -> HingeClient:
        return HingeClient(self.url, self.api_key)


@app.callback()
def main_options(
    ctx: typer.Context,
    url: Annotated[str | None, typer.Option(envvar="HINGE_URL", help="The server's "
                   "address (default: http://127.0.0.1:$HINGE_PORT, port 8000 by default)",
                   show_default=False)] = None,
    api_key: Annotated[str | None, typer.Option(envvar="HINGE_API_KEY",
                       help="An API key, hk_...")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the API's JSON answers")
                       ] = False,
) -> None:
    ctx.obj = Options(url, api_key, as_json)


def _options(ctx: typer.Context) -> Options:
    return ctx.obj


@contextmanager
def _calling_the_api() -> Iterator[None]:
    """An API error exits 1 with its message; Ctrl-C exits 130 (Click would say 1)."""
    try:
        yield
    except HingeError as exc:
        err.print(Text("error: ", style="bold red") + Text(str(exc)), highlight=False)
        raise typer.Exit(EXIT_API_ERROR) from None
    except KeyboardInterrupt:
        err.print("interrupted")
        raise typer.Exit(EXIT_INTERRUPTED) from None


def _print_json(value: Any) -> None:
    out.print_json(json.dumps(value))


def _g(value: Any) -> str:
    """A number as svm-predict prints it (%g), anything else as it is."""
    return f"{value:g}" if isinstance(value, int | float) else str(value)


def _dataset_line(dataset: Dataset) -> str:
    counts = ", ".join(f"{label} ({count:,})" for label, count in
                       dataset.get("class_counts", {}).items())
    return (f"dataset {dataset['id']} \"{dataset['name']}\": {dataset['rows']:,} rows, "
            f"{dataset['features']:,} features, {dataset['nnz']:,} non-zeros; "
            f"classes {counts}")


# -- datasets ---------------------------------------------------------------------------

@app.command()
def upload(ctx: typer.Context,
           file: Annotated[Path, typer.Argument(exists=True, dir_okay=False,
                           help="svmlight, CSV/TSV with a header, Parquet or .npz; "
                           "plain or gzip/bz2/xz")],
           name: Annotated[str | None, typer.Option(help="Dataset name (default: the "
                           "file's name)")] = None,
           quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Print only the "
                            "dataset's id")] = False,
           format: Annotated[str | None, typer.Option(
               "--format", help="svmlight, csv, tsv, parquet or npz (default: the server "
               "reads it from the content)")] = None,
           label_column: Annotated[str | None, typer.Option(
               "--label-column", help="CSV/TSV/Parquet: the label column, a header name "
               "or 0-based position (default: the column named 'label')")] = None,
           ) -> None:
    """Upload a dataset, with a progress bar."""
    options = _options(ctx)
    columns = (TextColumn("uploading {task.description}", markup=False), BarColumn(),
               TaskProgressColumn(), DownloadColumn(), TransferSpeedColumn(),
               TimeRemainingColumn())
    with options.client() as client, Progress(*columns, console=err,
                                              disable=quiet or options.as_json) as bar:
        task = bar.add_task(file.name, total=file.stat().st_size)
        with _calling_the_api():
            dataset = client.upload(file, name, progress=lambda sent, _total:
                                    bar.update(task, completed=sent), format=format,
                                    label_column=label_column)
    if options.as_json:
        _print_json(dataset)
    elif quiet:
        print(dataset["id"])
    else:
        out.print(_dataset_line(dataset), highlight=False)


@app.command()
def sample(
    out_file: Annotated[Path | None, typer.Option(
        "--out", "-o", dir_okay=False, help="Write to this file (default: standard output)")
    ] = None,
    kind: Annotated[str, typer.Option(help="binary (labels -1/+1) or multiclass (1, 2, 3)")
                    ] = "binary",
    rows: Annotated[int, typer.Option(min=1, help="How many rows")] = samples.DEFAULT_ROWS,
    seed: Annotated[int, typer.Option(min=0, help="Draws the rows: another seed gives "
                                      "new rows of the same problem (a test set)")] = 0,
) -> None:
    """Write a small a9a-like svmlight dataset (one-hot 0/1 features) to try Hinge with.

    Made here, from a fixed rule: no server, no download."""
    if kind not in samples.KINDS:
        raise typer.BadParameter(f"choose one of: {', '.join(samples.KINDS)}",
                                 param_hint="--kind")
    text = samples.sample(kind, rows, seed)
    if out_file is None:
        sys.stdout.write(text)
        return
    out_file.write_text(text)
    err.print(f"wrote {rows:,} {kind} rows to {out_file}")


@app.command()
def datasets(ctx: typer.Context,
             quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Print only the "
                              "ids, newest first")] = False) -> None:
    """List the datasets, newest first."""
    options = _options(ctx)
    with options.client() as client, _calling_the_api():
        rows = client.datasets()
    if options.as_json or quiet:
        _print_json(rows) if options.as_json else print("\n".join(r["id"] for r in rows))
        return
    table = Table("id", "name", "rows", "features", "non-zeros", "classes", "created")
    for row in rows:
        table.add_row(row["id"], row["name"], f"{row['rows']:,}", f"{row['features']:,}",
                      f"{row['nnz']:,}", str(len(row.get("labels", []))),
                      row.get("created_at", "")[:19])
    out.print(table)


# -- jobs -------------------------------------------------------------------------------

def parse_param(text: str) -> tuple[str, Any]:
    """`k=v`: the value as JSON when it is JSON (1, 0.5, true, null, "x"), else a string."""
    key, sep, raw = text.partition("=")
    if not sep or not key.strip():
        raise typer.BadParameter(f"{text!r}: write a parameter as NAME=VALUE, e.g. C=1")
    try:
        value: Any = json.loads(raw)
    except ValueError:
        value = raw
    return key.strip(), value


def _measure(progress: dict[str, Any]) -> str:
    parts = []
    for key in ("gap", "violation"):
        value = progress.get(key)
        if isinstance(value, int | float) and math.isfinite(value):
            parts.append(f"{key} {value:.3g}")
    if progress.get("n_classes") and int(progress["n_classes"]) > 1:
        parts.append(f"subproblem {int(progress.get('class_index') or 0) + 1}/"
                     f"{int(progress['n_classes'])}")
    return "  ".join(parts)


def _summary(job: Job) -> str:
    result: dict[str, Any] = dict(job.get("result") or {})
    status = job.get("status")
    if status != "succeeded":
        reason = job.get("error") or ""
        return f"job {job['id']} {status}" + (f": {reason}" if reason else "")
    bits = [f"exit {result.get('exit_reason')}",
            "converged" if result.get("converged") else "NOT converged"]
    for key, label in (("primal_objective", "primal"), ("relative_gap", "relative gap"),
                       ("train_accuracy", "train accuracy"), ("train_seconds", "seconds")):
        if result.get(key) is not None:
            bits.append(f"{label} {result[key]:.6g}")
    lines = [f"job {job['id']} succeeded: " + ", ".join(bits)]
    lines += [f"warning: {w}" for w in result.get("warnings") or []]
    lines.append(f"model {job.get('model_id')}")
    return "\n".join(lines)


def watch_job(client: HingeClient, job: Job, as_json: bool) -> int:
    """Follow the job's events with a live progress bar; on Ctrl-C ask whether to cancel
    it. Returns the exit code."""
    job_id = job["id"]
    columns = (TextColumn("{task.description}"), BarColumn(), TaskProgressColumn(),
               TextColumn("{task.fields[measure]}"), TimeElapsedColumn(),
               TextColumn("eta"), TimeRemainingColumn())
    try:
        with Progress(*columns, console=err, disable=as_json) as bar:
            task = bar.add_task(f"{job.get('solver', '')} {job.get('status', '')}",
                                total=None, measure="")
            for event in client.events(job_id):
                if event.kind == "status":
                    bar.update(task, description=f"{job.get('solver')} "
                                                 f"{event.data.get('status')}")
                elif event.kind == "progress":
                    fraction = event.data.get("fraction")
                    if isinstance(fraction, int | float):
                        bar.update(task, total=1.0, completed=float(fraction))
                    bar.update(task, measure=_measure(event.data))
                if event.is_terminal and event.data.get("status") == "succeeded":
                    result = event.data.get("result") or {}
                    gap = result.get("relative_gap")
                    bar.update(task, total=1.0, completed=1.0, measure="" if gap is None
                               else f"relative gap {gap:.3g}")
    except KeyboardInterrupt:
        return _interrupted(client, job_id)
    final = client.job(job_id)
    if as_json:
        _print_json(final)
    else:
        out.print(_summary(final), highlight=False)
    return EXIT_OK if final.get("status") == "succeeded" else EXIT_JOB_NOT_SUCCEEDED


def _interrupted(client: HingeClient, job_id: str) -> int:
    try:
        cancel = Confirm.ask(f"\nCancel job {job_id}?", console=err, default=False)
    except (KeyboardInterrupt, EOFError):
        cancel = False
    if not cancel:
        err.print(f"job {job_id} keeps running; follow it with: hinge job {job_id}",
                  highlight=False)
        return EXIT_INTERRUPTED
    try:
        job = client.cancel(job_id)
        err.print(f"job {job_id} {job['status']}"
                  + (" (cancel requested: it stops at its next progress check)"
                     if job["status"] == "running" else ""), highlight=False)
    except HingeError as exc:  # it finished meanwhile (409), or the server went away
        err.print(f"job {job_id} not cancelled: {exc.message}", highlight=False)
    return EXIT_INTERRUPTED


@app.command()
def train(ctx: typer.Context,
          dataset: Annotated[str, typer.Argument(help="The dataset's id")],
          solver: Annotated[str | None, typer.Option(help="dcd, acf, ocas, alm, pegasos, "
                            "tron, newton, gram, smo or auto (default: auto)")] = None,
          param: Annotated[list[str] | None, typer.Option("--param", "-p", help="A solver "
                           "parameter NAME=VALUE (repeat it); see GET /v1/solvers")] = None,
          watch: Annotated[bool, typer.Option(help="Follow the job live to its end "
                           "(Ctrl-C asks whether to cancel it)")] = False) -> None:
    """Submit a training job (and, with --watch, follow it)."""
    options = _options(ctx)
    params = dict(parse_param(p) for p in param or [])
    with options.client() as client, _calling_the_api():
        job = client.train(dataset, solver, params)
        if not options.as_json or not watch:
            _print_json(job) if options.as_json else out.print(
                f"job {job['id']} {job['status']} ({job['solver']})", highlight=False)
        if watch:
            raise typer.Exit(watch_job(client, job, options.as_json))


@app.command()
def jobs(ctx: typer.Context,
         status: Annotated[str | None, typer.Option(help="Only jobs in this status")] = None
         ) -> None:
    """List the jobs, newest first."""
    options = _options(ctx)
    with options.client() as client, _calling_the_api():
        rows = client.jobs(status=status)
    if options.as_json:
        _print_json(rows)
        return
    table = Table("id", "status", "solver", "dataset", "progress", "exit", "model",
                  "created")
    for row in rows:
        result = row.get("result") or {}
        fraction = row.get("progress_fraction")
        table.add_row(row["id"], row["status"], row["solver"], row.get("dataset_id") or "",
                      "" if fraction is None else f"{fraction:.0%}",
                      str(result.get("exit_reason") or ""), row.get("model_id") or "",
                      row.get("created_at", "")[:19])
    out.print(table)


@app.command()
def job(ctx: typer.Context, job_id: Annotated[str, typer.Argument(help="The job's id")]
        ) -> None:
    """Show a job: status, parameters, progress, result (as JSON)."""
    options = _options(ctx)
    with options.client() as client, _calling_the_api():
        _print_json(client.job(job_id))


@app.command()
def cancel(ctx: typer.Context, job_id: Annotated[str, typer.Argument(help="The job's id")]
           ) -> None:
    """Cancel a queued or running job."""
    options = _options(ctx)
    with options.client() as client, _calling_the_api():
        answer = client.cancel(job_id)
    _print_json(answer) if options.as_json else out.print(
        f"job {job_id} {answer['status']}", highlight=False)


# -- models -----------------------------------------------------------------------------

models_app = typer.Typer(help="List the models (no command), or import one.",
                         invoke_without_command=True, no_args_is_help=False)
app.add_typer(models_app, name="models")


@models_app.callback()
def models(ctx: typer.Context) -> None:
    """List the models, newest first (`hinge models import FILE` uploads one)."""
    if ctx.invoked_subcommand is not None:
        return
    options = _options(ctx)
    with options.client() as client, _calling_the_api():
        rows = client.models()
    if options.as_json:
        _print_json(rows)
        return
    table = Table("id", "kind", "solver", "classes", "features", "converged",
                  "train accuracy", "job")
    for row in rows:
        accuracy = row.get("train_accuracy")
        table.add_row(row["id"], row["kind"], row["solver"], str(len(row["labels"])),
                      f"{row['n_features']:,}", "yes" if row["converged"] else "no",
                      "" if accuracy is None else f"{accuracy:.4f}", row.get("job_id") or "")
    out.print(table)


@app.command()
def predict(ctx: typer.Context,
            model: Annotated[str, typer.Argument(help="The model's id")],
            file: Annotated[str, typer.Argument(help="svmlight lines (labels optional); "
                            "- reads standard input")]) -> None:
    """Predict: one line per row, the label then its decision value(s), tab-separated."""
    options = _options(ctx)
    body = sys.stdin.buffer.read() if file == "-" else _read(file)
    with options.client() as client, _calling_the_api():
        answer = client.predict(model, body)
    if options.as_json:
        _print_json(answer)
        return
    for label, values in zip(answer["labels"], answer["decision_values"], strict=True):
        shown = " ".join(_g(v) for v in values) if isinstance(values, list) else _g(values)
        print(f"{_g(label)}\t{shown}")


# -- models import (its own block: issue 28, models in) --------------------------------

@models_app.command("import")
def import_model(ctx: typer.Context,
                 file: Annotated[Path, typer.Argument(help="A LIBSVM or LIBLINEAR model "
                                                      "file")],
                 range_file: Annotated[Path | None, typer.Option(
                     "--range", help="The svm-scale -s range file the model was trained "
                     "behind")] = None,
                 n_features: Annotated[int | None, typer.Option(
                     "--n-features", help="The width of a LIBSVM model (default: its "
                     "largest support-vector index)")] = None) -> None:
    """Import a model trained by LIBSVM or LIBLINEAR; prints the new model's id."""
    options = _options(ctx)
    with options.client() as client, _calling_the_api():
        answer = client.import_model(file, range_file, n_features=n_features)
    if options.as_json:
        _print_json(answer)
    else:
        out.print(f"model {answer['id']} ({answer['kind']}, {len(answer['labels'])} "
                  f"classes, {answer['n_features']:,} features) from {file.name}",
                  highlight=False)


def _read(file: str) -> bytes:
    try:
        return Path(file).read_bytes()
    except OSError as exc:
        raise typer.BadParameter(f"cannot read {file}: {exc.strerror}") from None


@app.command()
def export(ctx: typer.Context,
           model: Annotated[str, typer.Argument(help="The model's id")],
           format: Annotated[str | None, typer.Option(
               "--format", "-f", help="liblinear (linear models' default), libsvm (kernel "
               "models' default), scale (the svm-scale range file) or onnx (binary: "
               "use --output)")] = None,
           output: Annotated[Path | None, typer.Option("--output", "-o", help="Write to "
                             "this file (default: standard output)")] = None) -> None:
    """Export a model file that LIBLINEAR's or LIBSVM's predict loads."""
    options = _options(ctx)
    if format == "onnx":
        with options.client() as client, _calling_the_api():
            graph = client.export_onnx(model)
        if output is None:
            sys.stdout.buffer.write(graph)
        else:
            output.write_bytes(graph)
        return
    with options.client() as client, _calling_the_api():
        text = client.export(model, format)
    if output is None:
        sys.stdout.write(text)
    else:
        output.write_text(text)


def main() -> None:
    """The console script `hinge`."""
    app()


if __name__ == "__main__":
    main()
