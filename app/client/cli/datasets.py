"""`hinge upload`, `import`, `sample`, `datasets` and `dataset`: the datasets."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TaskProgressColumn,
    TextColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)
from rich.text import Text

from app.client import sample as samples
from app.client.cli import common
from app.client.cli.common import IdArg, JsonFlag, WideFlag, app
from app.client.uploads import PART_BYTES


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
    options = common.options_of(ctx, as_json)
    columns = (TextColumn("uploading {task.description}", markup=False), BarColumn(),
               TaskProgressColumn(), DownloadColumn(), TransferSpeedColumn(),
               TimeRemainingColumn())
    with options.client() as client, Progress(*columns, console=common.err,
                                              disable=quiet or options.as_json) as bar:
        bar_task = bar.add_task(file.name, total=file.stat().st_size)
        with common.calling_the_api():
            dataset = client.upload(file, name, reuse=reuse, progress=lambda sent, _total:
                                    bar.update(bar_task, completed=sent), format=format,
                                    label_column=label_column, task=task,
                                    weight_column=weight_column, part_bytes=part_size)
    if options.as_json:
        common.print_json(dataset)
        return
    if quiet:
        print(dataset["id"])
    elif dataset.get("reused"):
        common.out.print(f"reused {common.dataset_line(dataset)} (the same content; nothing "
                         "stored)", highlight=False)
    else:
        common.out.print(common.dataset_line(dataset), highlight=False)
    earlier = dataset.get("duplicate_of") or []
    if earlier and not dataset.get("reused"):
        common.err.print(f"note: the same content as dataset{'s' if len(earlier) > 1 else ''} "
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
            dtype: Annotated[str, typer.Option(
                "--dtype", help="The stored values' layout: float32 (8 bytes a non-zero; "
                "values rounded to float32), float64 (12 bytes a non-zero) or auto: "
                "float32 when every value is exactly a float32")] = "auto",
            quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Print only the "
                             "dataset's id")] = False,
            as_json: JsonFlag = False) -> None:
    """Import a dataset the server reads itself (from S3, or its own disk), following its
    progress with a bar. Ctrl-C cancels the import."""
    options = common.options_of(ctx, as_json)
    columns = (TextColumn("importing {task.description}", markup=False), BarColumn(),
               TaskProgressColumn(), DownloadColumn(), TransferSpeedColumn(),
               TimeRemainingColumn())
    with options.client() as client, common.calling_the_api():
        record = client.start_import(source if len(source) > 1 else source[0], name,
                                     task=task, dtype=dtype)
        with Progress(*columns, console=common.err, disable=quiet or options.as_json) as bar:
            shown = bar.add_task(f"{record['name']} ({record['parts_total']} parts)",
                                 total=record["bytes_total"])
            try:
                record = client.wait_import(record["id"], progress=lambda done, _total:
                                            bar.update(shown, completed=done))
            except KeyboardInterrupt:
                client.cancel_import(record["id"])
                common.err.print(f"import {record['id']} cancelled", highlight=False)
                raise typer.Exit(common.EXIT_INTERRUPTED) from None
        if record["status"] != "succeeded":
            if options.as_json:
                common.print_json(record)
            common.err.print(Text("error: ", style="bold red") + Text(
                f"import {record['id']} {record['status']}: {record.get('error') or ''}"),
                highlight=False)
            raise typer.Exit(common.EXIT_API_ERROR)
        dataset = client.dataset(record["dataset_id"])
    if options.as_json:
        common.print_json({**record, "dataset": dataset})
    elif quiet:
        print(dataset["id"])
    else:
        common.out.print(common.dataset_line(dataset), highlight=False)


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
    common.err.print(f"wrote {rows:,} {kind} rows to {out_file}")


@app.command()
def datasets(ctx: typer.Context,
             quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Print only the "
                              "ids (whole), newest first")] = False,
             wide: WideFlag = False, as_json: JsonFlag = False) -> None:
    """List the datasets, newest first."""
    options = common.options_of(ctx, as_json)
    with options.client() as client, common.calling_the_api():
        rows = client.datasets()
    if options.as_json or quiet:
        common.print_json(rows) if options.as_json else print("\n".join(r["id"] for r in rows))
        return
    ids = common.Ids(wide, [r["id"] for r in rows])
    table = common.listing(ids, "id", "name", "rows", "features", "non-zeros", "classes", "created")
    for row in rows:
        table.add_row(ids(row["id"]), row["name"], f"{row['rows']:,}",
                      f"{row['features']:,}", f"{row['nnz']:,}", common.classes_cell(row),
                      common.when(row.get("created_at")))
    common.out.print(table)


@app.command()
def dataset(ctx: typer.Context,
            dataset_id: Annotated[str, IdArg(help="The dataset's id (or a unique prefix)")],
            as_json: JsonFlag = False) -> None:
    """Show a dataset (as JSON with --json)."""
    common.print_answer(ctx, as_json, lambda client: client.dataset(dataset_id),
                        common.dataset_line)


