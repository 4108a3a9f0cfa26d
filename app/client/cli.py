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

import json
import math
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import urlsplit

import typer
from rich import box
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

from app.client import Dataset, HingeClient, HingeError, Job, default_url
from app.client import sample as samples
from app.client.uploads import PART_BYTES

EXIT_OK = 0
EXIT_API_ERROR = 1
EXIT_USAGE = 2
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


SHORT_ID = 8  # the fewest hex digits a list shows of an id


@dataclass
class Options:
    url: str | None
    api_key: str | None
    as_json: bool
    url_from: str = "default"  # where the address came from: --url, HINGE_URL or default
    key_from: str = "none"  # --api-key, HINGE_API_KEY or none

    def client(self) -> HingeClient:
        url = self.url or default_url()
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            where = "--url" if self.url_from == "--url" else "HINGE_URL"
            _usage_error(f"{where} is {url!r}, not an http:// or https:// address: set "
                         "HINGE_URL or pass --url, e.g. --url http://127.0.0.1:8000")
        if not self.api_key:
            _usage_error("no API key: set HINGE_API_KEY=hk_... or pass --api-key hk_... "
                         "before the command (`make run` prints a key; an admin makes "
                         "more with `python -m app.admin keys create`)")
        return HingeClient(url, self.api_key)


def _usage_error(message: str) -> None:
    err.print(Text("error: ", style="bold red") + Text(message), highlight=False)
    raise typer.Exit(EXIT_USAGE)


def _source(ctx: typer.Context, name: str, flag: str, variable: str, fallback: str) -> str:
    source = getattr(ctx.get_parameter_source(name), "name", None)  # click's ParameterSource
    if source == "COMMANDLINE":
        return flag
    if source == "ENVIRONMENT":
        return variable
    return fallback


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
    ctx.obj = Options(url, api_key, as_json,
                      url_from=_source(ctx, "url", "--url", "HINGE_URL", "default"),
                      key_from=_source(ctx, "api_key", "--api-key", "HINGE_API_KEY", "none"))
    _current[:] = [ctx.obj]


_current: list[Options] = []  # this run's options, for the hints of its errors


JsonFlag = Annotated[bool, typer.Option("--json", help="Print the API's JSON answer "
                                        "(as `hinge --json ...`)")]
WideFlag = Annotated[bool, typer.Option("--wide", "-w", help="Whole ids, not the "
                                        "shortest unique prefixes")]


def _options(ctx: typer.Context, as_json: bool = False) -> Options:
    options: Options = ctx.obj
    options.as_json = options.as_json or as_json
    return options


def _show(ctx: typer.Context, fetch: Callable[[HingeClient], Any]) -> None:
    """A show command: what `fetch` gets from the API, as JSON."""
    options = _options(ctx)
    with options.client() as client, _calling_the_api():
        _print_json(fetch(client))


def _show_command(noun: str, doc: str, fetch: Callable[[HingeClient, str], Any]) -> None:
    """Register `hinge NOUN ID`: show one object (as JSON), found by its id or a unique
    prefix."""
    def command(ctx: typer.Context, ident: str, as_json: JsonFlag = True) -> None:
        _show(ctx, lambda client: fetch(client, ident))

    command.__doc__ = doc
    # (an annotation object, not a string: its help names the noun)
    command.__annotations__["ident"] = Annotated[str, IdArg(
        metavar=f"{noun}_id", help=f"The {noun}'s id (or a unique prefix)")]
    app.command(noun)(command)


def _answer(ctx: typer.Context, as_json: bool, fetch: Callable[[HingeClient], Any],
            line: Callable[[Any], str]) -> None:
    """A command's one answer from the API: as JSON with --json, else as `line` says it."""
    options = _options(ctx, as_json)
    with options.client() as client, _calling_the_api():
        answer = fetch(client)
    _print_json(answer) if options.as_json else out.print(line(answer), highlight=False)


def _rows(ctx: typer.Context, as_json: bool, fetch: Callable[[HingeClient], list[Any]]
          ) -> list[Any] | None:
    """A list command's rows, for its table; None when they were printed as JSON."""
    options = _options(ctx, as_json)
    with options.client() as client, _calling_the_api():
        rows = fetch(client)
    if options.as_json:
        _print_json(rows)
        return None
    return rows


