"""Imports (POST /v1/imports): a dataset read by workers from part files in S3 or under
HINGE_IMPORT_ROOTS (app.infra.import_sources), parsed a part at a time into row shards.

The API's side (`create_import`): the source is resolved into its parts and their sizes
(a listing, HEAD or stat; nothing is read), refused with 422 when it is malformed,
matches nothing or lies outside the roots (a `..`, a symlink out), and with 413 when the
tenant's quota cannot hold it (the arrays take about as many bytes as the text: 12 a
non-zero against the 9 to 20 characters of `index:value `), and with 429 when the tenant
has HINGE_TENANT_MAX_QUEUED_JOBS imports queued or running. The import and one row per
part (`ImportPart`) commit `queued` with its message in the outbox, answered 202.

The import is a durable work item on the one lifecycle (app.domain.lifecycle, `IMPORTS`):
claimed by a worker (the coordinator), leased by its heartbeat, swept back to `queued`
when that worker dies, failed after HINGE_MAX_ATTEMPTS, cancelled with DELETE (a queued
one at once, a running one at its next check). The parts are taken by whichever worker
asks first (`take_part`: a conditional UPDATE pending -> running with a token of its
own; a running part whose heartbeat is older than the lease may be taken again): the
coordinator and HINGE_IMPORT_HELPERS helper tasks parse side by side (workers.imports).
A part done keeps its shards and counts, durably, across attempts: a SIGKILLed
coordinator's next attempt resumes at a part boundary. A malformed part fails the
import (the part and its line in `error` and `error_detail`, a 422's particulars).

The values' layout (`dtype`, as an upload's): float64, float32 (rounded: 8 bytes a
non-zero instead of 12), or auto, float32 only where every value of every part is exactly
a float32. The dataset ends in one layout, whichever workers parse which parts: a part
writes the import's layout as it is when the part is taken (`PartTaken.value_dtype`; an
auto import's is `auto` until known). A part of an auto import that meets a value that is
not a float32 turns its own shards to float64 (app.infra.storage.ShardWriter) and the
import's layout to float64 (`widen`): the parts already done in float32 go back to
pending and are parsed again in float64, and a part being parsed in float32 finds out
when it is recorded (`part_done` raises `Widened`: its worker turns its shards to float64
and records it again). Both take the import's row lock first, so no float32 part is
recorded done after the import turned float64; an import whose every part is done in
float32 makes a float32 dataset.

The dataset (`assemble`) is created in one transaction that also finishes the import:
its `shards` manifest lists every part's shards in order, its counts are their sums, the
quota is checked again under the tenant's lock. A failed or cancelled import leaves no
dataset and its shard blobs are deleted (`remove_shards`, after the commit; the sweep's
orphan pass removes any a crash left behind, app.domain.sweep).
"""

from __future__ import annotations

import contextlib
import hashlib
import uuid
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from sqlalchemy import case, func, select, update
from sqlalchemy.orm import Session

from app.domain import lifecycle, outbox
from app.domain.errors import Invalid, TooLarge
from app.domain.job_status import ACTIVE_STATUSES, JobStatus
from app.domain.lifecycle import Claim
from app.domain.orm import Dataset, Import, ImportPart, Tenant, new_id, utcnow
from app.domain.services.datasets import VALUE_DTYPES, check_quota
from app.domain.services.limits import (
    below_running_limit,
    check_tenant_active,
    lock_tenant,
    tenant_limit,
)
from app.domain.services.owned import get_owned
from app.domain.tasks import DETECT
from app.infra.bus import notify
from app.infra.db import after_commit
from app.infra.import_sources import SourceError, resolve
from app.infra.queue import IMPORT_TASK
from app.infra.storage import DATASETS, LocalBlobStore, blob_store, sharded_blob_path
from app.settings import Settings
from solvers.params import label_key

