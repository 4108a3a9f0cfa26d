"""`hinge train`, `jobs`, `job` and `cancel`: training jobs, followed live."""

from __future__ import annotations

import json
import math
from typing import Annotated, Any

import typer
from rich.progress import (
    BarColumn,
    Progress,
    TaskProgressColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.prompt import Confirm

from app.client import HingeClient, HingeError, Job
from app.client.cli import common
from app.client.cli.common import IdArg, JsonFlag, WideFlag, app


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
        with Progress(*columns, console=common.err, disable=as_json) as bar:
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
        common.print_json(final)
    else:
        common.out.print(_summary(final), highlight=False)
    return common.EXIT_OK if final.get("status") == "succeeded" else common.EXIT_JOB_NOT_SUCCEEDED


def _cancelled_line(job: Job) -> str:
    if job["status"] == "cancelled":
        return f"job {job['id']} cancelled"
    return (f"job {job['id']} is {job['status']}: cancel requested, it stops at its next "
            "progress check")


def _interrupted(client: HingeClient, job_id: str) -> int:
    try:
        cancel = Confirm.ask(f"\nCancel job {job_id}?", console=common.err, default=False)
    except (KeyboardInterrupt, EOFError):
        cancel = False
    if not cancel:
        common.err.print(f"job {job_id} keeps running; follow it with: hinge job {job_id}",
                         highlight=False)
        return common.EXIT_INTERRUPTED
    try:
        common.err.print(_cancelled_line(client.cancel(job_id)), highlight=False)
    except HingeError as exc:  # it finished meanwhile (409), or the server went away
        common.err.print(f"job {job_id} not cancelled: {exc.message}", highlight=False)
    return common.EXIT_INTERRUPTED


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
    options = common.options_of(ctx, as_json)
    params = dict(parse_param(p) for p in param or [])
    with options.client() as client, common.calling_the_api():
        job = client.train(dataset, solver, params,
                           sample_weight="none" if unweighted else None)
        if not options.as_json or not watch:
            common.print_json(job) if options.as_json else common.out.print(
                f"job {job['id']} {job['status']} ({job['solver']})", highlight=False)
        if watch:
            raise typer.Exit(watch_job(client, job, options.as_json))


@app.command()
def jobs(ctx: typer.Context,
         status: Annotated[str | None, typer.Option(help="Only jobs in this status")] = None,
         wide: WideFlag = False, as_json: JsonFlag = False) -> None:
    """List the jobs, newest first."""
    rows = common.list_rows(ctx, as_json, lambda client: client.jobs(status=status))
    if rows is None:
        return
    ids = common.Ids(wide, [r["id"] for r in rows], [r.get("dataset_id") for r in rows],
                     [r.get("model_id") for r in rows])
    table = common.listing(ids, "id", "status", "solver", "dataset", "progress", "exit", "model",
                           "created")
    for row in rows:
        result = row.get("result") or {}
        fraction = row.get("progress_fraction")
        table.add_row(ids(row["id"]), row["status"], common.solver_cell(row),
                      ids(row.get("dataset_id")),
                      "" if fraction is None else f"{fraction:.0%}",
                      str(result.get("exit_reason") or ""), ids(row.get("model_id")),
                      common.when(row.get("created_at")))
    common.out.print(table)


common.show_command("job", "Show a job: status, parameters, progress, result (as JSON).",
                    HingeClient.job)


@app.command()
def cancel(ctx: typer.Context,
           job_id: Annotated[str, IdArg(help="The job's id (or a unique prefix)")],
           as_json: JsonFlag = False) -> None:
    """Cancel a queued or running job."""
    common.print_answer(ctx, as_json, lambda client: client.cancel(job_id), _cancelled_line)


