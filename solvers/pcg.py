"""The step of tron's preconditioned conjugate gradient (newton.cpp's), shared by the
drivers that do the O(d) vector work of CG themselves, one H d at a time: the Dask
engine (solvers/distributed.py) and streaming tron over row shards
(solvers/streaming_tron.py). Single-host tron runs the same step compiled
(solvers/_tron_kernels.py)."""

from __future__ import annotations

import numpy as np


def cg_step(s: np.ndarray, r: np.ndarray, d: np.ndarray, hd: np.ndarray, dhd: float,
            ztr: float, inverse: np.ndarray) -> tuple[np.ndarray, float, float]:
    """One CG step along d with H d = `hd` and d'Hd = `dhd` > 0: s += a d and r -= a H d
    in place (a = z'r / d'Hd); returns z = M^-1 r (`inverse`: 1 / the preconditioner),
    the new z'r and the quadratic model's change -a z'r / 2 (for the stop rule)."""
    alpha = ztr / dhd
    s += alpha * d
    r -= alpha * hd
    z = r * inverse
    return z, float(z @ r), -0.5 * alpha * ztr
