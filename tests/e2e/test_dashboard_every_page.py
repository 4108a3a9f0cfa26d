"""Every dashboard page for every kind of job, in headless Chromium against a real API and
worker (issue 31): no console error, no table cut off, no `null` where a value is known.

Each page (jobs, job, datasets, dataset, models, model with an evaluation, searches,
search, login) is opened after the jobs it shows have ended (and the job page also while
a job runs). A page fails the test when
- the browser logs an error (console.error, an uncaught exception, a CSP violation, a 5xx);
- a table is wider than its container without a scrolling wrapper, or reaches past the
  right edge of the viewport, or the page itself is wider than the viewport;
- a value cell (dd, td, th, the chart's captions, an option) reads `null`, `None`,
  `undefined`, `NaN` or `[object Object]`.

The default suite covers every page with a linear binary job (scaled, probabilities), a
10-class one-vs-rest job, the 45-pair one-vs-one SMO job with probabilities on
pendigits-like data, an unconverged, a cancelled and a failed job; the `slow` test runs
the whole matrix (linear and SMO, binary and multi-class, with and without `probability`
and `scale`). Data: scikit-learn's bundled sets and generated data (testkit), never
../shared.

Screenshots: $HINGE_SHOTS when set, else a folder under pytest's tmp_path (printed).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from testkit import bundled, datagen
from tests.e2e.long_fit import long_fit_bytes, long_job, wait_running_with_progress
from tests.e2e.test_dashboard import (
    CHROMIUM,
    CHROMIUM_ARGS,
    DESKTOP,
    PHONE,
    Page,
    _key,
    _log_tails,
    _require_browser,
)
from tests.support import embedded_settings, running_service, wait_for_job

# -- what a page must not show -----------------------------------------------------------

# every table: its nearest ancestor that clips (overflow other than visible) must scroll,
# or the table must fit inside it; with no such ancestor it must fit the viewport
TABLE_OVERFLOW_JS = """() => {
  const problems = [];
  const viewport = document.documentElement.clientWidth;
  for (const table of document.querySelectorAll('table')) {
    if (!table.offsetParent) continue;  // hidden
    const box = table.getBoundingClientRect();
    const name = table.id || table.className || 'table';
    let clipper = null;
    for (let node = table.parentElement; node && node !== document.body;
         node = node.parentElement) {
      if (getComputedStyle(node).overflowX !== 'visible') { clipper = node; break; }
    }
    if (clipper) {
      const overflow = getComputedStyle(clipper).overflowX;
      const scrolls = overflow === 'auto' || overflow === 'scroll';
      const outer = clipper.getBoundingClientRect();
      if (!scrolls && table.scrollWidth > clipper.clientWidth + 1) {
        problems.push(`${name}: ${table.scrollWidth}px in a ${clipper.clientWidth}px`
                      + ' container that does not scroll');
      }
      if (outer.right > viewport + 1) {
        problems.push(`${name}: its container ends at ${Math.round(outer.right)}px,`
                      + ` past the viewport (${viewport}px)`);
      }
    } else if (box.right > viewport + 1) {
      problems.push(`${name}: ends at ${Math.round(box.right)}px,`
                    + ` past the viewport (${viewport}px)`);
    }
  }
  const page = document.documentElement.scrollWidth - document.documentElement.clientWidth;
  if (page > 0) {
    const wide = [...document.body.querySelectorAll('*')]
      .filter((e) => e.getBoundingClientRect().right > viewport + 1)
      .map((e) => e.tagName.toLowerCase() + (e.id ? '#' + e.id : '')
                  + (e.className && typeof e.className === 'string' ? '.' + e.className : ''));
    problems.push(`the page is ${page}px wider than the viewport: ${wide.slice(0, 5)}`);
  }
  return problems;
}"""

# value cells only: help text may explain what `null` means for a parameter
VALUE_SELECTOR = ("dd, td, th, caption, h1, h3, option, .job-summary, .chart-summary, "
                  ".chart-current, .chart-phases, .progress-detail, .progress-text, "
                  ".status, .crumbs")
NULL_TEXT_JS = """(selector) => {
  const found = [];
  const word = /(^|[^\\w-])(null|None|undefined|NaN|\\[object Object\\])($|[^\\w-])/;
  for (const element of document.querySelectorAll(selector)) {
    if (element.closest('[hidden], template')) continue;
    const text = element.innerText === undefined ? element.textContent : element.innerText;
    if (word.test(text)) {
      const where = element.tagName.toLowerCase() + (element.id ? '#' + element.id : '');
      found.push(`${where}: ${text.trim().slice(0, 120)}`);
    }
  }
  return found;
}"""

TERMINAL = ("succeeded", "failed", "cancelled")


# -- fixtures ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = (Path(os.environ["HINGE_SHOTS"]) / "every-page" if os.environ.get("HINGE_SHOTS")
              else tmp_path_factory.mktemp("every-page-shots"))
    folder.mkdir(parents=True, exist_ok=True)
    print(f"\nscreenshots of every page: {folder}")
    return folder


@pytest.fixture(scope="module")
def browser(shots: Path) -> Iterator[Any]:
    sync_playwright = _require_browser()
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture(scope="module")
def service_logs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("every-page")


@pytest.fixture(scope="module")
def service(service_logs: Path, browser: Any) -> Iterator[httpx.Client]:
    settings = embedded_settings(service_logs / "home", rate_per_second=0)
    with running_service(settings, service_logs, workers=2) as (client, _workers):
        client.home = settings.home  # type: ignore[attr-defined]
        yield client


def _upload(service: httpx.Client, name: str, content: bytes) -> str:
    response = service.post(f"/v1/datasets?name={name}", content=content)
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


@pytest.fixture(scope="module")
def data(service: httpx.Client) -> dict[str, str]:
    """Dataset ids by name: the bundled sets and a pendigits-like 10-class set (45 pairs)."""
    ids = {name: _upload(service, name, bundled.svmlight_bytes(name))
           for name in ("cancer", "wine", "digits", "iris")}
    ids["long"] = _upload(service, "long", long_fit_bytes())  # tests/e2e/long_fit.py
    ids["pendigits-like"] = _upload(service, "pendigits-like", bundled.dump_svmlight(
        *datagen.letter_like(rows_per_class=25, n_classes=10)))
    return ids


def _submit(service: httpx.Client, dataset_id: str, solver: str, **params: Any) -> str:
    response = service.post("/v1/jobs", json={"dataset_id": dataset_id, "solver": solver,
                                              "params": params})
    assert response.status_code == 202, response.text
    return str(response.json()["id"])


def _finished(service: httpx.Client, job_ids: dict[str, str], timeout: float = 300
              ) -> dict[str, dict[str, Any]]:
    return {name: wait_for_job(service.get, job_id, timeout=timeout)
            for name, job_id in job_ids.items()}


# -- the page walk -------------------------------------------------------------------------


class Walk:
    """Opens pages in one browser tab and collects what is wrong on each."""

    def __init__(self, browser: Any, service: httpx.Client, shots: Path,
                 viewport: dict[str, int] = DESKTOP) -> None:
        self.view = Page(browser, str(service.base_url), viewport, _key(service))
        self.shots = shots
        self.problems: list[str] = []

    def _ready(self, kind: str) -> None:
        page = self.view.page
        if kind == "dataset":
            page.wait_for_selector("#job-form[data-ready='true']")
        elif kind == "job":
            # the history replayed, the result fetched, the plot drawn (or said empty)
            page.wait_for_function(
                "() => { const s = document.getElementById('job').dataset.status;"
                " const empty = document.getElementById('chart-empty');"
                " const plotted = empty.hidden || !/Loading|Waiting/.test(empty.textContent);"
                " const done = !['succeeded','failed','cancelled'].includes(s)"
                "   || !document.getElementById('result-empty').hidden"
                "   || document.getElementById('job-result').children.length > 0;"
                " return plotted && done; }", timeout=30_000)
            if page.locator("#job").get_attribute("data-status") in TERMINAL:
                page.wait_for_function(
                    "() => document.getElementById('chart').dataset.finished === 'true'"
                    " || !document.getElementById('chart-empty').hidden", timeout=30_000)
        elif kind == "model":
            page.wait_for_function(
                "() => [...document.querySelectorAll('.roc-chart')]"
                ".every((f) => Number(f.dataset.points) > 0)", timeout=30_000)
        elif kind == "search":
            page.wait_for_function(
                "() => document.getElementById('search-chart').dataset.best !== undefined",
                timeout=30_000)
        page.wait_for_timeout(250)  # a frame for the plots' requestAnimationFrame

    def check(self, url: str, kind: str, name: str) -> None:
        page = self.view.page
        before = len(self.view.errors)
        page.goto(url)
        try:
            self._ready(kind)
        except Exception as exc:  # say which page, and keep looking at the others
            self.problems.append(f"{name} ({url}): never ready: {exc.__class__.__name__}: "
                                 f"{str(exc).splitlines()[0]}")
        for problem in page.evaluate(TABLE_OVERFLOW_JS):
            self.problems.append(f"{name} ({url}): overflow: {problem}")
        for text in page.evaluate(NULL_TEXT_JS, VALUE_SELECTOR):
            self.problems.append(f"{name} ({url}): shows a null: {text}")
        for error in self.view.errors[before:]:
            self.problems.append(f"{name} ({url}): console: {error}")
        page.screenshot(path=self.shots / f"{name}.png", full_page=True)

    def jobs(self, service: httpx.Client, jobs: dict[str, str]) -> None:
        models = []
        for name, job_id in jobs.items():
            self.check(f"/jobs/{job_id}", "job", f"job-{name}")
            job = service.get(f"/v1/jobs/{job_id}").json()
            if job["model_id"]:
                models.append((name, job["model_id"]))
        for name, model_id in models:
            self.check(f"/models/{model_id}", "model", f"model-{name}")

    def close(self) -> None:
        self.view.close()


def _cancelled_job(service: httpx.Client, dataset_id: str) -> str:
    """A job cancelled while it runs (a fit that would run two minutes)."""
    job_id = _submit(service, dataset_id, "dcd", **long_job(120.0))
    wait_running_with_progress(service, job_id)
    assert service.post(f"/v1/jobs/{job_id}/cancel").status_code in (200, 202)
    assert wait_for_job(service.get, job_id, timeout=60)["status"] == "cancelled"
    return job_id


def _failed_job(service: httpx.Client, dataset_id: str) -> str:
    """A job whose dataset's file is gone from the store when the worker loads it."""
    home = Path(service.home)  # type: ignore[attr-defined]
    files = [p for p in home.rglob("*") if p.is_file() and dataset_id in p.name]
    assert files, f"no stored file of dataset {dataset_id} under {home}"
    for path in files:
        path.unlink()
    job_id = _submit(service, dataset_id, "auto")
    job = wait_for_job(service.get, job_id, timeout=60)
    assert job["status"] == "failed", job
    return job_id