def short_ids(ids: list[str], least: int = SHORT_ID) -> dict[str, str]:
    """Each id's shortest prefix of at least `least` characters that no other id in
    `ids` shares (the whole id when it is shorter)."""
    unique = sorted(set(ids))
    shown: dict[str, str] = {}
    for i, ident in enumerate(unique):
        length = least
        for other in (unique[i - 1] if i else "", unique[i + 1] if i + 1 < len(unique)
                      else ""):
            common = len(_common_prefix(ident, other))
            length = max(length, common + 1)
        shown[ident] = ident[:length]
    return shown


def _common_prefix(a: str, b: str) -> str:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return a[:n]


class _Ids:
    """How a table shows ids: the shortest unique prefixes among the ids it shows (of
    each column), or the whole ids with --wide."""

    def __init__(self, wide: bool, *columns: list[str | None]) -> None:
        self.wide = wide
        self.short: dict[str, str] = {}
        for column in columns:
            self.short.update(short_ids([c for c in column if c]))

    def __call__(self, ident: str | None) -> str:
        if not ident:
            return ""
        return ident if self.wide else self.short.get(ident, ident)

    @property
    def width(self) -> int:
        """The widest id shown (so that no id column is narrower)."""
        if self.wide:
            return 32
        return max((len(v) for v in self.short.values()), default=SHORT_ID)


def _table() -> Table:
    """A list's table: a rule under the header, one space between columns (a list of jobs
    fits 80 columns with short ids; a cell that does not fit wraps, ids are never cut)."""
    return Table(box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, 0))


def _when(value: Any) -> str:
    """A timestamp to the second, with a space where it may wrap."""
    return str(value or "")[:19].replace("T", " ")


ID_HEADERS = frozenset({"id", "dataset", "model", "job"})  # the columns that hold ids


def _listing(ids: _Ids, *headers: str) -> Table:
    """A list's table with these columns; an id column (ID_HEADERS) is never cut: its ids
    wrap to fit before they would be cut."""
    table = _table()
    for header in headers:
        if header in ID_HEADERS:
            table.add_column(header, no_wrap=True, min_width=ids.width, overflow="fold")
        else:
            table.add_column(header)
    return table


@contextmanager
def _calling_the_api() -> Iterator[None]:
    """An API error exits 1 with its message; Ctrl-C exits 130 (Click would say 1)."""
    try:
        yield
    except HingeError as exc:
        err.print(Text("error: ", style="bold red") + Text(str(exc)), highlight=False)
        hint = _hint(exc)
        if hint:
            err.print(hint, highlight=False)
        raise typer.Exit(EXIT_API_ERROR) from None
    except KeyboardInterrupt:
        err.print("interrupted")
        raise typer.Exit(EXIT_INTERRUPTED) from None


def _hint(exc: HingeError) -> str:
    """What to set, for the errors that a setting causes."""
    options = _current[0] if _current else None
    if exc.status_code == 401:
        where = options.key_from if options else "HINGE_API_KEY"
        return (f"the key (from {where}) was refused: set HINGE_API_KEY or pass --api-key "
                "with a valid key, hk_<id>_<secret>")
    if exc.status_code == 0 and exc.code == "connection_error":
        where = options.url_from if options else "default"
        source = ("the default address (HINGE_PORT, else port 8000)"
                  if where == "default" else where)
        return (f"is the server running? The address comes from {source}: set HINGE_URL "
                "or pass --url")
    if exc.code == "ambiguous_id":
        return "give more of the id (or copy it from a list with --wide)"
    return ""


def _print_json(value: Any) -> None:
    out.print_json(json.dumps(value))


def _g(value: Any) -> str:
    """A number as svm-predict prints it (%g), anything else as it is."""
    return f"{value:g}" if isinstance(value, int | float) else str(value)


def _dataset_line(dataset: Dataset) -> str:
    stats = dataset.get("label_stats")
    if dataset.get("task") == "regression" and stats:
        labels = (f"regression targets {_g(stats['min'])} to {_g(stats['max'])}, mean "
                  f"{stats['mean']:.4g}, std {stats['std']:.4g}, "
                  f"{stats['distinct']:,} distinct")
    else:
        labels = "classes " + ", ".join(f"{label} ({count:,})" for label, count in
                                        dataset.get("class_counts", {}).items())
    weights = dataset.get("weight_stats")
    if weights:
        labels += (f"; weights {_g(weights['min'])} to {_g(weights['max'])}, mean "
                   f"{weights['mean']:.4g}, {weights['zeros']:,} zero")
    return (f"dataset {dataset['id']} \"{dataset['name']}\": {dataset['rows']:,} rows, "
            f"{dataset['features']:,} features, {dataset['nnz']:,} non-zeros; {labels}")


