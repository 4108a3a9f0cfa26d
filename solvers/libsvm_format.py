"""Kept for `app/routes/models.py` (`libsvm_model_text`): the model file formats live in
solvers/formats.py."""

from solvers.formats import libsvm_model_text, read_libsvm_model_text

__all__ = ["libsvm_model_text", "read_libsvm_model_text"]
