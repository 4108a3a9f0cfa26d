"""Runs scripts in one interpreter, each as `python script.py` would (its own __main__
namespace, its own stdout), so that the gallery test pays the interpreter's start and
the imports once per variant, not once per script.

stdin: a JSON list of {"name", "path", "source"}; stdout: a JSON object
{name: {"stdout", "error", "fits"}}. "error" is the traceback of an exception the script
raised (None when it ran to the end or called sys.exit(0)); "convergence_warnings" the
messages of the ConvergenceWarnings it issued. "fits" lists, for every fit
of a hinge.sklearn estimator the script made, the estimator's class, `tol`, `solver_`,
`converged_` and `relative_gap_` (hinge.sklearn._service.record, which every fit calls,
observed: the call goes on to the real function).
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
import traceback
import warnings
from typing import Any


def _observe_hinge_fits(fits: list[dict[str, Any]]) -> None:
    try:
        from hinge.sklearn import _service
    except ImportError:  # scikit-learn's variant may run without Hinge importable
        return
    record = _service.record

    def observed(estimator: Any, trained: Any) -> None:
        record(estimator, trained)
        fits.append({"estimator": type(estimator).__name__, "tol": float(estimator.tol),
                     "solver": estimator.solver_, "converged": bool(estimator.converged_),
                     "relative_gap": estimator.relative_gap_})

    _service.record = observed


def run(scripts: list[dict[str, str]]) -> dict[str, dict[str, Any]]:
    results: dict[str, dict[str, Any]] = {}
    fits: list[dict[str, Any]] = []
    _observe_hinge_fits(fits)
    for script in scripts:
        out, error = io.StringIO(), None
        fits.clear()
        namespace = {"__name__": "__main__", "__file__": script["path"]}
        with warnings.catch_warnings(record=True) as caught, contextlib.redirect_stdout(out):
            warnings.simplefilter("always")
            try:
                exec(compile(script["source"], script["path"], "exec"), namespace)
            except SystemExit as stop:
                if stop.code not in (None, 0):
                    error = f"SystemExit({stop.code!r})"
            except BaseException:  # reported to the test, which fails on it
                error = traceback.format_exc()
        if "matplotlib.pyplot" in sys.modules:
            sys.modules["matplotlib.pyplot"].close("all")
        convergence = [str(w.message) for w in caught
                       if w.category.__name__ == "ConvergenceWarning"]
        results[script["name"]] = {"stdout": out.getvalue(), "error": error,
                                   "fits": list(fits), "convergence_warnings": convergence}
    return results


if __name__ == "__main__":
    json.dump(run(json.load(sys.stdin)), sys.stdout)