def _evaluate(service: httpx.Client, model_id: str, dataset_id: str) -> None:
    response = service.post(f"/v1/models/{model_id}/evaluations",
                            json={"dataset_id": dataset_id})
    assert response.status_code in (201, 202), response.text
    evaluation_id = response.json()["id"]
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        body = service.get(f"/v1/models/{model_id}/evaluations/{evaluation_id}").json()
        if body["status"] in TERMINAL:
            assert body["status"] == "succeeded", body
            return
        time.sleep(0.1)
    raise TimeoutError(evaluation_id)


def _search(service: httpx.Client, dataset_id: str) -> str:
    response = service.post("/v1/searches", json={
        "dataset_id": dataset_id, "solver": "smo",
        "space": {"C": {"log2": [-1, 3, 2]}, "gamma": {"log2": [-3, 1, 2]}}})
    assert response.status_code == 202, response.text
    search_id = str(response.json()["id"])
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if service.get(f"/v1/searches/{search_id}").json()["status"] in TERMINAL:
            return search_id
        time.sleep(0.2)
    raise TimeoutError(search_id)


def _assert_clean(walk: Walk, service_logs: Path) -> None:
    assert walk.problems == [], ("\n".join(walk.problems) + "\n" + _log_tails(service_logs))


# -- the tests -----------------------------------------------------------------------------