def _classes_cell(row: Any) -> str:
    """A list's "classes" cell: how many, or the task of a regression or outlier row."""
    task = row.get("task", "classification")
    return str(len(row.get("labels", []))) if task == "classification" else str(task)


def _solver_cell(job: Any) -> str:
    """A jobs list's "solver" cell: the solver, and the task unless classification."""
    task = job.get("task", "classification")
    return job["solver"] if task == "classification" else f"{job['solver']}, {task}"


# -- datasets ---------------------------------------------------------------------------

IdArg = typer.Argument  # (every id argument: the whole id or a unique prefix)


@app.command()
def upload(ctx: typer.Context,
           file: Annotated[Path, typer.Argument(exists=True, dir_okay=False,
                           help="svmlight, CSV/TSV with a header, Parquet or .npz; "
                           "plain or gzip/bz2/xz")],
           name: Annotated[str | None, typer.Option(help="Dataset name (default: the "
                           "file's name)")] = None,
           reuse: Annotated[bool, typer.Option("--reuse", help="If you uploaded the same "
                            "content before, use that dataset instead of storing a copy"
                            )] = False,
           quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Print only the "
                            "dataset's id")] = False,
           format: Annotated[str | None, typer.Option(
               "--format", help="svmlight, csv, tsv, parquet or npz (default: the server "
               "reads it from the content)")] = None,
           label_column: Annotated[str | None, typer.Option(
               "--label-column", help="CSV/TSV/Parquet: the label column, a header name "
               "or 0-based position (default: the column named 'label')")] = None,
           task: Annotated[str | None, typer.Option(
               "--task", help="classification or regression (default: the server reads "
               "the labels: non-integer ones, or more distinct ones than its class limit, "
               "make a regression dataset)")] = None,
           weight_column: Annotated[str | None, typer.Option(
               "--weight-column", help="The column of instance weights (C_i = C * w_i): a "
               "header name, or svmlight's 1-based feature index; it leaves the "
               "features")] = None,
           part_size: Annotated[int, typer.Option(
               "--part-size", min=1, help="A file larger than this many bytes is sent in "
               "parts of this size, resumable: a dropped connection resumes where the "
               "server's bytes end")] = PART_BYTES,
           as_json: JsonFlag = False) -> None:
    """Upload a dataset, with a progress bar (a large file in resumable parts).

    The same content uploaded again is stored again (the earlier datasets are named)
    unless --reuse."""
    options = _options(ctx, as_json)
    columns = (TextColumn("uploading {task.description}", markup=False), BarColumn(),
               TaskProgressColumn(), DownloadColumn(), TransferSpeedColumn(),
               TimeRemainingColumn())
    with options.client() as client, Progress(*columns, console=err,
                                              disable=quiet or options.as_json) as bar:
        bar_task = bar.add_task(file.name, total=file.stat().st_size)
        with _calling_the_api():
            dataset = client.upload(file, name, reuse=reuse, progress=lambda sent, _total:
                                    bar.update(bar_task, completed=sent), format=format,
                                    label_column=label_column, task=task,
                                    weight_column=weight_column, part_bytes=part_size)
    if options.as_json:
        _print_json(dataset)
        return
    if quiet:
        print(dataset["id"])
    elif dataset.get("reused"):
        out.print(f"reused {_dataset_line(dataset)} (the same content; nothing stored)",
                  highlight=False)
    else:
        out.print(_dataset_line(dataset), highlight=False)
    earlier = dataset.get("duplicate_of") or []
    if earlier and not dataset.get("reused"):
        err.print(f"note: the same content as dataset{'s' if len(earlier) > 1 else ''} "
                  f"{', '.join(earlier)}, stored again; `hinge upload --reuse` uses the "
                  "earlier one instead", highlight=False)


