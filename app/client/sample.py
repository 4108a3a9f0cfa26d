"""`hinge sample`: a small svmlight dataset that a fresh install can make, for the README's
walk-through and a first try, with nothing downloaded.

The data look like a9a (LIBSVM's Adult census set): categorical attributes coded one-hot,
so every stored value is 1 and each row has one feature per attribute present, and a label
from a noisy linear rule over those features. `binary`: labels -1/+1, under a third +1 (a9a: 24%).
`multiclass`: labels 1, 2, 3. `regression`: the rule's score itself (with its noise) as a
real-valued target, 4 significant digits. The attributes, their value frequencies and the rule are
fixed; `seed` draws the rows, so samples of different seeds are a training set and a test
set of the same problem. Same arguments, same bytes.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

Kind = Literal["binary", "multiclass", "regression"]
KINDS: tuple[Kind, ...] = ("binary", "multiclass", "regression")
DEFAULT_ROWS = 4000

_STRUCTURE_SEED = 20231  # the attributes, their frequencies and the labelling rule
_ATTRIBUTES = 14  # a9a: 14 attributes, 123 indicator features
_MISSING = 0.01  # chance that an attribute is absent from a row
_LABEL_NOISE = 0.08


def sample(kind: Kind = "binary", rows: int = DEFAULT_ROWS, seed: int = 0) -> str:
    """The svmlight text of `rows` rows (1-based feature indices, sorted within a row)."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {', '.join(KINDS)}, not {kind!r}")
    if rows < 1:
        raise ValueError("rows must be at least 1")
    structure = np.random.default_rng(_STRUCTURE_SEED)
    sizes = structure.integers(2, 17, size=_ATTRIBUTES)
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    frequencies = [structure.dirichlet(np.full(int(size), 0.8)) for size in sizes]
    n_outputs = 1 if kind == "binary" else 3
    teacher = structure.normal(size=(int(offsets[-1]), n_outputs))

    rng = np.random.default_rng([seed, KINDS.index(kind) + 1])
    chosen = np.stack([offsets[g] + rng.choice(int(size), size=rows, p=frequencies[g])
                       for g, size in enumerate(sizes)], axis=1)  # rows x attributes
    present = rng.random(chosen.shape) >= _MISSING
    scores = (teacher[chosen] * present[:, :, None]).sum(axis=1)  # rows x outputs
    scores += 0.5 * rng.normal(size=scores.shape)
    noisy = rng.random(rows) < _LABEL_NOISE
    if kind == "regression":
        targets = [f"{v:.4g}" for v in scores[:, 0]]
        return "".join(f"{targets[i]} " + " ".join(f"{j + 1}:1" for j in chosen[i, present[i]])
                       + "\n" for i in range(rows))
    if kind == "binary":
        labels = np.where(scores[:, 0] > _BINARY_THRESHOLD, 1, -1)
        labels[noisy] = -labels[noisy]
        names = {1: "+1", -1: "-1"}
    else:
        labels = np.argmax(scores, axis=1) + 1
        labels[noisy] = rng.integers(1, 4, size=int(noisy.sum()))
        names = {1: "1", 2: "2", 3: "3"}
    lines = []
    for i in range(rows):
        features = " ".join(f"{j + 1}:1" for j in chosen[i, present[i]])
        lines.append(f"{names[int(labels[i])]} {features}")
    return "\n".join(lines) + "\n"


# The rule's score above which a row is +1: the 75th percentile of the score over 40,000
# rows; with the label noise, about 29% of the rows are +1 (a9a: 24%).
_BINARY_THRESHOLD = 0.25
