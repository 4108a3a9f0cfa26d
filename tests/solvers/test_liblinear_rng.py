"""scikit-learn's LIBLINEAR generator (solvers/_kernel_helpers.py): MT19937 against numpy's
legacy RandomState (the same init_genrand and twister), bounded_rand_int against a
transcription of sklearn/svm/src/newrand/newrand.h, the sweep shuffle against
linear.cpp's loop, and dcd's `sweeps` parameter (the default path keeps Hinge's
generator)."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import make_classification

from solvers._kernel_helpers import (
    MT_WORDS,
    bounded_rand_int,
    liblinear_shuffle,
    mt_next,
    mt_state,
    shuffle_prefix,
    shuffle_sweep,
)
from solvers.backbone import rng_of, seed_state
from solvers.params import ParamError, validate_params
from solvers.train import fit

SEEDS = (0, 1, 42, 1608637542, 2**31 - 2, 2**32 - 1)


class _NewRand:
    """newrand.h in Python on numpy's raw 32-bit MT19937 outputs (the reference)."""

    def __init__(self, seed: int) -> None:
        self.twister = np.random.RandomState(seed & 0xFFFFFFFF)

    def raw(self) -> int:
        return int(self.twister.randint(0, 2**32, dtype=np.uint64))

    def __call__(self, bound: int) -> int:
        m = self.raw() * bound
        low = m & 0xFFFFFFFF
        if low < bound:
            t = (-bound) & 0xFFFFFFFF
            if t >= bound:
                t -= bound
                if t >= bound:
                    t %= bound
            while low < t:
                m = self.raw() * bound
                low = m & 0xFFFFFFFF
        return m >> 32


@pytest.mark.parametrize("seed", SEEDS)
def test_mt_next_gives_numpy_s_raw_outputs_across_several_twists(seed: int) -> None:
    state = mt_state(seed)
    assert state.dtype == np.uint64 and state.shape == (MT_WORDS + 1,)
    expected = np.random.RandomState(seed).randint(0, 2**32, size=3 * MT_WORDS + 5,
                                                   dtype=np.uint64)
    got = np.array([mt_next(state) for _ in range(expected.shape[0])], dtype=np.uint64)
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("seed", SEEDS)
def test_bounded_rand_int_is_newrand_h_s(seed: int) -> None:
    # bounds near 2**32 reject often; 1 still consumes an output
    bounds = [1, 2, 3, 7, 40, 997, 65537, 2**31 - 1, 2**31 + 1, 3 * 2**30, 2**32 - 1] * 40
    state, reference = mt_state(seed), _NewRand(seed)
    assert [int(bounded_rand_int(state, b)) for b in bounds] == [reference(b) for b in bounds]
    assert int(mt_next(state)) == reference.raw()  # the same number of outputs consumed


def test_platt_s_generator_is_the_same_one() -> None:
    from hinge.sklearn._platt import _BoundedRand

    rand, reference = _BoundedRand(42), _NewRand(42)
    draws = [rand(n) for n in range(200, 0, -1)]
    assert draws == [reference(n) for n in range(200, 0, -1)]
    rand.reseed()
    assert rand(200) == draws[0]


@pytest.mark.parametrize("size", [0, 1, 2, 5, 40, 1000])
def test_liblinear_shuffle_is_linear_cpp_s_loop(size: int) -> None:
    index, state, reference = np.arange(size + 3, dtype=np.int64), mt_state(7), _NewRand(7)
    expected = list(range(size + 3))
    for i in range(size):  # for (i=0; i<active_size; i++) swap(index[i], index[j])
        j = i + reference(size - i)
        expected[i], expected[j] = expected[j], expected[i]
    liblinear_shuffle(index, size, state)
    assert index.tolist() == expected  # the tail past size untouched
    assert int(mt_next(state)) == reference.raw()


def test_shuffle_sweep_keeps_hinge_s_generator_on_a_one_slot_state() -> None:
    rng_a = np.array([seed_state(3)], dtype=np.uint64)
    rng_b = rng_a.copy()
    a, b = np.arange(50, dtype=np.int64), np.arange(50, dtype=np.int64)
    shuffle_sweep(a, 50, rng_a)
    shuffle_prefix(b, 50, rng_b)
    np.testing.assert_array_equal(a, b)
    assert rng_a[0] == rng_b[0]
    c, state = np.arange(50, dtype=np.int64), mt_state(3)
    shuffle_sweep(c, 50, state)
    d, other = np.arange(50, dtype=np.int64), mt_state(3)
    liblinear_shuffle(d, 50, other)
    np.testing.assert_array_equal(c, d)


def test_rng_of_seeds_or_shares_the_twister() -> None:
    assert rng_of({"seed": 5}).shape == (1,)
    assert rng_of({"seed": 5, "sweeps": "hinge"})[0] == seed_state(5)
    np.testing.assert_array_equal(rng_of({"seed": 5, "sweeps": "sklearn"}), mt_state(5))
    shared = mt_state(9)
    assert rng_of({"seed": 5, "sweeps": "sklearn", "rng_state": shared}) is shared


def test_sweeps_defaults_to_hinge_and_takes_only_its_choices() -> None:
    assert validate_params("dcd", {})["sweeps"] == "hinge"
    assert validate_params("dcd", {"sweeps": "sklearn"})["sweeps"] == "sklearn"
    with pytest.raises(ParamError):
        validate_params("dcd", {"sweeps": "liblinear"})


def test_the_default_is_the_hinge_sweeps_bit_for_bit() -> None:
    X, y = make_classification(n_samples=400, n_features=8, n_classes=3, n_informative=4,
                               random_state=0)
    plain = fit(X, y, solver="dcd", loss="l1", seed=11)
    named = fit(X, y, solver="dcd", loss="l1", seed=11, sweeps="hinge")
    other = fit(X, y, solver="dcd", loss="l1", seed=11, sweeps="sklearn")
    np.testing.assert_array_equal(plain.model.coef, named.model.coef)
    assert plain.iterations == named.iterations
    assert not np.array_equal(plain.model.coef, other.model.coef)
