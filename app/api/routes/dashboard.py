"""The web dashboard: server-rendered pages at `/`, `/jobs/{id}`, `/datasets`, `/models`.

The pages are Jinja2 templates (autoescaped) plus small ES modules under `app/api/static` that
talk to the JSON API (`/v1/...`) for live updates, uploads, job submission and prediction.
Every dashboard and static response carries a strict Content-Security-Policy: no inline
script or style, nothing from another origin.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Coroutine
from datetime import UTC, datetime
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import parse_qs

import jinja2
from fastapi import APIRouter, Query, Request, Response
from fastapi.responses import HTMLResponse, RedirectResponse
from fastapi.routing import APIRoute
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates
from starlette.types import Scope

from app.api.auth import SESSION_COOKIE, Public, csrf_token, require_page_scope
from app.api.deps import SessionDep
from app.domain.errors import NotFound
from app.domain.job_status import ACTIVE_STATUSES, TERMINAL_STATUSES, JobStatus
from app.domain.schemas import JobPublic
from app.domain.services import datasets, evaluations, imports, jobs, lineage, models
from app.domain.services.tenants import Principal
from app.domain.services.workers import WaitExplainer

APP_DIR = Path(__file__).resolve().parents[1]
TEMPLATES_DIR = APP_DIR / "templates"
STATIC_DIR = APP_DIR / "static"

CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; "
    "form-action 'self'; frame-ancestors 'none'"
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",
    "Cross-Origin-Opener-Policy": "same-origin",
}
LIST_LIMIT = 100


def add_security_headers(response: Response) -> Response:
    for name, value in SECURITY_HEADERS.items():
        response.headers.setdefault(name, value)
    return response


class DashboardRoute(APIRoute):
    """A page's route: a job, dataset, model or search that is not there (or another
    tenant's) is the "not found" page, and every response carries the security headers."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def secured(request: Request) -> Response:
            try:
                response = await handler(request)
            except NotFound as missing:
                response = _not_found(request, missing)
            return add_security_headers(response)

        return secured


class SecureStaticFiles(StaticFiles):
    """StaticFiles whose responses carry the same security headers as the pages."""

    async def get_response(self, path: str, scope: Scope) -> Response:
        response = await super().get_response(path, scope)
        add_security_headers(response)
        if "v" in parse_qs(scope.get("query_string", b"").decode("latin-1")):
            # `?v=<content hash>` URLs never change meaning: cache them for a year.
            response.headers["Cache-Control"] = "public, max-age=31536000, immutable"
        return response


def static_files() -> SecureStaticFiles:
    """The app mounts this at `/static` (name "static")."""
    return SecureStaticFiles(directory=STATIC_DIR)


@lru_cache(maxsize=256)
def _static_version(path: str, mtime_ns: int) -> str:
    return hashlib.sha256((STATIC_DIR / path).read_bytes()).hexdigest()[:10]


def static_url(path: str) -> str:
    """`/static/<path>?v=<content hash>`: a new URL whenever the file changes."""
    file = STATIC_DIR / path
    try:
        version = _static_version(path, file.stat().st_mtime_ns)
    except OSError:
        return f"/static/{path}"
    return f"/static/{path}?v={version}"


# -- formatting helpers shared by the templates (the JS has the same rules) --------------

def fmt_int(value: Any) -> str:
    if value is None:
        return "—"
    return f"{int(value):,}"


def fmt_num(value: Any, digits: int = 6) -> str:
    """A float in at most `digits` significant digits; scientific for very small/large."""
    if value is None or isinstance(value, bool):
        return "—" if value is None else ("yes" if value else "no")
    if not isinstance(value, int | float):
        return str(value)
    number = float(value)
    if not math.isfinite(number):
        return str(number)
    if number != 0 and (abs(number) < 1e-3 or abs(number) >= 1e7):
        return f"{number:.{max(1, digits - 3)}e}"
    return f"{number:.{digits}g}"