def test_every_page_for_the_common_job_kinds(browser: Any, service: httpx.Client,
                                             data: dict[str, str], shots: Path,
                                             service_logs: Path) -> None:
    walk = Walk(browser, service, shots)
    try:
        # a running job: its page must not call the last point "the job's result"
        running = _submit(service, data["long"], "dcd", **long_job(6.0))
        wait_running_with_progress(service, running)
        walk.view.page.goto(f"/jobs/{running}")
        walk.view.page.wait_for_function(
            "() => Number(document.getElementById('chart').dataset.points) >= 2")
        caption = walk.view.page.locator("#chart-description").inner_text()
        if service.get(f"/v1/jobs/{running}").json()["status"] == "running":
            assert "result" not in caption, caption
        walk.check(f"/jobs/{running}", "job", "job-running")

        jobs = {
            "linear-binary-scaled-probability": _submit(
                service, data["cancer"], "auto", scale="minmax", probability=True),
            "linear-ovr-10-classes": _submit(service, data["digits"], "auto"),
            "smo-ovo-45-pairs-probability": _submit(
                service, data["pendigits-like"], "smo", probability=True, scale="minmax"),
            "smo-unconverged-max-iter": _submit(service, data["cancer"], "smo", max_iter=5),
        }
        jobs["unconverged-max-seconds"] = running
        jobs["cancelled"] = _cancelled_job(service, data["long"])
        ended = _finished(service, jobs)
        assert ended["smo-unconverged-max-iter"]["result"]["exit_reason"] == "max_iter"
        assert ended["unconverged-max-seconds"]["result"]["exit_reason"] == "max_seconds"
        throwaway = _upload(service, "deleted-file", bundled.svmlight_bytes("iris"))
        jobs["failed"] = _failed_job(service, throwaway)

        # an evaluation with a 10-class confusion matrix, and one with probabilities
        digits_model = ended["linear-ovr-10-classes"]["model_id"]
        _evaluate(service, digits_model, data["digits"])
        _evaluate(service, ended["linear-binary-scaled-probability"]["model_id"],
                  data["cancer"])
        search_id = _search(service, data["wine"])

        walk.jobs(service, jobs)
        walk.check("/", "jobs", "jobs")
        walk.check("/datasets", "datasets", "datasets")
        for name in ("cancer", "pendigits-like"):
            walk.check(f"/datasets/{data[name]}", "dataset", f"dataset-{name}")
        walk.check("/models", "models", "models")
        walk.check("/searches", "searches", "searches")
        walk.check(f"/searches/{search_id}", "search", "search")
        # the registry: a name with a version and an alias that has moved once
        assert service.post("/v1/registry/models", json={"name": "digits"}).status_code == 201
        for _ in range(2):
            assert service.post("/v1/registry/models/digits/versions",
                                json={"model_id": digits_model}).status_code == 201
        for version in (1, 2):
            assert service.put("/v1/registry/models/digits/aliases/production",
                               json={"version": version}).status_code == 200
        walk.check("/registry", "registry", "registry")
        walk.check("/registry/digits", "registered-model", "registered-model")
        _assert_clean(walk, service_logs)
    finally:
        walk.close()

    # the same pages on a phone
    phone = Walk(browser, service, shots, PHONE)
    try:
        for url, kind, name in (
                ("/", "jobs", "phone-jobs"), ("/datasets", "datasets", "phone-datasets"),
                ("/models", "models", "phone-models"), ("/searches", "searches", "phone-searches"),
                (f"/jobs/{jobs['smo-ovo-45-pairs-probability']}", "job", "phone-job-45-pairs"),
                (f"/models/{ended['linear-ovr-10-classes']['model_id']}", "model",
                 "phone-model-10-classes"),
                (f"/datasets/{data['pendigits-like']}", "dataset", "phone-dataset")):
            phone.check(url, kind, name)
        _assert_clean(phone, service_logs)
    finally:
        phone.close()

    walk = Walk(browser, service, shots)
    try:

        # the 10-class confusion matrix shows all ten columns
        page = walk.view.page
        page.goto(f"/models/{digits_model}")
        matrix = page.locator("table.confusion").first
        assert matrix.locator("thead th").count() == 11
        assert page.evaluate(
            "() => { const t = document.querySelector('table.confusion');"
            " const wrap = t.closest('.table-wrap');"
            " return t.getBoundingClientRect().width <= wrap.clientWidth + 1; }"), \
            "the confusion matrix needs scrolling on a 1280 px screen"
        # "Evaluate on" offers only datasets with at most the model's 16 features
        pairs_model = ended["smo-ovo-45-pairs-probability"]["model_id"]
        page.goto(f"/models/{pairs_model}")
        offered = page.locator("#evaluate-dataset option").evaluate_all(
            "options => options.map((o) => o.value)")
        assert data["pendigits-like"] in offered
        assert data["digits"] not in offered and data["cancer"] not in offered, offered
        assert page.locator("#evaluate-dataset").input_value() == data["pendigits-like"]
        # parameters show what the fit used: gamma 1/16, not null
        shown = dict(zip(page.locator(".params dt").all_inner_texts(),
                         page.locator(".params dd").all_inner_texts(), strict=True))
        assert shown["gamma"].startswith("0.0625"), shown
        assert shown["probability"] in ("yes", "true"), shown
        # the models list: every date on one line
        page.goto("/models")
        heights = page.locator(".models-table time").evaluate_all(
            "times => times.map((t) => t.getClientRects().length)")
        assert heights and set(heights) == {1}, heights
        # auto's long help: its first sentence, the rest folded under "more"
        page.goto(f"/datasets/{data['cancer']}")
        page.wait_for_selector("#job-form[data-ready='true']")
        help_box = page.locator("#job-solver-description")
        assert help_box.locator("details").count() == 1
        assert help_box.evaluate("node => node.getBoundingClientRect().height") < 60
        help_box.locator("summary").click()
        assert help_box.evaluate("node => node.getBoundingClientRect().height") > 60
    finally:
        walk.close()

    # the login page, signed out
    signed_out = Page(browser, str(service.base_url), DESKTOP)
    try:
        signed_out.page.goto("/login")
        assert signed_out.page.evaluate(TABLE_OVERFLOW_JS) == []
        signed_out.page.screenshot(path=shots / "login.png", full_page=True)
        assert signed_out.errors == []
    finally:
        signed_out.close()


