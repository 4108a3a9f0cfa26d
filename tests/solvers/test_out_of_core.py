"""Out-of-core block minimization (solvers/out_of_core.py, solvers/blocks.py): a small set
in several shards, read in blocks, gives the in-memory model within the certified
tolerance, and its certificate holds when checked independently."""

import math

import numpy as np
import pytest

from solvers import fit
from solvers.blocks import Blocks, Reader, plan_blocks
from solvers.out_of_core import CERTIFY_EVERY, accuracy_pass, fit_blocks, next_certificate
from solvers.shards import MemoryShards, concatenate, split_rows, write_npz_shards
from testkit.certified import certify_pair
from testkit.datagen import text_like

TOL = 1e-3


@pytest.fixture(scope="module")
def data():
    return text_like(1200, 600, seed=4, nnz_per_row=30)


def _agrees_with_memory(result, memory, X):
    """Both certified within tol: primal values within tol of each other, and w within
    sqrt(2 gap) of w* each (P is 1-strongly convex), so decision values within that
    distance times the row norm (unit rows plus the bias feature B = 1)."""
    assert result.converged and memory.converged
    p, q = result.primal_objective, memory.primal_objective
    assert abs(p - q) <= TOL * max(p, q)
    gap_a = result.relative_gap * p
    gap_b = memory.relative_gap * q
    radius = math.sqrt(2 * gap_a) + math.sqrt(2 * gap_b)
    distance = np.linalg.norm(np.append(result.coef[0] - memory.coef[0],
                                        result.intercept[0] - memory.intercept[0]))
    assert distance <= radius
    values = result.decision_function(X)[:, 0] - memory.decision_function(X)[:, 0]
    assert np.max(np.abs(values)) <= radius * math.sqrt(2.0) + 1e-12


@pytest.mark.parametrize("loss", ["l1", "l2"])
def test_dcd_blocks_match_memory_and_certify(data, loss, tmp_path):
    X, y = data
    source = write_npz_shards(tmp_path, split_rows(X, y, None, 800), X.shape[1])
    result = fit_blocks(source, "dcd", max_block_bytes=150_000, loss=loss)
    plan = result.data_plan
    assert plan["mode"] == "blocks" and plan["blocks"] > len(source)  # shards cut
    assert plan["passes"] >= plan["certificate_passes"] + 1 >= 2
    assert plan["bytes_read"] >= plan["passes"] * X.data.nbytes
    memory = fit(X, y, solver="dcd", loss=loss)
    _agrees_with_memory(result, memory, X)
    # independently: the pair (w, a) has a duality gap within tol (testkit/certified.py)
    certify_pair(X, y, result.coef[0], result.intercept[0], result.dual_solutions[0],
                 loss=loss, bias="augment", bias_scale=1.0, rel_gap=TOL)


def test_logistic_blocks_match_memory_and_certify(data):
    X, y = data
    source = MemoryShards(split_rows(X, y, None, 300), X.shape[1])
    result = fit_blocks(source, "logistic_dcd", max_block_bytes=40_000)
    memory = fit(X, y, solver="logistic_dcd")
    _agrees_with_memory(result, memory, X)
    plan = result.data_plan
    assert plan["blocks"] > 1 and plan["passes"] >= plan["certificate_passes"] + 2
    assert result.per_output[0]["passes"] == plan["passes"]  # one output: all of them
    # independently: P(w) and the dual value of a, with w(a) recomputed from X
    a = result.dual_solutions[0]
    signs = np.where(y > 0, 1.0, -1.0)
    w = np.append(X.T @ (signs * a), np.sum(signs * a))
    np.testing.assert_allclose(w, np.append(result.coef[0], result.intercept[0]), atol=1e-9)
    margins = signs * (X @ w[:-1] + w[-1])
    primal = 0.5 * w @ w + np.sum(np.logaddexp(0.0, -margins))
    dual = -0.5 * w @ w - np.sum(a * np.log(a) + (1 - a) * np.log(1 - a))
    assert primal - dual <= TOL * primal
    assert abs(primal - result.primal_objective) <= 1e-9 * primal