QUEUED, RUNNING = JobStatus.QUEUED, JobStatus.RUNNING
SUCCEEDED, FAILED, CANCELLED = JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.CANCELLED
PENDING, PARSING, DONE, BAD = "pending", "running", "done", "failed"
FORMATS = ("svmlight",)
AUTO, FLOAT32, FLOAT64 = VALUE_DTYPES


def remove_shards(settings: Settings, dataset_id: str) -> None:
    """Delete every blob of an import's dataset (`datasets/<id>/...`), finished or not."""
    store = blob_store(settings)
    prefix = f"{DATASETS}/{dataset_id}"
    forever = 1e18
    for key in store.keys_older_than(prefix, forever):
        store.delete(key)
    store.remove_stale_scratch(prefix, forever)
    if isinstance(store, LocalBlobStore):
        with contextlib.suppress(OSError):  # (not empty: another writer's file)
            store.path(prefix).rmdir()


def _on_lost(session: Session, settings: Settings, import_id: str) -> None:
    """The sweep failed an import whose workers were lost: its shards go after the commit."""
    dataset_id = session.scalar(select(Import.dataset_id).where(Import.id == import_id))
    if dataset_id:
        after_commit(session, lambda: remove_shards(settings, dataset_id))


IMPORTS = lifecycle.WorkKind(
    name="import", plural="imports", table=Import, task=IMPORT_TASK,
    cancel_flag="cancel_requested", admission=below_running_limit(Import), on_lost=_on_lost)


# -- the API's side ----------------------------------------------------------------------

def _remaining(session: Session, settings: Settings, tenant: Tenant) -> int:
    stored = session.scalar(select(func.coalesce(func.sum(Dataset.stored_bytes), 0))
                            .where(Dataset.tenant_id == tenant.id)) or 0
    return tenant_limit(tenant, settings, "max_stored_bytes") - int(stored)


def create_import(session: Session, settings: Settings, tenant_id: str, sources: list[str],
                  name: str | None, fmt: str, task: str = DETECT, dtype: str = AUTO
                  ) -> Import:
    """A queued import of `sources` with its parts and its message in the outbox (the
    caller commits); 422 for a source refused (see the module doc), 413 over the quota.
    `dtype`: the values' layout (see the module doc)."""
    if fmt not in FORMATS:
        raise Invalid(f"format {fmt!r} is not imported: one of {', '.join(FORMATS)}",
                      field="format")
    if dtype not in VALUE_DTYPES:
        raise Invalid(f"dtype {dtype!r}: one of {', '.join(VALUE_DTYPES)}", field="dtype")
    try:
        parts = resolve(settings, sources, settings.import_max_parts)
    except SourceError as exc:
        raise Invalid(str(exc), {"reason": exc.reason, "source": exc.uri},
                      field="source") from None
    total = sum(p.size for p in parts)
    tenant = check_tenant_active(session, settings, tenant_id, Import,
                                 "imports queued or running")
    try:
        check_quota(session, settings, tenant, total)
    except TooLarge as exc:
        raise TooLarge(f"the source has {total} bytes in {len(parts)} part(s); "
                       f"{exc.message}", {**(exc.detail or {}), "source_bytes": total}
                       ) from None
    now = utcnow()
    item = Import(id=new_id(), tenant_id=tenant_id,
                  name=(name or parts[0].uri.rsplit("/", 1)[-1])[:255], format=fmt,
                  task=task, source=list(sources), dataset_id=new_id(), dtype=dtype,
                  value_dtype=None if dtype == AUTO else dtype,
                  parts_total=len(parts), bytes_total=total, cancel_requested=False,
                  status=QUEUED, attempt=0, created_at=now, queued_at=now)
    session.add(item)
    session.flush()
    session.add_all(ImportPart(import_id=item.id, part=i, uri=p.uri, size=p.size,
                               state=PENDING, bytes_done=0, rows=0, nnz=0, features=0,
                               text_bytes=0) for i, p in enumerate(parts))
    session.flush()
    outbox.post(session, settings, IMPORT_TASK, item.id)
    return item


