"""The web dashboard in headless Chromium (Playwright), against a real API and worker.

Uploads through the form, a job started from the dataset page (by keyboard), a live
convergence plot fed by SSE, cancelling from the job page, predicting from the models
page, a hostile dataset name, the security headers and the phone layout. Screenshots of
every page go to test-artifacts/dashboard/ (git-ignored).
"""

from __future__ import annotations

import contextlib
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from testkit import bundled
from tests.e2e.long_fit import long_fit_bytes, long_job
from tests.support import IN_CI, REPO, SharedService, wait_for_job

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
ARTIFACTS = REPO / "test-artifacts" / "dashboard"
DESKTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}
# a fit that would run 120 s on any machine (long_fit.py), longer than the test's walk
# through the pages; the test cancels it. The form's fields take text.
LONG_JOB = {name: str(value).lower() if isinstance(value, bool) else str(value)
            for name, value in long_job(120.0).items()}
XSS_NAME = "<script>alert(1)</script>"
EXPECTED_CSP = {
    "default-src 'self'", "script-src 'self'", "style-src 'self'", "img-src 'self' data:",
    "connect-src 'self'", "object-src 'none'", "base-uri 'none'", "frame-ancestors 'none'",
}


def _require_browser() -> Any:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as exc:  # pragma: no cover - depends on the machine
        message = f"playwright is not installed: {exc}"
        if IN_CI:
            pytest.fail(message)
        pytest.skip(message)
    if shutil.which(CHROMIUM) is None:
        message = f"{CHROMIUM} is missing (apt-get install -y chromium)"
        if IN_CI:
            pytest.fail(message + " (CI=true: the dashboard tests need the browser)")
        pytest.skip(message)
    return sync_playwright


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    sync_playwright = _require_browser()
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture(scope="module")
def service_logs(shared_service: SharedService) -> Path:
    return shared_service.log_dir


@pytest.fixture(scope="module")
def service(browser: Any, shared_service: SharedService) -> Iterator[httpx.Client]:
    """The shared service (tests/e2e/conftest.py), as a tenant of this module's own (the
    browser first: without one the module is skipped before anything starts)."""
    with shared_service.tenant() as client:
        yield client


def _log_tails(log_dir: Path, chars: int = 3000) -> str:
    """The end of the API's and the worker's logs, for a failure message."""
    return "\n".join(f"--- {path.name} ---\n{path.read_text(errors='replace')[-chars:]}"
                     for path in sorted(log_dir.glob("*.log")))


class Page:
    """A browser page plus what it saw: console errors, CSP violations and dialogs."""

    def __init__(self, browser: Any, base: str, viewport: dict[str, int],
                 key: str | None = None) -> None:
        self.context = browser.new_context(viewport=viewport, base_url=base)
        self.page = self.context.new_page()
        self.page.set_default_timeout(30_000)
        self.errors: list[str] = []
        self.dialogs: list[str] = []
        self.page.on("console", self._console)
        self.page.on("pageerror", lambda error: self.errors.append(f"page error: {error}"))
        self.page.on("response", self._response)
        self.page.on("dialog", self._dialog)
        if key is not None:
            self.sign_in(key)

    def sign_in(self, key: str) -> None:
        """Through the sign-in page, as a person would."""
        self.page.goto("/datasets")
        self.page.wait_for_url(re.compile(r"/login\?next=%2Fdatasets$"))
        self.page.fill("#key", key)
        self.page.get_by_role("button", name="Sign in").click()
        self.page.wait_for_url(re.compile(r"/datasets$"))

    def _console(self, message: Any) -> None:
        if message.type == "error":
            self.errors.append(message.text)

    def _response(self, response: Any) -> None:
        # The console says only "the server responded with a status of 500": name the URL.
        if response.status >= 500:
            self.errors.append(f"{response.status} from {response.request.method} {response.url}")

    def _dialog(self, dialog: Any) -> None:
        self.dialogs.append(dialog.message)
        dialog.dismiss()

    def shot(self, name: str) -> None:
        """Save a screenshot, after checking the page is no wider than the screen."""
        overflow = self.page.evaluate(
            "() => document.documentElement.scrollWidth - document.documentElement.clientWidth")
        assert overflow <= 0, f"{self.page.url} is {overflow}px wider than the screen"
        self.page.screenshot(path=ARTIFACTS / f"{name}.png", full_page=True)

    def close(self) -> None:
        self.context.close()


