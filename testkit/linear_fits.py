"""The linear fits whose certified suboptimality the tests and the benchmark measure
(issue 12): label -> (keyword arguments of solvers.fit, (loss, bias) of the problem the
fit solves, as testkit.certified names them)."""

from __future__ import annotations

from typing import Any

LINEAR_FITS: dict[str, tuple[dict[str, Any], tuple[str, str | None]]] = {
    "auto l1": ({"solver": "auto", "loss": "l1"}, ("l1", "augment")),
    "auto l2": ({"solver": "auto", "loss": "l2"}, ("l2", "augment")),
    "dcd l1": ({"solver": "dcd", "loss": "l1"}, ("l1", "augment")),
    "dcd l2": ({"solver": "dcd", "loss": "l2"}, ("l2", "augment")),
    "acf l1": ({"solver": "acf", "loss": "l1"}, ("l1", "augment")),
    "acf l2": ({"solver": "acf", "loss": "l2"}, ("l2", "augment")),
    "ocas": ({"solver": "ocas"}, ("l1", "augment")),
    "tron": ({"solver": "tron"}, ("l2", "augment")),
    "newton": ({"solver": "newton"}, ("l2", "augment")),
    "alm p=1": ({"solver": "alm", "p": 1.0}, ("l1", "free")),
    "alm p=2": ({"solver": "alm"}, ("l2", "free")),
    "pegasos": ({"solver": "pegasos"}, ("l1", None)),
}
