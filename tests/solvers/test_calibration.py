"""solvers.calibration against LIBSVM's -b 1 (through its Python binding), a scipy
minimisation of Platt's objective, and a direct solve of the coupling problem."""

from __future__ import annotations

import ctypes
import ctypes.util
import math
import multiprocessing
import sys

import numpy as np
import pytest
import scipy.optimize
import scipy.sparse as sp
from libsvm.svmutil import svm_predict, svm_train

from solvers.calibration import (
    cv_decision_values,
    ovo_probabilities,
    ovr_probabilities,
    pairwise_coupling,
    platt_fit,
    platt_predict,
)
from testkit.datasets import load_any, load_local, split

# ---- references --------------------------------------------------------------------------


def platt_objective(params: np.ndarray, dec: np.ndarray, labels: np.ndarray) -> float:
    """Platt's cross-entropy with the smoothed targets of Lin, Lin & Weng (dense, direct)."""
    prior1 = np.sum(labels > 0)
    prior0 = labels.size - prior1
    t = np.where(labels > 0, (prior1 + 1.0) / (prior1 + 2.0), 1.0 / (prior0 + 2.0))
    z = dec * params[0] + params[1]
    # -t log p - (1-t) log(1-p), p = 1/(1+exp(z)): = t z + log(1 + exp(-z))
    return float(np.sum(t * z + np.logaddexp(0.0, -z)))


