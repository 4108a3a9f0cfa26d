"""A small typed Python client of Hinge's HTTP API, for other services and for the `hinge`
command line (app/client/cli/).

It needs only httpx and httpx-sse: no server module is imported (an import-linter contract
in pyproject.toml says so), so a service that talks to Hinge imports this package alone.

    from app.client import HingeClient

    with HingeClient() as hinge:          # HINGE_URL (or HINGE_PORT), HINGE_API_KEY
        dataset = hinge.upload("a9a.xz", name="a9a")
        job = hinge.train(dataset["id"], solver="dcd", params={"C": 1})
        for event in hinge.events(job["id"]):         # Server-Sent Events, to the end
            print(event.kind, event.data)
        model_id = hinge.job(job["id"])["model_id"]
        hinge.predict(model_id, "1 3:1 11:1 14:1\\n")["labels"]

Every method raises `HingeError` for an answer that is not a success; the error carries
the status code and the API's error body (`{"error": {"code", "message", "detail"}}`).
Wherever a method takes an id, a unique prefix of it will do: the
server resolves it among the caller's own (an ambiguous one is a 422 `ambiguous_id` whose
detail lists the candidates).
Answers are the API's JSON, typed as TypedDicts (the keys the API documents; a newer
server may add keys).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, TypedDict, cast

import httpx
from httpx_sse import connect_sse

from app.client.imports import ImportCalls
from app.client.uploads import PART_BYTES, UploadCalls

DEFAULT_PORT = 8000  # HINGE_PORT's default, the port `make run` serves on


def default_url() -> str:
    """$HINGE_URL, else the address `make run` serves on: http://127.0.0.1:$HINGE_PORT
    (HINGE_PORT defaults to 8000)."""
    url = os.environ.get("HINGE_URL")
    if url:
        return url
    port = os.environ.get("HINGE_PORT") or str(DEFAULT_PORT)
    return f"http://127.0.0.1:{port}"


UPLOAD_CHUNK_BYTES = 1 << 20
# the job statuses after which nothing changes (tests/app/test_client_alone.py checks them
# against the server's app.domain.job_status)
TERMINAL = frozenset({"succeeded", "failed", "cancelled"})


class Dataset(TypedDict, total=False):
    id: str
    name: str
    rows: int
    features: int
    nnz: int
    task: str  # classification | regression
    labels: list[float]
    class_counts: dict[str, int]
    label_stats: dict[str, Any] | None  # regression: min, max, mean, std, quantiles
    weight_stats: dict[str, Any] | None  # instance weights: min, max, mean, sum, zeros
    sha256: str
    size_bytes: int
    created_at: str
    parent_id: str | None
    split_part: str | None
    source_format: str  # svmlight, csv, tsv, parquet or npz
    feature_names: list[str] | None
    value_dtype: str  # the stored values: float64, or float32 (compact)
    stored_bytes: int  # its stored arrays' bytes (the tenant's limit counts these)
    shards: int  # row shards it is stored in (1: one blob)
    duplicate_of: list[str]  # earlier datasets of the same content (a new upload's answer)
    reused: bool  # set by this client: upload(reuse=True) answered with an earlier dataset


class JobResult(TypedDict, total=False):
    primal_objective: float | None
    dual_objective: float | None
    duality_gap: float | None
    iterations: int | None
    train_seconds: float | None
    exit_reason: str | None
    converged: bool | None
    train_accuracy: float | None
    train_metrics: dict[str, Any] | None  # regression and outlier models
    n_support: int | None
    relative_gap: float | None
    tol: float | None
    warnings: list[str] | None
    path: list[dict[str, Any]]
    auto: dict[str, Any] | None
    nonzero_weights: list[int] | None  # L1-regularised models, per output
    violation: float | None  # kernel jobs with one binary problem
    problems: list[dict[str, Any]] | None  # kernel jobs with several problems
    threads: int | None
    code_version: str | None
    data_plan: dict[str, Any] | None


class Job(TypedDict, total=False):
    id: str
    dataset_id: str | None
    solver: str
    params: dict[str, Any]
    task: str  # classification | regression | outlier (the formulation's)
    status: str  # queued | running | succeeded | failed | cancelled (app.domain.job_status)
    error: str | None
    model_id: str | None
    result: JobResult | None
    progress: dict[str, Any] | None  # the latest progress event, without its fraction
    progress_fraction: float | None  # the job's one fraction, 0 to 1, in every state
    status_history: list[dict[str, Any]]
    attempt: int
    worker: str | None
    cancel_requested: bool
    created_at: str
    started_at: str | None
    finished_at: str | None


class Model(TypedDict, total=False):
    id: str
    job_id: str | None
    dataset_id: str | None
    kind: str  # linear | kernel
    task: str  # classification | regression | outlier
    solver: str
    params: dict[str, Any]
    labels: list[float]
    n_features: int
    result: dict[str, Any]
    converged: bool
    train_accuracy: float | None
    size_bytes: int
    origin: dict[str, Any] | None  # an imported model's format, file name, sha256
    created_at: str


class Prediction(TypedDict, total=False):
    model_id: str
    task: str  # regression: labels are the predicted values; outlier: +1 / -1
    labels: list[float]
    decision_values: list[float] | list[list[float]]
    classes: list[float]
    probabilities: list[list[float]] | None
    sigma: float | None  # regression with probability: the Laplace noise width
    served_by: dict[str, Any] | None  # by a reference: {name, version, alias}


class Instance(TypedDict):
    indices: list[int]  # 1-based feature indices
    values: list[float]


@dataclass(frozen=True)
class Event:
    """One Server-Sent Event of a job: `kind` is "status" or "progress"; `id` is the
    stored event's sequence number (None for a live progress point between stored ones)."""

    kind: str
    data: dict[str, Any]
    id: int | None

    @property
    def is_terminal(self) -> bool:
        return self.kind == "status" and self.data.get("status") in TERMINAL


