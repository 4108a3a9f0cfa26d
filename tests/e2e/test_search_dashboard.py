"""The search pages in headless Chromium (Playwright) against a real API and two workers:
the list, a live heatmap over (log2 C, log2 gamma) filled from the SSE stream with the
best point ringed at the end, a line plot for a one-dimensional space, cancelling from
the page, and the phone layout. No script error or CSP violation on any of them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.test_dashboard import (
    ARTIFACTS,
    CHROMIUM,
    CHROMIUM_ARGS,
    DESKTOP,
    PHONE,
    Page,
    _key,
    _log_tails,
    _require_browser,
)
from tests.support import embedded_settings, running_service

GRID = {"C": {"log2": [-5, 15, 4]}, "gamma": {"log2": [3, -15, -4]}}  # 6 x 5 points


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
def logs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("search-dashboard")


@pytest.fixture(scope="module")
def service(logs: Path, browser: Any) -> Iterator[httpx.Client]:
    settings = embedded_settings(logs / "home", rate_per_second=0)
    with running_service(settings, logs, workers=2) as (client, _workers):
        yield client


@pytest.fixture(scope="module")
def cancer_id(service: httpx.Client, cancer_bytes: bytes) -> str:
    response = service.post("/v1/datasets?name=cancer", content=cancer_bytes)
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


def _search(service: httpx.Client, dataset_id: str, **body: Any) -> str:
    response = service.post("/v1/searches", json={"dataset_id": dataset_id, **body})
    assert response.status_code == 202, response.text
    return str(response.json()["id"])


def _wait_for_best(view: Page) -> None:
    """Until the search ended and the page drew its best point."""
    view.page.wait_for_function(
        "() => !!document.getElementById('search-chart').dataset.best", timeout=180_000)


def test_live_heatmap_fills_and_rings_the_best_point(
        browser: Any, service: httpx.Client, cancer_id: str, logs: Path) -> None:
    view = Page(browser, str(service.base_url), DESKTOP, _key(service))
    try:
        search_id = _search(service, cancer_id, solver="smo", space=GRID)
        view.page.goto(f"/searches/{search_id}")
        # points arrive while the search runs (the page is open before it ends)
        view.page.wait_for_function(
            "() => Number(document.getElementById('search-chart').dataset.points) > 0")
        _wait_for_best(view)
        body = service.get(f"/v1/searches/{search_id}").json()
        chart = view.page.locator("#search-chart")
        assert chart.get_attribute("data-kind") == "heatmap"
        assert chart.get_attribute("data-points") == "30"
        assert chart.get_attribute("data-best") == str(body["best"]["index"])
        assert view.page.locator("#search-status").text_content() == "succeeded"
        assert view.page.locator("#search-progress-label").text_content() == "150 / 150 fits"
        assert view.page.locator("#cancel-search").is_hidden()
        view.page.wait_for_selector("#model-link:not([hidden])", timeout=60_000)
        view.shot("search-heatmap")
        view.page.goto("/searches")
        assert view.page.locator(f"tr[data-search-id='{search_id}']").count() == 1
        view.shot("searches")
        assert view.errors == [], f"{view.errors}\n{_log_tails(logs)}"
    finally:
        view.close()


def test_one_dimension_is_a_line_and_cancel_works_from_the_page(
        browser: Any, service: httpx.Client, cancer_id: str, logs: Path) -> None:
    view = Page(browser, str(service.base_url), DESKTOP, _key(service))
    try:
        line_id = _search(service, cancer_id, solver="dcd", space={"C": {"log2": [-5, 5, 1]}})
        view.page.goto(f"/searches/{line_id}")
        _wait_for_best(view)
        assert view.page.locator("#search-chart").get_attribute("data-kind") == "line"
        assert view.page.locator("#search-chart .uplot").count() == 1
        view.shot("search-line")
        big = {"C": {"log2": [-5, 15, 1]}, "gamma": {"log2": [3, -15, -1]}}  # 399 points
        cancel_id = _search(service, cancer_id, solver="smo", space=big, refit=False)
        view.page.goto(f"/searches/{cancel_id}")
        view.page.get_by_role("button", name="Cancel search").click()
        view.page.wait_for_function(
            "() => document.getElementById('search-status').textContent === 'cancelled'")
        assert service.get(f"/v1/searches/{cancel_id}").json()["status"] == "cancelled"
        assert view.errors == [], f"{view.errors}\n{_log_tails(logs)}"
    finally:
        view.close()


def test_an_l1_search_plots_its_regularisation_path(
        browser: Any, service: httpx.Client, cancer_id: str, logs: Path) -> None:
    """l1_cd over C: the line plot gets a second line (non-zero weights, right axis) and
    the path table one row per point, in increasing C, with the API's counts."""
    view = Page(browser, str(service.base_url), DESKTOP, _key(service))
    try:
        search_id = _search(service, cancer_id, solver="l1_cd",
                            space={"C": {"log2": [-9, 3, 2]}}, cv={"folds": 3}, refit=False)
        view.page.goto(f"/searches/{search_id}")
        _wait_for_best(view)
        body = service.get(f"/v1/searches/{search_id}").json()
        chart = view.page.locator("#search-chart")
        assert chart.get_attribute("data-kind") == "line"
        assert chart.get_attribute("data-nonzeros") == str(len(body["points"])) == "7"
        legend = view.page.locator("#search-chart .u-legend").inner_text()
        assert "non-zero weights" in legend, legend
        assert view.page.locator("#path-card").is_visible()
        rows = view.page.locator("#path-table tbody tr")
        assert rows.count() == 7
        expected = [p["nonzero_weights"] for p in sorted(body["points"],
                                                         key=lambda p: p["values"]["C"])]
        shown = [float(rows.nth(k).locator("[data-field=nonzero_weights]").inner_text())
                 for k in range(7)]
        assert shown == pytest.approx(expected, rel=1e-5)
        assert expected[0] == 0.0 and expected[-1] > expected[0]
        view.shot("search-l1-path")
        assert view.errors == [], f"{view.errors}\n{_log_tails(logs)}"
    finally:
        view.close()


def test_search_pages_fit_a_phone_screen(browser: Any, service: httpx.Client,
                                         cancer_id: str) -> None:
    search_id = service.get("/v1/searches").json()["data"][-1]["id"]
    view = Page(browser, str(service.base_url), PHONE, _key(service))
    try:
        for name, url in (("searches", "/searches"), ("search", f"/searches/{search_id}")):
            view.page.goto(url)
            view.shot(f"phone-{name}")
        assert view.errors == [], view.errors
    finally:
        view.close()
