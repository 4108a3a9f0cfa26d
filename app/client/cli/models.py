"""`hinge models` (import, register, promote, versions), `model`, `predict` and
`export`: the models."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.text import Text

from app.client import HingeClient
from app.client.cli import common
from app.client.cli.common import IdArg, JsonFlag, WideFlag, app

models_app = typer.Typer(help="List the models (no command), import one, or register, "
                         "promote and list the versions of a name.",
                         invoke_without_command=True, no_args_is_help=False)
app.add_typer(models_app, name="models")


@models_app.callback()
def models(ctx: typer.Context, wide: WideFlag = False, as_json: JsonFlag = False) -> None:
    """List the models, newest first (`hinge models import FILE` uploads one)."""
    if ctx.invoked_subcommand is not None:
        return
    rows = common.list_rows(ctx, as_json, lambda client: client.models())
    if rows is None:
        return
    ids = common.Ids(wide, [r["id"] for r in rows], [r.get("job_id") for r in rows])
    table = common.listing(ids, "id", "kind", "solver", "classes", "features", "converged",
                           "train accuracy", "job")
    for row in rows:
        accuracy = row.get("train_accuracy")
        table.add_row(ids(row["id"]), row["kind"], row["solver"], common.classes_cell(row),
                      f"{row['n_features']:,}", "yes" if row["converged"] else "no",
                      "" if accuracy is None else f"{accuracy:.4f}", ids(row.get("job_id")))
    common.out.print(table)


common.show_command("model", "Show a model (as JSON).", HingeClient.model)


def _batch_predict(options: common.Options, model: str, dataset: str, out_path: str,
                   fmt: str) -> None:
    """A batch prediction on a worker: queue it, follow its progress on standard error,
    download its output to `out_path`."""
    with options.client() as client, common.calling_the_api():
        record = client.batch_predict(model, dataset)
        common.err.print(f"prediction {record['id']}: {record['rows']} rows of "
                         f"{record['dataset_name']}", highlight=False)

        def shown(now: dict[str, Any]) -> None:
            if not options.as_json and now["status"] == "running":
                common.err.print(f"  {now['rows_done']}/{now['rows']} rows", highlight=False)

        try:
            record = client.wait_prediction(record["id"], progress=shown)
        except KeyboardInterrupt:
            client.cancel_prediction(record["id"])
            common.err.print(f"prediction {record['id']} cancelled", highlight=False)
            raise typer.Exit(common.EXIT_API_ERROR) from None
        if record["status"] != "succeeded":
            common.err.print(Text("error: ", style="bold red") + Text(
                f"prediction {record['id']} {record['status']}: {record.get('error') or ''}"),
                highlight=False)
            raise typer.Exit(common.EXIT_API_ERROR)
        written = client.prediction_output(record["id"], out_path, fmt)
    if options.as_json:
        common.print_json({**record, "out": out_path, "bytes": written})
    else:
        common.out.print(f"{record['rows']} rows -> {out_path} ({written} bytes, {fmt})",
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
    options = common.options_of(ctx, as_json)
    model = model_option or model
    if model is None:
        common.usage_error("name the model: hinge predict MODEL FILE, or --model MODEL")
    assert model is not None
    if dataset is not None:
        if out_path is None or fmt not in ("csv", "jsonl", "npz"):
            common.usage_error("a batch prediction needs --out FILE and --format csv|jsonl|npz")
        assert out_path is not None
        _batch_predict(options, model, dataset, out_path, fmt)
        return
    if file is None:
        common.usage_error("give a FILE of rows to predict, or --dataset ID --out FILE")
    assert file is not None
    body = sys.stdin.buffer.read() if file == "-" else _read(file)
    with options.client() as client, common.calling_the_api():
        answer = client.predict(model, body)
    if answer.get("task") == "regression" and not options.as_json:
        if probabilities and answer.get("sigma") is not None:  # svm-predict -b 1's note
            common.err.print("Prob. model for test data: target value = predicted value + z,\n"
                             "z: Laplace distribution e^(-|z|/sigma)/(2sigma),"
                             f"sigma={common.as_g(answer['sigma'])}", highlight=False)
        print("\n".join(common.as_g(value) for value in answer["labels"]))
        return
    if probabilities and answer.get("probabilities") is None:
        common.err.print(Text("error: ", style="bold red") + Text(
            f"model {answer['model_id']} has no probabilities: train it with "
            "-p probability=true (calibrated), or -p loss=logistic (logistic regression "
            "gives them directly)"), highlight=False)
        raise typer.Exit(common.EXIT_API_ERROR)
    if options.as_json:
        common.print_json(answer)
        return
    if probabilities:
        print("labels\t" + " ".join(common.as_g(c) for c in answer["classes"]))
        for label, row in zip(answer["labels"], answer["probabilities"] or [], strict=True):
            print(f"{common.as_g(label)}\t" + " ".join(common.as_g(p) for p in row))
        return
    for label, values in zip(answer["labels"], answer["decision_values"], strict=True):
        shown = (" ".join(common.as_g(v) for v in values) if isinstance(values, list)
                 else common.as_g(values))
        print(f"{common.as_g(label)}\t{shown}")


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
    options = common.options_of(ctx)
    with options.client() as client, common.calling_the_api():
        answer = client.import_model(file, range_file, n_features=n_features)
    if options.as_json:
        common.print_json(answer)
    else:
        common.out.print(f"model {answer['id']} ({answer['kind']}, {len(answer['labels'])} "
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
    options = common.options_of(ctx)
    tags = {}
    for item in tag or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise typer.BadParameter(f"--tag {item!r}: expected KEY=VALUE")
        tags[key] = value
    with options.client() as client, common.calling_the_api():
        answer = client.register(name, model, description=description, tags=tags)
    if options.as_json:
        common.print_json(answer)
    else:
        common.out.print(f"{answer['name']}/versions/{answer['version']} is model "
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
    options = common.options_of(ctx)
    with options.client() as client, common.calling_the_api():
        answer = client.promote(name, alias, version)
    if options.as_json:
        common.print_json(answer)
    else:
        common.out.print(f"{name}@{alias} -> version {answer['version']}", highlight=False)


@models_app.command("versions")
def model_versions(ctx: typer.Context,
                   name: Annotated[str, typer.Argument(help="The registered name")],
                   as_json: JsonFlag = False) -> None:
    """A name's versions, newest first, with the aliases on each."""
    rows = common.list_rows(ctx, as_json, lambda client: client.versions(name))
    if rows is None:
        return
    table = common.new_table()
    for header in ("version", "model", "aliases", "description", "created"):
        table.add_column(header)
    for row in rows:
        table.add_row(str(row["version"]), row["model_id"], ", ".join(row["aliases"]),
                      row["description"], row["created_at"][:19])
    common.out.print(table)


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
    options = common.options_of(ctx, as_json)
    if format == "onnx":
        with options.client() as client, common.calling_the_api():
            graph = client.export_onnx(model)
        if output is None:
            sys.stdout.buffer.write(graph)
        else:
            output.write_bytes(graph)
        return
    with options.client() as client, common.calling_the_api():
        text = client.export(model, format)
        if options.as_json:
            found = client.model(model)
            text = json.dumps({"model_id": found["id"], "format": format or (
                "libsvm" if found.get("kind") == "kernel" else "liblinear"), "text": text})
    if output is None:
        common.print_json(json.loads(text)) if options.as_json else sys.stdout.write(text)
    else:
        output.write_text(text)


# -- evaluations and searches -----------------------------------------------------------
