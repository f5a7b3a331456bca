"""Checks the dependency direction between rocketq's components (docs/architecture.md).

Reads every module's imports with :mod:`ast` (nothing is imported, so the check is fast and
cannot be fooled by import side effects) and fails with the file, line and offending import.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
COMPONENTS = ("client", "namesrv", "broker", "connector")
SANS_IO_BANNED = {"socket", "asyncio", "selectors", "threading", "ssl", "socketserver"}
REMOTING_THIRD_PARTY = {"msgpack", "lz4"}


def _imports(path: Path) -> Iterator[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.lineno, node.module


def _modules(component: str) -> list[Path]:
    return sorted((ROOT / component / "src").rglob("*.py"))


def _violations() -> list[str]:
    found: list[str] = []
    forbidden = {
        "client": ("rocketq.namesrv", "rocketq.broker", "rocketq.connector"),
        "namesrv": ("rocketq.broker", "rocketq.connector"),
        "broker": ("rocketq.namesrv", "rocketq.connector"),
        "connector": ("rocketq.broker", "rocketq.namesrv"),
    }
    for component in COMPONENTS:
        for path in _modules(component):
            rel = path.relative_to(ROOT)
            in_remoting = "rocketq/client/remoting" in path.as_posix()
            for line, name in _imports(path):
                top = name.split(".")[0]
                where = f"{rel}:{line} imports {name}"
                if any(name == f or name.startswith(f + ".") for f in forbidden[component]):
                    found.append(f"{where}: {component} must not import that component")
                if top == "pyspark" and component != "connector":
                    found.append(f"{where}: pyspark is imported only inside the connector")
                if in_remoting:
                    if top in SANS_IO_BANNED:
                        found.append(f"{where}: rocketq.client.remoting is sans-IO")
                    elif top == "rocketq":
                        if not name.startswith(("rocketq.client.remoting", "rocketq.client.errors")):
                            found.append(f"{where}: remoting may only import itself and client.errors")
                    elif top not in sys.stdlib_module_names and top not in REMOTING_THIRD_PARTY:
                        found.append(f"{where}: remoting imports only the stdlib, msgpack and lz4")
    return found


def test_dependency_direction() -> None:
    violations = _violations()
    assert not violations, "dependency direction broken:\n" + "\n".join(violations)


def test_rocketq_is_a_namespace_package() -> None:
    inits = [p for c in COMPONENTS for p in [ROOT / c / "src" / "rocketq" / "__init__.py"] if p.exists()]
    assert not inits, f"rocketq is a PEP 420 namespace; remove {inits}"


def test_checker_catches_a_violation(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("import asyncio\nfrom rocketq.broker.store import x\n", encoding="utf-8")
    assert [name for _, name in _imports(bad)] == ["asyncio", "rocketq.broker.store"]


@pytest.mark.parametrize("component", COMPONENTS)
def test_every_module_has_a_docstring(component: str) -> None:
    missing = [
        str(p.relative_to(ROOT))
        for p in _modules(component)
        if p.stat().st_size > 0 and ast.get_docstring(ast.parse(p.read_text(encoding="utf-8"))) is None
    ]
    assert not missing, "modules without a docstring paragraph: " + ", ".join(missing)