def test_convergence_of_45_pairs_with_probabilities_is_readable(
        browser: Any, service: httpx.Client, data: dict[str, str], shots: Path,
        service_logs: Path) -> None:
    """The 45 one-vs-one problems as an envelope with the slowest few drawn, the fit and
    the probability calibration's 225 fits as two phases, every problem's final point."""
    job_id = _submit(service, data["pendigits-like"], "smo", probability=True)
    walk = Walk(browser, service, shots)
    try:
        page = walk.view.page
        page.goto(f"/jobs/{job_id}")
        wait_for_job(service.get, job_id, timeout=120)
        walk.check(f"/jobs/{job_id}", "job", "convergence-45-pairs-probability")
        chart = page.evaluate("() => ({...document.getElementById('chart').dataset})")
        assert chart["layout"] == "multi-kernel", chart
        assert chart["series"] == "45" and chart["view"] == "envelope", chart
        assert int(chart["finals"]) == 45, chart  # every pair's final violation
        assert json.loads(chart["phases"]) == ["fit", "calibration"], chart
        assert "225" in page.locator("#chart-phases").inner_text()
        _assert_clean(walk, service_logs)
    finally:
        walk.close()


def test_a_binary_fit_faster_than_the_progress_interval_shows_its_result(
        browser: Any, service: httpx.Client, data: dict[str, str], shots: Path,
        service_logs: Path) -> None:
    job_id = _submit(service, data["cancer"], "smo")
    ovr_id = _submit(service, data["digits"], "auto")
    _finished(service, {"binary": job_id, "ovr": ovr_id})
    walk = Walk(browser, service, shots)
    try:
        walk.check(f"/jobs/{job_id}", "job", "convergence-fast-binary")
        chart = walk.view.page.evaluate("() => ({...document.getElementById('chart').dataset})")
        assert int(chart.get("finals", "0")) >= 1, chart  # the result's point at least
        walk.check(f"/jobs/{ovr_id}", "job", "convergence-10-class-ovr")
        chart = walk.view.page.evaluate("() => ({...document.getElementById('chart').dataset})")
        assert chart["layout"] == "multi-linear" and chart["series"] == "10", chart
        assert int(chart["finals"]) == 10, chart
        _assert_clean(walk, service_logs)
    finally:
        walk.close()


