"""solvers.scaling against svm-scale (a literal Python port of svm-scale.c below), libsvm's
own Python scaler (commonutil.csr_find_scale_param / csr_scale) and scikit-learn."""

from __future__ import annotations

import contextlib
import io
import math

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from libsvm import commonutil
from sklearn.preprocessing import MaxAbsScaler, StandardScaler

from solvers.scaling import (
    STANDARD_MIN_DENSITY,
    Scaler,
    ScalingError,
    fit_scaler,
    scaler_from_range_text,
    scaler_to_range_text,
)
from testkit.datasets import load_local, split

# local sets (testkit.datasets): scaled (cancer, wine), natively unscaled and dense
# (cancer_raw, like pendigits) and 0/1 features (onehot3 like dna, onehot like a9a)
DATASETS = ["cancer", "wine", "cancer_raw", "onehot3"]


# ---- svm-scale.c, literally (dense rows, 0-based features) -------------------------------


def naive_svm_scale_min_max(X: np.ndarray) -> tuple[list[float], list[float]]:
    """Pass 2 of svm-scale: min/max over every row, absent features counting as 0."""
    feature_min = [math.inf] * X.shape[1]
    feature_max = [-math.inf] * X.shape[1]
    for row in X:
        for j, value in enumerate(row):
            feature_max[j] = value if value > feature_max[j] else feature_max[j]
            feature_min[j] = value if value < feature_min[j] else feature_min[j]
    return feature_min, feature_max


def naive_svm_scale_output(
    X: np.ndarray, feature_min: list[float], feature_max: list[float], lower: float, upper: float
) -> np.ndarray:
    """Pass 3 of svm-scale (output()): single-valued features and unlisted ones give 0."""
    out = np.zeros((X.shape[0], len(feature_min)))
    for i, row in enumerate(X):
        for j in range(len(feature_min)):
            value = float(row[j]) if j < len(row) else 0.0
            if feature_max[j] == feature_min[j]:
                continue
            if value == feature_min[j]:
                value = lower
            elif value == feature_max[j]:
                value = upper
            else:
                value = lower + (upper - lower) * (value - feature_min[j]) / (
                    feature_max[j] - feature_min[j]
                )
            out[i, j] = value
    return out


def naive_svm_scale_range_file(
    feature_min: list[float], feature_max: list[float], lower: float, upper: float
) -> str:
    """What svm-scale -s writes: 'x', '%.16g %.16g', then '%d %.16g %.16g' per feature."""
    lines = ["x\n", f"{lower:.16g} {upper:.16g}\n"]
    for j, (low, high) in enumerate(zip(feature_min, feature_max, strict=True)):
        if low != high:
            lines.append(f"{j + 1} {low:.16g} {high:.16g}\n")
    return "".join(lines)


def libsvm_python_scale(X: sp.csr_matrix, lower: float, upper: float) -> sp.csr_matrix:
    with contextlib.redirect_stderr(io.StringIO()):  # its densification warnings
        param = commonutil.csr_find_scale_param(X, lower=lower, upper=upper)
        return commonutil.csr_scale(X, param)


def random_sparse(rng: np.random.Generator, shape: tuple[int, int], density: float) -> np.ndarray:
    dense = rng.normal(size=shape) * rng.choice([0.01, 1.0, 1000.0], size=shape[1])
    dense[rng.random(shape) > density] = 0.0
    return dense


# ---- agreement with LIBSVM ---------------------------------------------------------------


@pytest.mark.parametrize("name", DATASETS)
@pytest.mark.parametrize(("lower", "upper"), [(-1.0, 1.0), (0.0, 1.0)])
def test_minmax_equals_libsvm_commonutil(name: str, lower: float, upper: float) -> None:
    X, _ = load_local(name)
    ours = fit_scaler(X, "minmax", lower, upper).transform(X)
    theirs = libsvm_python_scale(X, lower, upper)
    assert ours.shape == theirs.shape
    assert np.max(np.abs((ours - theirs).toarray())) <= 1e-12
    theirs.eliminate_zeros()
    assert ours.nnz == theirs.nnz  # the same entries are stored