def get_import(session: Session, tenant_id: str, import_id: str) -> Import:
    return get_owned(session, Import, "import", tenant_id, import_id)


def list_imports(session: Session, tenant_id: str, *, limit: int = 100, offset: int = 0
                 ) -> tuple[list[Import], int]:
    owned = Import.tenant_id == tenant_id
    rows = list(session.scalars(select(Import).where(owned)
                                .order_by(Import.created_at.desc(), Import.id)
                                .limit(limit).offset(offset)))
    return rows, session.scalar(select(func.count()).select_from(Import).where(owned)) or 0


def progress(session: Session, import_ids: list[str]) -> dict[str, dict[str, int]]:
    """Each import's bytes, rows, non-zeros and parts done so far (from its parts)."""
    if not import_ids:
        return {}
    rows = session.execute(
        select(ImportPart.import_id, func.sum(ImportPart.bytes_done), func.sum(ImportPart.rows),
               func.sum(ImportPart.nnz),
               func.sum(case((ImportPart.state == DONE, 1), else_=0)))
        .where(ImportPart.import_id.in_(import_ids)).group_by(ImportPart.import_id)).all()
    return {row[0]: {"bytes_done": int(row[1] or 0), "rows_done": int(row[2] or 0),
                     "nnz_done": int(row[3] or 0), "parts_done": int(row[4] or 0)}
            for row in rows}


def public(item: Import, done: dict[str, int] | None) -> dict[str, Any]:
    """What GET /v1/imports/{id} says (app.domain.import_schemas.ImportPublic)."""
    done = done or {"bytes_done": 0, "rows_done": 0, "nnz_done": 0, "parts_done": 0}
    return {"id": item.id, "name": item.name, "format": item.format, "source": item.source,
            "dtype": item.dtype, "value_dtype": item.value_dtype,
            "status": item.status, "parts_total": item.parts_total,
            "bytes_total": item.bytes_total, **done,
            "dataset_id": item.dataset_id if item.status == SUCCEEDED else None,
            "cancel_requested": item.cancel_requested, "error": item.error,
            "error_detail": item.error_detail, "attempt": item.attempt,
            "worker": item.worker, "created_at": item.created_at,
            "finished_at": item.finished_at}


def cancel(session: Session, settings: Settings, tenant_id: str, import_id: str) -> Import:
    """A queued import is cancelled at once (its parts' blobs, if any, go after the
    commit); a running one stops at its next check; a finished one is a 409."""
    item = get_import(session, tenant_id, import_id)
    lifecycle.request_cancel(session, IMPORTS, item)
    if item.status == CANCELLED:
        dataset_id = item.dataset_id
        after_commit(session, lambda: remove_shards(settings, dataset_id))
    after_commit(session, lambda: notify(settings, import_id))
    return item


# -- the worker's side -------------------------------------------------------------------

@dataclass(frozen=True)
class ImportWork:
    """What a claimed import assembles (its `lifecycle.Claim`'s work)."""

    tenant_id: str
    dataset_id: str
    name: str
    task: str
    parts_total: int


@dataclass(frozen=True)
class PartTaken:
    import_id: str
    part: int
    uri: str
    size: int
    token: str
    value_dtype: str = FLOAT64  # the layout its shards are written in (auto: until known)


def claim_import(session: Session, settings: Settings, import_id: str, worker: str
                 ) -> Claim[ImportWork] | None:
    return lifecycle.claim_as(session, IMPORTS, import_id, worker, lambda item: ImportWork(
        item.tenant_id, item.dataset_id, item.name, item.task, item.parts_total), settings)


def active(session: Session, import_id: str) -> bool:
    """Whether the import runs and was not asked to stop (parts go on being parsed)."""
    row = session.execute(select(Import.status, Import.cancel_requested)
                          .where(Import.id == import_id)).first()
    return row is not None and row.status == RUNNING and not row.cancel_requested


