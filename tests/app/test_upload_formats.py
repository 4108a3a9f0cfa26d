"""Uploads in the forms people have (issue 28): CSV, TSV, Parquet and NumPy .npz become the
same stored arrays as svmlight, through the real API on a real SQLite file and blob
directory; a malformed row of each gets a 422 that names it."""

from __future__ import annotations

import bz2
import gzip
import io
import lzma

import httpx
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import scipy.sparse as sp
from fastapi.testclient import TestClient

from app.infra.storage import blob_store
from app.settings import Settings
from solvers.svmlight import dump_svmlight

NAMES = ["f1", "f2", "f3", "f4", "f5"]


def _data(rows: int = 40, seed: int = 3) -> tuple[np.ndarray, np.ndarray]:
    """A dense table with many zeros (every column non-zero somewhere), labels 1/2/3."""
    rng = np.random.default_rng(seed)
    X = np.round(rng.normal(size=(rows, len(NAMES))), 3) * (rng.random((rows, 5)) < 0.5)
    X[0, :] = [1.5, -2.25, 3e-5, 1e10, 0.1]  # every column non-zero, odd decimals
    y = rng.integers(1, 4, size=rows).astype(np.float64)
    return X, y


def _svmlight(X: np.ndarray, y: np.ndarray) -> bytes:
    out = io.BytesIO()
    dump_svmlight(sp.csr_matrix(X), y, out)
    return out.getvalue()


def _csv(X: np.ndarray, y: np.ndarray, sep: str = ",", label_first: bool = True) -> bytes:
    lines = [sep.join(["label", *NAMES] if label_first else [*NAMES, "label"])]
    for row, label in zip(X.tolist(), y.tolist(), strict=True):
        cells = [repr(v) for v in row]
        lines.append(sep.join([repr(label), *cells] if label_first else [*cells, repr(label)]))
    return ("\n".join(lines) + "\n").encode()


def _parquet(X: np.ndarray, y: np.ndarray, nulls: bool = False) -> bytes:
    columns = {"label": pa.array(y.astype(np.int64))}
    for j, name in enumerate(NAMES):
        values = X[:, j].tolist()
        if nulls and j == 2:
            values[6] = None  # row 7
        columns[name] = pa.array(values, type=pa.float64())
    out = io.BytesIO()
    pq.write_table(pa.table(columns), out, row_group_size=16)
    return out.getvalue()


def _npz(X: np.ndarray, y: np.ndarray, **extra: object) -> bytes:
    M = sp.csr_matrix(X)
    arrays: dict[str, object] = {"data": M.data, "indices": M.indices, "indptr": M.indptr,
                                 "shape": np.array(M.shape), "format": "csr", "y": y}
    arrays.update(extra)
    out = io.BytesIO()
    np.savez_compressed(out, **arrays)  # type: ignore[arg-type]
    return out.getvalue()


def _stored(settings: Settings, client: TestClient, dataset_id: str) -> dict[str, np.ndarray]:
    body = client.get(f"/v1/datasets/{dataset_id}").json()
    from app.domain.orm import Dataset
    from app.infra.db import read_sessionmaker_for
    from app.infra.storage import BlobRef
    with read_sessionmaker_for(settings.database_url)() as session:
        row = session.get(Dataset, body["id"])
        assert row is not None
        ref = BlobRef.parse(row.blob_path)
    with blob_store(settings).open(ref) as handle, np.load(handle) as blob:
        return {key: blob[key] for key in ("data", "indices", "indptr", "y")}


def _upload(client: TestClient, content: bytes, **params: str) -> httpx.Response:
    return client.post("/v1/datasets", params=params, content=content)


def test_svmlight_csv_tsv_parquet_npz_give_identical_datasets(
        client: TestClient, settings: Settings) -> None:
    X, y = _data()
    bodies = {
        "svmlight": _svmlight(X, y),
        "csv": _csv(X, y),
        "tsv": _csv(X, y, sep="\t", label_first=False),
        "parquet": _parquet(X, y),
        "npz": _npz(X, y, feature_names=np.array(NAMES)),
    }
    stored = {}
    for fmt, content in bodies.items():
        response = _upload(client, content, name=fmt)  # the format read from the content
        assert response.status_code == 201, (fmt, response.text)
        body = response.json()
        assert body["source_format"] == fmt
        assert body["feature_names"] == (None if fmt == "svmlight" else NAMES)
        assert (body["rows"], body["features"]) == (40, 5), fmt
        stored[fmt] = (body, _stored(settings, client, body["id"]))
    reference_body, reference = stored["svmlight"]
    assert reference["data"].shape[0] == np.count_nonzero(X)
    for fmt, (body, arrays) in stored.items():
        for key in ("nnz", "labels", "class_counts"):
            assert body[key] == reference_body[key], (fmt, key)
        for key, array in arrays.items():
            assert array.dtype == reference[key].dtype, (fmt, key)
            assert np.array_equal(array, reference[key]), (fmt, key)
            assert array.tobytes() == reference[key].tobytes(), (fmt, key)  # bit for bit