@pytest.mark.parametrize("name", ["cancer", "cancer_raw"])
def test_minmax_equals_svm_scale_bit_for_bit(name: str) -> None:
    X, _ = load_local(name)
    dense = X.toarray()
    scaler = fit_scaler(X, "minmax", -1.0, 1.0)
    feature_min, feature_max = naive_svm_scale_min_max(dense)
    assert scaler.feature_min.tolist() == feature_min
    assert scaler.feature_max.tolist() == feature_max
    expected = naive_svm_scale_output(dense, feature_min, feature_max, -1.0, 1.0)
    assert np.array_equal(scaler.transform(X).toarray(), expected)


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    n_rows=st.integers(1, 12),
    n_features=st.integers(1, 8),
    density=st.floats(0.0, 1.0),
    lower=st.sampled_from([-1.0, 0.0, -3.5, 2.0]),
    width=st.sampled_from([1.0, 2.0, 0.1, 7.0]),
)
def test_minmax_equals_svm_scale_on_random_matrices(
    seed: int, n_rows: int, n_features: int, density: float, lower: float, width: float
) -> None:
    rng = np.random.default_rng(seed)
    dense = random_sparse(rng, (n_rows, n_features), density)
    dense[:, rng.random(n_features) < 0.2] = 3.0  # constant non-zero features
    upper = lower + width
    scaler = fit_scaler(sp.csr_matrix(dense), "minmax", lower, upper)
    feature_min, feature_max = naive_svm_scale_min_max(dense)
    expected = naive_svm_scale_output(dense, feature_min, feature_max, lower, upper)
    ours = scaler.transform(sp.csr_matrix(dense))
    assert np.array_equal(ours.toarray(), expected)
    assert ours.nnz == np.count_nonzero(expected)  # zeros are never stored
    unseen = random_sparse(rng, (5, n_features), density) * 3.0
    expected_unseen = naive_svm_scale_output(unseen, feature_min, feature_max, lower, upper)
    assert np.array_equal(scaler.transform(sp.csr_matrix(unseen)).toarray(), expected_unseen)


def test_constant_features_are_dropped_as_svm_scale_drops_them() -> None:
    X = sp.csr_matrix(np.array([[5.0, 0.0, 1.0, 0.0], [5.0, 0.0, 2.0, 0.0]]))
    scaler = fit_scaler(X)
    assert scaler.constant.tolist() == [True, True, False, True]
    new_rows = sp.csr_matrix(np.array([[7.0, 9.0, 1.5, 0.0]]))
    assert scaler.transform(new_rows).toarray().tolist() == [[0.0, 0.0, 0.0, 0.0]]
    assert scaler_to_range_text(scaler) == "x\n-1 1\n3 1 2\n"


# ---- rows the scaler has not seen --------------------------------------------------------


def test_test_split_scaled_with_training_ranges() -> None:
    X, _, X_test, _ = split(*load_local("cancer_raw"))
    scaler = fit_scaler(X)
    feature_min, feature_max = naive_svm_scale_min_max(X.toarray())
    expected = naive_svm_scale_output(X_test.toarray(), feature_min, feature_max, -1.0, 1.0)
    assert np.array_equal(scaler.transform(X_test).toarray(), expected)


def test_values_outside_the_training_range_are_extrapolated_not_clipped() -> None:
    scaler = fit_scaler(sp.csr_matrix(np.array([[0.0], [10.0]])), "minmax", 0.0, 1.0)
    out = scaler.transform(sp.csr_matrix(np.array([[20.0], [-5.0], [5.0]]))).toarray()
    assert out.ravel().tolist() == [2.0, -0.5, 0.5]


def test_features_beyond_training_are_scaled_to_zero() -> None:
    scaler = fit_scaler(sp.csr_matrix(np.array([[0.5, 3.0], [-0.5, 1.0]])))
    wider = sp.csr_matrix(np.array([[0.25, 2.0, 10.0], [0.0, 0.0, 20.0], [0.0, 0.0, 30.0]]))
    out = scaler.transform(wider)
    assert out.shape == (3, 2)
    # svm-scale 3.24 -r on these rows prints "1 1:0.5", "-1 2:-2", "1 2:-2"
    assert out.toarray().tolist() == [[0.5, 0.0], [0.0, -2.0], [0.0, -2.0]]


