"""What the model-file readers share (solvers/model_import.py: LIBLINEAR's files and the
range file; solvers/model_import_libsvm.py: LIBSVM's): their errors and limits, the model
they return, and the strict reading of header fields, body lines and numbers (each
failure names its 1-based line)."""

from __future__ import annotations

import math
from collections.abc import Callable, Container, Iterator
from dataclasses import dataclass, field
from typing import Any

from solvers.formats import ModelFormatError
from solvers.models import ServableModel


class ModelFileError(ModelFormatError):
    """A model file that does not parse; `line` is the 1-based line (None: the file)."""

    def __init__(self, message: str, line: int | None = None) -> None:
        super().__init__(f"line {line}: {message}" if line is not None else message)
        self.line = line
        self.reason = message


class NotServable(ModelFileError):
    """A well-formed model of a formulation Hinge does not serve yet."""


class OverLimit(ModelFileError):
    """A model larger than a limit allows (support vectors, features, classes)."""


@dataclass(frozen=True)
class ImportLimits:
    max_support_vectors: int = 1_000_000
    max_features: int = 10_000_000
    max_classes: int = 1000


@dataclass(frozen=True)
class ImportedModel:
    """A model read from a file: the servable model and what the file said about itself."""

    model: ServableModel
    format: str  # "libsvm" | "liblinear"
    kind: str  # "kernel" | "linear"
    solver: str  # LIBSVM's svm_type or LIBLINEAR's solver_type, as written
    classes: list[float]
    n_features: int
    params: dict[str, Any] = field(default_factory=dict)
    summary: dict[str, Any] = field(default_factory=dict)


# -- the header and body lines both formats share --------------------------------------

Header = dict[str, tuple[int, list[str]]]


def read_header(lines: list[str], program: str, fields: tuple[str, ...], marker: str,
                what: str) -> tuple[Header, int]:
    """The fields before the line `marker` (alone on its line), as {key: (line, values)},
    and the 1-based number of the marker line; `what` names what follows the marker."""
    header: Header = {}
    position = 0
    while position < len(lines):
        parts = lines[position].split()
        position += 1
        if not parts:
            continue
        if parts == [marker]:
            return header, position
        key = parts[0]
        if key not in fields:
            raise ModelFileError(f"unknown {program} header field {key!r} (known: "
                                 f"{', '.join(fields)}, then {marker})", position)
        if key in header:
            raise ModelFileError(f"{key} is given twice", position)
        header[key] = (position, parts[1:])
    raise ModelFileError(f"{program} model file has no '{marker}' line (the {what} follow "
                         "it)", len(lines) or None)


def one_value(header: Header, key: str, program: str, marker_line: int) -> tuple[int, str]:
    """(line, value) of a field that takes exactly one value."""
    if key not in header:
        raise ModelFileError(f"{program} header lacks {key}", marker_line)
    line, values = header[key]
    if len(values) != 1:
        raise ModelFileError(f"{key} takes one value, has {len(values)}", line)
    return line, values[0]


def model_kind(one: Callable[[str], tuple[int, str]], key: str, served: Container[str],
               not_yet: Container[str], not_yet_why: str) -> str:
    """The value of the field that names the model's type: one Hinge serves, or
    NotServable (a known type not served yet, `not_yet_why` says so) or ModelFileError."""
    line, kind = one(key)
    if kind in not_yet:
        raise NotServable(f"{key} {kind} {not_yet_why}", line)
    if kind not in served:
        raise ModelFileError(f"unknown {key} {kind!r}", line)
    return kind


def body_lines(lines: list[str], marker_line: int) -> Iterator[tuple[int, list[str]]]:
    """(1-based line number, fields) of every non-blank line after the marker line."""
    for number in range(marker_line + 1, len(lines) + 1):
        parts = lines[number - 1].split()
        if parts:
            yield number, parts


# -- numbers -----------------------------------------------------------------------------

def parse_number(text: str, what: str, line: int, node: str | None = None) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
        where = f" in {node!r}" if node is not None and node != text else ""
        raise ModelFileError(f"{what} {text!r}{where} is not a number", line) from None
    if not math.isfinite(value):
        raise ModelFileError(f"{what} {text!r} is not finite", line)
    return value


def parse_integer(text: str, what: str, line: int, low: int | None = None,
                  node: str | None = None) -> int:
    try:
        value = int(text)
    except ValueError:
        where = f" in {node!r}" if node is not None and node != text else ""
        raise ModelFileError(f"{what} {text!r}{where} is not an integer", line) from None
    if low is not None and value < low:
        raise ModelFileError(f"{what} {value} must be >= {low}", line)
    return value