def test_float32_values_and_multiclass(data):
    X, y = data
    labels = np.where(y > 0, 2.0, 1.0)
    labels[::3] = 3.0
    X32 = X.astype(np.float32)
    source = MemoryShards(split_rows(X32, labels, None, 400), X.shape[1])
    result = fit_blocks(source, "dcd", max_block_bytes=100_000, loss="l2")
    memory = fit(X32.astype(np.float64), labels, solver="dcd", loss="l2")
    assert result.converged and memory.converged
    assert list(result.classes) == [1.0, 2.0, 3.0]
    p, q = result.primal_objective, memory.primal_objective
    assert abs(p - q) <= TOL * max(p, q)
    accuracy, read = accuracy_pass(result, source, 100_000)
    assert accuracy == pytest.approx(np.mean(result.predict(X32) == labels))
    assert read >= X32.data.nbytes


def test_one_shard_is_cut_into_row_blocks_of_bounded_bytes(data):
    X, y = data
    source = MemoryShards(split_rows(X, y, None, X.shape[0]), X.shape[1])  # one blob
    blocks = plan_blocks(source, 30_000)
    assert len(blocks) > 4
    assert [b.first_row for b in blocks] == [b.start for b in blocks]
    assert blocks[0].start == 0 and blocks[-1].stop == X.shape[0]
    assert all(b.nbytes <= 30_000 for b in blocks)
    view = Blocks(source, 30_000)
    loaded = [view.load(k) for k in range(len(view))]
    whole = concatenate(MemoryShards(loaded, X.shape[1]))
    assert (whole.X != X).nnz == 0
    # each block holds the shard's own values and indices (SciPy's constructor would copy
    # a view of less than half of its base: the anonymous memory of a block, per block)
    shard = source.load(0)
    for block in loaded[1:]:
        assert np.shares_memory(block.X.data, shard.X.data)
        assert np.shares_memory(block.X.indices, shard.X.indices)
        assert block.X.indptr.dtype == block.X.indices.dtype and block.X.indptr[0] == 0


class _Counting(MemoryShards):
    """A source that records the row ranges released and prefetched."""

    def __init__(self, *args):
        super().__init__(*args)
        self.calls = []

    def prefetch_rows(self, index, start, stop):
        self.calls.append(("prefetch", index, start, stop))

    def release_rows(self, index, start, stop):
        self.calls.append(("release", index, start, stop))

    def release(self, index):
        self.calls.append(("release", index))


def test_reader_reads_ahead_and_releases_behind(data):
    X, y = data
    source = _Counting(split_rows(X, y, None, X.shape[0]), X.shape[1])
    blocks = Blocks(source, 30_000)
    source.calls.clear()
    reader = Reader(blocks)
    seen = []
    for block, shard in reader.one_pass():
        seen.append((block.index, shard.rows))
    reader.close()
    assert [k for k, _ in seen] == list(range(len(blocks)))
    prefetched = [c for c in source.calls if c[0] == "prefetch"]
    assert prefetched == [("prefetch", 0, b.start, b.stop) for b in blocks.blocks]
    released = [c for c in source.calls if c[0] == "release"]
    assert released[-1] == ("release", 0)  # the shard, after its last block
    assert len(released) == len(blocks)
    assert reader.bytes_read >= X.data.nbytes + X.indices.nbytes


def test_a_shard_is_released_only_after_its_last_block_of_a_pass(data):
    """In a random block order the shard's last block in the file is not the last one
    read: releasing the whole shard there dropped the pages of the block read ahead."""
    X, y = data
    source = _Counting(split_rows(X, y, None, X.shape[0]), X.shape[1])
    blocks = Blocks(source, 30_000)
    order = list(range(len(blocks)))[::-1]  # the shard's last block first
    source.calls.clear()
    reader = Reader(blocks)
    assert [block.index for block, _ in reader.one_pass(order)] == order
    reader.close()
    released = [c for c in source.calls if c[0] == "release"]
    assert released[-1] == ("release", 0)
    assert [c[2:] for c in released[:-1]] == [(blocks.blocks[k].start, blocks.blocks[k].stop)
                                              for k in order[:-1]]


