"""A solver parameter's schema (`Param`: name, type, default, range, description), its
coercion of a given value, and `ParamError`, the error of a spec a solver does not accept.
Pure Python (no NumPy): the API validates specs with it."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

Kind = Literal["float", "int", "choice", "class_weight", "str"]


class ParamError(ValueError):
    """A training spec the solver does not accept; `field` names the offending parameter."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class Param:
    name: str
    kind: Kind
    default: Any
    description: str
    minimum: float | None = None
    exclusive_minimum: bool = False
    maximum: float | None = None
    choices: tuple[Any, ...] | None = None
    nullable: bool = False
    # Whether `auto` passes the fit's value of this parameter on when it picks this solver
    # (False: the solver's default applies under auto, the parameter only when named).
    from_auto: bool = True

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name,
            "type": self.kind,
            "default": self.default,
            "description": self.description,
            "nullable": self.nullable,
        }
        if self.minimum is not None:
            out["exclusive_minimum" if self.exclusive_minimum else "minimum"] = self.minimum
        if self.maximum is not None:
            out["maximum"] = self.maximum
        if self.choices is not None:
            out["choices"] = list(self.choices)
        return out

    def coerce(self, value: Any) -> Any:
        if value is None:
            if self.nullable:
                return None
            raise ParamError(f"{self.name} may not be null", self.name)
        if self.kind == "float":
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ParamError(f"{self.name} must be a number, got {value!r}", self.name)
            number = float(value)
            if not math.isfinite(number):
                raise ParamError(f"{self.name} must be finite, got {value!r}", self.name)
            self._check_range(number)
            return number
        if self.kind == "int":
            if isinstance(value, bool) or not isinstance(value, int):
                if isinstance(value, float) and value.is_integer():
                    value = int(value)
                else:
                    raise ParamError(f"{self.name} must be an integer, got {value!r}", self.name)
            self._check_range(value)
            return int(value)
        if self.kind == "choice":
            assert self.choices is not None
            flags = isinstance(self.choices[0], bool)  # a flag takes true/false, not 1/0
            if value not in self.choices or (flags and not isinstance(value, bool)):
                allowed = ", ".join(repr(c) for c in self.choices)
                raise ParamError(f"{self.name} must be one of {allowed}, got {value!r}", self.name)
            return self.choices[self.choices.index(value)]  # the canonical value: 0 -> 0.0
        if self.kind == "class_weight":
            return _coerce_class_weight(self.name, value)
        if not isinstance(value, str):
            raise ParamError(f"{self.name} must be a string, got {value!r}", self.name)
        return value

    def _check_range(self, number: float) -> None:
        if self.minimum is not None:
            if self.exclusive_minimum and not number > self.minimum:
                raise ParamError(f"{self.name} must be > {self.minimum}, got {number}", self.name)
            if not self.exclusive_minimum and not number >= self.minimum:
                raise ParamError(f"{self.name} must be >= {self.minimum}, got {number}", self.name)
        if self.maximum is not None and number > self.maximum:
            raise ParamError(f"{self.name} must be <= {self.maximum}, got {number}", self.name)


def _coerce_class_weight(name: str, value: Any) -> dict[str, float]:
    if not isinstance(value, Mapping):
        raise ParamError(f"{name} must be an object mapping class label to weight", name)
    weights: dict[str, float] = {}
    for label, weight in value.items():
        try:
            label_value = float(label)
        except (TypeError, ValueError):
            raise ParamError(f"{name}: {label!r} is not a class label (a number)", name) from None
        if isinstance(weight, bool) or not isinstance(weight, int | float):
            raise ParamError(f"{name}[{label}] must be a number, got {weight!r}", name)
        if not (math.isfinite(weight) and weight > 0):
            raise ParamError(f"{name}[{label}] must be a finite number > 0", name)
        weights[label_key(label_value)] = float(weight)
    return weights


def label_key(label: float) -> str:
    """Canonical text of a class label: '1', '-1', '2.5'."""
    return str(int(label)) if float(label).is_integer() else repr(float(label))
