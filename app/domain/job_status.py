"""The one list of job statuses: every module, template and query names them from here.

The values are what the database stores (a VARCHAR(16) column) and what the API returns.
"""

from __future__ import annotations

from enum import StrEnum


class JobStatus(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def is_terminal(self) -> bool:
        return self in TERMINAL_STATUSES


ACTIVE_STATUSES: tuple[JobStatus, ...] = (JobStatus.QUEUED, JobStatus.RUNNING)
TERMINAL_STATUSES: tuple[JobStatus, ...] = (
    JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.CANCELLED,
)

# How a message says that a job (or search, evaluation) is in a status already, in English:
# "job 'x' has already succeeded", "... was already cancelled" (not "is already succeeded").
_ALREADY = {
    JobStatus.QUEUED: "is already queued",
    JobStatus.RUNNING: "is already running",
    JobStatus.SUCCEEDED: "has already succeeded",
    JobStatus.FAILED: "has already failed",
    JobStatus.CANCELLED: "was already cancelled",
}


def already(status: JobStatus) -> str:
    """The predicate of "<kind> <id> ..." for a thing found in `status` already."""
    return _ALREADY[JobStatus(status)]
