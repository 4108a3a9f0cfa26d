"""A slow, obviously-correct reference parser for svmlight text (tests only).

It implements the rules documented in `solvers.svmlight` line by line with regular
expressions and Python's float(), and reports the first bad line the same way: the tests
compare its arrays and its error line numbers with the compiled parser.
"""

from __future__ import annotations

import math
import re

import numpy as np

from solvers.svmlight import ParseLimits, SvmlightError

NUMBER = re.compile(rb"[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?")
NONFINITE = re.compile(rb"[+-]?(nan|inf|infinity)", re.IGNORECASE)
INTEGER = re.compile(rb"[+-]?[0-9]+")
SEPARATORS = re.compile(rb"[ \t]+")


def _number(token: bytes, line: int, what: str) -> float:
    if not NUMBER.fullmatch(token):
        if NONFINITE.fullmatch(token):
            raise SvmlightError(line, f"{what} is NaN or infinite")
        raise SvmlightError(line, f"invalid {what}")
    value = float(token)
    if not math.isfinite(value):
        raise SvmlightError(line, f"{what} is NaN or infinite")
    return value


def naive_parse(text: bytes, limits: ParseLimits | None = None):
    """Return (data, indices, indptr, y, n_features) or raise SvmlightError."""
    limits = limits or ParseLimits()
    data: list[float] = []
    indices: list[int] = []
    indptr = [0]
    labels: list[float] = []
    classes: set[float] = set()
    n_features = 0
    lines = text.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()  # the text ended with a newline
    for number, raw in enumerate(lines, start=1):
        if len(raw) > limits.max_line_bytes:
            raise SvmlightError(number, "line longer than max_line_bytes")
        if b"\0" in raw:
            raise SvmlightError(number, "NUL byte")
        content = raw.split(b"#", 1)[0]
        if content.endswith(b"\r") and b"#" not in raw:
            content = content[:-1]
        if b"\r" in content:
            raise SvmlightError(number, "carriage return")
        tokens = [t for t in SEPARATORS.split(content) if t]
        if not tokens:
            continue
        if b":" in tokens[0]:
            raise SvmlightError(number, "missing label")
        label = _number(tokens[0], number, "label")
        rest = tokens[1:]
        if rest and rest[0].startswith(b"qid:"):
            if not INTEGER.fullmatch(rest[0][4:]):
                raise SvmlightError(number, "invalid qid")
            rest = rest[1:]
        previous = 0
        for token in rest:
            if b":" not in token:
                raise SvmlightError(number, "invalid feature")
            index_text, value_text = token.split(b":", 1)
            if not index_text:
                raise SvmlightError(number, "empty index")
            if not index_text.isdigit():  # bytes.isdigit: ASCII 0-9 only
                if index_text.startswith(b"-") and index_text[1:].isdigit():
                    raise SvmlightError(number, "negative index")
                raise SvmlightError(number, "invalid feature")
            digits = index_text.lstrip(b"0") or b"0"
            # int() refuses over 4300 digits; anything over 18 is over max_features anyway
            index = int(digits) if len(digits) <= 18 else limits.max_features + 1
            if index == 0:
                raise SvmlightError(number, "index 0")
            if index > limits.max_features:
                raise SvmlightError(number, "index exceeds max_features")
            if index <= previous:
                raise SvmlightError(number, "index not increasing")
            if not value_text:
                raise SvmlightError(number, "empty value")
            value = _number(value_text, number, "value")
            data.append(value)
            indices.append(index - 1)
            previous = index
            n_features = max(n_features, index)
        classes.add(label)
        if len(classes) > limits.max_classes:
            raise SvmlightError(number, "more than max_classes")
        labels.append(label)
        indptr.append(len(data))
    if not labels:
        raise SvmlightError(None, "no data rows")
    return (
        np.array(data, dtype=np.float64),
        np.array(indices, dtype=np.int32),
        np.array(indptr, dtype=np.int64),
        np.array(labels, dtype=np.float64),
        n_features,
    )
