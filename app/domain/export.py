"""Model files in the formats of the reference engines: the formats live in
solvers/formats.py; this module maps their errors to API errors."""

from __future__ import annotations

from typing import Any

from app.domain.errors import Invalid
from solvers.formats import LIBLINEAR_SOLVER_TYPES, ModelFormatError
from solvers.formats import liblinear_model_text as _liblinear_model_text
from solvers.models import LinearModel

__all__ = ["LIBLINEAR_SOLVER_TYPES", "liblinear_model_text"]


def liblinear_model_text(model: LinearModel, params: dict[str, Any]) -> str:
    """LIBLINEAR's model file (solvers.formats); a model it cannot hold is a 422."""
    try:
        return _liblinear_model_text(model, params)
    except ModelFormatError as exc:
        raise Invalid(str(exc)) from None
