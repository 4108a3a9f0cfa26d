"""The job page explains a job (headless Chromium against a real API and worker):

Data from the repository (testkit): a pendigits-like 10-class set (`letter_like`), digits
(10 classes: 45 one-vs-one pairs), the a9a-like `onehot` and `cancer`.

- a 10-class one-vs-rest job: one series per binary problem, the current one named, and
  each problem's last point its certified relative gap from the result;
- one-vs-one SMO: one series per class pair, positive quantities only (the KKT
  violation), each ending at its pair's final violation from the result, and a progress
  fraction that moves and never goes back;
- a binary SMO job: −dual and the violation plotted, the last point the result's dual,
  and a progress bar that moves during the run;
- a job that stopped at max_iter: a warning badge with the reason, no green success and
  no 100% bar;
- an upload of content uploaded before: the notice, and "use the existing dataset".

Screenshots go to $HINGE_SHOTS (default /tmp/hinge-shots), outside the repository.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from testkit import bundled, datagen
from tests.e2e.test_dashboard import (
    CHROMIUM,
    CHROMIUM_ARGS,
    DESKTOP,
    Page,
    _key,
    _log_tails,
    _require_browser,
)
from tests.support import SharedService, wait_for_job

SHOTS = Path(os.environ.get("HINGE_SHOTS", "/tmp/hinge-shots"))


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    sync_playwright = _require_browser()
    SHOTS.mkdir(parents=True, exist_ok=True)
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


@pytest.fixture
def view(browser: Any, service: httpx.Client, service_logs: Path) -> Iterator[Page]:
    page = Page(browser, str(service.base_url), DESKTOP, _key(service))
    yield page
    page.close()
    assert page.errors == [], f"{page.errors}\n{_log_tails(service_logs)}"


def _shot(view: Page, name: str) -> Path:
    path = SHOTS / f"{name}.png"
    view.page.screenshot(path=path, full_page=True)
    return path


def _upload(service: httpx.Client, name: str, content: bytes) -> str:
    response = service.post(f"/v1/datasets?name={name}", content=content)
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


def _train(service: httpx.Client, dataset_id: str, solver: str, **params: Any) -> str:
    response = service.post("/v1/jobs", json={"dataset_id": dataset_id, "solver": solver,
                                              "params": params})
    assert response.status_code == 202, response.text
    return str(response.json()["id"])


def _progress_events(service: httpx.Client, job_id: str) -> list[dict[str, Any]]:
    """The job's stored progress events, from its (finished) SSE stream."""
    events = []
    with service.stream("GET", f"/v1/jobs/{job_id}/events", timeout=30) as stream:
        kind = None
        for line in stream.iter_lines():
            if line.startswith("event: "):
                kind = line.removeprefix("event: ")
            elif line.startswith("data: "):
                payload = json.loads(line.removeprefix("data: "))
                if kind == "progress":
                    events.append(payload)
                elif kind == "status" and payload["status"] in ("succeeded", "failed",
                                                                "cancelled"):
                    break
    return events


def _chart(view: Page) -> dict[str, Any]:
    return dict(view.page.evaluate("() => ({...document.getElementById('chart').dataset})"))


def _wait_final(view: Page) -> dict[str, Any]:
    try:
        view.page.wait_for_function("() => document.getElementById('chart').dataset.final",
                                    timeout=60_000)
    except Exception as error:
        raise AssertionError(f"no final point: chart {_chart(view)}; summary "
                             f"{view.page.locator('#chart-summary').inner_text()!r}") from error
    chart = _chart(view)
    chart["final"] = json.loads(chart["final"])
    return chart


