"""The row-shard layout (solvers/shards.py): a split, written and read back, is the set."""

import numpy as np
import pytest
import scipy.sparse as sp

from solvers.shards import MemoryShards, concatenate, split_rows, write_npz_shards


def _set(rows=53, features=17, seed=3):
    rng = np.random.default_rng(seed)
    X = sp.random(rows, features, density=0.2, format="csr", random_state=rng)
    return X, rng.choice([-1.0, 1.0], rows), rng.uniform(0.5, 2.0, rows)


def test_split_then_concatenate_is_the_set(tmp_path):
    X, y, w = _set()
    shards = split_rows(X, y, w, rows_per_shard=10)
    assert [s.rows for s in shards] == [10, 10, 10, 10, 10, 3]
    assert sum(s.nnz for s in shards) == X.nnz
    for source in (MemoryShards(shards, 17), write_npz_shards(tmp_path, shards, 17)):
        whole = concatenate(source)
        assert (whole.X != X).nnz == 0
        np.testing.assert_array_equal(whole.y, y)
        np.testing.assert_array_equal(whole.w, w)
        assert whole.X.indices.dtype == np.int32
        assert source.info(5).rows == 3


def test_float32_values_stay_float32(tmp_path):
    X, y, _ = _set()
    X32 = X.astype(np.float32)
    source = write_npz_shards(tmp_path, split_rows(X32, y, None, 20), 17)
    shard = source.load(0)
    assert shard.X.dtype == np.float32 and shard.w is None
    source.prefetch(1)
    source.release(1)


def test_a_shard_needs_a_row():
    X, y, w = _set()
    with pytest.raises(ValueError, match="at least 1"):
        split_rows(X, y, w, 0)
