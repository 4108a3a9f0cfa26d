"""One import on the workers (app.domain.services.imports): the coordinator claims it,
sends HINGE_IMPORT_HELPERS helper tasks, and parses parts beside them until none is left;
the last step creates the dataset and finishes the import in one transaction.

A part is read (app.infra.import_sources.read_part), decompressed by magic bytes and
parsed by the project's svmlight parser (solvers.svmlight; solvers.svmlight_stream)
HINGE_IMPORT_SHARD_TEXT_BYTES of text at a time, cut at a line boundary: each piece is
one shard blob `datasets/<dataset_id>/p<part:05d>-<k:05d>.npz`, written under a
temporary name and committed (app.infra.storage), so a worker holds about one piece of a
part at once, whatever the part's or the dataset's size. Line numbers in errors count
from the part's first line.

A shard's key is a function of its part and its place in it: a part parsed again after
its worker died writes the same keys, and a part recorded `done` is never parsed again
(the next attempt of a SIGKILLed coordinator resumes at a part boundary). A part that
fails (malformed text, a full disk) is recorded failed with its reason; the coordinator
then fails the import, and its shards are deleted after that commits.

A part's shards are written in the import's layout as it was when the part was taken
(float32, float64, or auto: float32 while every value is exactly one). A part of an auto
import that meets a value that is not a float32 turns its shards and the import to
float64 at once (`imports.widen`: the parts done in float32 are parsed again); a part
that finishes in float32 after that turns its shards to float64 before it is recorded
(`imports.Widened`), so the dataset is in one layout (app.domain.services.imports).
"""

from __future__ import annotations

import errno
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from app.domain import lifecycle
from app.domain.errors import TooLarge
from app.domain.lifecycle import Claim
from app.domain.orm import Import
from app.domain.services import imports
from app.domain.services.imports import ImportWork, PartResult, PartTaken
from app.infra.bus import notify
from app.infra.db import read_sessionmaker_for, session_scope
from app.infra.import_sources import SourceError, read_part
from app.infra.queue import IMPORT_PART_TASK, enqueue
from app.infra.storage import BlobRef, ShardWriter, blob_store
from app.settings import Settings
from solvers.params import label_key
from solvers.svmlight import ParseLimits, SvmlightError, SvmlightParser
from solvers.svmlight_stream import StreamDecompressor
from workers import runner
from workers.runner import Heartbeat, Lost, Work

log = logging.getLogger("hinge.worker")

DECOMPRESS_STEP = 1 << 20
WAIT_SECONDS = 0.2  # how often a coordinator with no part left looks at the others'


class PartStopped(Exception):
    """The import stopped (cancelled, failed, re-queued) or the part was taken over."""


class PartFailure(Exception):
    """A part that cannot be imported: `error` as the part records it, `line` if any."""

    def __init__(self, error: str, line: int | None = None) -> None:
        super().__init__(error)
        self.error = error
        self.line = line


def _writing(write: Callable[[], None]) -> None:
    """Write shards through the uploads' writer (app.infra.storage.ShardWriter: the same
    keys, free-disk reserve, commit and layouts); a full disk fails the part."""
    try:
        write()
    except OSError as exc:
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise PartFailure(f"the disk is full: a shard could not be written ({exc})"
                              ) from None
        raise


def part_writer(settings: Settings, taken: PartTaken, dataset_id: str) -> ShardWriter:
    """The writer of a part's shards, in the layout the part was taken with."""
    return ShardWriter(blob_store(settings), dataset_id, settings.disk_reserve_bytes,
                       part=taken.part, value_dtype=taken.value_dtype)


def shard_entries(writer: ShardWriter) -> list[dict[str, Any]]:
    """The part's manifest entries (Dataset.shards, and `stored_bytes` for the quota)."""
    return [{**entry, "stored_bytes": stored.size}
            for entry, (stored, _info) in zip(writer.manifest(), writer.written, strict=True)]


@dataclass
class _Counts:
    raw: int = 0
    rows: int = 0
    nnz: int = 0
    features: int = 0
    text: int = 0
    lines: int = 0