class HingeError(Exception):
    """An answer that is not a success (or no answer at all: `status_code` 0).

    `code`, `message` and `detail` come from the API's error body
    `{"error": {"code", "message", "detail"}}`; `body` is the whole parsed body (or the
    text, when it was not that JSON)."""

    def __init__(self, status_code: int, code: str, message: str, detail: Any = None,
                 body: Any = None) -> None:
        super().__init__(f"{status_code} {code}: {message}" if status_code else message)
        self.status_code = status_code
        self.code = code
        self.message = message
        self.detail = detail
        self.body = body

    @classmethod
    def from_response(cls, response: httpx.Response) -> HingeError:
        try:
            body: Any = response.json()
        except ValueError:
            body = response.text
        error = body.get("error") if isinstance(body, dict) else None
        if isinstance(error, dict):
            return cls(response.status_code, str(error.get("code", "error")),
                       str(error.get("message", "")), error.get("detail"), body)
        return cls(response.status_code, "error",
                   (response.text or response.reason_phrase)[:500], None, body)


ProgressCallback = Callable[[int, int | None], None]  # (bytes sent, total bytes or None)


class HingeClient(ImportCalls, UploadCalls):
    """Hinge's API over one httpx connection pool. `url` defaults to $HINGE_URL (else
    http://127.0.0.1:$HINGE_PORT, port 8000 by default), `api_key` to $HINGE_API_KEY."""

    def __init__(self, url: str | None = None, api_key: str | None = None, *,
                 timeout: float = 60.0, transport: httpx.BaseTransport | None = None) -> None:
        self.url = (url or default_url()).rstrip("/")
        key = api_key if api_key is not None else os.environ.get("HINGE_API_KEY")
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._http = httpx.Client(base_url=self.url, headers=headers, timeout=timeout,
                                  transport=transport)

    def __enter__(self) -> HingeClient:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    # -- plumbing --------------------------------------------------------------------

    def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            response = self._http.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise HingeError(0, "connection_error",
                             f"cannot reach Hinge at {self.url}: {exc}") from exc
        if response.is_error:
            raise HingeError.from_response(response)
        return response

    def _json(self, method: str, path: str, **kwargs: Any) -> Any:
        return self._request(method, path, **kwargs).json()

    # -- datasets --------------------------------------------------------------------

    def upload(self, file: str | os.PathLike[str] | BinaryIO, name: str | None = None, *,
               progress: ProgressCallback | None = None,
               idempotency_key: str | None = None, format: str | None = None,
               label_column: str | int | None = None, reuse: bool = False,
               task: str | None = None, weight_column: str | int | None = None,
               part_bytes: int = PART_BYTES) -> Dataset:
        """Upload a dataset file (svmlight, CSV/TSV with a header, Parquet or .npz; plain,
        gzip, bz2 or xz), streamed in 1 MiB chunks as the raw request body;
        `progress(sent, total)` is called after each chunk. `format` (default: read from
        the content by the server) and `label_column` (CSV/TSV/Parquet: a column name or
        0-based position; default: the column named 'label') say how to read it;
        `task` (classification or regression; default: the server reads the labels)
        what its labels are; `weight_column` the column of instance weights (a header
        name, or svmlight's 1-based feature index; it leaves the features). A file larger
        than `part_bytes` goes in parts (`resumable_upload`): a dropped connection resumes.

        Content this tenant uploaded before is stored again, and the answer's
        `duplicate_of` lists the earlier datasets; with `reuse=True` the answer is the
        oldest of them instead (nothing stored), marked `reused: True`."""
        if isinstance(file, str | os.PathLike):
            path = Path(file)
            with path.open("rb") as handle:
                return self.upload(handle, name or path.name, progress=progress,
                                   idempotency_key=idempotency_key, format=format,
                                   label_column=label_column, reuse=reuse, task=task,
                                   weight_column=weight_column, part_bytes=part_bytes)
        total: int | None = None
        try:
            total = os.fstat(file.fileno()).st_size - file.tell()
        except (AttributeError, OSError, ValueError):
            total = None
        if total is not None and total > part_bytes and file.seekable():
            return cast(Dataset, self.resumable_upload(
                file, name, part_bytes=part_bytes, progress=progress, reuse=reuse,
                idempotency_key=idempotency_key, format=format, label_column=label_column,
                task=task, weight_column=weight_column))

        def chunks() -> Iterator[bytes]:
            sent = 0
            while chunk := file.read(UPLOAD_CHUNK_BYTES):
                sent += len(chunk)
                yield chunk
                if progress is not None:
                    progress(sent, total)

        headers = {"content-type": "application/octet-stream"}
        if total is not None:
            headers["content-length"] = str(total)
        if idempotency_key:
            headers["Idempotency-Key"] = idempotency_key
        asked = {"name": name or None, "format": format, "label_column": label_column,
                 "reuse": "true" if reuse else None, "task": task,
                 "weight_column": weight_column}
        params = {key: str(value) for key, value in asked.items() if value is not None}
        response = self._request("POST", "/v1/datasets", content=chunks(), headers=headers,
                                 params=params)
        dataset = cast(Dataset, response.json())
        dataset["reused"] = response.status_code == 200  # 201: stored
        return dataset

    def datasets(self, *, limit: int = 100, offset: int = 0) -> list[Dataset]:
        page = self._json("GET", "/v1/datasets", params={"limit": limit, "offset": offset})
        return cast(list[Dataset], page["data"])

    def dataset(self, dataset_id: str) -> Dataset:
        return cast(Dataset, self._json("GET", f"/v1/datasets/{dataset_id}"))

    def delete_dataset(self, dataset_id: str) -> None:
        self._request("DELETE", f"/v1/datasets/{dataset_id}")

    # -- jobs ------------------------------------------------------------------------

    def train(self, dataset_id: str, solver: str | None = None,
              params: dict[str, Any] | None = None, *,
              idempotency_key: str | None = None,
              sample_weight: str | list[float] | None = None) -> Job:
        """Submit a training job (202: queued). Without `solver` the server's "auto"
        chooses. `sample_weight`: "dataset" (the server's default: the dataset's
        weights, if it has them), "none", or one weight per row."""
        spec: dict[str, Any] = {"dataset_id": dataset_id, "params": params or {}}
        if solver:
            spec["solver"] = solver
        if sample_weight is not None:
            spec["sample_weight"] = sample_weight
        headers = {"Idempotency-Key": idempotency_key} if idempotency_key else {}
        return cast(Job, self._json("POST", "/v1/jobs", json=spec, headers=headers))

    def jobs(self, *, status: str | None = None, dataset_id: str | None = None,
             limit: int = 100, offset: int = 0) -> list[Job]:
        params: dict[str, Any] = {"limit": limit, "offset": offset}
        if status:
            params["status"] = status
        if dataset_id:
            params["dataset_id"] = dataset_id
        return cast(list[Job], self._json("GET", "/v1/jobs", params=params)["data"])

    def job(self, job_id: str) -> Job:
        return cast(Job, self._json("GET", f"/v1/jobs/{job_id}"))

    def cancel(self, job_id: str) -> Job:
        """Cancel a queued job (at once) or a running one (at its next progress check);
        HingeError 409 once the job has finished."""
        return cast(Job, self._json("POST", f"/v1/jobs/{job_id}/cancel"))

    def events(self, job_id: str, *, last_event_id: int | None = None,
               timeout: float | None = None) -> Iterator[Event]:
        """The job's Server-Sent Events: the stored history (after `last_event_id`), then
        live progress, ending after the terminal status event. `timeout` bounds the wait
        for each piece of the stream (None: wait as long as the job runs)."""
        return self._events(f"/v1/jobs/{job_id}/events", last_event_id, timeout)

    def _events(self, path: str, last_event_id: int | None = None,
                timeout: float | None = None) -> Iterator[Event]:
        headers = {"Accept": "text/event-stream"}
        if last_event_id is not None:
            headers["Last-Event-ID"] = str(last_event_id)
        try:
            with connect_sse(self._http, "GET", path, headers=headers,
                             timeout=httpx.Timeout(self._http.timeout.connect,
                                                   read=timeout)) as source:
                if source.response.is_error:
                    source.response.read()
                    raise HingeError.from_response(source.response)
                for message in source.iter_sse():
                    if not message.data:
                        continue
                    payload = message.json()
                    ident = int(message.id) if message.id and message.id.isdigit() else None
                    event = Event(message.event, payload if isinstance(payload, dict)
                                  else {"data": payload}, ident)
                    yield event
                    if event.is_terminal:
                        return
        except httpx.HTTPError as exc:
            raise HingeError(0, "connection_error",
                             f"event stream from {self.url} broke: {exc}") from exc

    def wait(self, job_id: str, *, timeout: float | None = None) -> Job:
        """Follow the job's events to its end; the job as it ended."""
        for _event in self.events(job_id, timeout=timeout):
            pass
        return self.job(job_id)

    # -- models ----------------------------------------------------------------------

    def models(self, *, limit: int = 100, offset: int = 0) -> list[Model]:
        page = self._json("GET", "/v1/models", params={"limit": limit, "offset": offset})
        return cast(list[Model], page["data"])

    def model(self, model_id: str) -> Model:
        return cast(Model, self._json("GET", f"/v1/models/{model_id}"))

    def delete_model(self, model_id: str) -> None:
        self._request("DELETE", f"/v1/models/{model_id}")

    def predict(self, model_id: str, rows: str | bytes | list[Instance]) -> Prediction:
        """Predict svmlight lines (str or bytes; labels optional) or JSON instances with
        1-based feature indices."""
        path = f"/v1/models/{model_id}/predict"
        if isinstance(rows, str | bytes):
            body = rows.encode() if isinstance(rows, str) else rows
            return cast(Prediction, self._json(
                "POST", path, content=body, headers={"content-type": "text/plain"}))
        return cast(Prediction, self._json("POST", path, json={"instances": rows}))

    def export(self, model_id: str, format: str | None = None) -> str:
        """The model file: `liblinear` (linear models' default), `libsvm` (kernel models'
        default) or `scale` (the svm-scale range file of a `scale: minmax` model)."""
        params = {"format": format} if format else {}
        return self._request("GET", f"/v1/models/{model_id}/export", params=params).text

    def export_onnx(self, model_id: str) -> bytes:
        """The model as an ONNX graph (scaler and probability calibration inside); the
        server needs its `onnx` extra."""
        return self._request("GET", f"/v1/models/{model_id}/export",
                             params={"format": "onnx"}).content

    def import_model(self, file: str | os.PathLike[str], range_file: str | os.PathLike[str]
                     | None = None, *, n_features: int | None = None) -> Model:
        """Upload a LIBSVM or LIBLINEAR model file (and the svm-scale range file it was
        trained behind) as a model of this tenant; 422 names the line of a bad file."""
        path = Path(file)
        files: dict[str, tuple[str, bytes]] = {"file": (path.name, path.read_bytes())}
        if range_file is not None:
            range_path = Path(range_file)
            files["range"] = (range_path.name, range_path.read_bytes())
        data = {} if n_features is None else {"n_features": str(n_features)}
        return cast(Model, self._json("POST", "/v1/models", files=files, data=data))

    def lineage(self, model_id: str) -> dict[str, Any]:
        """Dataset (and sha256), job, search, parameters, certificate, code version,
        evaluations and registered versions of a model."""
        return cast(dict[str, Any], self._json("GET", f"/v1/models/{model_id}/lineage"))

    # -- the registry: names, versions, aliases (a model is then `name@alias` or
    # `name/versions/n` wherever a model id goes) -----------------------------------

    def register(self, name: str, model_id: str, *, description: str = "",
                 tags: dict[str, str] | None = None) -> dict[str, Any]:
        """Register the model as the next version of `name` (the name is made if new)."""
        try:
            self._json("POST", "/v1/registry/models", json={"name": name})
        except HingeError as exc:
            if exc.status_code != 409:  # 409: the name exists already
                raise
        return cast(dict[str, Any], self._json(
            "POST", f"/v1/registry/models/{name}/versions",
            json={"model_id": model_id, "description": description, "tags": tags or {}}))

    def registered_models(self, *, limit: int = 100, offset: int = 0
                          ) -> list[dict[str, Any]]:
        page = self._json("GET", "/v1/registry/models",
                          params={"limit": limit, "offset": offset})
        return cast(list[dict[str, Any]], page["data"])

    def versions(self, name: str) -> list[dict[str, Any]]:
        """The name's versions, newest first."""
        page = self._json("GET", f"/v1/registry/models/{name}/versions")
        return cast(list[dict[str, Any]], page["data"])

    def promote(self, name: str, alias: str, version: int) -> dict[str, Any]:
        """Point `alias` of `name` at `version` (also how to roll back)."""
        return cast(dict[str, Any], self._json(
            "PUT", f"/v1/registry/models/{name}/aliases/{alias}", json={"version": version}))

    def delete_version(self, name: str, version: int) -> None:
        self._request("DELETE", f"/v1/registry/models/{name}/versions/{version}")

    def alias_history(self, name: str) -> list[dict[str, Any]]:
        """Every move of the name's aliases, newest first."""
        page = self._json("GET", f"/v1/registry/models/{name}/history")
        return cast(list[dict[str, Any]], page["data"])

    # -- evaluations and searches ----------------------------------------------------

    def evaluate(self, model_id: str, dataset_id: str) -> dict[str, Any]:
        """Score a model on a stored dataset (201 done at once, 202 queued: see
        `evaluation()`)."""
        return cast(dict[str, Any], self._json(
            "POST", f"/v1/models/{model_id}/evaluations", json={"dataset_id": dataset_id}))

    def evaluations(self, model_id: str, *, limit: int = 100, offset: int = 0
                    ) -> list[dict[str, Any]]:
        page = self._json("GET", f"/v1/models/{model_id}/evaluations",
                          params={"limit": limit, "offset": offset})
        return cast(list[dict[str, Any]], page["data"])

    def evaluation(self, model_id: str, evaluation_id: str) -> dict[str, Any]:
        return cast(dict[str, Any], self._json(
            "GET", f"/v1/models/{model_id}/evaluations/{evaluation_id}"))

    # -- batch predictions ------------------------------------------------------------

    def batch_predict(self, model: str, dataset_id: str,
                      outputs: list[str] | None = None) -> dict[str, Any]:
        """Queue a batch prediction of `model` (an id, NAME@ALIAS or NAME/versions/N) on
        every row of a stored dataset (202); follow it with `prediction()`."""
        body: dict[str, Any] = {"model_id": model, "dataset_id": dataset_id}
        if outputs is not None:
            body["outputs"] = outputs
        return cast(dict[str, Any], self._json("POST", "/v1/predictions", json=body))

    def prediction(self, prediction_id: str) -> dict[str, Any]:
        return cast(dict[str, Any], self._json("GET", f"/v1/predictions/{prediction_id}"))

    def cancel_prediction(self, prediction_id: str) -> dict[str, Any]:
        return cast(dict[str, Any], self._json(
            "POST", f"/v1/predictions/{prediction_id}/cancel"))

    def wait_prediction(self, prediction_id: str, *, poll: float = 0.5,
                        progress: Callable[[dict[str, Any]], None] | None = None
                        ) -> dict[str, Any]:
        """Poll until the prediction ends; `progress(record)` after each poll."""
        while True:
            record = self.prediction(prediction_id)
            if progress is not None:
                progress(record)
            if record["status"] in ("succeeded", "failed", "cancelled"):
                return record
            time.sleep(poll)

    def prediction_output(self, prediction_id: str, out: str | os.PathLike[str],
                          format: str = "csv") -> int:
        """Download a succeeded prediction's output (csv, jsonl or npz) to `out`,
        streamed; the bytes written."""
        written = 0
        try:
            with self._http.stream("GET", f"/v1/predictions/{prediction_id}/output",
                                   params={"format": format}) as response:
                if response.is_error:
                    response.read()
                    raise HingeError.from_response(response)
                with open(out, "wb") as handle:
                    for piece in response.iter_bytes():
                        written += handle.write(piece)
        except httpx.HTTPError as exc:
            raise HingeError(0, "connection_error",
                             f"cannot reach Hinge at {self.url}: {exc}") from exc
        return written

    def searches(self, *, limit: int = 100, offset: int = 0) -> list[dict[str, Any]]:
        page = self._json("GET", "/v1/searches", params={"limit": limit, "offset": offset})
        return cast(list[dict[str, Any]], page["data"])

    def search(self, search_id: str) -> dict[str, Any]:
        return cast(dict[str, Any], self._json("GET", f"/v1/searches/{search_id}"))

    def create_search(self, dataset_id: str, space: dict[str, Any], solver: str | None = None,
                      params: dict[str, Any] | None = None, **options: Any
                      ) -> dict[str, Any]:
        """Submit a cross-validated search (202: queued) of `space` (parameter -> values,
        or {"log2": [start, stop, step]}); `options` are the body's other fields (cv,
        metric, strategy, refit, select). Without `solver` the server's "auto"."""
        body: dict[str, Any] = {"dataset_id": dataset_id, "space": space,
                                "params": params or {}, **options}
        if solver:
            body["solver"] = solver
        return cast(dict[str, Any], self._json("POST", "/v1/searches", json=body))

    def wait_search(self, search_id: str, *, poll: float = 0.5,
                    timeout: float | None = None) -> dict[str, Any]:
        """Poll until the search ends (or `timeout` seconds pass); the search as it is."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            search = self.search(search_id)
            if search["status"] in ("succeeded", "failed", "cancelled") or (
                    deadline is not None and time.monotonic() >= deadline):
                return search
            time.sleep(poll)

    def regularisation_path(self, search_id: str) -> list[dict[str, Any]]:
        """An L1 search's path: one {"C", "nonzero_weights", "mean", "std"} per point
        that reports non-zero weights, in increasing C (several points of one C, when
        other parameters vary too, each appear)."""
        points = self.search(search_id).get("points") or []
        path = [{"C": p["values"].get("C", p.get("params", {}).get("C")),
                 "nonzero_weights": p["nonzero_weights"], "mean": p.get("mean"),
                 "std": p.get("std")}
                for p in points if p.get("nonzero_weights") is not None]
        return sorted(path, key=lambda p: float(p["C"]) if p["C"] is not None else 0.0)

    def cancel_search(self, search_id: str) -> dict[str, Any]:
        return cast(dict[str, Any], self._json("POST", f"/v1/searches/{search_id}/cancel"))

    # -- the rest --------------------------------------------------------------------

    def solvers(self) -> list[dict[str, Any]]:
        return cast(list[dict[str, Any]], self._json("GET", "/v1/solvers")["data"])

    def health(self) -> dict[str, Any]:
        return cast(dict[str, Any], self._json("GET", "/healthz"))
