"""An evaluation's own failure is a lifecycle.Failed, as every kind's: its message is the
stored error as it is, not "ValueError: ..." (issue 42)."""

from __future__ import annotations

from typing import Any, cast

import pytest

from app.domain.lifecycle import Claim, Failed, public_error
from app.domain.services.evaluations import (
    EVALUATIONS,
    EvaluationWork,
    run_claimed_evaluation,
)


def test_an_evaluation_whose_dataset_is_gone_fails_with_its_own_message() -> None:
    claim = Claim(EVALUATIONS, "ev_1", 1, EvaluationWork("model_1", None))
    with pytest.raises(Failed) as failed:
        run_claimed_evaluation(cast(Any, None), cast(Any, None), claim)
    assert public_error(failed.value, "evaluation") == (
        "the dataset was deleted before the evaluation started")