@app.command("import")
def import_(ctx: typer.Context,
            source: Annotated[list[str], typer.Argument(
                help="s3://bucket/key (a glob of part files: 's3://bucket/set/part-*'), "
                "or file:///path under the server's HINGE_IMPORT_ROOTS; several in order")],
            name: Annotated[str | None, typer.Option(help="Dataset name (default: the "
                            "first part's name)")] = None,
            task: Annotated[str, typer.Option(help="auto, classification or regression"
                                              )] = "auto",
            quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Print only the "
                             "dataset's id")] = False,
            as_json: JsonFlag = False) -> None:
    """Import a dataset the server reads itself (from S3, or its own disk), following its
    progress with a bar. Ctrl-C cancels the import."""
    options = _options(ctx, as_json)
    columns = (TextColumn("importing {task.description}", markup=False), BarColumn(),
               TaskProgressColumn(), DownloadColumn(), TransferSpeedColumn(),
               TimeRemainingColumn())
    with options.client() as client, _calling_the_api():
        record = client.start_import(source if len(source) > 1 else source[0], name,
                                     task=task)
        with Progress(*columns, console=err, disable=quiet or options.as_json) as bar:
            shown = bar.add_task(f"{record['name']} ({record['parts_total']} parts)",
                                 total=record["bytes_total"])
            try:
                record = client.wait_import(record["id"], progress=lambda done, _total:
                                            bar.update(shown, completed=done))
            except KeyboardInterrupt:
                client.cancel_import(record["id"])
                err.print(f"import {record['id']} cancelled", highlight=False)
                raise typer.Exit(EXIT_INTERRUPTED) from None
        if record["status"] != "succeeded":
            if options.as_json:
                _print_json(record)
            err.print(Text("error: ", style="bold red") + Text(
                f"import {record['id']} {record['status']}: {record.get('error') or ''}"),
                highlight=False)
            raise typer.Exit(EXIT_API_ERROR)
        dataset = client.dataset(record["dataset_id"])
    if options.as_json:
        _print_json({**record, "dataset": dataset})
    elif quiet:
        print(dataset["id"])
    else:
        out.print(_dataset_line(dataset), highlight=False)


@app.command()
def sample(
    out_file: Annotated[Path | None, typer.Option(
        "--out", "-o", dir_okay=False, help="Write to this file (default: standard output)")
    ] = None,
    kind: Annotated[str, typer.Option(help="binary (labels -1/+1), multiclass (1, 2, 3) "
                                      "or regression (real-valued targets)")] = "binary",
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
                              "ids (whole), newest first")] = False,
             wide: WideFlag = False, as_json: JsonFlag = False) -> None:
    """List the datasets, newest first."""
    options = _options(ctx, as_json)
    with options.client() as client, _calling_the_api():
        rows = client.datasets()
    if options.as_json or quiet:
        _print_json(rows) if options.as_json else print("\n".join(r["id"] for r in rows))
        return
    ids = _Ids(wide, [r["id"] for r in rows])
    table = _listing(ids, "id", "name", "rows", "features", "non-zeros", "classes", "created")
    for row in rows:
        table.add_row(ids(row["id"]), row["name"], f"{row['rows']:,}",
                      f"{row['features']:,}", f"{row['nnz']:,}", _classes_cell(row),
                      _when(row.get("created_at")))
    out.print(table)


@app.command()
def dataset(ctx: typer.Context,
            dataset_id: Annotated[str, IdArg(help="The dataset's id (or a unique prefix)")],
            as_json: JsonFlag = False) -> None:
    """Show a dataset (as JSON with --json)."""
    _answer(ctx, as_json, lambda client: client.dataset(dataset_id), _dataset_line)


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
    if result.get("nonzero_weights"):  # an L1-regularised model: per output
        bits.append("non-zero weights " + "/".join(map(str, result["nonzero_weights"])))
    if (result.get("auto") or {}).get("chosen"):
        bits.append(f"auto chose {result['auto']['chosen']}")
    for key, value in (result.get("train_metrics") or {}).items():  # regression, outlier
        if key != "n_samples" and isinstance(value, int | float):
            bits.append(f"train {key} {value:.6g}")
    if job.get("task", "classification") != "classification":
        bits.insert(0, str(job["task"]))
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


def _cancelled_line(job: Job) -> str:
    if job["status"] == "cancelled":
        return f"job {job['id']} cancelled"
    return (f"job {job['id']} is {job['status']}: cancel requested, it stops at its next "
            "progress check")


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
        err.print(_cancelled_line(client.cancel(job_id)), highlight=False)
    except HingeError as exc:  # it finished meanwhile (409), or the server went away
        err.print(f"job {job_id} not cancelled: {exc.message}", highlight=False)
    return EXIT_INTERRUPTED


# the registered solvers (solvers.params.SOLVERS, which the client does not import; a test
# ties the two), auto first
SOLVER_NAMES = ("auto", "dcd", "acf", "ocas", "alm", "pegasos", "tron", "newton", "gram",
                "logistic_dcd", "l1_cd", "crammer_singer", "linear_svr", "linear_one_class",
                "smo")
_SOLVER_HELP = (
    "auto (the default: picks a linear solver from the data, the loss, penalty and "
    f"formulation), {', '.join(SOLVER_NAMES[1:-1])} or {SOLVER_NAMES[-1]}; e.g. -p "
    "loss=logistic, -p penalty=l1, -p formulation=epsilon_svr")


