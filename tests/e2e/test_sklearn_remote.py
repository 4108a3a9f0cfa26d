"""hinge.sklearn's remote mode against a live service: a real API server process and a
real Celery worker process on SQLite. `fit(server=..., api_key=...)` uploads the rows as
svmlight, trains, waits, and reads the exported model file: its predictions (local, from
the file, or remote, from the predict route) must be the in-process fit's, since the
worker runs the same deterministic solvers on the same rows."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import numpy as np
import pytest

from app.client import HingeClient
from hinge.sklearn import HingeLinearSVC, HingeSVC
from testkit import bundled
from tests.support import embedded_settings, running_service


class Live:
    def __init__(self, http: httpx.Client) -> None:
        self.url = str(http.base_url).rstrip("/")
        self.key = http.headers["Authorization"].removeprefix("Bearer ")


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    tmp = tmp_path_factory.mktemp("sklearn")
    settings = embedded_settings(tmp / "home", job_lease_seconds=10.0)
    with running_service(settings, tmp) as (http, _workers):
        yield Live(http)


def test_remote_svc_is_the_in_process_fit(live: Live) -> None:
    X, y = bundled.load("wine")
    names = np.array(["barolo", "grignolino", "barbera"])[y.astype(int) - 1]
    params = {"C": 2.0, "gamma": "scale", "class_weight": "balanced"}
    local = HingeSVC(**params).fit(X, names)
    remote = HingeSVC(**params, server=live.url, api_key=live.key).fit(X, names)
    np.testing.assert_array_equal(remote.classes_, local.classes_)
    np.testing.assert_allclose(remote.decision_function(X), local.decision_function(X),
                               rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(remote.predict(X), local.predict(X))
    # the model file does not say which rows are support vectors: matched back to rows
    np.testing.assert_array_equal(remote.support_, local.support_)
    np.testing.assert_array_equal(remote.n_support_, local.n_support_)
    np.testing.assert_allclose(remote.dual_coef_.toarray(), local.dual_coef_.toarray(),
                               rtol=1e-12, atol=1e-15)
    assert remote.converged_ and remote.solver_ == "smo"
    with HingeClient(live.url, live.key) as client:
        job = client.job(remote.job_id_)
        assert job["status"] == "succeeded" and job["model_id"] == remote.model_id_
        assert job["params"]["gamma"] == pytest.approx(local._gamma, rel=1e-15)
        assert client.dataset(remote.dataset_id_)["rows"] == X.shape[0]
    # predictions through the service's predict route: the same
    remote.set_params(remote_predict=True)
    np.testing.assert_array_equal(remote.predict(X), local.predict(X))
    np.testing.assert_allclose(remote.decision_function(X), local.decision_function(X),
                               rtol=1e-9, atol=1e-9)


def test_remote_svc_probabilities_from_the_file_and_the_route_agree(live: Live) -> None:
    X, y = bundled.load("cancer")
    remote = HingeSVC(C=1.0, probability=True, random_state=5, server=live.url,
                      api_key=live.key).fit(X, y)
    from_file = remote.predict_proba(X)
    local = HingeSVC(C=1.0, probability=True, random_state=5).fit(X, y)
    np.testing.assert_allclose(from_file, local.predict_proba(X), rtol=1e-9, atol=1e-12)
    remote.set_params(remote_predict=True)
    np.testing.assert_allclose(remote.predict_proba(X), from_file, rtol=1e-9, atol=1e-12)


def test_remote_linear_svc_is_the_in_process_fit(live: Live) -> None:
    X, y = bundled.load("iris")
    params = {"C": 0.5, "solver": "dcd", "loss": "hinge", "tol": 1e-4, "random_state": 2}
    local = HingeLinearSVC(**params).fit(X, y)
    remote = HingeLinearSVC(**params, server=live.url, api_key=live.key).fit(X, y)
    np.testing.assert_allclose(remote.coef_, local.coef_, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(remote.intercept_, local.intercept_, rtol=1e-12, atol=1e-14)
    assert remote.converged_ and remote.relative_gap_ == pytest.approx(local.relative_gap_)
    np.testing.assert_array_equal(remote.predict(X), local.predict(X))
    remote.set_params(remote_predict=True)
    np.testing.assert_array_equal(remote.predict(X), local.predict(X))
    np.testing.assert_allclose(remote.decision_function(X), local.decision_function(X),
                               rtol=1e-9, atol=1e-9)


def test_remote_errors_are_the_service_s(live: Live) -> None:
    X, y = bundled.load("iris")
    with pytest.raises(ValueError, match="free intercept"):
        HingeLinearSVC(solver="alm", server=live.url, api_key=live.key).fit(X, y)
    from app.client import HingeError

    with pytest.raises(HingeError) as caught:
        HingeSVC(server=live.url, api_key="not-a-key").fit(X, y)
    assert caught.value.status_code == 401