def take_part(session: Session, settings: Settings, import_id: str) -> PartTaken | None:
    """The next part nobody parses (pending, or running with a heartbeat older than the
    lease: its worker is gone), now this caller's (a token of its own); None if none."""
    if not active(session, import_id):
        return None
    layout = session.scalar(select(Import.value_dtype).where(Import.id == import_id))
    now = utcnow()
    stale = now - timedelta(seconds=settings.job_lease_seconds)
    candidates = session.execute(
        select(ImportPart.part, ImportPart.uri, ImportPart.size).where(
            ImportPart.import_id == import_id,
            (ImportPart.state == PENDING)
            | ((ImportPart.state == PARSING) & (ImportPart.heartbeat_at < stale)))
        .order_by(ImportPart.part).limit(8)).all()
    for part, uri, size in candidates:
        token = uuid.uuid4().hex
        taken = session.execute(
            update(ImportPart).where(
                ImportPart.import_id == import_id, ImportPart.part == part,
                (ImportPart.state == PENDING)
                | ((ImportPart.state == PARSING) & (ImportPart.heartbeat_at < stale)))
            .values(state=PARSING, token=token, heartbeat_at=now, bytes_done=0, rows=0,
                    nnz=0).execution_options(synchronize_session=False)).rowcount  # type: ignore[attr-defined]
        if taken:
            return PartTaken(import_id, part, uri, size, token, layout or AUTO)
    return None


def _mine(taken: PartTaken) -> tuple[Any, ...]:
    return (ImportPart.import_id == taken.import_id, ImportPart.part == taken.part,
            ImportPart.token == taken.token, ImportPart.state == PARSING)


def part_progress(session: Session, taken: PartTaken, bytes_done: int, rows: int,
                  nnz: int) -> bool:
    """Record a part's progress (and its heartbeat); False when the part is no longer
    this caller's or the import no longer runs: stop."""
    held = session.execute(update(ImportPart).where(*_mine(taken)).values(
        bytes_done=bytes_done, rows=rows, nnz=nnz, heartbeat_at=utcnow())
        .execution_options(synchronize_session=False)).rowcount  # type: ignore[attr-defined]
    return bool(held) and active(session, taken.import_id)


@dataclass
class PartResult:
    rows: int
    nnz: int
    features: int
    text_bytes: int
    sha256: str
    class_counts: dict[str, int] | None
    shards: list[dict[str, Any]]
    value_dtype: str = FLOAT64  # its shards' layout: float32 or float64


class Widened(Exception):
    """The import turned float64 while this part was parsed in float32: turn its shards
    to float64 and record it again."""


def _lock_import(session: Session, import_id: str) -> None:
    """Lock the import's row until the transaction ends (PostgreSQL's FOR UPDATE; on
    SQLite the conditional UPDATEs below are each atomic, and writers are serial)."""
    session.execute(select(Import.id).where(Import.id == import_id).with_for_update())


def _turned_float64(import_id: str) -> Any:
    return select(Import.id).where(Import.id == import_id,
                                   Import.value_dtype == FLOAT64).exists()


def part_done(session: Session, taken: PartTaken, result: PartResult) -> bool:
    """Record the part done (False: it is no longer this caller's). Widened when its
    shards are float32 and the import's layout turned float64 meanwhile."""
    _lock_import(session, taken.import_id)
    consistent = [] if result.value_dtype == FLOAT64 else [~_turned_float64(taken.import_id)]
    done = session.execute(update(ImportPart).where(*_mine(taken), *consistent).values(
        state=DONE, bytes_done=taken.size, rows=result.rows, nnz=result.nnz,
        features=result.features, text_bytes=result.text_bytes, sha256=result.sha256,
        class_counts=result.class_counts, shards=result.shards,
        value_dtype=result.value_dtype, heartbeat_at=utcnow())
        .execution_options(synchronize_session=False)).rowcount  # type: ignore[attr-defined]
    if not done and consistent and session.scalar(
            select(func.count()).select_from(ImportPart).where(*_mine(taken))):
        raise Widened(taken.uri)
    return bool(done)


