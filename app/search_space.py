"""The points of a search: a space of parameter values, expanded as a grid, or a seeded
random draw of the grid's points. Pure Python: nothing is expanded before its size is
known, so a huge space is refused (413) without building it."""

from __future__ import annotations

import math
import random
from typing import Any

from app.search_schemas import Log2Range, SpaceDimension, Strategy

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
    seed (random; all of them when n >= the grid's size), in grid order."""
    if strategy.type != "random" or strategy.n is None or strategy.n >= size:
        return list(range(size))
    return sorted(random.Random(strategy.seed).sample(range(size), strategy.n))


def points_count(size: int, strategy: Strategy) -> int:
    if strategy.type == "random" and strategy.n is not None:
        return min(size, strategy.n)
    return size