def test_fewer_columns_than_training_scale_as_zeros() -> None:
    X, _, X_test, _ = split(*load_local("onehot"))
    X_test = sp.csr_matrix(X_test[:, :-1])  # as a9a.t: one column fewer than the training
    assert X_test.shape[1] == X.shape[1] - 1
    scaler = fit_scaler(X, "minmax", 0.0, 1.0)
    padded = sp.hstack([X_test, sp.csr_matrix((X_test.shape[0], 1))], format="csr")
    ours = scaler.transform(X_test)
    assert ours.shape == (X_test.shape[0], X.shape[1])
    assert (ours != scaler.transform(padded)).nnz == 0


def test_row_order_and_non_canonical_input_do_not_matter() -> None:
    rng = np.random.default_rng(3)
    dense = random_sparse(rng, (30, 6), 0.5)
    scaler = fit_scaler(sp.csr_matrix(dense))
    order = rng.permutation(30)
    assert np.array_equal(
        scaler.transform(sp.csr_matrix(dense[order])).toarray(),
        scaler.transform(sp.csr_matrix(dense)).toarray()[order],
    )
    # the same matrix with each row's entries split in two halves, in reverse order
    canonical = sp.csr_matrix(dense)
    data, indices, indptr = [], [], [0]
    for row in range(dense.shape[0]):
        span = slice(canonical.indptr[row], canonical.indptr[row + 1])
        columns, values = canonical.indices[span][::-1], canonical.data[span][::-1]
        indices += [*columns, *columns]
        data += [*(values / 2), *(values / 2)]
        indptr.append(len(data))
    halves = sp.csr_matrix((data, indices, indptr), shape=dense.shape)
    assert not halves.has_canonical_format
    assert np.array_equal(
        scaler.transform(halves).toarray(), scaler.transform(sp.csr_matrix(dense)).toarray()
    )


# ---- sparsity ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["onehot3", "onehot", "cancer_raw"])
def test_maxabs_keeps_the_sparsity_pattern_exactly(name: str) -> None:
    X, _ = load_local(name)
    X = X.copy()
    X.data = X.data * np.where(np.arange(X.nnz) % 3 == 0, -1.0, 1.0)  # some negatives
    scaler = fit_scaler(X, "maxabs")
    ours = scaler.transform(X)
    assert np.array_equal(ours.indptr, X.indptr)
    assert np.array_equal(ours.indices, X.indices)
    reference = MaxAbsScaler().fit(X).transform(X)
    assert np.max(np.abs(ours.data - sp.csr_matrix(reference).data)) <= 1e-15
    assert np.all(scaler.zero_image() == 0.0)


def test_minmax_densifies_by_the_zero_image_and_zero_one_keeps_zeros() -> None:
    X, _ = load_local("onehot3")  # binary features, min 0
    to_pm1 = fit_scaler(X, "minmax", -1.0, 1.0)
    varying = int(np.count_nonzero(~to_pm1.constant))
    assert np.count_nonzero(to_pm1.zero_image()) == varying
    assert to_pm1.transform(X).nnz == X.shape[0] * varying  # every varying feature is stored
    to_01 = fit_scaler(X, "minmax", 0.0, 1.0)
    assert np.all(to_01.zero_image() == 0.0)
    assert to_01.transform(X).nnz == X.nnz


# ---- standard ----------------------------------------------------------------------------


def test_standard_equals_scikit_learn_on_dense_data() -> None:
    X, _, X_test, _ = split(*load_local("cancer_raw"))  # every entry stored
    scaler = fit_scaler(X, "standard")
    dense = X.toarray()
    expected = StandardScaler().fit(dense).transform(dense)
    assert np.max(np.abs(scaler.transform(X).toarray() - expected)) <= 1e-12
    expected_test = StandardScaler().fit(dense).transform(X_test.toarray())
    assert np.max(np.abs(scaler.transform(X_test).toarray() - expected_test)) <= 1e-12


