"""`hinge searches`, `search` and `points`: hyper-parameter searches."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from app.client import HingeClient
from app.client.cli import common
from app.client.cli.common import IdArg, JsonFlag, WideFlag, app


@app.command()
def searches(ctx: typer.Context, wide: WideFlag = False, as_json: JsonFlag = False) -> None:
    """List the hyper-parameter searches, newest first."""
    rows = common.list_rows(ctx, as_json, lambda client: client.searches())
    if rows is None:
        return
    ids = common.Ids(wide, [r["id"] for r in rows], [r.get("dataset_id") for r in rows],
                     [r.get("model_id") for r in rows])
    table = common.listing(ids, "id", "status", "solver", "dataset", "done", "model", "created")
    for row in rows:
        table.add_row(ids(row["id"]), str(row.get("status", "")), str(row.get("solver", "")),
                      ids(row.get("dataset_id")), f"{row.get('done', 0)}/{row.get('total', 0)}",
                      ids(row.get("model_id")), common.when(row.get("created_at")))
    common.out.print(table)


common.show_command("search", "Show a search: status, points, best point, refit model (as JSON).",
                    HingeClient.search)


def _values_cell(values: dict[str, Any]) -> str:
    return " ".join(f"{k}={common.as_g(v) if isinstance(v, float) else v}"
                    for k, v in values.items())


@app.command()
def points(ctx: typer.Context,
           search_id: Annotated[str, IdArg(help="The search's id (or a unique prefix)")],
           as_json: JsonFlag = False) -> None:
    """A search's points (the best one starred): values, mean and std of the metric over
    the folds, convergence, and for L1-regularised models (l1_cd, auto with penalty=l1)
    the non-zero weights (mean over the folds): against C, the regularisation path."""
    options = common.options_of(ctx, as_json)
    with options.client() as client, common.calling_the_api():
        search = client.search(search_id)
    rows = list(search.get("points") or [])
    if options.as_json:
        common.print_json(rows)
        return
    sparse = any(r.get("nonzero_weights") is not None for r in rows)
    table = common.new_table()
    for header in ("point", "values", "mean", "std", "folds", "converged",
                   *(("non-zeros",) if sparse else ()), "fit s"):
        table.add_column(header)
    best = (search.get("best") or {}).get("index")
    for row in rows:
        nonzero = row.get("nonzero_weights")
        table.add_row(f"{row['index']}{'*' if row['index'] == best else ''}",
                      _values_cell(row.get("values") or {}), common.metric(row.get("mean")),
                      common.metric(row.get("std")), str(row.get("folds_done", 0)),
                      {True: "yes", False: "NO", None: ""}[row.get("converged")],
                      *((common.as_g(nonzero) if nonzero is not None else "",) if sparse else ()),
                      f"{row.get('fit_seconds', 0.0):.3g}")
    common.out.print(table)
