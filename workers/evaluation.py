"""One evaluation on a worker: claim, compute the report under a lease, finish.

The one runner of every durable work item (workers.runner): the claim is a conditional
update (a duplicate delivery does nothing), a heartbeat thread renews the lease while the
model predicts, the report is written only while this attempt still holds the evaluation,
and a failure stores app.domain.lifecycle.public_error (never a path of this server); the API's
sweep re-queues it if this worker dies.
"""

from __future__ import annotations

from typing import Any

from app.domain.job_status import JobStatus
from app.domain.lifecycle import Claim
from app.domain.services import evaluations
from app.domain.services.evaluations import EvaluationWork
from app.infra.db import read_sessionmaker_for
from app.settings import Settings
from workers import runner
from workers.runner import Heartbeat, Work


def _report(settings: Settings, claim: Claim[EvaluationWork], _heartbeat: Heartbeat
            ) -> dict[str, Any]:
    with read_sessionmaker_for(settings.database_url)() as reader:
        return evaluations.run_claimed_evaluation(reader, settings, claim)


EVALUATION: Work[EvaluationWork, dict[str, Any]] = Work(
    kind=evaluations.EVALUATIONS,
    claim=lambda session, _settings, evaluation_id, worker: evaluations.claim_evaluation(
        session, evaluation_id, worker),
    run=_report,
    finish=lambda settings, claim, report, heartbeat: runner.stop_and_finish(
        heartbeat, settings,
        lambda session: claim.finish(session, JobStatus.SUCCEEDED, report=report)))


def run_evaluation(settings: Settings, evaluation_id: str, hostname: str) -> str:
    """Run one delivery of an evaluation: succeeded, failed, lost or skipped."""
    return runner.run(settings, EVALUATION, evaluation_id, hostname)