def test_standard_refuses_sparse_data_and_says_why() -> None:
    X, _ = load_local("onehot")
    with pytest.raises(ScalingError, match="densify") as caught:
        fit_scaler(X, "standard")
    assert "maxabs" in str(caught.value)
    assert f"{X.nnz / (X.shape[0] * X.shape[1]):.1%}" in str(caught.value)


def test_standard_density_threshold_is_inclusive() -> None:
    at_limit = np.zeros((4, 2))
    at_limit[:, 0] = [1.0, 2.0, 3.0, 4.0]  # exactly half the entries stored
    assert STANDARD_MIN_DENSITY == 0.5
    fit_scaler(sp.csr_matrix(at_limit), "standard")
    below = at_limit.copy()
    below[3, 0] = 0.0
    with pytest.raises(ScalingError, match="densify"):
        fit_scaler(sp.csr_matrix(below), "standard")


def test_standard_constant_feature_outputs_zero() -> None:
    dense = np.array([[2.0, 1.0], [2.0, 3.0]])
    scaler = fit_scaler(sp.csr_matrix(dense), "standard")
    assert scaler.transform(sp.csr_matrix(np.array([[9.0, 2.0]]))).toarray().tolist() == [
        [0.0, 0.0]
    ]


# ---- range files -------------------------------------------------------------------------


@pytest.mark.parametrize("name", DATASETS)
@pytest.mark.parametrize("lower", [-1.0, 0.0])
def test_range_file_is_what_svm_scale_writes(name: str, lower: float) -> None:
    X, _ = load_local(name)
    scaler = fit_scaler(X, "minmax", lower, 1.0)
    feature_min, feature_max = naive_svm_scale_min_max(X.toarray())
    expected = naive_svm_scale_range_file(feature_min, feature_max, lower, 1.0)
    assert scaler_to_range_text(scaler) == expected


@pytest.mark.parametrize("name", DATASETS)
def test_range_file_round_trip_transforms_identically(name: str) -> None:
    X, _ = load_local(name)
    scaler = fit_scaler(X, "minmax", -1.0, 1.0)
    restored = scaler_from_range_text(scaler_to_range_text(scaler), n_features=X.shape[1])
    assert restored.n_features == scaler.n_features
    varying = ~scaler.constant
    assert np.array_equal(restored.feature_min[varying], scaler.feature_min[varying])
    assert np.array_equal(restored.feature_max[varying], scaler.feature_max[varying])
    assert np.array_equal(restored.constant, scaler.constant)
    assert (restored.transform(X) != scaler.transform(X)).nnz == 0


def test_range_file_is_lossless_where_sixteen_digits_are_not() -> None:
    awkward = float(np.nextafter(0.1, 1.0))  # %.16g prints 0.1, another double
    assert float(f"{awkward:.16g}") != awkward
    scaler = fit_scaler(sp.csr_matrix(np.array([[awkward], [0.7]])), "minmax", 0.0, 1.0)
    text = scaler_to_range_text(scaler)
    assert text == f"x\n0 1\n1 {awkward:.17g} 0.7\n"
    assert scaler_from_range_text(text).feature_min[0] == awkward


def test_range_file_reader_takes_what_svm_scale_reads() -> None:
    text = "y\n0 1\n-3 7\nx\n0   1\n2 -1.5 2.5e1\n\n5 0 3\n"
    scaler = scaler_from_range_text(text, n_features=6)
    assert (scaler.lower, scaler.upper) == (0.0, 1.0)
    assert scaler.feature_min.tolist() == [0, -1.5, 0, 0, 0, 0]
    assert scaler.feature_max.tolist() == [0, 25.0, 0, 0, 3.0, 0]
    assert scaler.constant.tolist() == [True, False, True, True, False, True]
    assert scaler_from_range_text(text).n_features == 5


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("1 0 1\n", "expected a line 'x'"),
        ("x\n-1\n", "lower upper"),
        ("x\n1 -1\n", "lower must be below upper"),
        ("x\n-1 1\n2 0 1\n2 0 3\n", "listed twice"),
        ("x\n-1 1\n0 0 1\n", ">= 1"),
        ("x\n-1 1\n1 3 1\n", "min 3.0 and max 1.0"),
        ("x\n-1 1\n1 a 1\n", "'a' is not a number"),
        ("x\n-1 1\n1.5 0 1\n", "not an integer"),
        ("y\n0 1\n", "y section"),
    ],
)
def test_range_file_reader_refuses_malformed_files(text: str, message: str) -> None:
    with pytest.raises(ScalingError, match=message):
        scaler_from_range_text(text)