@pytest.mark.parametrize("compress", [gzip.compress, bz2.compress, lzma.compress])
def test_compressed_csv_and_npz_are_read_by_magic_bytes(
        client: TestClient, compress: object) -> None:
    X, y = _data()
    for content, fmt in ((_csv(X, y), "csv"), (_npz(X, y), "npz")):
        response = _upload(client, compress(content))  # type: ignore[operator]
        assert response.status_code == 201, response.text
        assert response.json()["source_format"] == fmt


def test_multipart_csv_with_form_fields(client: TestClient) -> None:
    X, y = _data()
    content = _csv(X, y).replace(b"label,", b"target,", 1)
    response = client.post("/v1/datasets",
                           files=[("format", (None, "csv")), ("label_column", (None, "target")),
                                  ("file", ("data.csv", content))])
    assert response.status_code == 201, response.text
    assert response.json()["feature_names"] == NAMES
    # a field after the file cannot say how to read it
    response = client.post("/v1/datasets",
                           files=[("file", ("data.csv", content)),
                                  ("label_column", (None, "target"))])
    assert response.status_code == 422
    assert "before the `file` part" in response.json()["error"]["message"]


def test_label_column_by_name_and_position(client: TestClient, settings: Settings) -> None:
    X, y = _data()
    content = _csv(X, y).replace(b"label,", b"Class,", 1)
    response = _upload(client, content)
    assert response.status_code == 422
    message = response.json()["error"]["message"]
    assert "no column named 'label'" in message and "label_column=" in message
    assert "'Class'" in message
    by_name = _upload(client, content, label_column="Class")
    by_position = _upload(client, content, label_column="0")
    assert by_name.status_code == by_position.status_code == 201, by_name.text
    assert by_name.json()["feature_names"] == by_position.json()["feature_names"] == NAMES
    # the label at the end: position -1
    last = _upload(client, _csv(X, y, label_first=False), label_column="-1")
    assert last.status_code == 201, last.text
    first = _stored(settings, client, by_name.json()["id"])
    assert np.array_equal(_stored(settings, client, last.json()["id"])["data"], first["data"])
    # the same bytes with another label column are another dataset, not a duplicate
    other = _upload(client, content, label_column="f1", reuse="true")
    assert other.status_code == 201, other.text
    assert other.json()["feature_names"] == ["Class", *NAMES[1:]]
    assert other.json()["duplicate_of"] == []
    again = _upload(client, content, label_column="Class")
    assert again.json()["duplicate_of"] == [by_name.json()["id"], by_position.json()["id"]]
    bad = _upload(client, content, label_column="nope")
    assert bad.status_code == 422 and "'nope' is not a column" in bad.text


@pytest.mark.parametrize(("cell", "words"), [
    ("abc", "'abc' is not a number"), ("", "missing value"), ("NA", "missing value"),
    ("nan", "missing value"), ("inf", "NaN or infinite")])
def test_csv_bad_cell_names_line_row_and_column(client: TestClient, cell: str,
                                                words: str) -> None:
    X, y = _data()
    lines = _csv(X, y).split(b"\n")
    cells = lines[5].split(b",")  # line 6 = data row 5
    cells[3] = cell.encode()  # column f3
    lines[5] = b",".join(cells)
    response = _upload(client, b"\n".join(lines))
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert "row 5, column 'f3'" in error["message"] and words in error["message"]
    assert error["message"].startswith("invalid CSV dataset: line 6:")
    assert (error["detail"]["line"], error["detail"]["row"], error["detail"]["column"]) \
        == (6, 5, "f3")