@app.command()
def train(ctx: typer.Context,
          dataset: Annotated[str, IdArg(help="The dataset's id (or a unique prefix)")],
          solver: Annotated[str | None, typer.Option(help=_SOLVER_HELP)] = None,
          param: Annotated[list[str] | None, typer.Option("--param", "-p", help="A solver "
                           "parameter NAME=VALUE (repeat it); see GET /v1/solvers")] = None,
          watch: Annotated[bool, typer.Option(help="Follow the job live to its end "
                           "(Ctrl-C asks whether to cancel it)")] = False,
          unweighted: Annotated[bool, typer.Option(
              "--unweighted", help="Ignore the dataset's instance weights (default: a "
              "dataset uploaded with --weight-column trains weighted)")] = False,
          as_json: JsonFlag = False) -> None:
    """Submit a training job (and, with --watch, follow it)."""
    options = _options(ctx, as_json)
    params = dict(parse_param(p) for p in param or [])
    with options.client() as client, _calling_the_api():
        job = client.train(dataset, solver, params,
                           sample_weight="none" if unweighted else None)
        if not options.as_json or not watch:
            _print_json(job) if options.as_json else out.print(
                f"job {job['id']} {job['status']} ({job['solver']})", highlight=False)
        if watch:
            raise typer.Exit(watch_job(client, job, options.as_json))


@app.command()
def jobs(ctx: typer.Context,
         status: Annotated[str | None, typer.Option(help="Only jobs in this status")] = None,
         wide: WideFlag = False, as_json: JsonFlag = False) -> None:
    """List the jobs, newest first."""
    rows = _rows(ctx, as_json, lambda client: client.jobs(status=status))
    if rows is None:
        return
    ids = _Ids(wide, [r["id"] for r in rows], [r.get("dataset_id") for r in rows],
               [r.get("model_id") for r in rows])
    table = _listing(ids, "id", "status", "solver", "dataset", "progress", "exit", "model",
                     "created")
    for row in rows:
        result = row.get("result") or {}
        fraction = row.get("progress_fraction")
        table.add_row(ids(row["id"]), row["status"], _solver_cell(row),
                      ids(row.get("dataset_id")),
                      "" if fraction is None else f"{fraction:.0%}",
                      str(result.get("exit_reason") or ""), ids(row.get("model_id")),
                      _when(row.get("created_at")))
    out.print(table)


_show_command("job", "Show a job: status, parameters, progress, result (as JSON).",
              HingeClient.job)


@app.command()
def cancel(ctx: typer.Context,
           job_id: Annotated[str, IdArg(help="The job's id (or a unique prefix)")],
           as_json: JsonFlag = False) -> None:
    """Cancel a queued or running job."""
    _answer(ctx, as_json, lambda client: client.cancel(job_id), _cancelled_line)


# -- models -----------------------------------------------------------------------------

models_app = typer.Typer(help="List the models (no command), import one, or register, "
                         "promote and list the versions of a name.",
                         invoke_without_command=True, no_args_is_help=False)
app.add_typer(models_app, name="models")


@models_app.callback()
def models(ctx: typer.Context, wide: WideFlag = False, as_json: JsonFlag = False) -> None:
    """List the models, newest first (`hinge models import FILE` uploads one)."""
    if ctx.invoked_subcommand is not None:
        return
    rows = _rows(ctx, as_json, lambda client: client.models())
    if rows is None:
        return
    ids = _Ids(wide, [r["id"] for r in rows], [r.get("job_id") for r in rows])
    table = _listing(ids, "id", "kind", "solver", "classes", "features", "converged",
                     "train accuracy", "job")
    for row in rows:
        accuracy = row.get("train_accuracy")
        table.add_row(ids(row["id"]), row["kind"], row["solver"], _classes_cell(row),
                      f"{row['n_features']:,}", "yes" if row["converged"] else "no",
                      "" if accuracy is None else f"{accuracy:.4f}", ids(row.get("job_id")))
    out.print(table)


_show_command("model", "Show a model (as JSON).", HingeClient.model)


