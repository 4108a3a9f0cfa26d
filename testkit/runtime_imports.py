"""What the shipped install lacks: run by the runtime-only virtualenv's python as
`python -I testkit/runtime_imports.py` (isolated: neither this folder, nor the working
directory, nor PYTHONPATH is on sys.path, so only installed code is importable). Prints
one JSON report; every list in it is empty when the install is complete:

- "outside": a package of the service found elsewhere than in this virtualenv;
- "import_errors": a module of app, workers, solvers or migrations that does not import,
  or a piece that a documented deployment loads by name (the kombu transports of the
  three brokers, the PostgreSQL dialect, boto3 for S3), with the error;
- "missing": a top-level module that the sources import (anywhere: also inside a
  function, as app.infra.s3_store does with boto3) and that is not installed;
- "undeclared": a distribution that the sources import from but that pyproject.toml does
  not list in [project.dependencies] (it came in only as someone else's dependency).

Imports under `if TYPE_CHECKING:` and inside a `try` that catches ImportError are optional
and not counted. Standard library only.
"""

from __future__ import annotations

import ast
import importlib
import importlib.metadata as metadata
import importlib.util
import json
import re
import sys
from pathlib import Path

PACKAGES = ("app", "workers", "solvers", "migrations")
# alembic's environment script runs the migrations when it is imported (alembic does that)
NOT_IMPORTED = {"migrations.env"}
# the brokers docs/operations.md documents: embedded (sqla), Redis, RabbitMQ (amqp)
TRANSPORTS = ("sqla", "redis", "amqp")


def _name(requirement: str) -> str:
    match = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", requirement)
    return _normal(match.group(0) if match else requirement)


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _optional_guard(node: ast.AST) -> bool:
    if isinstance(node, ast.If):
        test = node.test
        return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
            isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")
    if isinstance(node, ast.Try):
        for handler in node.handlers:
            caught = handler.type
            names = caught.elts if isinstance(caught, ast.Tuple) else [caught]
            if any(isinstance(n, ast.Name) and n.id in {"ImportError", "ModuleNotFoundError"}
                   for n in names):
                return True
    return False


def imported_names(tree: ast.AST) -> set[str]:
    """Top-level names of the absolute imports in `tree`, outside optional blocks."""
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if _optional_guard(node):
            # the guarded body is optional; an `else:`/handler/`finally` part is not
            assert isinstance(node, ast.If | ast.Try)
            rest: list[ast.AST] = [*node.orelse]
            if isinstance(node, ast.Try):
                rest += [*node.handlers, *node.finalbody]
            for child in rest:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def _installed(name: str) -> bool:
    if sys.modules.get(name) is not None:  # imported above (its __spec__ may be None)
        return True
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def main() -> int:
    report: dict[str, object] = {"prefix": sys.prefix}
    outside: dict[str, str] = {}
    import_errors: dict[str, str] = {}
    sources: dict[str, set[str]] = {}  # imported top-level name -> files
    modules: list[str] = []
    prefix = Path(sys.prefix).resolve()
    for package in PACKAGES:
        spec = importlib.util.find_spec(package)
        if spec is None or not spec.submodule_search_locations:
            import_errors[package] = "not installed"
            continue
        root = Path(next(iter(spec.submodule_search_locations))).resolve()
        if prefix not in root.parents:
            outside[package] = str(root)
        for path in sorted(root.rglob("*.py")):
            relative = path.relative_to(root.parent).with_suffix("")
            parts = relative.parts[:-1] if relative.name == "__init__" else relative.parts
            modules.append(".".join(parts))
            for name in imported_names(ast.parse(path.read_bytes(), str(path))):
                sources.setdefault(name, set()).add(str(relative))
    for module in modules:
        if module in NOT_IMPORTED:
            continue
        try:
            importlib.import_module(module)
        except BaseException as exc:  # SystemExit too: report it, go on
            import_errors[module] = f"{type(exc).__name__}: {exc}"
    from kombu.transport import resolve_transport

    for transport in TRANSPORTS:
        try:
            resolve_transport(transport)
        except BaseException as exc:
            import_errors[f"kombu transport {transport}"] = f"{type(exc).__name__}: {exc}"
    pieces = {
        "PostgreSQL dialect": "import sqlalchemy; "
                              "sqlalchemy.create_engine('postgresql+psycopg://u@h/db')",
        "S3 client": "import boto3; boto3.session.Session().client('s3', "
                     "region_name='us-east-1', endpoint_url='http://127.0.0.1:1')",
    }
    for what, code in pieces.items():
        try:
            exec(code, {})
        except BaseException as exc:
            import_errors[what] = f"{type(exc).__name__}: {exc}"

    first_party = set(PACKAGES)
    third_party = {name: files for name, files in sources.items()
                   if name not in first_party and name not in sys.stdlib_module_names
                   and name != "__future__"}
    missing = {name: sorted(files) for name, files in third_party.items()
               if not _installed(name)}
    declared = {_name(r) for r in metadata.requires("hinge") or []
                if "extra ==" not in r.partition(";")[2]}
    providers = metadata.packages_distributions()
    undeclared: dict[str, list[str]] = {}
    for name in sorted(set(third_party) - set(missing)):
        distributions = {_normal(d) for d in providers.get(name, [])}
        if distributions and not distributions & declared:
            undeclared[name] = sorted(distributions)
    report.update(outside=outside, import_errors=import_errors, missing=missing,
                  undeclared=undeclared, modules=len(modules),
                  third_party=sorted(third_party))
    print(json.dumps(report, indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