def widen(session: Session, taken: PartTaken) -> int:
    """A part of an auto import (still this caller's: a worker that lost its part changes
    nothing) met a value that is not a float32: the import's layout is float64 from now
    on, and its parts done in float32 go back to pending (to be parsed again); how many."""
    import_id = taken.import_id
    _lock_import(session, import_id)
    session.execute(update(Import).where(
        Import.id == import_id, Import.dtype == AUTO,
        select(ImportPart.part).where(*_mine(taken)).exists())
        .values(value_dtype=FLOAT64).execution_options(synchronize_session=False))
    return int(session.execute(update(ImportPart).where(
        ImportPart.import_id == import_id, ImportPart.state == DONE,
        ImportPart.value_dtype == FLOAT32, _turned_float64(import_id))
        .values(state=PENDING, token=None, bytes_done=0, rows=0, nnz=0, shards=None,
                value_dtype=None)
        .execution_options(synchronize_session=False)).rowcount)  # type: ignore[attr-defined]


def part_failed(session: Session, taken: PartTaken, error: str, line: int | None) -> bool:
    return bool(session.execute(update(ImportPart).where(*_mine(taken)).values(
        state=BAD, error=error[:lifecycle.MAX_ERROR], error_line=line)
        .execution_options(synchronize_session=False)).rowcount)  # type: ignore[attr-defined]


@dataclass(frozen=True)
class PartsState:
    done: int
    open: int  # pending or being parsed
    failed: ImportPart | None  # the first failed part


def parts_state(session: Session, import_id: str) -> PartsState:
    counts = dict(session.execute(select(ImportPart.state, func.count())
                                  .where(ImportPart.import_id == import_id)
                                  .group_by(ImportPart.state)).all())
    failed = session.scalar(select(ImportPart).where(ImportPart.import_id == import_id,
                                                     ImportPart.state == BAD)
                            .order_by(ImportPart.part).limit(1))
    return PartsState(int(counts.get(DONE, 0)),
                      int(counts.get(PENDING, 0)) + int(counts.get(PARSING, 0)), failed)


def failure_of(part: ImportPart) -> tuple[str, dict[str, Any]]:
    """The import's error and error_detail for a failed part."""
    message = f"invalid dataset: part {part.part} ({part.uri}): {part.error}"
    return message, {"status": 422, "part": part.part, "uri": part.uri,
                     "line": part.error_line, "reason": part.error}


def record_failure(session: Session, claim: Claim[ImportWork], detail: dict[str, Any]
                   ) -> None:
    session.execute(update(Import).where(*claim.leased())
                    .values(error_detail=detail).execution_options(synchronize_session=False))


def _labels(parts: list[ImportPart], task: str, max_classes: int
            ) -> tuple[str, list[float], dict[str, int], dict[str, Any] | None] | None:
    """The dataset's task, labels and class counts from its parts' counts; None when a
    part kept none (real-valued or many labels: the caller reads the targets)."""
    if task == "regression" or any(p.class_counts is None for p in parts):
        return None
    merged: dict[str, int] = {}
    for part in parts:
        for key, count in (part.class_counts or {}).items():
            merged[key] = merged.get(key, 0) + int(count)
    if len(merged) > max_classes and task != "classification":
        return None
    labels = sorted(float(k) for k in merged)
    return ("classification" if task == DETECT else task, labels,
            {label_key(v): merged[label_key(v)] for v in labels}, None)