def parse_part(settings: Settings, taken: PartTaken, dataset_id: str,
               go_on: Callable[[int, int, int], bool],
               chunks: Iterator[bytes] | None = None, *, writer: ShardWriter | None = None,
               on_widen: Callable[[], None] | None = None) -> PartResult:
    """Parse one part into its shards (see the module doc); `go_on(raw bytes, rows,
    non-zeros)` every progress interval and after each shard (False: PartStopped);
    `on_widen()` once, when an auto layout meets a value that is not a float32."""
    store = blob_store(settings)
    writer = writer or part_writer(settings, taken, dataset_id)
    auto = writer.value_dtype == imports.AUTO
    limits = ParseLimits(max_features=settings.max_features,
                         max_line_bytes=settings.max_line_bytes, max_classes=None)
    decompressor = StreamDecompressor(step_bytes=DECOMPRESS_STEP)
    segment = settings.import_shard_text_bytes
    counts = _Counts()
    digests: list[str] = []
    classes: dict[str, int] | None = {}
    pending: list[bytes] = []
    pending_bytes = 0

    def parse_piece(text: bytes, final: bool) -> None:
        nonlocal classes, auto
        parser = SvmlightParser(limits)
        try:
            parser.feed(text)
            parsed = parser.finish()
        except SvmlightError as exc:
            if exc.line is None and exc.reason == "no data rows":
                return
            line = None if exc.line is None else exc.line + counts.lines
            where = f"line {line}: " if line is not None else ""
            raise PartFailure(f"invalid dataset: {where}{exc.reason}", line) from None
        finally:
            counts.lines += text.count(b"\n") + (
                1 if final and text and not text.endswith(b"\n") else 0)
        arrays = {"data": parsed.data, "indices": parsed.indices, "indptr": parsed.indptr,
                  "y": parsed.y}
        _writing(lambda: writer.write(arrays))
        stored = writer.written[-1][0]
        if auto and writer.value_dtype != imports.AUTO:
            auto = False  # a value that is not a float32: the other parts widen too
            if on_widen is not None:
                on_widen()
        counts.rows += parsed.n_samples
        counts.nnz += parsed.nnz
        counts.features = max(counts.features, parsed.n_features)
        digests.append(parsed.sha256)
        if classes is not None:
            if np.all(np.mod(parsed.y, 1.0) == 0):
                values, numbers = np.unique(parsed.y, return_counts=True)
                for value, number in zip(values.tolist(), numbers.tolist(), strict=True):
                    key = label_key(value)
                    classes[key] = classes.get(key, 0) + int(number)
                if len(classes) > settings.max_classes:
                    classes = None
            else:
                classes = None
        if not go_on(counts.raw, counts.rows, counts.nnz):
            store.delete(stored.ref.key)  # the import stopped meanwhile: keep nothing
            raise PartStopped(taken.uri)

    def flush(final: bool) -> None:
        """Parse the pending text a piece of about `segment` bytes at a time, each cut
        after a newline; with `final`, all of it."""
        nonlocal pending, pending_bytes
        text = b"".join(pending)
        position = 0
        while len(text) - position >= segment or (final and position < len(text)):
            cut = text.rfind(b"\n", position, position + segment) + 1
            if cut <= position:  # a line longer than a piece: take it whole
                cut = text.find(b"\n", position + segment) + 1
            if cut <= position:
                if not final:
                    break
                cut = len(text)
            counts.text += cut - position
            parse_piece(text[position:cut], final and cut == len(text))
            position = cut
        rest = text[position:]
        if len(rest) > segment + settings.max_line_bytes:
            raise PartFailure(f"invalid dataset: line {counts.lines + 1}: line longer "
                              f"than max_line_bytes ({settings.max_line_bytes} bytes)",
                              counts.lines + 1)
        pending, pending_bytes = ([rest], len(rest)) if rest else ([], 0)

    def add(pieces: Iterator[bytes]) -> None:
        nonlocal pending_bytes
        for piece in pieces:
            pending.append(piece)
            pending_bytes += len(piece)
            if pending_bytes >= segment:
                flush(final=False)

    reported = time.monotonic()
    try:
        for chunk in chunks if chunks is not None else read_part(settings, taken.uri):
            counts.raw += len(chunk)
            add(decompressor.iter_feed(chunk))
            if time.monotonic() - reported >= settings.progress_interval_seconds:
                reported = time.monotonic()
                if not go_on(counts.raw, counts.rows, counts.nnz):
                    raise PartStopped(taken.uri)
        add(decompressor.iter_finish())
        flush(final=True)
    except SvmlightError as exc:  # the decompressor's: truncated or corrupt input
        raise PartFailure(f"invalid dataset: {exc.reason}") from None
    except SourceError as exc:
        raise PartFailure(str(exc)) from None
    if counts.rows == 0:
        raise PartFailure("invalid dataset: no data rows")
    return PartResult(counts.rows, counts.nnz, counts.features, counts.text,
                      _combined(digests), classes, shard_entries(writer), writer.layout)