def test_range_file_refuses_n_features_below_the_listed_indices() -> None:
    with pytest.raises(ScalingError, match="lists feature 3"):
        scaler_from_range_text("x\n-1 1\n3 0 1\n", n_features=2)


@pytest.mark.parametrize("method", ["maxabs", "standard"])
def test_range_file_only_for_minmax(method: str) -> None:
    scaler = fit_scaler(sp.csr_matrix(np.array([[1.0, 2.0], [3.0, -4.0]])), method)  # type: ignore[arg-type]
    with pytest.raises(ScalingError, match="only a minmax scaler has an svm-scale range file"):
        scaler_to_range_text(scaler)


# ---- storage -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "lower"), [("minmax", -1.0), ("minmax", 0.0), ("maxabs", -1.0), ("standard", -1.0)]
)
def test_arrays_round_trip(method: str, lower: float) -> None:
    X, _ = load_local("cancer_raw")
    scaler = fit_scaler(X, method, lower=lower)  # type: ignore[arg-type]
    arrays, meta = scaler.to_arrays()
    assert all(array.dtype == np.float64 for array in arrays.values())
    assert set(meta) == {"format_version", "method", "lower", "upper", "n_features"}
    restored = Scaler.from_arrays({k: v.copy() for k, v in arrays.items()}, dict(meta))
    assert (restored.method, restored.lower, restored.upper) == (
        scaler.method,
        scaler.lower,
        scaler.upper,
    )
    assert (restored.transform(X) != scaler.transform(X)).nnz == 0


def test_from_arrays_refuses_inconsistent_storage() -> None:
    arrays, meta = fit_scaler(sp.csr_matrix(np.array([[1.0, 2.0], [3.0, 4.0]]))).to_arrays()
    with pytest.raises(ScalingError, match="format_version"):
        Scaler.from_arrays(arrays, {**meta, "format_version": 99})
    with pytest.raises(ScalingError, match="unknown method"):
        Scaler.from_arrays(arrays, {**meta, "method": "robust"})
    with pytest.raises(ScalingError, match="must hold 3 finite values"):
        Scaler.from_arrays(arrays, {**meta, "n_features": 3})
    with pytest.raises(ScalingError, match="lacks the array 'mean'"):
        Scaler.from_arrays(arrays, {**meta, "method": "standard"})
    swapped = {"feature_min": arrays["feature_max"], "feature_max": arrays["feature_min"]}
    with pytest.raises(ScalingError, match="min > max"):
        Scaler.from_arrays(swapped, meta)
    with pytest.raises(ScalingError, match="lower must be below upper"):
        Scaler.from_arrays(arrays, {**meta, "lower": 1.0})


# ---- validation --------------------------------------------------------------------------


def test_fit_refuses_bad_input() -> None:
    good = sp.csr_matrix(np.array([[1.0, 2.0], [3.0, 4.0]]))
    with pytest.raises(ScalingError, match="method must be one of"):
        fit_scaler(good, "robust")  # type: ignore[arg-type]
    with pytest.raises(ScalingError, match="lower must be below upper"):
        fit_scaler(good, "minmax", 1.0, 1.0)
    with pytest.raises(ScalingError, match="takes no range"):
        fit_scaler(good, "maxabs", 0.0, 1.0)
    with pytest.raises(ScalingError, match="zero rows"):
        fit_scaler(sp.csr_matrix((0, 3)))
    with pytest.raises(ScalingError, match="NaN or infinite"):
        fit_scaler(sp.csr_matrix(np.array([[np.nan, 1.0]])))
