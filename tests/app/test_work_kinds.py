"""The kinds of durable work (app.domain.lifecycle) share their edges (issue 42): one
`Claim` type for every kind, and a search's jobs enter the queue through the jobs'
public `queue`, under the same parameter caps as a submitted job."""

from __future__ import annotations

import ast
import inspect
from types import NoneType
from typing import get_args, get_origin, get_type_hints

import pytest
from sqlalchemy import func, select

from app.domain import lifecycle
from app.domain.errors import Invalid
from app.domain.orm import Job
from app.domain.services import evaluations, imports, jobs, predictions, searches
from app.domain.sweep import KINDS
from app.infra.db import session_scope
from app.settings import Settings

# each kind's claim (queued -> running) and the kind it claims
CLAIMS = {jobs.JOBS: jobs.claim_job, evaluations.EVALUATIONS: evaluations.claim_evaluation,
          predictions.PREDICTIONS: predictions.claim_prediction,
          searches.SEARCH_TASKS: searches.claim_task, imports.IMPORTS: imports.claim_import}


def test_every_kind_is_claimed_as_the_one_lifecycle_claim() -> None:
    assert set(CLAIMS) == set(KINDS)
    for kind, claim in CLAIMS.items():
        answer = get_type_hints(claim)["return"]
        claimed, none = get_args(answer)
        assert get_origin(claimed) is lifecycle.Claim, (kind.name, answer)
        assert none is NoneType


def test_a_claims_writes_are_its_kinds_lifecycle_writes(settings: Settings) -> None:
    """A claim's methods act on its own kind, item and attempt: a claim of a missing
    item holds nothing, whichever kind it is."""
    with session_scope(settings.database_url) as session:
        for kind in KINDS:
            claim = lifecycle.Claim(kind, "no_such_item", 1, None)
            assert claim.progress(session) == "lost"
            assert not claim.fail(session, "x")
            assert not claim.finish(session, lifecycle.CANCELLED)


def test_a_queued_job_is_held_to_the_parameter_caps_whoever_queues_it(
        settings: Settings) -> None:
    over = {"threads": settings.max_threads + 1}
    with session_scope(settings.database_url) as session, pytest.raises(Invalid) as refused:
        jobs.queue(session, settings, "tenant", "dataset", "dcd", over, search_id="s")
    assert refused.value.detail["field"] == "params.threads"
    with session_scope(settings.database_url) as session:
        assert session.scalar(select(func.count()).select_from(Job)) == 0


def test_searches_queue_their_jobs_through_the_jobs_public_queue() -> None:
    """No private name of the jobs service in searches, and no Job built there: its refit
    job comes from jobs.queue (the caps, the first status and event, the outbox)."""
    tree = ast.parse(inspect.getsource(searches))
    taken = [alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
             and node.module == "app.domain.services.jobs" for alias in node.names]
    assert "queue" in taken and not [name for name in taken if name.startswith("_")]
    built = [node for node in ast.walk(tree) if isinstance(node, ast.Call)
             and isinstance(node.func, ast.Name) and node.func.id == "Job"]
    assert built == []
    assert not [node for node in ast.walk(tree) if isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name) and node.value.id == "jobs"
                and node.attr.startswith("_")]
