"""The svmlight parser handing its rows over in shards (SvmlightParser's `on_shard`)."""

from __future__ import annotations

import io

import numpy as np
import pytest
import scipy.sparse as sp

from solvers.svmlight import SvmlightError, SvmlightParser, dump_svmlight, parse_stream


def _text(rows: int = 3000, features: int = 400, seed: int = 7) -> tuple[bytes, sp.csr_matrix,
                                                                          np.ndarray]:
    rng = np.random.default_rng(seed)
    X = sp.random(rows, features, density=0.03, format="csr", random_state=rng)
    X.data = np.round(X.data * 100) / 8
    y = rng.choice([-1.0, 1.0], rows)
    buffer = io.BytesIO()
    dump_svmlight(X, y, buffer)
    return buffer.getvalue(), X, y


def _parse_in_shards(text: bytes, shard_bytes: int, chunk: int = 7001
                     ) -> tuple[list[dict[str, np.ndarray]], object]:
    shards: list[dict[str, np.ndarray]] = []
    parser = SvmlightParser(shard_bytes=shard_bytes,
                            on_shard=lambda a: shards.append({k: v.copy() for k, v in a.items()}))
    for start in range(0, len(text), chunk):
        parser.feed(text[start:start + chunk])
    return shards, parser.finish()


def test_shards_concatenate_to_the_whole_parse() -> None:
    text, _X, _y = _text()
    whole = parse_stream([text])
    shards, parsed = _parse_in_shards(text, shard_bytes=16 << 10)
    assert len(shards) > 3 and parsed.shards == len(shards)  # type: ignore[attr-defined]
    assert parsed.nnz == whole.nnz and parsed.n_samples == whole.n_samples  # type: ignore[attr-defined]
    assert parsed.sha256 == whole.sha256 and parsed.n_features == whole.n_features  # type: ignore[attr-defined]
    for shard in shards:
        assert shard["indptr"][0] == 0 and shard["indptr"][-1] == len(shard["data"])
        assert len(shard["y"]) == len(shard["indptr"]) - 1
        # bounded: one shard of arrays plus at most one parse pass's rows
        assert shard["data"].nbytes + shard["indices"].nbytes <= 3 * (16 << 10)
    blocks = [sp.csr_matrix((s["data"], s["indices"], s["indptr"]),
                            shape=(len(s["y"]), whole.n_features)) for s in shards]
    stacked = sp.vstack(blocks, format="csr")
    assert (stacked != whole.to_csr()).nnz == 0
    np.testing.assert_array_equal(np.concatenate([s["y"] for s in shards]), whole.y)
    assert len(parsed.y) == 0 and parsed.data.nbytes == 0  # type: ignore[attr-defined]


def test_a_set_smaller_than_a_shard_is_returned_whole() -> None:
    text, _X, _y = _text(rows=50)
    shards, parsed = _parse_in_shards(text, shard_bytes=64 << 20)
    assert shards == [] and parsed.shards == 0  # type: ignore[attr-defined]
    assert parsed.nnz == len(parsed.data) > 0  # type: ignore[attr-defined]


def test_an_error_after_some_shards_names_its_line() -> None:
    text, _X, _y = _text()
    lines = text.split(b"\n")
    lines[2500] = b"1 3:x"
    shards, bad = [], b"\n".join(lines)
    parser = SvmlightParser(shard_bytes=16 << 10, on_shard=lambda a: shards.append(1))
    with pytest.raises(SvmlightError) as caught:
        parser.feed(bad)
        parser.finish()
    assert caught.value.line == 2501 and shards