def _combined(digests: list[str]) -> str:
    import hashlib

    return hashlib.sha256("\n".join(digests).encode()).hexdigest()


def run_part(settings: Settings, taken: PartTaken, dataset_id: str,
             lost: Callable[[], bool]) -> str:
    """Parse a taken part and record it: done, failed, or stopped."""
    def go_on(raw: int, rows: int, nnz: int) -> bool:
        if lost():
            return False
        with session_scope(settings.database_url) as session:
            held = imports.part_progress(session, taken, raw, rows, nnz)
        notify(settings, taken.import_id)
        return held

    def on_widen() -> None:
        with session_scope(settings.database_url) as session:
            again = imports.widen(session, taken)
        if again:
            log.info("import %s: a value of part %d is not a float32: float64, %d "
                     "part(s) done in float32 to be parsed again", taken.import_id,
                     taken.part, again)

    writer = part_writer(settings, taken, dataset_id)
    try:
        result = parse_part(settings, taken, dataset_id, go_on, writer=writer,
                            on_widen=on_widen)
    except PartStopped:
        return "stopped"
    except PartFailure as exc:
        return _failed(settings, taken, dataset_id, exc)
    except Exception as exc:
        log.exception("import %s part %d failed", taken.import_id, taken.part)
        with session_scope(settings.database_url) as session:
            imports.part_failed(session, taken, lifecycle.public_error(exc, "import"), None)
        notify(settings, taken.import_id)
        return "failed"
    try:
        done = _record(settings, taken, writer, result)
    except PartFailure as exc:  # the disk filled as its shards turned float64
        return _failed(settings, taken, dataset_id, exc)
    notify(settings, taken.import_id)
    log.info("import %s part %d: %d rows, %d non-zeros in %d shard(s), %s%s",
             taken.import_id, taken.part, result.rows, result.nnz, len(result.shards),
             writer.layout, "" if done else " (taken over meanwhile: not recorded)")
    return "done" if done else "stopped"


def _failed(settings: Settings, taken: PartTaken, dataset_id: str, exc: PartFailure
            ) -> str:
    if exc.error.startswith("the disk is full"):  # free it first: the record needs room
        imports.remove_shards(settings, dataset_id)
    with session_scope(settings.database_url) as session:
        imports.part_failed(session, taken, exc.error, exc.line)
    notify(settings, taken.import_id)
    return "failed"


def _record(settings: Settings, taken: PartTaken, writer: ShardWriter, result: PartResult
            ) -> bool:
    """Record the part done; a float32 part of an import that turned float64 meanwhile
    turns its shards to float64 first. False: the part is no longer this worker's."""
    try:
        with session_scope(settings.database_url) as session:
            return imports.part_done(session, taken, result)
    except imports.Widened:
        _writing(writer.widen)
        result = replace(result, shards=shard_entries(writer), value_dtype=writer.layout)
        with session_scope(settings.database_url) as session:
            return imports.part_done(session, taken, result)


# -- the coordinator ---------------------------------------------------------------------

