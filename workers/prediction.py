"""One batch prediction on a worker: claim, pass the dataset through the model a block at
a time under a lease, store the output blob, finish.

The one runner of every durable work item (workers.runner): a duplicate delivery does
nothing, the heartbeat holds the lease, each block records its progress (rows done, and
whether the prediction was cancelled) only while this attempt holds it, the output blob
is committed under the prediction's own key and the row finished in one step; the API's
sweep re-queues it if this worker dies (the next attempt starts over and replaces the
blob).
"""

from __future__ import annotations

from dataclasses import dataclass

from app.domain.batch_output import OutputWriter
from app.domain.job_status import JobStatus
from app.domain.lifecycle import Claim
from app.domain.services import predictions
from app.domain.services.predictions import PredictionWork, output_key
from app.infra.blobs import StoredBlob
from app.infra.bus import notify
from app.infra.db import read_sessionmaker_for, session_scope
from app.infra.storage import blob_store
from app.settings import Settings
from workers import runner
from workers.runner import Heartbeat, Lost, Work


@dataclass(frozen=True)
class Output:
    stored: StoredBlob | None  # None: cancelled before the last block


def _run(settings: Settings, claim: Claim[PredictionWork], heartbeat: Heartbeat) -> Output:
    store = blob_store(settings)
    key = output_key(claim.id)
    scratch = store.scratch(key)

    def go_on(rows_done: int) -> bool:
        with session_scope(settings.database_url) as session:
            answer = predictions.progress(session, claim, rows_done)
        if answer == "lost":
            heartbeat.lose()
            raise Lost(claim.id)
        notify(settings, claim.id)
        return answer == "go"

    try:
        parts = scratch.parent / f".{claim.id}.parts"
        with OutputWriter(claim.work.rows, parts) as writer:
            with read_sessionmaker_for(settings.database_url)() as reader:
                complete = predictions.run_blocks(settings, reader, claim, writer, go_on)
            if not complete:
                return Output(None)
            writer.close(scratch)
        if heartbeat.lost:
            raise Lost(claim.id)
        return Output(store.commit(key, scratch))
    finally:
        scratch.unlink(missing_ok=True)


def _finish(settings: Settings, claim: Claim[PredictionWork], output: Output,
            heartbeat: Heartbeat) -> str:
    stored = output.stored
    if stored is None:
        return "cancelled" if runner.stop_and_finish(
            heartbeat, settings, lambda s: claim.finish(s, JobStatus.CANCELLED)) == "succeeded" \
            else "lost"
    return runner.stop_and_finish(heartbeat, settings, lambda session: predictions.succeed(
        session, claim, str(stored.ref), stored.size))


PREDICTION: Work[PredictionWork, Output] = Work(
    kind=predictions.PREDICTIONS,
    claim=predictions.claim_prediction,
    run=_run,
    finish=_finish,
    subject=lambda claim: claim.id)


def run_prediction(settings: Settings, prediction_id: str, hostname: str) -> str:
    """Run one delivery of a prediction: succeeded, cancelled, failed, lost, skipped or
    deferred."""
    return runner.run(settings, PREDICTION, prediction_id, hostname)
