"""`hinge evaluate`, `evaluations` and `evaluation`: a model scored on a stored dataset."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from app.client.cli import common
from app.client.cli.common import IdArg, JsonFlag, WideFlag, app

# what an evaluation's one line shows, by the model's task
REPORT_FIGURES = {"regression": ("mse", "rmse", "mae", "r2", "squared_correlation"),
                  "outlier": ("outlier_fraction", "roc_auc", "outlier_precision",
                              "outlier_recall"),
                  "classification": ("accuracy",)}


def _report_line(report: dict[str, Any]) -> str:
    figures = REPORT_FIGURES.get(str(report.get("task")), REPORT_FIGURES["classification"])
    return ", ".join(f"{name.replace('_', ' ')} {common.metric(report.get(name))}"
                     for name in figures if name in report)


@app.command()
def evaluate(ctx: typer.Context,
             model: Annotated[str, IdArg(help="The model's id (or a unique prefix)")],
             dataset: Annotated[str, IdArg(help="The dataset's id (or a unique prefix)")],
             as_json: JsonFlag = False) -> None:
    """Score a model on a stored dataset (accuracy, confusion matrix, ...; regression:
    mse, rmse, mae, r2, squared correlation; one-class: the outlier fraction, ...)."""
    options = common.options_of(ctx, as_json)
    with options.client() as client, common.calling_the_api():
        found = client.evaluate(model, dataset)
    if options.as_json:
        common.print_json(found)
    elif found.get("status") == "succeeded":
        common.out.print(f"evaluation {found['id']} succeeded: "
                         f"{_report_line(found.get('report') or {})}", highlight=False)
    else:  # a large dataset: a worker computes it
        common.out.print(f"evaluation {found['id']} {found.get('status')}; see it with: hinge "
                         f"evaluation {found['model_id']} {found['id']}", highlight=False)


@app.command()
def evaluations(ctx: typer.Context,
                model: Annotated[str, IdArg(help="The model's id (or a unique prefix)")],
                wide: WideFlag = False, as_json: JsonFlag = False) -> None:
    """List a model's evaluations, newest first."""
    rows = common.list_rows(ctx, as_json, lambda client: client.evaluations(model))
    if rows is None:
        return
    ids = common.Ids(wide, [r["id"] for r in rows], [r.get("dataset_id") for r in rows])
    table = common.listing(ids, "id", "status", "dataset", "accuracy", "created")
    for row in rows:
        table.add_row(ids(row["id"]), str(row.get("status", "")), ids(row.get("dataset_id")),
                      common.metric((row.get("report") or {}).get("accuracy")),
                      common.when(row.get("created_at")))
    common.out.print(table)


@app.command()
def evaluation(ctx: typer.Context,
               model: Annotated[str, IdArg(help="The model's id (or a unique prefix)")],
               evaluation_id: Annotated[str, IdArg(help="The evaluation's id (or a unique "
                                                   "prefix)")],
               as_json: JsonFlag = True) -> None:
    """Show an evaluation (as JSON)."""
    common.show_json(ctx, lambda client: client.evaluation(model, evaluation_id))