def platt_reference(dec: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """The minimiser of the same objective by scipy, to a gradient below 1e-10."""
    prior1 = np.sum(labels > 0)
    prior0 = labels.size - prior1
    t = np.where(labels > 0, (prior1 + 1.0) / (prior1 + 2.0), 1.0 / (prior0 + 2.0))

    def gradient(params: np.ndarray, *_: object) -> np.ndarray:
        p = 1.0 / (1.0 + np.exp(dec * params[0] + params[1]))
        return np.array([np.sum(dec * (t - p)), np.sum(t - p)])

    def hessian(params: np.ndarray, *_: object) -> np.ndarray:
        p = 1.0 / (1.0 + np.exp(dec * params[0] + params[1]))
        w = p * (1 - p)
        return np.array([[np.sum(dec * dec * w), np.sum(dec * w)], [np.sum(dec * w), np.sum(w)]])

    # F is convex: its minimiser is the root of its gradient (found without comparing
    # F values, which round at 1e-14 relative and stall line searches before 1e-12)
    start = scipy.optimize.minimize(
        platt_objective, np.zeros(2), args=(dec, labels), jac=gradient, method="BFGS"
    ).x
    result = scipy.optimize.root(gradient, start, jac=hessian, method="hybr", tol=1e-15)
    assert np.max(np.abs(gradient(result.x))) < 1e-10
    return np.asarray(result.x)


def coupling_reference(r: np.ndarray) -> np.ndarray:
    """Method 2 exactly: min p'Qp s.t. e'p = 1, from its KKT system [2Q e; e' 0]."""
    k = r.shape[0]
    Q = np.empty((k, k))
    for t in range(k):
        for j in range(k):
            Q[t, j] = (
                sum(r[s, t] ** 2 for s in range(k) if s != t) if t == j else -r[j, t] * r[t, j]
            )
    kkt = np.zeros((k + 1, k + 1))
    kkt[:k, :k] = 2 * Q
    kkt[:k, k] = 1.0
    kkt[k, :k] = 1.0
    rhs = np.zeros(k + 1)
    rhs[k] = 1.0
    return np.linalg.solve(kkt, rhs)[:k]


def naive_multiclass_probability(r: np.ndarray) -> np.ndarray:
    """libsvm's multiclass_probability, line for line, in Python."""
    k = r.shape[0]
    max_iter, eps = max(100, k), 0.005 / k
    p = [1.0 / k] * k
    Q = [[0.0] * k for _ in range(k)]
    for t in range(k):
        for j in range(t):
            Q[t][t] += r[j][t] * r[j][t]
            Q[t][j] = Q[j][t]
        for j in range(t + 1, k):
            Q[t][t] += r[j][t] * r[j][t]
            Q[t][j] = -r[j][t] * r[t][j]
    Qp = [0.0] * k
    for _ in range(max_iter):
        pQp = 0.0
        for t in range(k):
            Qp[t] = sum(Q[t][j] * p[j] for j in range(k))
            pQp += p[t] * Qp[t]
        if max(abs(Qp[t] - pQp) for t in range(k)) < eps:
            break
        for t in range(k):
            diff = (-Qp[t] + pQp) / Q[t][t]
            p[t] += diff
            pQp = (pQp + diff * (diff * Q[t][t] + 2 * Qp[t])) / (1 + diff) / (1 + diff)
            for j in range(k):
                Qp[j] = (Qp[j] + diff * Q[t][j]) / (1 + diff)
                p[j] /= 1 + diff
    return np.array(p)


def random_pairwise(rng: np.random.Generator, k: int) -> np.ndarray:
    r = np.zeros((k, k))
    upper = np.triu_indices(k, 1)
    r[upper] = rng.uniform(0.02, 0.98, size=upper[0].size)
    r[upper[1], upper[0]] = 1 - r[upper]
    return r


def libsvm_fit_fn(options: str):
    """fit_fn for cv_decision_values: a LIBSVM model, values oriented to label +1."""

    def fit(X_train, y_train):
        model = svm_train(y_train, X_train, options)
        sign = model.get_labels()[0]

        def decide(X_test):
            _, _, values = svm_predict(np.zeros(X_test.shape[0]), X_test, model, "-q")
            return np.asarray(values)[:, 0] * sign

        return decide

    return fit


def libsvm_pairs(model, k: int) -> tuple[np.ndarray, np.ndarray]:
    n_pairs = k * (k - 1) // 2
    return (
        np.array([model.probA[i] for i in range(n_pairs)]),
        np.array([model.probB[i] for i in range(n_pairs)]),
    )


# ---- platt_fit ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("seed", "n", "separation", "positive_share"),
    [(0, 50, 1.0, 0.5), (1, 400, 3.0, 0.2), (2, 1000, 0.3, 0.7), (3, 30, 6.0, 0.5)],
)
def test_platt_fit_is_the_minimiser_of_platts_objective(
    seed: int, n: int, separation: float, positive_share: float
) -> None:
    rng = np.random.default_rng(seed)
    labels = np.where(rng.random(n) < positive_share, 1.0, -1.0)
    dec = labels * separation + rng.normal(size=n)
    fitted = platt_fit(dec, labels)
    assert fitted.exit_reason == "converged"
    reference = platt_reference(dec, labels)
    assert abs(fitted.A - reference[0]) <= 1e-6
    assert abs(fitted.B - reference[1]) <= 1e-6
    assert fitted.A < 0  # larger decision value, larger P(+1)


def test_platt_fit_on_separable_values_stays_finite() -> None:
    dec = np.array([-3.0, -2.0, -1.0, 1.0, 2.0, 3.0])
    labels = np.sign(dec)
    fitted = platt_fit(dec, labels)
    # the smoothed targets keep the optimum finite even for separable data
    reference = platt_reference(dec, labels)
    assert np.isfinite([fitted.A, fitted.B]).all()
    assert abs(fitted.A - reference[0]) <= 1e-6
    assert abs(fitted.B - reference[1]) <= 1e-6


def test_platt_fit_with_one_class_gives_the_prior_target() -> None:
    fitted = platt_fit(np.array([0.5, 1.0, 2.0]), np.array([1, 1, 1]))
    # t = 4/5 for all rows; with A = 0, p = 1/(1+exp(B)) = 4/5 minimises F
    assert fitted.exit_reason == "converged"
    assert abs(platt_predict(1.0, fitted.A, fitted.B) - 0.8) < 1e-4


def test_platt_fit_refuses_bad_input() -> None:
    with pytest.raises(ValueError, match="one length"):
        platt_fit(np.zeros(3), np.zeros(2))
    with pytest.raises(ValueError, match="at least one"):
        platt_fit(np.zeros(0), np.zeros(0))
    with pytest.raises(ValueError, match="NaN"):
        platt_fit(np.array([np.nan]), np.array([1]))


