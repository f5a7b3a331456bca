"""Checks the dependency direction between rocketq's packages (docs/architecture.md).

Reads every module's imports with :mod:`ast` (nothing is imported, so the check is fast and
cannot be fooled by import side effects) and fails with the file, line and offending import.
The packages are the four components plus ``rocketq.server``, the server side of the transport,
which ships from the client's source folder but is checked as a package of its own: the client
never imports it, and it imports nothing of namesrv, broker or connector.
"""

from __future__ import annotations

import ast
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SRC_FOLDERS = ("client", "namesrv", "broker", "connector")
#: package -> the folder holding its modules
PACKAGES = {
    "client": ROOT / "client" / "src" / "rocketq" / "client",
    "server": ROOT / "client" / "src" / "rocketq" / "server",
    "namesrv": ROOT / "namesrv" / "src",
    "controller": ROOT / "namesrv" / "src" / "rocketq" / "controller",  # ships with namesrv
    "broker": ROOT / "broker" / "src",
    "connector": ROOT / "connector" / "src",
    "dashboard": ROOT / "client" / "src" / "rocketq" / "dashboard",  # ships with the client
}
FORBIDDEN = {
    "client": (
        "rocketq.namesrv",
        "rocketq.broker",
        "rocketq.connector",
        "rocketq.server",
        "rocketq.dashboard",
    ),
    "server": ("rocketq.namesrv", "rocketq.broker", "rocketq.connector"),
    "namesrv": ("rocketq.broker", "rocketq.connector"),
    "controller": ("rocketq.broker", "rocketq.connector"),
    "broker": ("rocketq.namesrv", "rocketq.connector"),
    "connector": ("rocketq.broker", "rocketq.namesrv", "rocketq.server"),
    "dashboard": ("rocketq.broker", "rocketq.namesrv", "rocketq.server", "rocketq.connector"),
}
#: the parts of rocketq.client the server side may build on (not the producer, consumer or admin)
SERVER_MAY_IMPORT = (
    "rocketq.server",
    "rocketq.client.remoting",
    "rocketq.client.transport",
    "rocketq.client.errors",
)
SANS_IO_BANNED = {"socket", "asyncio", "selectors", "threading", "ssl", "socketserver"}
REMOTING_THIRD_PARTY = {"lz4"}


def _imports(path: Path) -> Iterator[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.lineno, node.module


def _modules(package: str) -> list[Path]:
    return sorted(PACKAGES[package].rglob("*.py"))


def _check(package: str, path: Path, rel: str, in_remoting: bool) -> list[str]:
    found: list[str] = []
    for line, name in _imports(path):
        top = name.split(".")[0]
        where = f"{rel}:{line} imports {name}"
        if any(name == f or name.startswith(f + ".") for f in FORBIDDEN[package]):
            found.append(f"{where}: {package} must not import that package")
        elif package == "server" and top == "rocketq" and not name.startswith(SERVER_MAY_IMPORT):
            found.append(f"{where}: rocketq.server builds only on client.remoting, client.transport, errors")
        if top == "pyspark" and package != "connector":
            found.append(f"{where}: pyspark is imported only inside the connector")
        if in_remoting:
            if top in SANS_IO_BANNED:
                found.append(f"{where}: rocketq.client.remoting is sans-IO")
            elif top == "rocketq":
                if not name.startswith(("rocketq.client.remoting", "rocketq.client.errors")):
                    found.append(f"{where}: remoting may only import itself and client.errors")
            elif top not in sys.stdlib_module_names and top not in REMOTING_THIRD_PARTY:
                found.append(f"{where}: remoting imports only the stdlib and lz4")
    return found


def _violations() -> list[str]:
    found: list[str] = []
    for package in PACKAGES:
        for path in _modules(package):
            in_remoting = "rocketq/client/remoting" in path.as_posix()
            found += _check(package, path, str(path.relative_to(ROOT)), in_remoting)
    return found


def test_dependency_direction() -> None:
    violations = _violations()
    assert not violations, "dependency direction broken:\n" + "\n".join(violations)


def test_rocketq_is_a_namespace_package() -> None:
    inits = [p for c in SRC_FOLDERS for p in [ROOT / c / "src" / "rocketq" / "__init__.py"] if p.exists()]
    assert not inits, f"rocketq is a PEP 420 namespace; remove {inits}"


def test_every_package_is_found_and_shipped() -> None:
    assert all(_modules(package) for package in PACKAGES), "a package folder moved; update PACKAGES"
    build = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["hatch"]["build"]
    for folder in (f"{c}/src" for c in SRC_FOLDERS):  # rocketq.server ships from client/src
        assert folder in build["targets"]["wheel"]["only-include"], f"{folder} is not in the wheel"
        assert folder in build["dev-mode-dirs"], f"{folder} is not in the editable install"


def test_checker_reads_imports(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("import asyncio\nfrom rocketq.broker.store import x\n", encoding="utf-8")
    assert [name for _, name in _imports(bad)] == ["asyncio", "rocketq.broker.store"]


@pytest.mark.parametrize(
    ("package", "source", "expected"),
    [
        ("client", "def f():\n    from rocketq.server import RemotingServer\n", "client must not import"),
        ("server", "from rocketq.broker.server import BrokerController\n", "server must not import"),
        ("server", "from rocketq.client.producer import Producer\n", "builds only on"),
        ("connector", "import rocketq.server.remoting_server\n", "connector must not import"),
        ("broker", "import pyspark.sql\n", "pyspark is imported only"),
    ],
)
def test_checker_catches_a_violation(tmp_path: Path, package: str, source: str, expected: str) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text(source, encoding="utf-8")
    found = _check(package, bad, "bad.py", in_remoting=False)
    assert len(found) == 1 and expected in found[0], found


def test_checker_allows_the_server_its_foundation(tmp_path: Path) -> None:
    ok = tmp_path / "ok.py"
    ok.write_text("from rocketq.client.transport.channel import Channel\nfrom rocketq.server import x\n")
    assert _check("server", ok, "ok.py", in_remoting=False) == []
    assert _check("broker", ok, "ok.py", in_remoting=False) == []


@pytest.mark.parametrize("package", PACKAGES)
def test_every_module_has_a_docstring(package: str) -> None:
    missing = [
        str(p.relative_to(ROOT))
        for p in _modules(package)
        if p.stat().st_size > 0 and ast.get_docstring(ast.parse(p.read_text(encoding="utf-8"))) is None
    ]
    assert not missing, "modules without a docstring paragraph: " + ", ".join(missing)