def test_progress_per_block_and_cancel_within_a_block(data):
    X, y = data
    source = MemoryShards(split_rows(X, y, None, 400), X.shape[1])
    events = []

    def progress(event):
        events.append(event)
        return len(events) >= 3  # cancel at the third event

    result = fit_blocks(source, "dcd", max_block_bytes=40_000, progress=progress,
                        progress_interval=0.0, loss="l1")
    assert result.exit_reason == "cancelled" and not result.converged
    assert len(events) == 3
    assert all({"block", "blocks", "passes", "bytes_read"} <= set(e) for e in events)
    assert events[0]["block"] < events[0]["blocks"]  # between the sweeps of a block
    assert result.data_plan["certificate_passes"] == 0


def test_max_seconds_is_reported_honestly(data):
    X, y = data
    source = MemoryShards(split_rows(X, y, None, 400), X.shape[1])
    result = fit_blocks(source, "dcd", max_block_bytes=40_000, loss="l1", max_seconds=1e-4)
    assert result.exit_reason == "max_seconds"
    assert result.data_plan["certificate_passes"] == 1  # the certificate still runs
    assert result.converged == (result.relative_gap <= TOL)


def test_unsupported_solver_is_refused(data):
    X, y = data
    with pytest.raises(ValueError, match="no out-of-core path"):
        fit_blocks(MemoryShards(split_rows(X, y, None, 400), X.shape[1]), "smo",
                   max_block_bytes=40_000)


@pytest.mark.parametrize("loss", ["l2", "logistic"])
def test_tron_streaming_passes_match_memory(data, loss):
    X, y = data
    source = MemoryShards(split_rows(X, y, None, 300), X.shape[1])
    result = fit_blocks(source, "tron", max_block_bytes=40_000, loss=loss)
    memory = fit(X, y, solver="tron", loss=loss)
    _agrees_with_memory(result, memory, X)
    plan, details = result.data_plan, result.per_output[0]
    # a pass for each function/gradient, each CG step and each direction, and the
    # certificate's
    assert plan["passes"] >= details["newton_steps"] * 2 + details["cg_iterations"] + 1
    if loss == "l2":  # independently: the dual point from the slacks at w
        margins = np.where(y > 0, 1.0, -1.0) * result.decision_function(X)[:, 0]
        certify_pair(X, y, result.coef[0], result.intercept[0],
                     2.0 * np.maximum(0.0, 1.0 - margins), loss="l2", bias="augment",
                     bias_scale=1.0, rel_gap=TOL)


