"""One evaluation on a worker: claim, compute the report under a lease, finish.

The same guarantees as a training job (workers/training.py): the claim is a conditional
update (a duplicate delivery does nothing), a heartbeat thread renews the lease while the
model predicts, and the report is written only while this attempt still holds the
evaluation; the API's sweep re-queues it if this worker dies.
"""

from __future__ import annotations

import logging

from app.domain.services import evaluations
from app.infra.db import read_sessionmaker_for, session_scope
from app.settings import Settings
from workers.training import Heartbeat, worker_name

log = logging.getLogger("hinge.worker")


class EvaluationHeartbeat(Heartbeat):
    """Renews an evaluation's lease (not a job's) from a thread."""

    kind = "evaluation"

    def renew(self) -> bool:
        with session_scope(self.settings.database_url) as session:
            return evaluations.renew_evaluation_lease(session, self.job_id, self.attempt)


def run_evaluation(settings: Settings, evaluation_id: str, hostname: str) -> str:
    """Run one delivery of an evaluation: succeeded, failed, lost or skipped."""
    with session_scope(settings.database_url) as session:
        claim = evaluations.claim_evaluation(session, evaluation_id, worker_name(hostname))
    if claim is None:
        log.info("evaluation %s: not queued any more, nothing to do", evaluation_id)
        return "skipped"
    try:
        with EvaluationHeartbeat(settings, evaluation_id, claim.attempt), \
                read_sessionmaker_for(settings.database_url)() as reader:
            report = evaluations.run_claimed_evaluation(reader, settings, claim)
    except Exception as exc:
        log.exception("evaluation %s failed", evaluation_id)
        with session_scope(settings.database_url) as session:
            done = evaluations.finish_evaluation(session, claim,
                                                 error=f"{type(exc).__name__}: {exc}")
        return "failed" if done else "lost"
    with session_scope(settings.database_url) as session:
        done = evaluations.finish_evaluation(session, claim, report=report)
    return "succeeded" if done else "lost"