@pytest.fixture
def desktop(browser: Any, service: httpx.Client, service_logs: Path) -> Iterator[Page]:
    page = Page(browser, str(service.base_url), DESKTOP, _key(service))
    yield page
    page.close()
    assert page.dialogs == [], page.dialogs
    # CSP violations, script errors and 5xx responses show up here.
    assert page.errors == [], f"{page.errors}\n{_log_tails(service_logs)}"


def _key(service: httpx.Client) -> str:
    return service.headers["Authorization"].removeprefix("Bearer ")


def _upload(view: Page, path: Path, name: str) -> str:
    page = view.page
    page.goto("/datasets")
    page.set_input_files("#upload-file", str(path))
    page.fill("#upload-name", name)
    page.get_by_role("button", name="Upload").click()
    page.wait_for_selector("#upload-status >> text=Uploaded")
    assert page.locator("#upload-progress").evaluate("bar => bar.value") == 1.0
    row = page.locator("#datasets-body tr").filter(
        has=page.get_by_role("link", name=name, exact=True)).first
    dataset_id = row.get_attribute("data-dataset-id")
    assert dataset_id
    return dataset_id


def _open_job_form(view: Page, dataset_id: str) -> None:
    view.page.goto(f"/datasets/{dataset_id}")
    view.page.wait_for_selector("#job-form[data-ready='true']")


def _job_id_from_url(view: Page) -> str:
    view.page.wait_for_url(re.compile(r"/jobs/[0-9a-f]{32}$"))
    return view.page.url.rsplit("/", 1)[1]


def _start_long_job(view: Page, dataset_id: str) -> str:
    _open_job_form(view, dataset_id)
    page = view.page
    page.select_option("#job-solver", "dcd")  # the form preselects auto, which has no eps
    page.fill("#param-C", LONG_JOB["C"])
    page.select_option("#param-loss", label=LONG_JOB["loss"])
    page.fill("#param-eps", LONG_JOB["eps"])
    page.select_option("#param-fallback", label=LONG_JOB["fallback"])
    page.fill("#param-max_iter", LONG_JOB["max_iter"])
    page.fill("#param-max_seconds", LONG_JOB["max_seconds"])
    page.get_by_role("button", name="Start training").click()
    return _job_id_from_url(view)


def _wait_for_status(view: Page, service: httpx.Client, job_id: str, status: str,
                     timeout_ms: int) -> None:
    """Wait for the job page to show `status`; on timeout, say what the API and page saw."""
    try:
        view.page.wait_for_selector(f"#job-status[data-status='{status}']", timeout=timeout_ms)
    except Exception as exc:
        job = service.get(f"/v1/jobs/{job_id}").json()
        raise AssertionError(f"the page never showed {status!r} ({exc.__class__.__name__}); "
                             f"the API says {job['status']!r}; page errors: {view.errors}"
                             ) from exc


def _cancer_file(tmp_path: Path) -> tuple[Path, list[str]]:
    text = bundled.svmlight_bytes("cancer")
    path = tmp_path / "cancer.txt"
    path.write_bytes(text)
    return path, text.decode().splitlines()


def _class_counts(name: str) -> str:
    """The dataset table's classes cell for a bundled set: "-1: 357, 1: 212"."""
    _X, y = bundled.load(name)
    labels, counts = np.unique(y, return_counts=True)
    return ", ".join(f"{label:g}: {count}" for label, count in zip(labels, counts, strict=True))


