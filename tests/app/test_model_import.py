"""POST /v1/models: models trained by libsvm-official / liblinear-official (the C code of
svm-train / train), saved, uploaded, and served: Hinge's predict gives svm_predict's /
LIBLINEAR predict's labels and decision values (and svm_predict -b 1's probabilities) with
that model file; malformed files get a 422 naming the line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp
from fastapi.testclient import TestClient

from app.settings import Settings
from testkit import bundled

libsvm = pytest.importorskip("libsvm.svmutil")
liblinear = pytest.importorskip("liblinear.liblinearutil")


def _split(name: str, permute: int | None = None) -> tuple[sp.csr_matrix, np.ndarray,
                                                            sp.csr_matrix]:
    X, y = bundled.load(name)
    n = X.shape[0]
    # permute: another first-appearance order of the classes
    rows = np.arange(n) if permute is None else np.random.default_rng(permute).permutation(n)
    train, test = rows[np.arange(n) % 3 != 0], rows[np.arange(n) % 3 == 0]
    if permute is None:  # LIBSVM lists the labels as they first appear: in sorted order
        train = train[np.argsort(y[train], kind="stable")]
    return X[train], y[train], X[test]


def upload(client: TestClient, path: Path, range_path: Path | None = None,
           **data: Any) -> Any:
    files = {"file": (path.name, path.read_bytes())}
    if range_path is not None:
        files["range"] = (range_path.name, range_path.read_bytes())
    return client.post("/v1/models", files=files, data=data)


def hinge_predict(client: TestClient, model_id: str, X: sp.csr_matrix) -> dict[str, Any]:
    body = bundled.dump_svmlight(X, np.zeros(X.shape[0]))
    response = client.post(f"/v1/models/{model_id}/predict", content=body,
                           headers={"Content-Type": "text/plain"})
    assert response.status_code == 200, response.text
    return response.json()


def _sorted_pairs(file_labels: list[float]) -> tuple[list[int], np.ndarray]:
    """For each pair of the sorted classes (LIBSVM's order), the file's pair and the sign
    that orients it for the sorted pair's first class."""
    k = len(file_labels)
    file_pairs = {(i, j): p for p, (i, j) in enumerate((i, j) for i in range(k)
                                                      for j in range(i + 1, k))}
    ranked = sorted(file_labels)
    index, signs = [], []
    for a in range(k):
        for b in range(a + 1, k):
            fa, fb = file_labels.index(ranked[a]), file_labels.index(ranked[b])
            index.append(file_pairs[(min(fa, fb), max(fa, fb))])
            signs.append(1.0 if fa < fb else -1.0)
    return index, np.array(signs)


LIBSVM_CASES = [
    ("cancer", "-t 2 -c 1"),
    ("cancer", "-t 0 -c 0.5"),
    ("cancer", "-t 1 -d 3 -g 0.05 -r 1"),
    ("cancer", "-t 2 -c 2 -b 1"),
    ("wine", "-t 2 -c 1"),
    ("wine", "-t 0 -c 1"),
    ("wine", "-t 1 -d 2 -g 0.1 -r 0.5"),
    ("wine", "-t 2 -c 1 -b 1"),
    ("digits", "-t 2 -g 0.02 -b 1"),
]


@pytest.mark.parametrize(("name", "options"), LIBSVM_CASES)
def test_an_uploaded_libsvm_model_predicts_what_svm_predict_does(
        client: TestClient, tmp_path: Path, name: str, options: str) -> None:
    X, y, X_test = _split(name)
    reference = libsvm.svm_train(y, X, options + " -q")
    path = tmp_path / f"{name}.model"
    libsvm.svm_save_model(str(path), reference)
    reference = libsvm.svm_load_model(str(path))  # what svm-predict reads
    response = upload(client, path)
    assert response.status_code == 201, response.text
    model = response.json()
    assert model["origin"]["format"] == "libsvm" and model["origin"]["file_name"] == path.name
    assert model["job_id"] is None and model["kind"] == "kernel"
    answer = hinge_predict(client, model["id"], X_test)
    _same_as_libsvm(answer, reference, X_test, probability="-b 1" in options)


def _same_as_libsvm(answer: dict[str, Any], reference: Any, X_test: sp.csr_matrix,
                    probability: bool) -> None:
    labels, _, dec = libsvm.svm_predict([0] * X_test.shape[0], X_test, reference, "-q")
    file_labels = [float(v) for v in reference.get_labels()]
    dec = np.array(dec)
    hinge_values = np.array(answer["decision_values"])
    if len(file_labels) == 2:
        sign = 1.0 if file_labels[0] == max(file_labels) else -1.0
        expected = sign * dec[:, 0]
    else:
        index, signs = _sorted_pairs(file_labels)
        expected = dec[:, index] * signs
    # the same sums in another order (Hinge scatters a row into a dense buffer; LIBSVM
    # walks two sorted index lists): rounding only
    np.testing.assert_allclose(hinge_values, expected, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(np.array(answer["labels"]), labels)
    if probability:
        _, _, probabilities = libsvm.svm_predict([0] * X_test.shape[0], X_test, reference,
                                                 "-b 1 -q")
        order = np.argsort(file_labels, kind="stable")
        np.testing.assert_allclose(np.array(answer["probabilities"]),
                                   np.array(probabilities)[:, order], rtol=1e-9,
                                   atol=1e-12)
    else:
        assert answer["probabilities"] is None


def _vote_tied(dec: np.ndarray, k: int) -> np.ndarray:
    votes = np.zeros((dec.shape[0], k), dtype=int)
    p = 0
    for i in range(k):
        for j in range(i + 1, k):
            votes[:, i] += dec[:, p] > 0
            votes[:, j] += dec[:, p] <= 0
            p += 1
    top = votes.max(axis=1, keepdims=True)
    return (votes == top).sum(axis=1) > 1


@pytest.mark.parametrize(("name", "seed"), [("wine", 1), ("digits", 2)])
def test_a_file_whose_labels_are_not_sorted_is_served_as_libsvm_serves_it(
        client: TestClient, tmp_path: Path, name: str, seed: int) -> None:
    """Rows shuffled, so that LIBSVM lists the labels unsorted (as they first appear):
    Hinge serves the classes sorted, pairs and sigmoids re-oriented, and keeps what the
    file's order decides: vote ties (to the label listed first) and the coupling order."""
    X, y, X_test = _split(name, permute=seed)
    reference = libsvm.svm_train(y, X, "-t 2 -c 1 -b 1 -q")
    assert [float(v) for v in reference.get_labels()] != sorted(reference.get_labels())
    path = tmp_path / f"{name}.model"
    libsvm.svm_save_model(str(path), reference)
    reference = libsvm.svm_load_model(str(path))
    model = upload(client, path).json()
    assert model["labels"] == sorted(model["labels"])
    answer = hinge_predict(client, model["id"], X_test)
    _same_as_libsvm(answer, reference, X_test, probability=True)
    _, _, dec = libsvm.svm_predict([0] * X_test.shape[0], X_test, reference, "-q")
    ties = int(_vote_tied(np.array(dec), len(model["labels"])).sum())
    print(f"{name}: {ties} of {X_test.shape[0]} rows with a vote tie")
    if name == "digits":  # the tie rule is exercised (wine may have none)
        assert ties > 0


LIBLINEAR_CASES = [
    ("cancer", "-s 1 -B 1"), ("cancer", "-s 1"), ("cancer", "-s 2 -B 1"), ("cancer", "-s 2"),
    ("wine", "-s 1 -B 1"), ("wine", "-s 1"), ("wine", "-s 2 -B 1"), ("wine", "-s 2"),
    ("cancer12", "-s 2 -B 2"),  # labels 1 / 2, 1 first: LIBLINEAR's label[0] is the smaller
]


@pytest.mark.parametrize(("name", "options"), LIBLINEAR_CASES)
def test_an_uploaded_liblinear_model_predicts_what_liblinear_predict_does(
        client: TestClient, tmp_path: Path, name: str, options: str) -> None:
    X, y, X_test = _split(name.removesuffix("12"))
    if name == "cancer12":
        y = np.where(y == y[0], 1.0, 2.0)
    reference = liblinear.train(y, X, options + " -q")
    path = tmp_path / f"{name}.model"
    liblinear.save_model(str(path), reference)
    reference = liblinear.load_model(str(path))  # what predict reads
    response = upload(client, path)
    assert response.status_code == 201, response.text
    model = response.json()
    assert model["kind"] == "linear" and model["origin"]["format"] == "liblinear"
    answer = hinge_predict(client, model["id"], X_test)
    labels, _, dec = liblinear.predict([0] * X_test.shape[0], X_test, reference, "-q")
    file_labels = [float(v) for v in reference.get_labels()]
    dec = np.array(dec)
    if len(file_labels) == 2:
        sign = 1.0 if file_labels[0] == max(file_labels) else -1.0
        expected = sign * dec[:, 0]
    else:
        expected = dec[:, np.argsort(file_labels, kind="stable")]
    np.testing.assert_allclose(np.array(answer["decision_values"]), expected, rtol=1e-12,
                               atol=1e-12)
    np.testing.assert_array_equal(np.array(answer["labels"]), labels)


def test_a_scaled_model_with_its_range_file_predicts_on_raw_rows(
        client: TestClient, tmp_path: Path) -> None:
    """cancer_raw (unscaled) scaled by libsvm's own csr_scale into [-1, 1], trained by
    libsvm; Hinge gets the model and the range file and predicts on the raw rows."""
    from libsvm.commonutil import csr_find_scale_param, csr_scale

    X, y, X_test = _split("cancer_raw")
    param = csr_find_scale_param(X, lower=-1, upper=1)
    reference = libsvm.svm_train(y, csr_scale(X, param), "-t 2 -c 4 -b 1 -q")
    path = tmp_path / "raw.model"
    libsvm.svm_save_model(str(path), reference)
    reference = libsvm.svm_load_model(str(path))  # what svm-predict reads
    low, high = X.min(axis=0).toarray().ravel(), X.max(axis=0).toarray().ravel()
    range_path = tmp_path / "raw.range"
    range_path.write_text("x\n-1 1\n" + "".join(
        f"{j + 1} {low[j]:.17g} {high[j]:.17g}\n" for j in range(X.shape[1])
        if low[j] < high[j]))
    response = upload(client, path, range_path)
    assert response.status_code == 201, response.text
    model = response.json()
    assert model["params"]["scale"] == "minmax"
    assert model["origin"]["range_file"] == "raw.range"
    answer = hinge_predict(client, model["id"], X_test)
    scaled = csr_scale(X_test, param)
    labels, _, dec = libsvm.svm_predict([0] * X_test.shape[0], scaled, reference, "-q")
    np.testing.assert_array_equal(answer["labels"], labels)
    sign = 1.0 if reference.get_labels()[0] == max(reference.get_labels()) else -1.0
    # csr_scale computes x * coef + offset, svm-scale (and Hinge) lower + (upper - lower)
    # * (x - min) / (max - min): the same map, rounded differently
    np.testing.assert_allclose(answer["decision_values"], sign * np.array(dec)[:, 0],
                               rtol=1e-9, atol=1e-9)
    # the range file comes back out
    exported = client.get(f"/v1/models/{model['id']}/export", params={"format": "scale"})
    assert exported.status_code == 200


def test_an_imported_model_exports_evaluates_and_lists(client: TestClient, tmp_path: Path,
                                                       cancer_id: str) -> None:
    X, y = bundled.load("cancer")
    reference = libsvm.svm_train(y, X, "-t 2 -c 1 -q")
    path = tmp_path / "cancer.model"
    libsvm.svm_save_model(str(path), reference)
    reference = libsvm.svm_load_model(str(path))  # what svm-predict reads
    model = upload(client, path).json()
    # export: LIBSVM reads Hinge's file back and predicts as the original
    exported = client.get(f"/v1/models/{model['id']}/export")
    assert exported.status_code == 200
    again_path = tmp_path / "again.model"
    again_path.write_text(exported.text)
    again = libsvm.svm_load_model(str(again_path))
    first = libsvm.svm_predict(y, X, reference, "-q")
    second = libsvm.svm_predict(y, X, again, "-q")
    assert first[0] == second[0]
    # Hinge writes the labels sorted (-1 1), the original lists them as they came (1 -1)
    assert again.get_labels() == sorted(reference.get_labels()) != reference.get_labels()
    np.testing.assert_allclose(np.array(first[2]), -np.array(second[2]), rtol=1e-12,
                               atol=1e-12)
    evaluation = client.post(f"/v1/models/{model['id']}/evaluations",
                             json={"dataset_id": cancer_id})
    assert evaluation.status_code == 201, evaluation.text
    accuracy = float(np.mean(np.array(first[0]) == y))
    assert evaluation.json()["report"]["accuracy"] == pytest.approx(accuracy)
    listed = client.get("/v1/models").json()["data"]
    assert [m["origin"]["sha256"] for m in listed] == [model["origin"]["sha256"]]
    page = client.get(f"/models/{model['id']}")  # the dashboard says where it came from
    assert page.status_code == 200
    assert 'imported from <span class="mono">cancer.model</span> (libsvm)' in page.text
    listing = client.get("/models")
    assert listing.status_code == 200 and "imported: cancer.model" in listing.text


# -- files that do not parse ---------------------------------------------------------------

def _libsvm_text(tmp_path: Path) -> str:
    X, y = bundled.load("iris")
    path = tmp_path / "iris.model"
    libsvm.svm_save_model(str(path), libsvm.svm_train(y, X, "-t 2 -b 1 -q"))
    return path.read_text()


def _mutate(text: str, key: str, replace: Any) -> tuple[str, int]:
    lines = text.splitlines()
    number = next(i for i, line in enumerate(lines) if line.startswith(key)) + 1
    lines[number - 1] = replace(lines[number - 1])
    return "\n".join(lines) + "\n", number


@pytest.mark.parametrize(("key", "replace", "says"), [
    ("rho", lambda line: line.rsplit(" ", 1)[0], "rho has 2 values"),
    ("gamma", lambda line: "gamma x", "gamma 'x' is not a number"),
    ("nr_sv", lambda line: "nr_sv 1 2 3", "nr_sv sums to 6"),
    ("label", lambda line: "label 1 1 2", "labels must be distinct"),
    ("kernel_type", lambda line: "kernel_type cubic", "unknown kernel_type"),
    ("probA", lambda line: "probX 1", "unknown LIBSVM header field 'probX'"),
    ("SV", lambda line: line, None),  # the line after SV: see below
])
def test_a_libsvm_file_that_does_not_parse_gets_422_naming_the_line(
        client: TestClient, tmp_path: Path, key: str, replace: Any, says: str | None
        ) -> None:
    text = _libsvm_text(tmp_path)
    if says is None:  # a support vector with a broken node
        key, says = "SV", "feature value 'abc' in '9:abc' is not a number"
        lines = text.splitlines()
        number = lines.index("SV") + 3
        lines[number - 1] = lines[number - 1].rstrip() + " 9:abc"
        text = "\n".join(lines) + "\n"
    else:
        text, number = _mutate(text, key, replace)
    response = client.post("/v1/models", files={"file": ("bad.model", text.encode())})
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["detail"]["line"] == number
    assert f"line {number}: {says}" in error["message"]


def test_support_vector_lines_are_counted_and_checked(client: TestClient,
                                                      tmp_path: Path) -> None:
    text = _libsvm_text(tmp_path)
    lines = text.splitlines()
    cases = {
        "more support vectors than total_sv": ([*lines, lines[-1]], len(lines) + 1),
        "lines after 'SV'": (lines[:-1], len(lines) - 1),  # total_sv n, but n - 1
        "feature indices must increase": (
            [*lines[:-1], lines[-1].rstrip() + " 1:0.5"], len(lines)),
    }
    for says, (changed, number) in cases.items():
        response = client.post("/v1/models", files={
            "file": ("bad.model", ("\n".join(changed) + "\n").encode())})
        assert response.status_code == 422, (says, response.text)
        assert response.json()["error"]["detail"]["line"] == number, says
        assert says in response.json()["error"]["message"]


def test_a_liblinear_file_with_a_short_weight_row_gets_422(client: TestClient,
                                                            tmp_path: Path) -> None:
    X, y = bundled.load("wine")
    path = tmp_path / "wine.model"
    liblinear.save_model(str(path), liblinear.train(y, X, "-s 1 -B 1 -q"))
    lines = path.read_text().splitlines()
    number = lines.index("w") + 4
    lines[number - 1] = " ".join(lines[number - 1].split()[:2])
    response = client.post("/v1/models", files={
        "file": ("bad.model", ("\n".join(lines) + "\n").encode())})
    assert response.status_code == 422
    assert response.json()["error"]["detail"]["line"] == number
    assert "has 3 value(s)" in response.json()["error"]["message"]


@pytest.mark.parametrize(("options", "says"), [
    ("-s 11", "solver_type L2R_L2LOSS_SVR (regression or one-class) is not supported yet"),
])
def test_formulations_hinge_does_not_serve_yet_get_a_clear_422(
        client: TestClient, tmp_path: Path, options: str, says: str) -> None:
    X, y = bundled.load("cancer")
    path = tmp_path / "other.model"
    liblinear.save_model(str(path), liblinear.train(y, X, options + " -q"))
    response = upload(client, path)
    assert response.status_code == 422, response.text
    assert says in response.json()["error"]["message"]
    assert response.json()["error"]["detail"]["supported"] is False


def test_a_nu_svc_model_is_served_like_c_svc(client: TestClient, tmp_path: Path) -> None:
    """LIBSVM predicts with a nu_svc model exactly as with a c_svc one (svm_predict_values
    treats them alike); the reference is the same file with its svm_type renamed (the
    Python binding's svm_predict on a loaded nu_svc model crashes here: a bus error)."""
    X, y, X_test = _split("wine")
    path = tmp_path / "nu.model"
    libsvm.svm_save_model(str(path), libsvm.svm_train(y, X, "-s 1 -n 0.3 -t 2 -q"))
    assert path.read_text().startswith("svm_type nu_svc\n")
    as_c_svc = tmp_path / "as_c_svc.model"
    as_c_svc.write_text(path.read_text().replace("svm_type nu_svc", "svm_type c_svc", 1))
    reference = libsvm.svm_load_model(str(as_c_svc))
    model = upload(client, path)
    assert model.status_code == 201, model.text
    assert model.json()["params"]["svm_type"] == "nu_svc"
    _same_as_libsvm(hinge_predict(client, model.json()["id"], X_test), reference, X_test,
                    probability=False)


def test_limits_and_wrong_requests(settings: Settings, admin_key: str,
                                   tmp_path: Path) -> None:
    from app.api.main import create_app
    from tests.support import bearer

    settings.max_import_support_vectors = 10
    settings.max_model_import_bytes = 50_000
    X, y = bundled.load("cancer")
    path = tmp_path / "cancer.model"
    libsvm.svm_save_model(str(path), libsvm.svm_train(y, X, "-t 2 -q"))
    small = tmp_path / "small.model"
    liblinear.save_model(str(small), liblinear.train(y, X, "-s 2 -q"))
    with TestClient(create_app(settings), headers=bearer(admin_key)) as client:
        over = upload(client, small)
        assert over.status_code == 201, over.text
        response = client.post("/v1/models", files={"file": ("big", path.read_bytes()[:49_000])})
        assert response.status_code == 413
        assert "exceeds the limit of 10 support vectors" in response.json()["error"]["message"]
        response = upload(client, path)  # over the body limit
        assert response.status_code == 413
        assert "HINGE_MAX_MODEL_IMPORT_BYTES" in response.json()["error"]["message"]
        response = client.post("/v1/models", content=small.read_bytes(),
                               headers={"Content-Type": "text/plain"})
        assert response.status_code == 415
        assert "-F file=@" in response.json()["error"]["message"]
        response = client.post("/v1/models", files={"range": ("r", b"x\n-1 1\n")})
        assert response.status_code == 422
        response = client.post("/v1/models", files={"file": ("z.gz", b"\x1f\x8b\x08\x00")})
        assert response.status_code == 422
        assert "decompress it first" in response.json()["error"]["message"]


def _diabetes() -> tuple[sp.csr_matrix, np.ndarray]:
    from sklearn import datasets as skdata

    features, target = skdata.load_diabetes(return_X_y=True)
    X = bundled.scale_columns(np.asarray(features, dtype=np.float64))
    return sp.csr_matrix(X), (target - target.mean()) / target.std()


@pytest.mark.parametrize("options", [
    "-s 3 -t 2 -c 2 -p 0.2 -g 0.3",
    "-s 3 -t 1 -d 2 -g 0.2 -r 1 -c 1 -b 1",
    "-s 4 -t 2 -n 0.4 -c 1",
    "-s 4 -t 0 -n 0.3 -c 0.5 -b 1",
    "-s 2 -t 2 -n 0.2 -g 0.5",
    "-s 2 -t 3 -n 0.3 -g 0.1 -r 0",
    "-s 2 -t 2 -n 0.3 -g 0.5 -b 1",
])
def test_an_uploaded_regression_or_one_class_model_predicts_what_svm_predict_does(
        client: TestClient, tmp_path: Path, options: str) -> None:
    """epsilon_svr, nu_svr and one_class files of libsvm-official 3.37 (with -b 1: the
    Laplace width, or the one-class prob_density_marks): Hinge's values are svm_predict's
    to 1e-12, its labels (the value, or +1 / -1) and probabilities equal them."""
    one_class = options.startswith("-s 2")
    X, y = bundled.load("cancer") if one_class else _diabetes()
    train, test = np.arange(X.shape[0]) % 3 != 0, np.arange(X.shape[0]) % 3 == 0
    path = tmp_path / "single.model"
    libsvm.svm_save_model(str(path), libsvm.svm_train(y[train], X[train], options + " -q"))
    reference = libsvm.svm_load_model(str(path))
    response = upload(client, path)
    assert response.status_code == 201, response.text
    model = response.json()
    assert model["task"] == ("outlier" if one_class else "regression")
    assert model["params"]["svm_type"] == path.read_text().split()[1]
    answer = hinge_predict(client, model["id"], X[test])
    labels, _, dec = libsvm.svm_predict([0] * int(test.sum()), X[test], reference, "-q")
    np.testing.assert_allclose(answer["decision_values"], np.array(dec)[:, 0], rtol=1e-12,
                               atol=1e-12)
    if one_class:
        np.testing.assert_array_equal(answer["labels"], labels)
    else:
        np.testing.assert_allclose(answer["labels"], labels, rtol=1e-12, atol=1e-12)
    if "-b 1" not in options:
        assert answer["probabilities"] is None and answer["sigma"] is None
    elif one_class:
        _, _, probabilities = libsvm.svm_predict([0] * int(test.sum()), X[test], reference,
                                                 "-b 1 -q")
        inlier = np.array(probabilities)[:, 0]
        np.testing.assert_array_equal(np.array(answer["probabilities"]),
                                      np.column_stack([1 - inlier, inlier]))
    else:
        assert answer["sigma"] == reference.get_svr_probability()
    # the model exports back to the same file's numbers
    exported = client.get(f"/v1/models/{model['id']}/export")
    assert exported.status_code == 200
    again = tmp_path / "again.model"
    again.write_text(exported.text)
    values = libsvm.svm_predict([0] * int(test.sum()), X[test],
                                libsvm.svm_load_model(str(again)), "-q")[2]
    np.testing.assert_allclose(np.array(values)[:, 0], np.array(dec)[:, 0], rtol=1e-12,
                               atol=1e-12)


@pytest.mark.parametrize(("change", "says"), [
    (("nr_class 2", "nr_class 3"), "nr_class of a one_class model is 2"),
    (("rho ", "label 1\nrho "), "label does not belong to a one_class model"),
    (("rho ", "probA 0.5\nrho "), "probA does not belong to a one_class model"),
    (("prob_density_marks ", "prob_density_marks 1 "), "prob_density_marks has 11 values"),
])
def test_a_malformed_one_class_file_gets_422(client: TestClient, tmp_path: Path,
                                             change: tuple[str, str], says: str) -> None:
    X, y = bundled.load("cancer")
    path = tmp_path / "one.model"
    libsvm.svm_save_model(str(path), libsvm.svm_train(y, X, "-s 2 -n 0.3 -b 1 -q"))
    text = path.read_text().replace(change[0], change[1], 1)
    response = client.post("/v1/models", files={"file": ("bad.model", text.encode())})
    assert response.status_code == 422, response.text
    assert says in response.json()["error"]["message"]