def test_one_vs_rest_has_a_series_per_class_and_ends_at_the_result(
        view: Page, service: httpx.Client) -> None:
    # 7,500 x 16 dense rows in 10 classes, shaped like pendigits; C = 100 and eps = 1e-4
    # make the ten problems last (6.5 s and 29 progress events on a busy 2-core machine,
    # about 1 s on a quiet one), so the page sees the job running and the events name
    # their problem
    content = bundled.dump_svmlight(*datagen.letter_like(rows_per_class=750, n_classes=10))
    dataset = _upload(service, "ten-classes", content)
    job_id = _train(service, dataset, "dcd", C=100, eps=1e-4)
    page = view.page
    page.goto(f"/jobs/{job_id}")
    page.wait_for_function("() => Number(document.getElementById('chart').dataset.points) >= 2",
                           timeout=120_000)
    current = page.locator("#chart-current")
    if service.get(f"/v1/jobs/{job_id}").json()["status"] == "running":
        assert re.fullmatch(r"Training binary problem \d+ of 10: \d+ vs rest \(one-vs-rest; "
                            r"the thick line\)\.", current.inner_text()), current.inner_text()
        _shot(view, "ovr-running")
    page.wait_for_selector("#job-status[data-status='succeeded']", timeout=120_000)
    chart = _wait_final(view)
    job = wait_for_job(service.get, job_id)
    assert job["result"]["converged"] is True
    assert chart["layout"] == "multi-linear" and chart["series"] == "10"
    events = _progress_events(service, job_id)
    assert len({e["class_index"] for e in events}) >= 1
    assert chart["drawn"] == "10"  # one line per problem, with events or not
    # each problem's last point is the certified relative gap of its last path step
    labels = [float(v) for v in service.get(f"/v1/datasets/{dataset}").json()["labels"]]
    expected = {}
    for k in range(10):
        steps = [s for s in job["result"]["path"] if s.get("output") == k]
        expected[f"{labels[k]:g} vs rest"] = steps[-1]["relative_gap"]
    assert chart["final"] == pytest.approx(expected, rel=1e-12)
    assert page.locator("#job-progress").evaluate("bar => bar.value") == 1.0
    assert page.locator("#job-progress-detail").inner_text().startswith("finished: ")
    assert page.locator("#job-unconverged").is_hidden()
    assert current.inner_text().startswith("10 binary problems (one-vs-rest)")
    path = _shot(view, "ovr-10-classes")
    print(f"\nscreenshot: {path}")


def test_one_vs_one_smo_plots_positive_series_per_pair_and_progress_moves(
        view: Page, service: httpx.Client) -> None:
    dataset = _upload(service, "digits-ovo", bundled.svmlight_bytes("digits"))
    job_id = _train(service, dataset, "smo", scale="minmax", C=1e5, gamma=0.01, eps=1e-5)
    job = wait_for_job(service.get, job_id, timeout=180)
    assert job["status"] == "succeeded" and job["result"]["converged"] is True
    # the fit may take less than the 0.2 s between progress events on a quiet machine:
    # the plot must not depend on them
    events = _progress_events(service, job_id)
    assert all(e["n_classes"] == 45 and len(e["pair"]) == 2 for e in events)
    fractions = [e["fraction"] for e in events]
    assert fractions == sorted(fractions) and all(0 <= f <= 1 for f in fractions)
    page = view.page
    page.goto(f"/jobs/{job_id}")
    chart = _wait_final(view)
    assert chart["layout"] == "multi-kernel" and chart["series"] == "45"
    # 45 pairs are an envelope (smallest, median and largest violation of the pairs, the
    # 3 slowest pairs as lines, a dot at each pair's end): every pair ends at its final
    # violation from the result, even the pairs solved between two progress events
    assert chart["view"] == "envelope"
    problems = job["result"]["problems"]
    assert len(problems) == 45 and all(p["exit_reason"] == "converged" for p in problems)
    assert chart["finals"] == "45" and chart["drawn"] == "7"
    assert int(chart["points"]) == len(events) + 45
    assert chart["final"] == {f"{a:g} vs {b:g}": p["violation"]
                              for p in problems for a, b in [p["pair"]]}
    assert all(0 < p["violation"] <= 1e-5 for p in problems)
    caption = page.locator("#chart-current").inner_text()
    if events:
        assert caption == ("45 binary problems (one-vs-one): their envelope, the 3 slowest "
                           "and every problem's end."), caption
    else:  # a fit shorter than the progress interval: the dots are the pairs' ends
        assert caption.startswith("The fit ended in ") and "each dot" in caption, caption
    if events:
        assert chart["current"] == str(events[-1]["class_index"])
    # the violations plotted are positive numbers (nothing dropped off a log axis)
    assert all(e["violation"] > 0 for e in events)
    assert page.locator("#chart canvas").count() == 1
    path = _shot(view, "ovo-smo-45-pairs")
    print(f"\nscreenshot: {path}")


def test_binary_smo_plots_minus_dual_and_ends_at_the_result(
        view: Page, service: httpx.Client) -> None:
    dataset = _upload(service, "onehot", bundled.svmlight_bytes("onehot"))
    # C = 100 on the a9a-like 8,000 one-hot rows: 11 s and 38 progress events 0.2 s apart
    # on a busy 2-core machine, some 2 s on a quiet one (at C = 1 the 0/1 rows' bit sets
    # finish in a fraction of a second, a handful of events)
    job_id = _train(service, dataset, "smo", C=100.0)
    job = wait_for_job(service.get, job_id, timeout=180)
    assert job["status"] == "succeeded"
    events = _progress_events(service, job_id)
    assert events and all(e["dual"] < 0 and e["primal"] is None for e in events)
    # the bar moves during the run (the share of variables meeting the KKT conditions),
    # not only at the end, and never goes back
    fractions = [e["fraction"] for e in events]
    assert fractions == sorted(fractions)
    assert len(events) >= 3 and 0 < fractions[-2] < 1, fractions
    page = view.page
    page.goto(f"/jobs/{job_id}")
    chart = _wait_final(view)
    assert chart["layout"] == "binary-kernel" and chart["drawn"] == "2"
    assert chart["final"] == {"−dual": -job["result"]["dual_objective"],
                              "violation m − M": job["result"]["violation"]}
    assert 0 < job["result"]["violation"] <= 1e-3  # converged: below eps
    assert int(chart["points"]) == len(events) + 1  # the events, then the result
    path = _shot(view, "binary-smo")
    print(f"\nscreenshot: {path}")


