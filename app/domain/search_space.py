"""The points of a search: a space of parameter values, expanded as a grid, or a seeded
random draw of the grid's points; and the rounds of successive halving. Pure Python:
nothing is expanded before its size is known, so a huge space is refused (413) without
building it.

Successive halving (`halving_schedule`), after scikit-learn's HalvingGridSearchCV with
resource = rows: round r evaluates its candidates by cross-validation on a stratified,
seeded subsample of min_resources x factor^r rows, and the best ceil(candidates /
factor) go on to round r + 1; the last round uses every row. Rounds = min(1 +
floor(log_factor(candidates)) (until a few candidates are left), 1 +
floor(log_factor(rows / min_resources)) (until the rows run out)). min_resources:
'smallest' = 2 x classes x max(folds, 2); 'exhaust' (default) = rows //
factor^(rounds needed - 1), so that the last round's budget reaches every row; or a
number of rows; never below 'smallest', never above the rows. A subsample takes from
each class its share of the rows (largest remainders), and at least min(its rows,
max(folds, 2)) so that every fold sees every class (`stratified_counts`).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Any

from app.domain.search_schemas import Log2Range, SpaceDimension, Strategy

MAX_VALUES = 1000  # per dimension
MAX_EXPONENT = 1000  # 2**1000 is still a float


class SpaceError(ValueError):
    def __init__(self, message: str, field: str) -> None:
        super().__init__(message)
        self.field = field


def dimension_values(name: str, dimension: SpaceDimension) -> list[Any]:
    """The values of one dimension, in the order given."""
    if isinstance(dimension, Log2Range):
        start, stop, step = dimension.log2
        if not all(math.isfinite(v) and abs(v) <= MAX_EXPONENT for v in (start, stop, step)):
            raise SpaceError(f"space.{name}: log2 [start, stop, step] must be finite exponents "
                             f"within +-{MAX_EXPONENT}, got {list(dimension.log2)}",
                             f"space.{name}")
        if step == 0 or (stop - start) * step < 0:
            raise SpaceError(f"space.{name}: log2 [start, stop, step] needs a step that goes "
                             f"from start toward stop, got {list(dimension.log2)}",
                             f"space.{name}")
        count = math.floor((stop - start) / step + 1e-9) + 1
        if count > MAX_VALUES:
            raise SpaceError(f"space.{name}: {count} values, more than {MAX_VALUES}",
                             f"space.{name}")
        return [2.0 ** (start + k * step) for k in range(count)]
    if not dimension:
        raise SpaceError(f"space.{name}: an empty list of values", f"space.{name}")
    if len(dimension) > MAX_VALUES:
        raise SpaceError(f"space.{name}: {len(dimension)} values, more than {MAX_VALUES}",
                         f"space.{name}")
    if len({repr(v) for v in dimension}) != len(dimension):
        raise SpaceError(f"space.{name}: values repeat", f"space.{name}")
    return list(dimension)


def grid_size(values: dict[str, list[Any]]) -> int:
    return math.prod(len(v) for v in values.values())


def point_at(values: dict[str, list[Any]], index: int) -> dict[str, Any]:
    """The grid's index-th point (the last dimension varies fastest)."""
    point: dict[str, Any] = {}
    for name in reversed(list(values)):
        index, position = divmod(index, len(values[name]))
        point[name] = values[name][position]
    return {name: point[name] for name in values}


def drawn_indices(size: int, strategy: Strategy) -> list[int]:
    """Which grid points the strategy takes: all (grid), or n distinct ones drawn with the
    seed (random, and halving's candidates when n is given; all of them when n >= the
    grid's size), in grid order."""
    if strategy.type == "grid" or strategy.n is None or strategy.n >= size:
        return list(range(size))
    return sorted(random.Random(strategy.seed).sample(range(size), strategy.n))


def points_count(size: int, strategy: Strategy) -> int:
    if strategy.type != "grid" and strategy.n is not None:
        return min(size, strategy.n)
    return size


@dataclass(frozen=True)
class Round:
    round: int
    candidates: int
    n_rows: int  # the subsample's actual size (sum of stratified_counts)


def smallest_rows(n_classes: int, folds: int) -> int:
    return 2 * n_classes * max(folds, 2)


def stratified_counts(class_counts: list[int], n_rows: int, folds: int) -> list[int]:
    """Rows to take from each class (in class order) for a subsample of about n_rows:
    shares proportional to the class sizes (largest remainders, ties to the earlier
    class), each at least min(class size, max(folds, 2)) and at most the class size."""
    total = sum(class_counts)
    if n_rows >= total:
        return list(class_counts)
    exact = [n_rows * c / total for c in class_counts]
    counts = [math.floor(e) for e in exact]
    order = sorted(range(len(exact)), key=lambda k: (-(exact[k] - counts[k]), k))
    for k in order[:n_rows - sum(counts)]:
        counts[k] += 1
    floor = max(folds, 2)
    return [min(c, max(k, floor)) for k, c in zip(counts, class_counts, strict=True)]


def _log(value: float, base: float) -> int:
    """floor(log_base(value)) for value >= 1, robust to rounding (3^5 gives 5)."""
    power = max(0, math.floor(math.log(max(value, 1.0)) / math.log(base)))
    while base ** (power + 1) <= value * (1 + 1e-12):
        power += 1
    while power > 0 and base ** power > value * (1 + 1e-12):
        power -= 1
    return power


def halving_schedule(candidates: int, class_counts: list[int], folds: int, factor: float,
                     min_resources: str | int) -> tuple[int, list[Round]]:
    """(min_resources in rows, the rounds) of successive halving (module docstring)."""
    rows = sum(class_counts)
    smallest = min(smallest_rows(len(class_counts), folds), rows)
    needed = 1 + _log(candidates, factor)
    if min_resources == "exhaust":
        first = int(rows / factor ** (needed - 1))
    elif min_resources == "smallest":
        first = smallest
    else:
        first = int(min_resources)
    first = min(max(first, smallest), rows)
    count = max(1, min(needed, 1 + _log(rows / first, factor)))
    rounds = []
    for r in range(count):
        target = rows if r == count - 1 else int(first * factor ** r)
        rounds.append(Round(r, candidates,
                            sum(stratified_counts(class_counts, target, folds))))
        candidates = math.ceil(candidates / factor)
    return first, rounds