def assemble(session: Session, settings: Settings, claim: Claim[ImportWork],
             read_targets: Any) -> Dataset | None:
    """The dataset of a claimed import whose parts are all done, and the import finished
    `succeeded` with it, in the session's transaction; None when this attempt no longer
    holds the import. 413 (TooLarge) over the tenant's quota. `read_targets(shards)`: the
    targets of the shards in order (for a regression summary)."""
    from app.domain.tasks import dataset_task, label_summary

    work = claim.work
    parts = list(session.scalars(select(ImportPart).where(
        ImportPart.import_id == claim.id).order_by(ImportPart.part)))
    assert all(p.state == DONE for p in parts), "assemble before every part is done"
    shards = [shard for p in parts for shard in (p.shards or [])]
    if not shards:
        raise lifecycle.Failed("invalid dataset: no data rows in any part")
    summary = _labels(parts, work.task, settings.max_classes)
    if summary is None:
        y = read_targets(shards)
        task = dataset_task(y, work.task, settings.max_classes)
        labels, class_counts, label_stats = label_summary(y, task)
    else:
        task, labels, class_counts, label_stats = summary
    layouts = {p.value_dtype or FLOAT64 for p in parts}  # (a part of an older row: float64)
    if len(layouts) > 1:  # never: part_done and widen take the import's lock
        raise lifecycle.Failed(f"the parts were stored in {' and '.join(sorted(layouts))}")
    layout = layouts.pop()
    stored = sum(int(s["stored_bytes"]) for s in shards)
    tenant = lock_tenant(session, work.tenant_id)
    check_quota(session, settings, tenant, stored)
    digest = hashlib.sha256("\n".join(str(p.sha256) for p in parts).encode()).hexdigest()
    dataset = Dataset(
        id=work.dataset_id, tenant_id=work.tenant_id, name=work.name,
        rows=sum(p.rows for p in parts), features=max(p.features for p in parts),
        nnz=sum(p.nnz for p in parts), labels=labels, class_counts=class_counts, task=task,
        label_stats=label_stats, weight_stats=None, sha256=digest,
        size_bytes=sum(p.text_bytes for p in parts), blob_path=sharded_blob_path(work.dataset_id),
        stored_bytes=stored, source_format="svmlight",
        shards=[{k: s[k] for k in ("blob_path", "rows", "nnz", "nbytes")} for s in shards],
        value_dtype=layout)
    if not claim.finish(session, SUCCEEDED, value_dtype=layout):
        return None
    session.add(dataset)
    session.flush()
    return dataset


def fail(settings: Settings, session: Session, claim: Claim[ImportWork], error: str) -> bool:
    return _removing_shards(settings, session, claim, claim.fail(session, error))


def cancelled(settings: Settings, session: Session, claim: Claim[ImportWork]) -> bool:
    return _removing_shards(settings, session, claim, claim.finish(session, CANCELLED))


def _removing_shards(settings: Settings, session: Session, claim: Claim[ImportWork],
                     done: bool) -> bool:
    """`done`; when it is, the import's shards are removed after the commit."""
    if done:
        dataset_id = claim.work.dataset_id
        after_commit(session, lambda: remove_shards(settings, dataset_id))
    return done


def reserved_dataset_ids(session: Session, dataset_ids: list[str]) -> set[str]:
    """Those of `dataset_ids` that an import not yet finished writes (the sweep keeps
    their blobs)."""
    return set(session.scalars(select(Import.dataset_id).where(
        Import.dataset_id.in_(dataset_ids), Import.status.in_(ACTIVE_STATUSES))))


def dataset_of(import_id: str) -> Any:
    """The query of an import's dataset id."""
    return select(Import.dataset_id).where(Import.id == import_id)


def active_imports(session: Session, tenant_id: str, limit: int = 20) -> list[dict[str, Any]]:
    """The tenant's queued and running imports with their progress (the datasets page)."""
    rows = list(session.scalars(select(Import).where(
        Import.tenant_id == tenant_id, Import.status.in_(ACTIVE_STATUSES))
        .order_by(Import.created_at.desc()).limit(limit)))
    done = progress(session, [r.id for r in rows])
    return [public(r, done.get(r.id)) for r in rows]