def test_upload_train_by_keyboard_and_predict(desktop: Page, service: httpx.Client,
                                              tmp_path: Path) -> None:
    page = desktop.page
    cancer, lines = _cancer_file(tmp_path)
    dataset_id = _upload(desktop, cancer, "cancer")
    row = page.locator(f"tr[data-dataset-id='{dataset_id}']")
    assert row.locator("[data-field=rows]").inner_text() == str(len(lines))
    assert row.locator("[data-field=classes]").inner_text() == _class_counts("cancer")
    desktop.shot("datasets")

    # The training form comes from GET /v1/solvers; fill it and submit it by keyboard only.
    page.get_by_role("link", name="Train a model on it").click()
    page.wait_for_selector("#job-form[data-ready='true']")
    solvers = service.get("/v1/solvers").json()["data"]
    assert page.locator("#job-solver").input_value() == "auto"  # the default for jobs
    auto = next(s for s in solvers if s["name"] == "auto")
    for param in auto["params"]:
        assert page.locator(f"#param-{param['name']}").count() == 1, param["name"]
    assert page.locator("#param-C").input_value() == "1"
    assert page.locator("#param-C").get_attribute("min") == "0"
    assert page.locator("#param-max_seconds").input_value() == ""  # nullable: empty = null
    desktop.shot("dataset")
    page.focus("#param-C")
    page.keyboard.press("Control+A")
    page.keyboard.type("2")
    for _ in range(40):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.id") == "job-submit":
            break
    else:
        raise AssertionError("Tab never reached the submit button")
    outline = page.evaluate("getComputedStyle(document.activeElement).outlineStyle")
    assert outline != "none"  # the focus is visible
    page.keyboard.press("Enter")
    job_id = _job_id_from_url(desktop)
    assert service.get(f"/v1/jobs/{job_id}").json()["params"]["C"] == 2.0

    # Job detail: the status arrives over SSE, then the result and the model link.
    _wait_for_status(desktop, service, job_id, "succeeded", timeout_ms=60_000)
    assert page.locator("#job-status-line").inner_text().strip().endswith("succeeded")
    # the result box is filled by a fetch the terminal status event starts: wait for it
    page.wait_for_selector("#job-result >> text=%", timeout=30_000)
    assert page.locator("#cancel-job").is_hidden()
    desktop.shot("job-succeeded")

    # The model: metrics, export link, and predictions from pasted svmlight lines.
    page.get_by_role("link", name="View model").click()
    page.wait_for_url(re.compile(r"/models/[0-9a-f]{32}$"))
    model_id = page.url.rsplit("/", 1)[1]
    page.fill("#predict-input", "\n".join(lines[:5]))
    page.get_by_role("button", name="Predict").click()
    page.wait_for_selector("#predict-table")
    assert page.locator("#predict-table tbody tr").count() == 5
    assert page.locator("#predict-summary").inner_text().startswith("5 rows predicted")
    desktop.shot("model")

    # Evaluate it on its dataset from the page: the figures, the confusion matrix (an HTML
    # table) and the ROC curve appear, and agree with the stored record.
    page.select_option("#evaluate-dataset", dataset_id)
    page.get_by_role("button", name="Evaluate").click()
    page.wait_for_selector("article.evaluation[data-status='succeeded']")
    evaluation = service.get(f"/v1/models/{model_id}/evaluations").json()["data"][0]
    report = evaluation["report"]
    table = page.locator(f"#confusion-{evaluation['id']}")
    cells = [[int(c) for c in row.locator("td").all_inner_texts()]
             for row in table.locator("tbody tr").all()]
    assert cells == report["confusion_matrix"] and sum(map(sum, cells)) == len(lines)
    shown = page.locator(f"#evaluation-{evaluation['id']} [data-field=accuracy]").inner_text()
    assert shown == f"{100 * report['accuracy']:.2f}%"
    roc = page.locator(f"#roc-{evaluation['id']}")
    page.wait_for_function(f"() => Number(document.getElementById('roc-{evaluation['id']}')"
                           ".dataset.points) >= 2")
    assert roc.locator("canvas").count() == 1
    assert int(roc.get_attribute("data-points") or 0) == len(report["roc_curve"]["fpr"])
    desktop.shot("model-evaluation")

    page.goto("/models")
    row = page.locator(f"tr[data-model-id='{model_id}']")
    assert "cancer" in row.inner_text()
    export = row.get_by_role("link", name=re.compile("^Export"))
    href = export.get_attribute("href")
    assert href == f"/v1/models/{model_id}/export?format=liblinear"
    assert page.request.get(href).text().startswith("solver_type")
    page.fill("#predict-input", lines[0].split(" ", 1)[1])  # a row without its label
    page.get_by_role("button", name="Predict").click()
    page.wait_for_selector("#predict-summary >> text=1 row predicted")
    desktop.shot("models")