def _batch_predict(options: Options, model: str, dataset: str, out_path: str,
                   fmt: str) -> None:
    """A batch prediction on a worker: queue it, follow its progress on standard error,
    download its output to `out_path`."""
    with options.client() as client, _calling_the_api():
        record = client.batch_predict(model, dataset)
        err.print(f"prediction {record['id']}: {record['rows']} rows of "
                  f"{record['dataset_name']}", highlight=False)

        def shown(now: dict[str, Any]) -> None:
            if not options.as_json and now["status"] == "running":
                err.print(f"  {now['rows_done']}/{now['rows']} rows", highlight=False)

        try:
            record = client.wait_prediction(record["id"], progress=shown)
        except KeyboardInterrupt:
            client.cancel_prediction(record["id"])
            err.print(f"prediction {record['id']} cancelled", highlight=False)
            raise typer.Exit(EXIT_API_ERROR) from None
        if record["status"] != "succeeded":
            err.print(Text("error: ", style="bold red") + Text(
                f"prediction {record['id']} {record['status']}: {record.get('error') or ''}"),
                highlight=False)
            raise typer.Exit(EXIT_API_ERROR)
        written = client.prediction_output(record["id"], out_path, fmt)
    if options.as_json:
        _print_json({**record, "out": out_path, "bytes": written})
    else:
        out.print(f"{record['rows']} rows -> {out_path} ({written} bytes, {fmt})",
                  highlight=False)


@app.command()
def predict(ctx: typer.Context,
            model: Annotated[str | None, IdArg(help="The model's id (or a unique prefix), "
                                               "or NAME@ALIAS, NAME/versions/N")] = None,
            file: Annotated[str | None, typer.Argument(help="svmlight lines (labels "
                            "optional); - reads standard input")] = None,
            model_option: Annotated[str | None, typer.Option(
                "--model", "-m", help="The model (instead of the argument)")] = None,
            dataset: Annotated[str | None, typer.Option(
                "--dataset", "-d", help="A batch prediction of every row of this stored "
                "dataset on a worker (needs --out)")] = None,
            out_path: Annotated[str | None, typer.Option(
                "--out", "-o", help="Where a batch prediction's output goes")] = None,
            fmt: Annotated[str, typer.Option(
                "--format", "-f", help="A batch output's format: csv, jsonl or npz")] = "csv",
            probabilities: Annotated[bool, typer.Option(
                "--probabilities", "-b", help="The label then the probability of each "
                "class, after a first line `labels` with the classes in their order (as "
                "LIBSVM's svm-predict -b 1); the model needs probability=true")] = False,
            as_json: JsonFlag = False) -> None:
    """Predict: one line per row, the label then its decision value(s), tab-separated
    (a regression model: the predicted value alone, as svm-predict). With --dataset: a
    batch prediction of a stored dataset on a worker, its progress followed, its output
    written to --out (`hinge predict --model M --dataset D --out scores.csv`)."""
    options = _options(ctx, as_json)
    model = model_option or model
    if model is None:
        _usage_error("name the model: hinge predict MODEL FILE, or --model MODEL")
    assert model is not None
    if dataset is not None:
        if out_path is None or fmt not in ("csv", "jsonl", "npz"):
            _usage_error("a batch prediction needs --out FILE and --format csv|jsonl|npz")
        assert out_path is not None
        _batch_predict(options, model, dataset, out_path, fmt)
        return
    if file is None:
        _usage_error("give a FILE of rows to predict, or --dataset ID --out FILE")
    assert file is not None
    body = sys.stdin.buffer.read() if file == "-" else _read(file)
    with options.client() as client, _calling_the_api():
        answer = client.predict(model, body)
    if answer.get("task") == "regression" and not options.as_json:
        if probabilities and answer.get("sigma") is not None:  # svm-predict -b 1's note
            err.print("Prob. model for test data: target value = predicted value + z,\n"
                      "z: Laplace distribution e^(-|z|/sigma)/(2sigma),"
                      f"sigma={_g(answer['sigma'])}", highlight=False)
        print("\n".join(_g(value) for value in answer["labels"]))
        return
    if probabilities and answer.get("probabilities") is None:
        err.print(Text("error: ", style="bold red") + Text(
            f"model {answer['model_id']} has no probabilities: train it with "
            "-p probability=true (calibrated), or -p loss=logistic (logistic regression "
            "gives them directly)"), highlight=False)
        raise typer.Exit(EXIT_API_ERROR)
    if options.as_json:
        _print_json(answer)
        return
    if probabilities:
        print("labels\t" + " ".join(_g(c) for c in answer["classes"]))
        for label, row in zip(answer["labels"], answer["probabilities"] or [], strict=True):
            print(f"{_g(label)}\t" + " ".join(_g(p) for p in row))
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


# -- the registry: models register, promote, versions ---------------------------------