def test_csv_ragged_row_and_headerless(client: TestClient) -> None:
    X, y = _data()
    lines = _csv(X, y).split(b"\n")
    lines[3] += b",7"
    response = _upload(client, b"\n".join(lines))
    assert response.status_code == 422
    assert "line 4 (row 3) has 7 cells but the header names 6 columns" in response.text
    headerless = b"\n".join(_csv(X, y).split(b"\n")[1:])
    response = _upload(client, headerless)
    assert response.status_code == 422
    assert "data, not a header" in response.text
    pandas_index = b"," + _csv(X, y)  # pandas' to_csv with its index: an unnamed column
    response = _upload(client, pandas_index.replace(b"\n", b"\n0,")[:-2])
    assert response.status_code == 422 and "index=False" in response.text


def test_svmlight_forced_on_a_csv_points_at_format_csv(client: TestClient) -> None:
    X, y = _data()
    response = _upload(client, _csv(X, y), format="svmlight")
    assert response.status_code == 422
    assert "line 1: invalid label" in response.text
    semicolons = _csv(X, y).replace(b",", b";")  # not detected as CSV: read as svmlight
    response = _upload(client, semicolons)
    assert response.status_code == 422
    assert "is read with format=csv" in response.json()["error"]["message"]


def test_parquet_null_names_row_and_column(client: TestClient) -> None:
    X, y = _data()
    response = _upload(client, _parquet(X, y, nulls=True))
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert "row 7, column 'f3': missing value (null)" in error["message"]
    assert (error["detail"]["row"], error["detail"]["column"]) == (7, "f3")
    text = pa.table({"label": pa.array([1, 2]), "city": pa.array(["a", "b"])})
    out = io.BytesIO()
    pq.write_table(text, out)
    response = _upload(client, out.getvalue())
    assert response.status_code == 422 and "column 'city' has type string" in response.text


def test_npz_malformed_row_is_named(client: TestClient) -> None:
    X, y = _data()
    M = sp.csr_matrix(X)
    data = M.data.copy()
    data[M.indptr[8]] = np.nan  # row 9
    response = _upload(client, _npz(X, y, data=data))
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["message"] == ("invalid .npz dataset: row 9, column 2: value nan is NaN "
                                "or infinite")
    assert error["detail"]["row"] == 9
    indices = M.indices.copy()
    indices[M.indptr[4]] = 99  # row 5
    response = _upload(client, _npz(X, y, indices=indices))
    assert response.status_code == 422
    assert "row 5: column index 99 is outside [0, 5)" in response.text
    response = _upload(client, _npz(X, y[:-1]))
    assert response.status_code == 422 and "39 labels for 40 rows" in response.text
    out = io.BytesIO()
    np.savez(out, X=X, y=y)  # a dense matrix: not the documented layout
    response = _upload(client, out.getvalue())
    assert response.status_code == 422 and "save_npz" in response.text


def test_npz_from_scipy_save_npz_and_unsorted_indices(client: TestClient,
                                                       settings: Settings) -> None:
    X, y = _data()
    out = io.BytesIO()
    sp.save_npz(out, sp.csr_matrix(X))  # save_npz's own file, then the labels added
    with np.load(io.BytesIO(out.getvalue())) as saved:
        arrays = dict(saved)
    shuffled = {**arrays, "indices": arrays["indices"].copy(), "data": arrays["data"].copy()}
    start, stop = int(arrays["indptr"][0]), int(arrays["indptr"][1])
    shuffled["indices"][start:stop] = arrays["indices"][start:stop][::-1]
    shuffled["data"][start:stop] = arrays["data"][start:stop][::-1]
    ids = []
    for payload in (arrays, shuffled):
        buffer = io.BytesIO()
        np.savez(buffer, **payload, y=y)
        response = _upload(client, buffer.getvalue())
        assert response.status_code == 201, response.text
        ids.append(response.json()["id"])
    a, b = (_stored(settings, client, i) for i in ids)
    assert all(np.array_equal(a[k], b[k]) for k in a)


def test_upload_limits_apply_to_csv_and_npz(tmp_path: object) -> None:
    from fastapi.testclient import TestClient as Client

    from app.api.main import create_app
    from tests.support import bearer, embedded_settings, make_key, migrate

    settings = embedded_settings(tmp_path / "home", max_dataset_rows=10)  # type: ignore[operator]
    settings.ensure_dirs()
    migrate(settings.database_url)
    X, y = _data()
    with Client(create_app(settings), headers=bearer(make_key(settings))) as client:
        for content in (_csv(X, y), _npz(X, y), _parquet(X, y)):
            response = _upload(client, content)
            assert response.status_code == 413, response.text
            assert "more than 10 rows" in response.text