def test_long_job_live_plot_progress_and_cancel(desktop: Page, service: httpx.Client,
                                                tmp_path: Path) -> None:
    page = desktop.page
    path = tmp_path / "long.txt"
    path.write_bytes(long_fit_bytes())
    dataset_id = _upload(desktop, path, "long")
    watched = _start_long_job(desktop, dataset_id)

    # The plot gains points and the progress bar moves while the job runs.
    _wait_for_status(desktop, service, watched, "running", timeout_ms=60_000)
    page.wait_for_function("() => Number(document.getElementById('chart').dataset.points) >= 3",
                           timeout=60_000)
    page.wait_for_function("() => document.getElementById('job-progress').hasAttribute('value')")
    points = int(page.locator("#chart").get_attribute("data-points") or 0)
    fraction = page.locator("#job-progress").evaluate("bar => bar.value")
    page.wait_for_function(
        "([points, fraction]) => Number(document.getElementById('chart').dataset.points)"
        " >= points + 3 && document.getElementById('job-progress').value !== fraction",
        arg=[points, fraction], timeout=30_000)
    assert page.locator("#chart canvas").count() == 1
    assert "iteration" in page.locator("#job-progress-detail").inner_text()
    desktop.shot("job-running")

    # The jobs list shows it running with a live progress bar; the filter keeps it.
    page.goto("/?status=running")
    row = page.locator(f"tr[data-job-id='{watched}']")
    assert row.locator(".status").inner_text() == "running"
    page.wait_for_function(
        f"() => document.querySelector(\"tr[data-job-id='{watched}'] progress\").value > 0")
    assert row.locator("[data-field=dataset]").inner_text() == "long"
    desktop.shot("jobs-running")

    # A second job waits behind the first (one worker); cancel it with the button.
    second = _start_long_job(desktop, dataset_id)
    page.get_by_role("button", name="Cancel job").click()
    _wait_for_status(desktop, service, second, "cancelled", timeout_ms=15_000)
    assert page.locator("#job-status-line").inner_text().strip().endswith("cancelled")
    assert page.locator("#cancel-job").is_hidden()
    assert "cancelled" in page.locator("#job-history").inner_text()
    assert service.get(f"/v1/jobs/{second}").json()["status"] == "cancelled"
    desktop.shot("job-cancelled")

    # And the watched one while it runs: it stops, and its plot keeps the history.
    page.goto(f"/jobs/{watched}")
    page.wait_for_function("() => Number(document.getElementById('chart').dataset.points) >= 3")
    if service.get(f"/v1/jobs/{watched}").json()["status"] == "running":
        page.get_by_role("button", name="Cancel job").click()
    page.wait_for_selector("#job-status:is([data-status='cancelled'], [data-status='succeeded'])",
                           timeout=15_000)
    assert wait_for_job(service.get, watched, timeout=15)["status"] in ("cancelled",
                                                                         "succeeded")