def test_a_job_stopped_at_max_iter_shows_a_warning_not_a_success(
        view: Page, service: httpx.Client) -> None:
    dataset = _upload(service, "onehot-capped", bundled.svmlight_bytes("onehot"))
    # C = 1000, 50,000 steps on the a9a-like one-hot rows: 10 s of progress events on a
    # busy 2-core machine, about 1 s on a quiet one (C = 1 with 1,500 steps ended in 0.15 s
    # once 0/1 rows used bit sets, before the first event, and the chart then says there
    # is nothing to plot)
    job_id = _train(service, dataset, "smo", C=1000.0, max_iter=50_000)
    job = wait_for_job(service.get, job_id, timeout=180)
    assert job["status"] == "succeeded"
    assert job["result"]["converged"] is False and job["result"]["exit_reason"] == "max_iter"
    assert job["progress_fraction"] != 1.0  # not a finished 100%
    page = view.page
    page.goto(f"/jobs/{job_id}")
    badge = page.locator("#job-unconverged [data-field=unconverged]")
    badge.wait_for(timeout=30_000)
    assert badge.inner_text() == "⚠ Not converged (max_iter)"
    status = page.locator("#job-status")
    assert status.inner_text() == "stopped: max_iter"
    assert "status-succeeded" not in (status.get_attribute("class") or "")
    color = status.evaluate("node => getComputedStyle(node).color")
    assert color != "rgb(26, 127, 55)"  # not the green of success
    last_entry = page.locator("#job-history li").last.locator(".status")
    assert last_entry.inner_text() == "stopped: max_iter"  # the history says so too
    page.wait_for_function("() => document.getElementById('chart').dataset.final")
    bar = page.locator("#job-progress")
    assert bar.evaluate("bar => bar.value") < 1.0
    assert "unconverged" in (bar.get_attribute("class") or "")
    assert page.locator("#job-progress-label").inner_text().endswith("stopped")
    path = _shot(view, "unconverged-max-iter")
    print(f"\nscreenshot: {path}")
    # the jobs list says it too, server-rendered and after the page's own refresh
    page.goto("/")
    badge = page.locator(f"tr[data-job-id='{job_id}'] .status")
    assert badge.inner_text() == "stopped: max_iter"
    page.wait_for_function(f"() => document.querySelector(\"tr[data-job-id='{job_id}'] "
                           "[data-field=progress-text]\").textContent.endsWith('stopped')")
    assert badge.inner_text() == "stopped: max_iter"


def test_a_duplicate_upload_offers_the_existing_dataset(
        view: Page, service: httpx.Client, tmp_path: Path, cancer_bytes: bytes) -> None:
    text = cancer_bytes
    first = _upload(service, "cancer-original", text)
    path = tmp_path / "cancer_copy.txt"
    path.write_bytes(text)
    page = view.page
    page.goto("/datasets")
    page.set_input_files("#upload-file", str(path))
    page.fill("#upload-name", "cancer-copy")
    page.get_by_role("button", name="Upload").click()
    notice = page.locator("#upload-duplicate")
    notice.wait_for(state="visible", timeout=30_000)
    assert "cancer-original" in notice.inner_text()
    assert notice.get_attribute("data-existing-id") == first
    _shot(view, "duplicate-upload")
    copies = [d for d in service.get("/v1/datasets").json()["data"] if d["name"] == "cancer-copy"]
    assert len(copies) == 1
    page.get_by_role("button", name="Use the existing dataset (delete this copy)").click()
    page.wait_for_selector("#upload-status >> text=Using “cancer-original”")
    assert notice.is_hidden()
    names = [d["name"] for d in service.get("/v1/datasets").json()["data"]]
    assert "cancer-copy" not in names and "cancer-original" in names
    assert page.locator(f"tr[data-dataset-id='{copies[0]['id']}']").count() == 0

    # with the box ticked, the same file is not stored again at all
    page.set_input_files("#upload-file", str(path))
    page.check("#upload-reuse")
    page.get_by_role("button", name="Upload").click()
    page.wait_for_selector("#upload-status >> text=uploaded before as “cancer-original”")
    assert [d["name"] for d in service.get("/v1/datasets").json()["data"]].count(
        "cancer-original") == 1