# ---- platt_predict -----------------------------------------------------------------------


def test_platt_predict_is_sigmoid_predict_and_never_overflows() -> None:
    dec = np.array([-1e6, -30.0, -1.0, 0.0, 0.3, 1.0, 30.0, 1e6])
    A, B = -1.7, 0.2
    expected = []
    for f in dec:
        z = f * A + B
        expected.append(math.exp(-z) / (1.0 + math.exp(-z)) if z >= 0 else 1.0 / (1 + math.exp(z)))
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        ours = platt_predict(dec, A, B)
    assert ours.tolist() == expected
    assert ours[0] == 0.0 and ours[-1] == 1.0


# ---- pairwise coupling -------------------------------------------------------------------


@pytest.mark.parametrize("k", [2, 3, 4, 7, 10])
def test_coupling_converges_to_the_method_2_solution(k: int) -> None:
    rng = np.random.default_rng(k)
    rows = np.stack([random_pairwise(rng, k) for _ in range(20)])
    ours = pairwise_coupling(rows, eps=1e-13, max_iter=100_000)
    for row, p in zip(rows, ours, strict=True):
        assert np.max(np.abs(p - coupling_reference(row))) <= 1e-6
        assert abs(p.sum() - 1.0) <= 1e-12


@pytest.mark.parametrize("k", [2, 3, 5, 10])
def test_coupling_default_is_libsvm_multiclass_probability(k: int) -> None:
    rng = np.random.default_rng(100 + k)
    rows = np.stack([random_pairwise(rng, k) for _ in range(30)])
    ours = pairwise_coupling(rows)
    for row, p in zip(rows, ours, strict=True):
        assert np.max(np.abs(p - naive_multiclass_probability(row))) <= 1e-15
    assert np.array_equal(pairwise_coupling(rows[3]), ours[3])  # (k, k) input


def test_coupling_of_consistent_pairs_recovers_the_distribution() -> None:
    p = np.array([0.5, 0.3, 0.15, 0.05])
    r = p[:, None] / (p[:, None] + p[None, :])
    assert np.max(np.abs(pairwise_coupling(r, eps=1e-14, max_iter=10_000) - p)) <= 1e-12


def test_ovr_probabilities_are_normalised_sigmoids() -> None:
    dec = np.array([[1.0, -1.0, 0.2], [-2.0, 0.5, 0.1]])
    A, B = np.array([-1.0, -2.0, -0.5]), np.array([0.1, 0.0, -0.3])
    ours = ovr_probabilities(dec, A, B)
    sigmoids = 1.0 / (1.0 + np.exp(dec * A + B))
    assert np.max(np.abs(ours - sigmoids / sigmoids.sum(axis=1, keepdims=True))) <= 1e-15
    assert np.max(np.abs(ours.sum(axis=1) - 1.0)) <= 1e-15


# ---- the cross-validation helper ---------------------------------------------------------