@models_app.command("register")
def register_model(ctx: typer.Context,
                   model: Annotated[str, IdArg(help="The model's id (or a unique prefix)")],
                   name: Annotated[str, typer.Option("--name", "-n", help="The registered "
                                                     "name (made if new)")],
                   description: Annotated[str, typer.Option(
                       "--description", "-d", help="What this version is")] = "",
                   tag: Annotated[list[str] | None, typer.Option(
                       "--tag", "-t", help="KEY=VALUE (repeatable)")] = None) -> None:
    """Register a model as the next version of a name; prints `name/versions/n`."""
    options = _options(ctx)
    tags = {}
    for item in tag or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise typer.BadParameter(f"--tag {item!r}: expected KEY=VALUE")
        tags[key] = value
    with options.client() as client, _calling_the_api():
        answer = client.register(name, model, description=description, tags=tags)
    if options.as_json:
        _print_json(answer)
    else:
        out.print(f"{answer['name']}/versions/{answer['version']} is model "
                  f"{answer['model_id']}", highlight=False)


@models_app.command("promote")
def promote_model(ctx: typer.Context,
                  name: Annotated[str, typer.Argument(help="The registered name")],
                  alias: Annotated[str, typer.Argument(help="The alias: production, "
                                                       "staging, ...")],
                  version: Annotated[int, typer.Argument(help="The version it points at "
                                                         "from now on (rolling back too)")]
                  ) -> None:
    """Move an alias to a version: `hinge predict NAME@ALIAS` follows it at once."""
    options = _options(ctx)
    with options.client() as client, _calling_the_api():
        answer = client.promote(name, alias, version)
    if options.as_json:
        _print_json(answer)
    else:
        out.print(f"{name}@{alias} -> version {answer['version']}", highlight=False)


@models_app.command("versions")
def model_versions(ctx: typer.Context,
                   name: Annotated[str, typer.Argument(help="The registered name")],
                   as_json: JsonFlag = False) -> None:
    """A name's versions, newest first, with the aliases on each."""
    rows = _rows(ctx, as_json, lambda client: client.versions(name))
    if rows is None:
        return
    table = _table()
    for header in ("version", "model", "aliases", "description", "created"):
        table.add_column(header)
    for row in rows:
        table.add_row(str(row["version"]), row["model_id"], ", ".join(row["aliases"]),
                      row["description"], row["created_at"][:19])
    out.print(table)


def _read(file: str) -> bytes:
    try:
        return Path(file).read_bytes()
    except OSError as exc:
        raise typer.BadParameter(f"cannot read {file}: {exc.strerror}") from None


@app.command()
def export(ctx: typer.Context,
           model: Annotated[str, IdArg(help="The model's id (or a unique prefix)")],
           format: Annotated[str | None, typer.Option(
               "--format", "-f", help="liblinear (linear models' default), libsvm (kernel "
               "models' default), scale (the svm-scale range file) or onnx (binary: "
               "use --output)")] = None,
           output: Annotated[Path | None, typer.Option("--output", "-o", help="Write to "
                             "this file (default: standard output)")] = None,
           as_json: JsonFlag = False) -> None:
    """Export a model file that LIBLINEAR's or LIBSVM's predict loads.

    --json: the file's text in {"model_id", "format", "text"} (not for onnx)."""
    options = _options(ctx, as_json)
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
        if options.as_json:
            found = client.model(model)
            text = json.dumps({"model_id": found["id"], "format": format or (
                "libsvm" if found.get("kind") == "kernel" else "liblinear"), "text": text})
    if output is None:
        _print_json(json.loads(text)) if options.as_json else sys.stdout.write(text)
    else:
        output.write_text(text)


# -- evaluations and searches -----------------------------------------------------------

def _metric(value: Any) -> str:
    return "" if value is None else f"{value:.4f}" if isinstance(value, float) else str(value)


# what an evaluation's one line shows, by the model's task
REPORT_FIGURES = {"regression": ("mse", "rmse", "mae", "r2", "squared_correlation"),
                  "outlier": ("outlier_fraction", "roc_auc", "outlier_precision",
                              "outlier_recall"),
                  "classification": ("accuracy",)}


def _report_line(report: dict[str, Any]) -> str:
    figures = REPORT_FIGURES.get(str(report.get("task")), REPORT_FIGURES["classification"])
    return ", ".join(f"{name.replace('_', ' ')} {_metric(report.get(name))}"
                     for name in figures if name in report)