def test_hostile_dataset_name_is_text_and_headers_are_strict(
    desktop: Page, service: httpx.Client, tmp_path: Path
) -> None:
    page = desktop.page
    cancer, _lines = _cancer_file(tmp_path)
    dataset_id = _upload(desktop, cancer, XSS_NAME)
    assert page.get_by_role("link", name=XSS_NAME, exact=True).is_visible()
    response = page.goto("/datasets")
    assert response is not None
    headers = response.headers
    assert set(p.strip() for p in headers["content-security-policy"].split(";")) >= EXPECTED_CSP
    assert headers["x-content-type-options"] == "nosniff"
    assert page.get_by_role("link", name=XSS_NAME, exact=True).is_visible()
    page.goto(f"/datasets/{dataset_id}")
    assert page.locator("h1").inner_text() == XSS_NAME
    assert XSS_NAME in page.title()

    # A job on it appears in the open jobs list (a row the page's script builds).
    page.goto("/")
    response = service.post("/v1/jobs", json={"dataset_id": dataset_id, "params": {}})
    job_id = response.json()["id"]
    cell = page.locator(f"tr[data-job-id='{job_id}'] [data-field=dataset]")
    cell.wait_for(timeout=15_000)
    assert cell.inner_text() == XSS_NAME
    page.wait_for_selector(f"tr[data-job-id='{job_id}'][data-status='succeeded']",
                           timeout=30_000)
    assert page.evaluate("document.querySelectorAll('script:not([src])').length") == 0
    desktop.shot("xss-jobs")
    page.goto(f"/jobs/{job_id}")
    assert page.get_by_role("link", name=XSS_NAME, exact=True).is_visible()

    # The policy is enforced: an injected inline script does not run.
    page.evaluate("window.injected = false")
    with contextlib.suppress(Exception):  # Playwright may or may not report the refusal
        page.add_script_tag(content="window.injected = true")
    assert page.evaluate("window.injected") is False
    refused = [e for e in desktop.errors if "Content Security Policy" in e]
    assert refused, desktop.errors  # the browser refused it because of the policy
    desktop.errors = [e for e in desktop.errors if e not in refused]
    static = page.request.get("/static/js/common.js")
    assert static.headers["x-content-type-options"] == "nosniff"
    assert "content-security-policy" in static.headers
    assert desktop.dialogs == []


def test_every_page_fits_a_phone_screen(browser: Any, service: httpx.Client) -> None:
    view = Page(browser, str(service.base_url), PHONE, _key(service))
    try:
        jobs = service.get("/v1/jobs").json()["data"]
        datasets = service.get("/v1/datasets").json()["data"]
        models = service.get("/v1/models").json()["data"]
        pages = {"jobs": "/", "datasets": "/datasets", "models": "/models"}
        if jobs:  # preferably one with a convergence plot
            job = next((j for j in jobs if j["progress"]), jobs[-1])
            pages["job"] = f"/jobs/{job['id']}"
        if datasets:
            pages["dataset"] = f"/datasets/{datasets[-1]['id']}"
        if models:
            pages["model"] = f"/models/{models[-1]['id']}"
        for name, url in pages.items():
            view.page.goto(url)
            if name == "dataset":
                view.page.wait_for_selector("#job-form[data-ready='true']")
            if name == "job":
                view.page.wait_for_function(
                    "() => document.getElementById('chart-empty').hidden"
                    " || !document.getElementById('chart-empty').textContent.includes('Load')")
            view.shot(f"phone-{name}")
        assert view.errors == [], view.errors
    finally:
        view.close()


def test_sign_in_session_cookie_csrf_and_sign_out(browser: Any, service: httpx.Client) -> None:
    view = Page(browser, str(service.base_url), DESKTOP)
    try:
        page = view.page
        page.goto("/")
        page.wait_for_url(re.compile(r"/login\?next=%2F$"))
        page.fill("#key", "hk_0123456789ab_not-a-real-key-at-all-xxxxxxxx")
        page.get_by_role("button", name="Sign in").click()
        assert page.locator("[role=alert]").inner_text() == "That key is not valid."
        view.errors = [e for e in view.errors if "401" not in e]  # the refused sign-in
        view.sign_in(_key(service))
        cookie = next(c for c in view.context.cookies() if c["name"] == "hinge_session")
        assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
        assert _key(service) not in cookie["value"]
        # The session may read; a change without the page's CSRF token is refused.
        bare = page.evaluate("""async () => (await fetch('/v1/jobs', {method: 'POST',
            headers: {'Content-Type': 'application/json'}, body: '{}'})).status""")
        assert bare == 403
        token = page.get_attribute("meta[name=csrf-token]", "content")
        with_token = page.evaluate("""async (token) => (await fetch('/v1/jobs', {method: 'POST',
            headers: {'Content-Type': 'application/json', 'X-CSRF-Token': token},
            body: '{}'})).status""", token)
        assert with_token == 422  # past authentication: the empty spec is invalid
        view.errors = [e for e in view.errors if "403" not in e and "422" not in e]
        page.get_by_role("button", name="Sign out").click()
        page.wait_for_url(re.compile(r"/login$"))
        page.goto("/models")
        page.wait_for_url(re.compile(r"/login\?next=%2Fmodels$"))
        assert view.errors == [], view.errors
    finally:
        view.close()
