"""`hinge searches`, `search` and `points`: hyper-parameter searches."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from app.client import HingeClient
from app.client.cli.common import (
    IdArg,
    Ids,
    JsonFlag,
    WideFlag,
    app,
    as_g,
    calling_the_api,
    list_rows,
    listing,
    metric,
    new_table,
    options_of,
    out,
    print_json,
    show_command,
    when,
)


@app.command()
def searches(ctx: typer.Context, wide: WideFlag = False, as_json: JsonFlag = False) -> None:
    """List the hyper-parameter searches, newest first."""
    rows = list_rows(ctx, as_json, lambda client: client.searches())
    if rows is None:
        return
    ids = Ids(wide, [r["id"] for r in rows], [r.get("dataset_id") for r in rows],
               [r.get("model_id") for r in rows])
    table = listing(ids, "id", "status", "solver", "dataset", "done", "model", "created")
    for row in rows:
        table.add_row(ids(row["id"]), str(row.get("status", "")), str(row.get("solver", "")),
                      ids(row.get("dataset_id")), f"{row.get('done', 0)}/{row.get('total', 0)}",
                      ids(row.get("model_id")), when(row.get("created_at")))
    out.print(table)


show_command("search", "Show a search: status, points, best point, refit model (as JSON).",
              HingeClient.search)


def _values_cell(values: dict[str, Any]) -> str:
    return " ".join(f"{k}={as_g(v) if isinstance(v, float) else v}" for k, v in values.items())


@app.command()
def points(ctx: typer.Context,
           search_id: Annotated[str, IdArg(help="The search's id (or a unique prefix)")],
           as_json: JsonFlag = False) -> None:
    """A search's points (the best one starred): values, mean and std of the metric over
    the folds, convergence, and for L1-regularised models (l1_cd, auto with penalty=l1)
    the non-zero weights (mean over the folds): against C, the regularisation path."""
    options = options_of(ctx, as_json)
    with options.client() as client, calling_the_api():
        search = client.search(search_id)
    rows = list(search.get("points") or [])
    if options.as_json:
        print_json(rows)
        return
    sparse = any(r.get("nonzero_weights") is not None for r in rows)
    table = new_table()
    for header in ("point", "values", "mean", "std", "folds", "converged",
                   *(("non-zeros",) if sparse else ()), "fit s"):
        table.add_column(header)
    best = (search.get("best") or {}).get("index")
    for row in rows:
        nonzero = row.get("nonzero_weights")
        table.add_row(f"{row['index']}{'*' if row['index'] == best else ''}",
                      _values_cell(row.get("values") or {}), metric(row.get("mean")),
                      metric(row.get("std")), str(row.get("folds_done", 0)),
                      {True: "yes", False: "NO", None: ""}[row.get("converged")],
                      *((as_g(nonzero) if nonzero is not None else "",) if sparse else ()),
                      f"{row.get('fit_seconds', 0.0):.3g}")
    out.print(table)
