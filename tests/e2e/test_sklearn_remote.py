"""hinge.sklearn's remote mode against a live service: a real API server process and a
real Celery worker process on SQLite. `fit(server=..., api_key=...)` uploads the rows as
svmlight, trains, waits, and reads the exported model file: every estimator's fitted
attributes and predictions (local, from the file, or remote, from the predict route)
must be the in-process fit's, since the worker runs the same deterministic solvers on
the same rows."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from typing import Any

import httpx
import numpy as np
import pytest
import scipy.sparse as sp
from sklearn import datasets
from sklearn.preprocessing import StandardScaler

from app.client import HingeClient
from hinge.sklearn import (
    HingeLinearSVC,
    HingeLinearSVR,
    HingeLogisticRegression,
    HingeNuSVC,
    HingeNuSVR,
    HingeOneClassSVM,
    HingeSVC,
    HingeSVR,
)
from testkit import bundled
from tests.support import SharedService


class Live:
    def __init__(self, http: httpx.Client) -> None:
        self.url = str(http.base_url).rstrip("/")
        self.key = http.headers["Authorization"].removeprefix("Bearer ")


@pytest.fixture(scope="module")
def live(shared_service: SharedService) -> Iterator[Live]:
    """The shared service (tests/e2e/conftest.py), as a tenant of this module's own."""
    with shared_service.tenant() as http:
        yield Live(http)


def _dense(a: Any) -> np.ndarray:
    return a.toarray() if sp.issparse(a) else np.asarray(a)


def _diabetes() -> tuple[np.ndarray, np.ndarray]:
    X, y = datasets.load_diabetes(return_X_y=True)
    return StandardScaler().fit_transform(X), (y - y.mean()) / y.std()


KERNEL = [
    (HingeSVC, {"C": 2.0, "gamma": "scale", "class_weight": "balanced"}, "wine"),
    (HingeNuSVC, {"nu": 0.3}, "iris"),
    (HingeSVR, {"C": 3.0, "epsilon": 0.2}, "diabetes"),
    (HingeNuSVR, {"C": 3.0, "nu": 0.4}, "diabetes"),
    (HingeOneClassSVM, {"nu": 0.2, "gamma": 0.5}, "iris"),
]


def _kernel_data(name: str) -> tuple[Any, Any]:
    if name == "diabetes":
        return _diabetes()
    return bundled.load(name)


@pytest.mark.parametrize(("cls", "params", "data"), KERNEL,
                         ids=[c.__name__ for c, _, _ in KERNEL])
def test_remote_kernel_estimator_is_the_in_process_fit(live: Live, cls: Any,
                                                       params: dict[str, Any],
                                                       data: str) -> None:
    X, y = _kernel_data(data)
    target = None if cls is HingeOneClassSVM else y
    local = cls(**params).fit(X, target)
    remote = cls(**params, server=live.url, api_key=live.key).fit(X, target)
    # the model file does not say which rows are support vectors: matched back to rows
    np.testing.assert_array_equal(remote.support_, local.support_)
    np.testing.assert_array_equal(remote.n_support_, local.n_support_)
    np.testing.assert_allclose(_dense(remote.dual_coef_), _dense(local.dual_coef_),
                               rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(remote.intercept_, local.intercept_, rtol=1e-12, atol=1e-14)
    regression = cls in (HingeSVR, HingeNuSVR)
    same = np.testing.assert_allclose if regression else np.testing.assert_array_equal
    same(remote.predict(X), local.predict(X))
    assert remote.converged_ and remote.solver_ == "smo"
    with HingeClient(live.url, live.key) as client:
        job = client.job(remote.job_id_)
        assert job["status"] == "succeeded" and job["model_id"] == remote.model_id_
        assert client.dataset(remote.dataset_id_)["rows"] == X.shape[0]
    # predictions through the service's predict route: the same
    remote.set_params(remote_predict=True)
    if regression:
        np.testing.assert_allclose(remote.predict(X), local.predict(X), rtol=1e-9, atol=1e-9)
    else:
        np.testing.assert_array_equal(remote.predict(X), local.predict(X))
    if hasattr(local, "decision_function"):
        np.testing.assert_allclose(remote.decision_function(X), local.decision_function(X),
                                   rtol=1e-9, atol=1e-9)


LINEAR = [
    (HingeLinearSVC, {"C": 0.5, "dual": True, "loss": "hinge", "random_state": 2}, "iris"),
    (HingeLinearSVC, {"C": 0.5, "penalty": "l1", "dual": False, "random_state": 0},
     "cancer"),
    (HingeLinearSVR, {"C": 1.0, "epsilon": 0.1, "loss": "squared_epsilon_insensitive"},
     "diabetes"),
    (HingeLogisticRegression, {"C": 1.0}, "cancer"),
]


@pytest.mark.parametrize(("cls", "params", "data"), LINEAR,
                         ids=[f"{c.__name__}-{i}" for i, (c, _, _) in enumerate(LINEAR)])
def test_remote_linear_estimator_is_the_in_process_fit(live: Live, cls: Any,
                                                       params: dict[str, Any],
                                                       data: str) -> None:
    X, y = _kernel_data(data)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        local = cls(**params).fit(X, y)
        remote = cls(**params, server=live.url, api_key=live.key).fit(X, y)
    np.testing.assert_allclose(remote.coef_, local.coef_, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(remote.intercept_, local.intercept_, rtol=1e-12, atol=1e-14)
    assert remote.converged_ == local.converged_
    np.testing.assert_array_equal(remote.predict(X), local.predict(X))
    remote.set_params(remote_predict=True)
    np.testing.assert_allclose(remote.predict(X), local.predict(X), rtol=1e-9, atol=1e-9)


def test_remote_weighted_dual_linear_svc_is_the_in_process_fit(live: Live) -> None:
    """Sample weights with dual=True: the job's list of weights, the dual CD with C_i =
    C w_i in the worker as in process (rows of weight 0 left out)."""
    X, y = bundled.load("cancer")
    weights = np.random.RandomState(0).uniform(0.0, 3.0, y.shape[0])
    weights[:5] = 0.0
    params = {"C": 0.5, "dual": True, "loss": "hinge", "random_state": 1}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        local = HingeLinearSVC(**params).fit(X, y, sample_weight=weights)
        remote = HingeLinearSVC(**params, server=live.url, api_key=live.key).fit(
            X, y, sample_weight=weights)
        unweighted = HingeLinearSVC(**params).fit(X, y)
    assert local.solver_ == remote.solver_ == "dcd"
    np.testing.assert_allclose(remote.coef_, local.coef_, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(remote.intercept_, local.intercept_, rtol=1e-12, atol=1e-14)
    assert np.abs(unweighted.coef_ - local.coef_).max() > 1e-3  # the weights mattered


def test_remote_svc_probabilities_from_the_file_and_the_route_agree(live: Live) -> None:
    X, y = bundled.load("cancer")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # scikit-learn 1.9: deprecated
        remote = HingeSVC(C=1.0, probability=True, random_state=5, server=live.url,
                          api_key=live.key).fit(X, y)
        local = HingeSVC(C=1.0, probability=True, random_state=5).fit(X, y)
    from_file = remote.predict_proba(X)
    np.testing.assert_allclose(from_file, local.predict_proba(X), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(remote.probA_, local.probA_, rtol=1e-12)


def test_remote_errors_are_the_service_s(live: Live) -> None:
    X, y = bundled.load("iris")
    from app.client import HingeError

    with pytest.raises(HingeError) as caught:
        HingeSVC(server=live.url, api_key="not-a-key").fit(X, y)
    assert caught.value.status_code == 401