MATRIX = [(solver, dataset, probability, scale)
          for solver in ("auto", "smo") for dataset in ("cancer", "wine")
          for probability in (False, True) for scale in ("none", "minmax")]


@pytest.mark.slow
def test_every_job_kind_on_every_page(browser: Any, service: httpx.Client,
                                      data: dict[str, str], shots: Path,
                                      service_logs: Path) -> None:
    """Linear and SMO, binary and multi-class (one-vs-rest, one-vs-one, SMO one-vs-rest),
    with and without probabilities and scaling, and stopped by max_iter / max_seconds."""
    jobs = {f"{solver}-{dataset}-p{int(probability)}-{scale}": _submit(
        service, data[dataset], solver, probability=probability, scale=scale)
        for solver, dataset, probability, scale in MATRIX}
    jobs["smo-ovr-iris"] = _submit(service, data["iris"], "smo", multiclass="ovr",
                                   probability=True)
    jobs["dcd-max-iter-wine"] = _submit(service, data["wine"], "dcd", max_iter=1,
                                        fallback=False)
    jobs["smo-max-seconds-digits"] = _submit(service, data["digits"], "smo",
                                             max_seconds=0.05, probability=True)
    jobs["pegasos-digits"] = _submit(service, data["digits"], "pegasos")
    _finished(service, jobs, timeout=600)
    walk = Walk(browser, service, shots)
    try:
        walk.jobs(service, jobs)
        walk.check("/", "jobs", "matrix-jobs")
        walk.check("/models", "models", "matrix-models")
        _assert_clean(walk, service_logs)
    finally:
        walk.close()