def fmt_param(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return ", ".join(f"{k}: {fmt_param(v)}" for k, v in value.items()) or "{}"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def params_used(params: dict[str, Any], n_features: int | None,
                max_seconds: float | None = None) -> list[tuple[str, str]]:
    """A job's or model's parameters as the fit used them: (name, text) in spec order.

    The stored spec keeps `null` for "the default"; this page shows what that default was:
    gamma 1/features (LIBSVM's rule), the worker's time limit for max_seconds, the chosen
    solver's own max_iter, weight 1 for every class, seed 0. Booleans read as JSON does.
    """
    shown = []
    for name, value in params.items():
        text = fmt_param(value)
        if name == "max_seconds" and value is not None:
            text = f"{text} s"
        if value is None:
            if name == "gamma" and n_features:
                text = f"{1.0 / n_features:g} (1/{n_features} features)"
            elif name == "max_seconds":
                text = f"{max_seconds:g} s (the service's limit)" if max_seconds else "no limit"
            elif name == "max_iter":
                text = "the solver's default"
            elif name == "class_weight":
                text = "1 for every class"
            elif name == "seed":
                text = "0"
            else:
                text = "—"
        shown.append((name, text))
    return shown


def classes_text(labels: list[float]) -> str:
    """A model's classes in a table cell: all of them up to 4, else "10: 0 … 9"."""
    shown = [fmt_num(v) for v in labels]
    if len(shown) <= 4:
        return ", ".join(shown)
    return f"{len(shown)}: {shown[0]} … {shown[-1]}"


def path_text(path: list[dict[str, Any]] | None) -> str:
    """A fit's solver path, repeats counted: "tron (converged) × 10" for ten outputs that
    each ended the same way, not ten arrows."""
    path = path or []
    outputs: dict[Any, list[str]] = {}
    for step in path:
        outputs.setdefault(step.get("output"), []).append(
            f"{step.get('solver')} ({step.get('exit')})")
    if len(outputs) > 1 and len({tuple(v) for v in outputs.values()}) == 1:
        # one-vs-rest: every output took the same path
        return f"{' → '.join(next(iter(outputs.values())))}, each of the {len(outputs)} outputs"
    steps = [f"{step.get('solver')} ({step.get('exit')})" for step in path]
    runs: list[list[Any]] = []
    for text in steps:
        if runs and runs[-1][0] == text:
            runs[-1][1] += 1
        else:
            runs.append([text, 1])
    return " → ".join(text if count == 1 else f"{text} × {count}" for text, count in runs)


def fmt_seconds(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    seconds = max(0.0, float(seconds))
    if seconds < 0.001:
        return "0 s" if seconds == 0 else "< 1 ms"
    if seconds < 0.1:  # a 45 ms fit is not "0.0 s"
        return f"{round(seconds * 1000):.0f} ms"
    if seconds < 10:
        return f"{seconds:.1f} s"
    if seconds < 60:
        return f"{seconds:.0f} s"
    whole = int(seconds)
    if whole < 3600:
        return f"{whole // 60} min {whole % 60:02d} s"
    return f"{whole // 3600} h {(whole % 3600) // 60:02d} min"


def fmt_bytes(size: int | None) -> str:
    if size is None:
        return "—"
    value = float(size)
    for unit in ("B", "KB", "MB"):
        if value < 1000:
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    return f"{value:.1f} GB"


def fmt_dt(value: datetime | str | None) -> str:
    if value is None:
        return "—"
    when = value
    if isinstance(value, str):
        try:
            when = datetime.fromisoformat(value)
        except ValueError:
            return value
    assert isinstance(when, datetime)
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def iso(value: datetime | str | None) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.isoformat()


def job_elapsed(job: JobPublic) -> float | None:
    if job.started_at is None:
        return None
    end = job.finished_at or datetime.now(UTC)
    return (end - job.started_at).total_seconds()


def short_id(value: str | None) -> str:
    return value[:8] if value else "—"


def _label_order(label: str) -> float:
    try:
        return float(label)
    except ValueError:
        return math.inf


def class_counts_text(counts: dict[str, int]) -> str:
    return ", ".join(f"{label}: {counts[label]:,}" for label in sorted(counts, key=_label_order))


def dataset_labels_text(dataset: Any) -> str:
    """A dataset's labels in a table cell: its class counts, or a regression's range."""
    stats = getattr(dataset, "label_stats", None)
    if getattr(dataset, "task", "classification") == "regression" and stats:
        return f"regression: {fmt_num(stats['min'])} … {fmt_num(stats['max'])}"
    return class_counts_text(dataset.class_counts)


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES_DIR),
        autoescape=True,  # every template, whatever its extension
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(
        int=fmt_int, num=fmt_num, param=fmt_param, seconds=fmt_seconds, bytes=fmt_bytes,
        dt=fmt_dt, iso=iso, short=short_id, class_counts=class_counts_text, path=path_text,
        classes=classes_text, dataset_labels=dataset_labels_text,
    )
    env.globals.update(static=static_url, job_elapsed=job_elapsed, statuses=list(JobStatus),
                       active_statuses=ACTIVE_STATUSES, terminal_statuses=TERMINAL_STATUSES)
    return env


templates = Jinja2Templates(env=_environment())

router = APIRouter(include_in_schema=False, route_class=DashboardRoute,
                   default_response_class=HTMLResponse)


PageAuth = Annotated[Principal, require_page_scope("read")]


def _page(request: Request, template: str, status_code: int = 200, **context: Any
          ) -> HTMLResponse:
    cookie = request.cookies.get(SESSION_COOKIE)
    if cookie and "csrf" not in context:
        context["csrf"] = csrf_token(request.app.state.settings, cookie)
    response = templates.TemplateResponse(request, template, context, status_code=status_code)
    response.headers["Cache-Control"] = "no-store"
    return response


def _not_found(request: Request, missing: NotFound) -> HTMLResponse:
    return _page(request, "not_found.html", status_code=404, nav=f"{missing.kind}s",
                 kind=missing.kind, ident=missing.ident)


def _public(rows: list[Any]) -> list[JobPublic]:
    return [JobPublic.model_validate(row) for row in rows]


@router.get("/")
def jobs_page(request: Request, session: SessionDep, principal: PageAuth,
              status: str | None = Query(None, max_length=16)) -> HTMLResponse:
    tenant = principal.tenant_id
    wanted = JobStatus(status) if status in list(JobStatus) else None
    shown = _public(jobs.list_jobs(session, tenant, status=wanted, limit=LIST_LIMIT))
    counts = jobs.status_counts(session, tenant)
    names = datasets.dataset_names(session, tenant, {j.dataset_id for j in shown})
    return _page(request, "jobs.html", nav="jobs", jobs=shown, names=names, status=wanted,
                 counts=counts, total=sum(counts.values()), limit=LIST_LIMIT)


@router.get("/jobs", dependencies=[Public])
def jobs_alias() -> RedirectResponse:
    return RedirectResponse("/", status_code=307)


@router.get("/jobs/{job_id}")
def job_page(request: Request, job_id: str, session: SessionDep, principal: PageAuth
             ) -> HTMLResponse:
    row = jobs.get_job(session, principal.tenant_id, job_id)
    job = JobPublic.model_validate(row)
    job.waiting_for = WaitExplainer(session, request.app.state.settings,
                                    principal.allows("admin")).explain(row)
    dataset = datasets.find_dataset(session, principal.tenant_id, job.dataset_id)
    settings = request.app.state.settings
    return _page(request, "job.html", nav="jobs", job=job, dataset=dataset,
                 params=params_used(job.params, dataset.features if dataset else None,
                                    settings.job_max_seconds))


@router.get("/datasets")
def datasets_page(request: Request, session: SessionDep, principal: PageAuth
                  ) -> HTMLResponse:
    tenant = principal.tenant_id
    return _page(request, "datasets.html", nav="datasets",
                 datasets=datasets.list_datasets(session, tenant, limit=LIST_LIMIT),
                 count=datasets.count_datasets(session, tenant), limit=LIST_LIMIT,
                 imports=imports.active_imports(session, tenant))


@router.get("/datasets/{dataset_id}")
def dataset_page(request: Request, dataset_id: str, session: SessionDep, principal: PageAuth
                 ) -> HTMLResponse:
    tenant = principal.tenant_id
    dataset = datasets.get_dataset(session, tenant, dataset_id)
    shown = _public(jobs.list_jobs(session, tenant, dataset_id=dataset_id, limit=LIST_LIMIT))
    classes = sorted(dataset.class_counts.items(), key=lambda item: _label_order(item[0]))
    return _page(request, "dataset.html", nav="datasets", dataset=dataset, jobs=shown,
                 names={dataset.id: dataset.name}, classes=classes,
                 label_keys=[label for label, _count in classes])


@router.get("/models")
def models_page(request: Request, session: SessionDep, principal: PageAuth,
                model: str | None = Query(None, max_length=64)) -> HTMLResponse:
    tenant = principal.tenant_id
    shown = models.list_models(session, tenant, limit=LIST_LIMIT)
    names = datasets.dataset_names(session, tenant, {m.dataset_id for m in shown})
    selected = model if any(m.id == model for m in shown) else (
        shown[0].id if shown else None)
    return _page(request, "models.html", nav="models", models=shown,
                 count=models.count_models(session, tenant), names=names, selected=selected,
                 limit=LIST_LIMIT)


@router.get("/models/{model_id}")
def model_page(request: Request, model_id: str, session: SessionDep, principal: PageAuth
               ) -> HTMLResponse:
    model = models.get_model(session, principal.tenant_id, model_id)
    dataset = datasets.find_dataset(session, principal.tenant_id, model.dataset_id)
    # "Evaluate on" offers the datasets the model can read: at most its features (the API
    # refuses more), its own dataset first, then the test parts of splits
    usable = [d for d in datasets.list_datasets(session, principal.tenant_id, limit=LIST_LIMIT)
              if d.features <= model.n_features]
    parent = dataset.parent_id if dataset is not None else None
    usable.sort(key=lambda d: (not (d.split_part == "test" and parent
                                    and d.parent_id == parent),
                               d.id != model.dataset_id))
    settings = request.app.state.settings
    return _page(request, "model.html", nav="models", model=model, dataset=dataset,
                 models=[model], selected=model.id,
                 evaluations=evaluations.list_evaluations(session, principal.tenant_id,
                                                          model_id, limit=20),
                 datasets=usable, lineage=lineage.lineage(session, principal.tenant_id, model.id),
                 params=params_used(model.params, model.n_features, settings.job_max_seconds))
