"""What every `hinge` command shares: the Typer app and its global options, the consoles,
the exit codes, calling the API (its errors and their hints), and how answers are
printed (JSON, one line, or a table with short ids)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Annotated, Any
from urllib.parse import urlsplit

import typer
from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from app.client import Dataset, HingeClient, HingeError, default_url

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
            usage_error(f"{where} is {url!r}, not an http:// or https:// address: set "
                        "HINGE_URL or pass --url, e.g. --url http://127.0.0.1:8000")
        if not self.api_key:
            usage_error("no API key: set HINGE_API_KEY=hk_... or pass --api-key hk_... "
                        "before the command (`make run` prints a key; an admin makes "
                        "more with `python -m app.admin keys create`)")
        return HingeClient(url, self.api_key)


def usage_error(message: str) -> None:
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


def options_of(ctx: typer.Context, as_json: bool = False) -> Options:
    options: Options = ctx.obj
    options.as_json = options.as_json or as_json
    return options


def show_json(ctx: typer.Context, fetch: Callable[[HingeClient], Any]) -> None:
    """A show command: what `fetch` gets from the API, as JSON."""
    options = options_of(ctx)
    with options.client() as client, calling_the_api():
        print_json(fetch(client))


def show_command(noun: str, doc: str, fetch: Callable[[HingeClient, str], Any]) -> None:
    """Register `hinge NOUN ID`: show one object (as JSON), found by its id or a unique
    prefix."""
    def command(ctx: typer.Context, ident: str, as_json: JsonFlag = True) -> None:
        show_json(ctx, lambda client: fetch(client, ident))

    command.__doc__ = doc
    # (an annotation object, not a string: its help names the noun)
    command.__annotations__["ident"] = Annotated[str, IdArg(
        metavar=f"{noun}_id", help=f"The {noun}'s id (or a unique prefix)")]
    app.command(noun)(command)


def print_answer(ctx: typer.Context, as_json: bool, fetch: Callable[[HingeClient], Any],
                 line: Callable[[Any], str]) -> None:
    """A command's one answer from the API: as JSON with --json, else as `line` says it."""
    options = options_of(ctx, as_json)
    with options.client() as client, calling_the_api():
        answer = fetch(client)
    print_json(answer) if options.as_json else out.print(line(answer), highlight=False)


def list_rows(ctx: typer.Context, as_json: bool, fetch: Callable[[HingeClient], list[Any]]
          ) -> list[Any] | None:
    """A list command's rows, for its table; None when they were printed as JSON."""
    options = options_of(ctx, as_json)
    with options.client() as client, calling_the_api():
        rows = fetch(client)
    if options.as_json:
        print_json(rows)
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


class Ids:
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


def new_table() -> Table:
    """A list's table: a rule under the header, one space between columns (a list of jobs
    fits 80 columns with short ids; a cell that does not fit wraps, ids are never cut)."""
    return Table(box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, 0))


def when(value: Any) -> str:
    """A timestamp to the second, with a space where it may wrap."""
    return str(value or "")[:19].replace("T", " ")


ID_HEADERS = frozenset({"id", "dataset", "model", "job"})  # the columns that hold ids


def listing(ids: Ids, *headers: str) -> Table:
    """A list's table with these columns; an id column (ID_HEADERS) is never cut: its ids
    wrap to fit before they would be cut."""
    table = new_table()
    for header in headers:
        if header in ID_HEADERS:
            table.add_column(header, no_wrap=True, min_width=ids.width, overflow="fold")
        else:
            table.add_column(header)
    return table


@contextmanager
def calling_the_api() -> Iterator[None]:
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


def print_json(value: Any) -> None:
    out.print_json(json.dumps(value))


def as_g(value: Any) -> str:
    """A number as svm-predict prints it (%g), anything else as it is."""
    return f"{value:g}" if isinstance(value, int | float) else str(value)


def dataset_line(dataset: Dataset) -> str:
    stats = dataset.get("label_stats")
    if dataset.get("task") == "regression" and stats:
        labels = (f"regression targets {as_g(stats['min'])} to {as_g(stats['max'])}, mean "
                  f"{stats['mean']:.4g}, std {stats['std']:.4g}, "
                  f"{stats['distinct']:,} distinct")
    else:
        labels = "classes " + ", ".join(f"{label} ({count:,})" for label, count in
                                        dataset.get("class_counts", {}).items())
    weights = dataset.get("weight_stats")
    if weights:
        labels += (f"; weights {as_g(weights['min'])} to {as_g(weights['max'])}, mean "
                   f"{weights['mean']:.4g}, {weights['zeros']:,} zero")
    return (f"dataset {dataset['id']} \"{dataset['name']}\": {dataset['rows']:,} rows, "
            f"{dataset['features']:,} features, {dataset['nnz']:,} non-zeros; {labels}")


def classes_cell(row: Any) -> str:
    """A list's "classes" cell: how many, or the task of a regression or outlier row."""
    task = row.get("task", "classification")
    return str(len(row.get("labels", []))) if task == "classification" else str(task)


def solver_cell(job: Any) -> str:
    """A jobs list's "solver" cell: the solver, and the task unless classification."""
    task = job.get("task", "classification")
    return job["solver"] if task == "classification" else f"{job['solver']}, {task}"


IdArg = typer.Argument  # (every id argument: the whole id or a unique prefix)


def metric(value: Any) -> str:
    return "" if value is None else f"{value:.4f}" if isinstance(value, float) else str(value)

