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