@app.command()
def evaluate(ctx: typer.Context,
             model: Annotated[str, IdArg(help="The model's id (or a unique prefix)")],
             dataset: Annotated[str, IdArg(help="The dataset's id (or a unique prefix)")],
             as_json: JsonFlag = False) -> None:
    """Score a model on a stored dataset (accuracy, confusion matrix, ...; regression:
    mse, rmse, mae, r2, squared correlation; one-class: the outlier fraction, ...)."""
    options = _options(ctx, as_json)
    with options.client() as client, _calling_the_api():
        found = client.evaluate(model, dataset)
    if options.as_json:
        _print_json(found)
    elif found.get("status") == "succeeded":
        out.print(f"evaluation {found['id']} succeeded: "
                  f"{_report_line(found.get('report') or {})}", highlight=False)
    else:  # a large dataset: a worker computes it
        out.print(f"evaluation {found['id']} {found.get('status')}; see it with: hinge "
                  f"evaluation {found['model_id']} {found['id']}", highlight=False)


@app.command()
def evaluations(ctx: typer.Context,
                model: Annotated[str, IdArg(help="The model's id (or a unique prefix)")],
                wide: WideFlag = False, as_json: JsonFlag = False) -> None:
    """List a model's evaluations, newest first."""
    rows = _rows(ctx, as_json, lambda client: client.evaluations(model))
    if rows is None:
        return
    ids = _Ids(wide, [r["id"] for r in rows], [r.get("dataset_id") for r in rows])
    table = _listing(ids, "id", "status", "dataset", "accuracy", "created")
    for row in rows:
        table.add_row(ids(row["id"]), str(row.get("status", "")), ids(row.get("dataset_id")),
                      _metric((row.get("report") or {}).get("accuracy")),
                      _when(row.get("created_at")))
    out.print(table)


@app.command()
def evaluation(ctx: typer.Context,
               model: Annotated[str, IdArg(help="The model's id (or a unique prefix)")],
               evaluation_id: Annotated[str, IdArg(help="The evaluation's id (or a unique "
                                                   "prefix)")],
               as_json: JsonFlag = True) -> None:
    """Show an evaluation (as JSON)."""
    _show(ctx, lambda client: client.evaluation(model, evaluation_id))


@app.command()
def searches(ctx: typer.Context, wide: WideFlag = False, as_json: JsonFlag = False) -> None:
    """List the hyper-parameter searches, newest first."""
    rows = _rows(ctx, as_json, lambda client: client.searches())
    if rows is None:
        return
    ids = _Ids(wide, [r["id"] for r in rows], [r.get("dataset_id") for r in rows],
               [r.get("model_id") for r in rows])
    table = _listing(ids, "id", "status", "solver", "dataset", "done", "model", "created")
    for row in rows:
        table.add_row(ids(row["id"]), str(row.get("status", "")), str(row.get("solver", "")),
                      ids(row.get("dataset_id")), f"{row.get('done', 0)}/{row.get('total', 0)}",
                      ids(row.get("model_id")), _when(row.get("created_at")))
    out.print(table)


_show_command("search", "Show a search: status, points, best point, refit model (as JSON).",
              HingeClient.search)


def _values_cell(values: dict[str, Any]) -> str:
    return " ".join(f"{k}={_g(v) if isinstance(v, float) else v}" for k, v in values.items())


@app.command()
def points(ctx: typer.Context,
           search_id: Annotated[str, IdArg(help="The search's id (or a unique prefix)")],
           as_json: JsonFlag = False) -> None:
    """A search's points (the best one starred): values, mean and std of the metric over
    the folds, convergence, and for L1-regularised models (l1_cd, auto with penalty=l1)
    the non-zero weights (mean over the folds): against C, the regularisation path."""
    options = _options(ctx, as_json)
    with options.client() as client, _calling_the_api():
        search = client.search(search_id)
    rows = list(search.get("points") or [])
    if options.as_json:
        _print_json(rows)
        return
    sparse = any(r.get("nonzero_weights") is not None for r in rows)
    table = _table()
    for header in ("point", "values", "mean", "std", "folds", "converged",
                   *(("non-zeros",) if sparse else ()), "fit s"):
        table.add_column(header)
    best = (search.get("best") or {}).get("index")
    for row in rows:
        nonzero = row.get("nonzero_weights")
        table.add_row(f"{row['index']}{'*' if row['index'] == best else ''}",
                      _values_cell(row.get("values") or {}), _metric(row.get("mean")),
                      _metric(row.get("std")), str(row.get("folds_done", 0)),
                      {True: "yes", False: "NO", None: ""}[row.get("converged")],
                      *((_g(nonzero) if nonzero is not None else "",) if sparse else ()),
                      f"{row.get('fit_seconds', 0.0):.3g}")
    out.print(table)


def main() -> None:
    """The console script `hinge`."""
    app()


if __name__ == "__main__":
    main()