def test_cv_every_row_predicted_once_by_a_model_that_never_saw_it() -> None:
    n = 23
    X = np.arange(n, dtype=float).reshape(-1, 1)
    y = np.where(np.arange(n) % 3 == 0, 1.0, -1.0)
    permutation = np.random.default_rng(5).permutation(n)
    seen: list[set[int]] = []

    def fit(X_train, y_train):
        rows = {int(v) for v in X_train[:, 0]}
        seen.append(rows)
        assert [int(v) for v in X_train[:, 0]] == [
            int(i) for i in permutation if int(i) in rows
        ]  # shuffled order, as libsvm builds its subproblem
        return lambda X_test: np.array([1000.0 * len(seen) + v for v in X_test[:, 0]])

    dec = cv_decision_values(X, y, fit, permutation=permutation)
    assert len(seen) == 5
    fold_of_row = (dec // 1000).astype(int)
    for row in range(n):
        assert dec[row] % 1000 == row  # predicted exactly once
        assert row not in seen[fold_of_row[row] - 1]
    fold_sizes = np.bincount(fold_of_row)[1:]
    assert fold_sizes.tolist() == [(i + 1) * n // 5 - i * n // 5 for i in range(5)]


def test_cv_single_class_training_parts_give_plus_or_minus_one() -> None:
    y = np.array([1.0, -1.0, -1.0, -1.0, -1.0, -1.0])  # folds of 1, 1, 1, 1, 2 rows
    X = np.zeros((6, 1))
    calls = []

    def fit(X_train, y_train):
        calls.append(y_train.copy())
        return lambda X_test: np.full(X_test.shape[0], 0.25)

    dec = cv_decision_values(X, y, fit, permutation=np.arange(6))
    assert dec[0] == -1.0  # its training part is all negative
    assert dec[1:].tolist() == [0.25] * 5
    assert len(calls) == 4
    positives = cv_decision_values(X, np.ones(6), fit, permutation=np.arange(6))
    assert positives.tolist() == [1.0] * 6


def test_cv_is_seeded_and_needs_a_source_of_randomness() -> None:
    X = np.arange(40, dtype=float).reshape(-1, 1)
    y = np.where(np.arange(40) % 2 == 0, 1.0, -1.0)

    def fit(X_train, y_train):
        offset = float(X_train[:, 0].sum())
        return lambda X_test: X_test[:, 0] + offset

    first = cv_decision_values(X, y, fit, rng=np.random.default_rng(9))
    again = cv_decision_values(X, y, fit, rng=np.random.default_rng(9))
    other = cv_decision_values(X, y, fit, rng=np.random.default_rng(10))
    assert np.array_equal(first, again)
    assert not np.array_equal(first, other)
    with pytest.raises(ValueError, match="rng"):
        cv_decision_values(X, y, fit)
    with pytest.raises(ValueError, match="permutation of range"):
        cv_decision_values(X, y, fit, permutation=np.zeros(40, dtype=int))


# ---- LIBSVM -b 1, reproduced exactly -----------------------------------------------------

libc_path = ctypes.util.find_library("c")


def libsvm_permutation(libc, n: int) -> np.ndarray:
    """svm_binary_svc_probability's shuffle: j = i + rand() % (n - i), swap."""
    perm = list(range(n))
    for i in range(n):
        j = i + libc.rand() % (n - i)
        perm[i], perm[j] = perm[j], perm[i]
    return np.array(perm)


@pytest.mark.skipif(
    not sys.platform.startswith("linux") or libc_path is None,
    reason="replays libsvm's rand() through the C library it links (glibc)",
)
@pytest.mark.parametrize(("name", "n_rows"), [
    ("cancer", None), ("onehot3", 240),  # binary; 3 classes, 0/1 features (like dna)
    pytest.param("heart_scale", 270, marks=pytest.mark.parity),
    pytest.param("dna.scale", 240, marks=pytest.mark.parity)])
def test_libsvm_probability_model_reproduced_exactly(name: str, n_rows: int | None) -> None:
    """Same shuffles (LIBSVM's rand(), replayed), same sub-models: our platt_fit must
    return LIBSVM's probA/probB, and ovo_probabilities its -b 1 probabilities. Replayed in a
    fresh process: in a test process another thread calling the C library's rand() in
    between would shift the shuffles (it once did, under pytest-xdist)."""
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        pairs, worst = pool.apply(_replayed, (name, n_rows))
    assert pairs
    for fitted_a, prob_a, fitted_b, prob_b in pairs:
        assert abs(fitted_a - prob_a) <= 1e-10 * max(1.0, abs(prob_a))
        assert abs(fitted_b - prob_b) <= 1e-10 * max(1.0, abs(prob_b))
    assert worst <= 1e-12


def _replayed(name: str, n_rows: int | None
              ) -> tuple[list[tuple[float, float, float, float]], float]:
    """Each pair's (our A, LIBSVM's probA, our B, LIBSVM's probB), and the largest
    difference of our -b 1 probabilities from LIBSVM's."""
    libc = ctypes.CDLL(libc_path)
    X, y = load_any(name)
    X, y = X[:n_rows], y[:n_rows]
    libc.srand(12345)
    model = svm_train(y, X, "-b 1 -q")
    labels = model.get_labels()
    k = len(labels)
    probA, probB = libsvm_pairs(model, k)

    libc.srand(12345)
    pair = 0
    pairs = []
    for i in range(k):
        for j in range(i + 1, k):
            # libsvm's pair subproblem: class i rows (+1), then class j rows (-1)
            rows = np.concatenate([np.flatnonzero(y == labels[i]), np.flatnonzero(y == labels[j])])
            pair_y = np.where(y[rows] == labels[i], 1.0, -1.0)
            permutation = libsvm_permutation(libc, rows.size)
            dec = cv_decision_values(
                X[rows], pair_y, libsvm_fit_fn("-c 1 -q"), permutation=permutation
            )
            fitted = platt_fit(dec, pair_y)
            pairs.append((fitted.A, float(probA[pair]), fitted.B, float(probB[pair])))
            pair += 1

    _, _, decision_values = svm_predict(y, X, model, "-q")
    _, _, probabilities = svm_predict(y, X, model, "-b 1 -q")
    ours = ovo_probabilities(np.asarray(decision_values), probA, probB)
    return pairs, float(np.max(np.abs(ours - np.asarray(probabilities))))


# ---- LIBSVM -b 1, compared as distributions (our own shuffles) ---------------------------


def log_loss(probabilities: np.ndarray, y: np.ndarray, labels: list[int]) -> float:
    """Columns of LIBSVM's probabilities follow its label order."""
    columns = np.array([labels.index(int(v)) for v in y])
    return float(-np.mean(np.log(probabilities[np.arange(y.size), columns])))


def ours_versus_libsvm(
    X: sp.csr_matrix, y: np.ndarray, X_test: sp.csr_matrix, y_test: np.ndarray, seed: int
) -> tuple[float, float, float]:
    model = svm_train(y, X, "-b 1 -q")
    labels = model.get_labels()
    k = len(labels)
    rng = np.random.default_rng(seed)
    A, B = np.empty(k * (k - 1) // 2), np.empty(k * (k - 1) // 2)
    pair = 0
    for i in range(k):
        for j in range(i + 1, k):
            rows = np.concatenate([np.flatnonzero(y == labels[i]), np.flatnonzero(y == labels[j])])
            pair_y = np.where(y[rows] == labels[i], 1.0, -1.0)
            dec = cv_decision_values(X[rows], pair_y, libsvm_fit_fn("-c 1 -q"), rng=rng)
            fitted = platt_fit(dec, pair_y)
            A[pair], B[pair] = fitted.A, fitted.B
            pair += 1
    _, _, decision_values = svm_predict(y_test, X_test, model, "-q")
    _, _, theirs = svm_predict(y_test, X_test, model, "-b 1 -q")
    ours = ovo_probabilities(np.asarray(decision_values), A, B)
    theirs = np.asarray(theirs)
    correlation = float(np.corrcoef(ours.ravel(), theirs.ravel())[0, 1])
    return correlation, log_loss(ours, y_test, labels), log_loss(theirs, y_test, labels)


def test_probabilities_agree_with_libsvm_on_cancer() -> None:
    X, y = load_local("cancer")
    correlation, ours, theirs = ours_versus_libsvm(X, y, X, y, seed=0)
    print(f"cancer: correlation {correlation:.4f}, log loss {ours:.4f} vs {theirs:.4f}")
    assert correlation >= 0.99
    assert abs(ours - theirs) <= 0.02 * theirs


@pytest.mark.slow
def test_probabilities_agree_with_libsvm_on_onehot3() -> None:
    X, y, X_test, y_test = split(*load_local("onehot3"))  # like dna.scale
    correlation, ours, theirs = ours_versus_libsvm(X, y, X_test, y_test, seed=0)
    print(f"onehot3: correlation {correlation:.4f}, log loss {ours:.4f} vs {theirs:.4f}")
    assert correlation >= 0.99
    assert abs(ours - theirs) <= 0.02 * theirs