def test_l1_dcd_certifies_in_few_passes_with_the_selective_cache():
    """Selective block minimization (solvers/selective.py): the L1 loss, whose block
    minimization alone stalls near the optimum on the regularised bias (666 passes on
    this set before the certificate held), certifies in as many passes as the in-memory
    fit takes sweeps, at the in-memory objective."""
    X, y = text_like(3000, 3000, seed=3, nnz_per_row=30)
    nbytes = X.data.nbytes + X.indices.nbytes + X.indptr.nbytes + y.nbytes
    source = MemoryShards(split_rows(X, y, None, X.shape[0]), X.shape[1])
    result = fit_blocks(source, "dcd", max_block_bytes=nbytes // 6, loss="l1")
    plan = result.data_plan
    assert plan["cache_bytes"] > 0 and plan["blocks"] >= 6
    assert result.converged and result.exit_reason == "converged"
    # the block's rows and the cached ones interleaved in each sweep: 14 passes (one after
    # the other, 91; without the cache 666: the bias stalls block minimization)
    assert plan["passes"] <= 30
    memory = fit(X, y, solver="dcd", loss="l1")
    p, q = result.primal_objective, memory.primal_objective
    assert abs(p - q) <= TOL * q
    certify_pair(X, y, result.coef[0], result.intercept[0], result.dual_solutions[0],
                 loss="l1", bias="augment", bias_scale=1.0, rel_gap=TOL)


def test_the_cache_is_no_larger_than_a_block_when_shards_are_smaller_than_the_plan():
    """A dataset stored in shards smaller than the budget's blocks is read a shard a block;
    the cache, swept with every block, holds at most a block's bytes (not half the
    budget), and the fit certifies in as few passes."""
    X, y = text_like(3000, 3000, seed=3, nnz_per_row=30)
    nbytes = X.data.nbytes + X.indices.nbytes + X.indptr.nbytes + y.nbytes
    source = MemoryShards(split_rows(X, y, None, 250), X.shape[1])  # 12 small shards
    result = fit_blocks(source, "dcd", max_block_bytes=nbytes // 2, loss="l1")
    plan = result.data_plan
    assert plan["blocks"] == len(source) == 12
    largest = max(source.info(i).nbytes for i in range(len(source)))
    assert 0 < plan["cache_bytes"] <= largest < nbytes // 4
    assert result.converged and plan["passes"] <= 30


def test_a_blocks_sweeps_stop_at_inner_fraction_of_its_first_violation(data):
    """inner_fraction 1: every block stops after its first sweep, as with one sweep a
    block (the same draws, so the same model)."""
    X, y = data
    source = MemoryShards(split_rows(X, y, None, X.shape[0]), X.shape[1])
    once = fit_blocks(source, "dcd", max_block_bytes=60_000, loss="l1", block_sweeps=1)
    stopped = fit_blocks(source, "dcd", max_block_bytes=60_000, loss="l1",
                         inner_fraction=1.0)
    assert np.array_equal(once.coef, stopped.coef)
    assert once.data_plan["passes"] == stopped.data_plan["passes"]
    assert stopped.converged
    default = fit_blocks(source, "dcd", max_block_bytes=60_000, loss="l1")
    assert not np.array_equal(default.coef, stopped.coef)  # it did take more sweeps


@pytest.mark.parametrize("loss", ["l1", "l2", "logistic"])
def test_the_certificates_threads_give_the_one_thread_figures(data, loss, monkeypatch):
    """A certificate's pass cut into row ranges on several threads sums to what one
    thread computes (to rounding): the primal, the bound and the lower bound."""
    from solvers import block_certificate, out_of_core

    X, y = data
    source = MemoryShards(split_rows(X, y, None, 300), X.shape[1])
    w = np.random.default_rng(3).normal(scale=0.1, size=X.shape[1] + 1)
    figures = []
    for threads in (1, 3):
        monkeypatch.setattr(out_of_core, "certificate_threads", lambda t=threads: t)
        run = out_of_core._Run(Reader(Blocks(source, 40_000)), None, 1)
        assert run.threads == threads
        out = out_of_core._Output(np.where(y > 0, 1.0, -1.0), np.full(y.shape[0], 1.0), 1.0,
                                  X.shape[1])
        out.w[:] = w
        try:
            figures.append(block_certificate.certify_pass(run, out, loss, -math.inf))
        finally:
            run.reader.close()
            run.close()
    one, three = figures
    assert three.source == one.source
    assert three.primal == pytest.approx(one.primal, rel=1e-12)
    assert three.lower_bound == pytest.approx(one.lower_bound, rel=1e-12)


def test_the_certificates_row_ranges_split_the_non_zeros_evenly():
    from solvers.block_certificate import row_parts

    indptr = np.array([0, 5, 10, 10, 30, 31, 40], dtype=np.int64)
    assert row_parts(indptr, 1) == [0, 6]
    cuts = row_parts(indptr, 2)
    assert cuts[0] == 0 and cuts[-1] == 6 and cuts == sorted(cuts)
    assert row_parts(np.zeros(1, dtype=np.int64), 3) == [0, 0, 0, 0]


def test_blocks_are_released_on_the_read_ahead_thread_before_the_pass_ends(data):
    """The releases (madvise, fadvise) leave the solver's thread: the read-ahead thread
    does them, each before the pass's generator is exhausted."""
    import threading

    X, y = data
    names = []

    class Named(_Counting):
        def release_rows(self, index, start, stop):
            names.append(threading.current_thread().name)
            super().release_rows(index, start, stop)

    source = Named(split_rows(X, y, None, X.shape[0]), X.shape[1])
    blocks = Blocks(source, 30_000)
    reader = Reader(blocks)
    for _ in reader.one_pass():
        pass
    assert len(names) == len(blocks) - 1  # the last block: the shard's release
    assert names and all(name.startswith("readahead") for name in names)
    assert source.calls[-1] == ("release", 0)  # done when the pass ended
    reader.close()


def test_logistic_sweeps_pairs_of_blocks_and_certifies_in_few_passes():
    """logistic_dcd out of core sweeps two blocks at a time, a new pairing each pass (the
    blocks' random order): over a fixed partition, one sweep a block, this set took 67
    passes to its certificate (11 of them certificates); in pairs 11."""
    X, y = text_like(3000, 3000, seed=3, nnz_per_row=30)
    nbytes = X.data.nbytes + X.indices.nbytes + X.indptr.nbytes + y.nbytes
    source = MemoryShards(split_rows(X, y, None, X.shape[0]), X.shape[1])
    result = fit_blocks(source, "logistic_dcd", max_block_bytes=nbytes // 10)
    plan = result.data_plan
    assert plan["blocks"] >= 20 and plan["max_block_bytes"] == nbytes // 10 // 2
    assert result.converged and result.exit_reason == "converged"
    assert plan["passes"] <= 20
    memory = fit(X, y, solver="logistic_dcd")
    assert abs(result.primal_objective - memory.primal_objective) <= TOL * memory.primal_objective


def test_reader_groups_read_a_group_ahead_and_release_each_block(data):
    X, y = data
    source = _Counting(split_rows(X, y, None, X.shape[0]), X.shape[1])
    blocks = Blocks(source, 30_000)
    assert len(blocks) % 5 != 0  # the last group is smaller
    order = list(range(len(blocks)))[::-1]
    source.calls.clear()
    reader = Reader(blocks)
    groups = [[block.index for block, _ in group] for group in reader.groups(order, 5)]
    reader.close()
    assert groups == [order[p:p + 5] for p in range(0, len(order), 5)]
    assert reader.passes == 1
    assert reader.bytes_read >= X.data.nbytes + X.indices.nbytes
    released = [c for c in source.calls if c[0] == "release"]
    assert len(released) == len(blocks) and released[-1] == ("release", 0)
    # the group after the one trained is read ahead before the trained one is released
    kinds = [(c[0], c[2] if c[0] == "prefetch" else None) for c in source.calls]
    starts = [blocks.blocks[k].start for k in order]
    first_release = next(i for i, c in enumerate(source.calls) if c[0] == "release")
    assert {("prefetch", start) for start in starts[:10]} <= set(kinds[:first_release])
    assert ("prefetch", starts[10]) not in kinds[:first_release]


def test_next_certificate_follows_the_duals_rate():
    # the dual's increases halve each pass: a gap 8x tol needs 3 passes
    assert next_certificate(8e-3, 1e-3, [0.0, 4.0, 6.0]) == 3
    assert next_certificate(1.5e-3, 1e-3, [0.0, 4.0, 6.0]) == 1
    assert next_certificate(1.0, 1e-3, [0.0, 4.0, 6.0]) == CERTIFY_EVERY  # capped
    assert next_certificate(8e-3, 1e-3, [0.0, 4.0, 9.0]) == CERTIFY_EVERY  # not slowing
    assert next_certificate(8e-3, 1e-3, [0.0, 4.0]) == CERTIFY_EVERY  # no rate yet


@pytest.mark.parametrize("loss", ["l2", "logistic"])
def test_tron_products_on_two_threads_give_the_one_thread_fit(data, loss, monkeypatch):
    """tron out of core cuts each block's rows into ranges on threads of their own
    (solvers/streaming_tron.py, TRON_THREADS), an accumulator each: the same Newton and CG
    steps as one thread, the same objective to rounding."""
    from solvers import out_of_core, streaming_tron

    X, y = data
    source = MemoryShards(split_rows(X, y, None, 300), X.shape[1])
    used, fits = [], []
    real = streaming_tron.row_parts

    def counted(indptr, parts):
        used.append(parts)
        return real(indptr, parts)

    monkeypatch.setattr(streaming_tron, "row_parts", counted)
    for threads in (1, 2):
        monkeypatch.setattr(out_of_core, "certificate_threads", lambda t=threads: t)
        fits.append(fit_blocks(source, "tron", max_block_bytes=40_000, loss=loss))
    assert used and set(used) == {2}  # the 2-thread fit cut its blocks in two
    one, two = fits
    assert two.converged and one.converged
    assert two.primal_objective == pytest.approx(one.primal_objective, rel=1e-10)
    assert [p["newton_steps"] for p in two.per_output] == [p["newton_steps"]
                                                           for p in one.per_output]
    np.testing.assert_allclose(two.coef, one.coef, rtol=1e-7, atol=1e-10)