@dataclass(frozen=True)
class Outcome:
    what: str  # "assemble" or "cancelled"


def _run(settings: Settings, claim: Claim[ImportWork], heartbeat: Heartbeat) -> Outcome:
    for _ in range(min(settings.import_helpers, claim.work.parts_total - 1)):
        try:
            enqueue(settings.broker_url, settings.queue, IMPORT_PART_TASK, claim.id)
        except Exception:  # the coordinator parses every part itself then
            log.warning("import %s: a helper could not be sent", claim.id,
                        exc_info=True)
            break
    while True:
        if heartbeat.lost:
            raise Lost(claim.id)
        with session_scope(settings.database_url) as session:
            taken = imports.take_part(session, settings, claim.id)
        if taken is not None:
            run_part(settings, taken, claim.work.dataset_id, lambda: heartbeat.lost)
            continue
        with read_sessionmaker_for(settings.database_url)() as session:
            item = session.get(Import, claim.id)
            if item is None or item.attempt != claim.attempt:
                raise Lost(claim.id)
            if item.cancel_requested:
                return Outcome("cancelled")
            state = imports.parts_state(session, claim.id)
            failed = imports.failure_of(state.failed) if state.failed else None
        if failed is not None:
            message, detail = failed
            with session_scope(settings.database_url) as session:
                imports.record_failure(session, claim, detail)
            raise lifecycle.Failed(message)
        if state.open == 0:
            return Outcome("assemble")
        time.sleep(WAIT_SECONDS)


def _targets(settings: Settings) -> Callable[[list[dict[str, Any]]], np.ndarray]:
    store = blob_store(settings)

    def read(shards: list[dict[str, Any]]) -> np.ndarray:
        ys = []
        for shard in shards:
            with store.open(BlobRef.parse(shard["blob_path"])) as handle, \
                    np.load(handle, allow_pickle=False) as blob:
                ys.append(np.asarray(blob["y"]))
        return np.concatenate(ys)

    return read


def _finish(settings: Settings, claim: Claim[ImportWork], outcome: Outcome,
            heartbeat: Heartbeat) -> str:
    if outcome.what == "cancelled":
        done = runner.stop_and_finish(heartbeat, settings, lambda session: imports.cancelled(
            settings, session, claim))
        return "cancelled" if done == "succeeded" else "lost"
    heartbeat.stop()
    try:
        with session_scope(settings.database_url) as session:
            dataset = imports.assemble(session, settings, claim, _targets(settings))
    except (TooLarge, lifecycle.Failed) as exc:
        message = exc.message if isinstance(exc, TooLarge) else str(exc)
        with session_scope(settings.database_url) as session:
            imports.record_failure(session, claim, {"status": 413 if isinstance(
                exc, TooLarge) else 422, "reason": message})
            failed = imports.fail(settings, session, claim, message)
        return "failed" if failed else "lost"
    return "succeeded" if dataset is not None else "lost"


def import_work(settings: Settings) -> Work[ImportWork, Outcome]:
    """The runner's view of an import (workers.runner)."""
    return Work(kind=imports.IMPORTS, claim=imports.claim_import, run=_run, finish=_finish,
                fail=lambda session, claim, error: imports.fail(settings, session, claim,
                                                                error),
                subject=lambda claim: claim.id)


def run_import(settings: Settings, import_id: str, hostname: str) -> str:
    """Run one delivery of an import: succeeded, cancelled, failed, lost, skipped or
    deferred."""
    return runner.run(settings, import_work(settings), import_id, hostname)


def run_helper(settings: Settings, import_id: str, hostname: str) -> str:
    """A helper: parse parts of the import while some are left; how many it did."""
    with read_sessionmaker_for(settings.database_url)() as session:
        dataset_id = session.scalar(imports.dataset_of(import_id))
    if dataset_id is None:
        return "0 parts"
    parsed = 0
    while True:
        with session_scope(settings.database_url) as session:
            taken = imports.take_part(session, settings, import_id)
        if taken is None:
            return f"{parsed} parts"
        run_part(settings, taken, dataset_id, lambda: False)
        parsed += 1
