"""Checks the dependency direction between rocketq's packages and that no import circle exists.

Reads every module's imports with :mod:`ast` (nothing is imported, so the check is fast and
cannot be fooled by import side effects) and fails with the file, line and offending import.
``client/`` is the remoting library for both sides, as RocketMQ's ``remoting`` module: it holds
``rocketq.client`` (the sans-IO codec, transports and the client APIs), ``rocketq.server`` (the
server side: transport, ACL checks, the ``.properties`` reader, the metrics vocabulary) and
``rocketq.tools`` (the dashboard and ``rocketq dev``, programs over the public client API).  The
servers (``rocketq.server``, the NameServer, the controller, the broker) build only on the
remoting library; the controller ships with the NameServer but never imports its internals.

The cycle rule reads every import, including those inside functions and under ``TYPE_CHECKING``:
a circle kept importable by a late import is still a circle (docs/architecture.md).
"""

from __future__ import annotations

import ast
import sys
import tomllib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SRC_FOLDERS = ("client", "namesrv", "broker", "connector")
SRC_ROOTS = tuple(ROOT / folder / "src" for folder in SRC_FOLDERS)
#: package -> the folder holding its modules
PACKAGES = {
    "client": ROOT / "client" / "src" / "rocketq" / "client",
    "server": ROOT / "client" / "src" / "rocketq" / "server",
    "tools": ROOT / "client" / "src" / "rocketq" / "tools",  # ships with the client
    "namesrv": ROOT / "namesrv" / "src" / "rocketq" / "namesrv",
    "controller": ROOT / "namesrv" / "src" / "rocketq" / "controller",  # ships with namesrv
    "broker": ROOT / "broker" / "src" / "rocketq" / "broker",
    "proxy": ROOT / "broker" / "src" / "rocketq" / "proxy",  # ships with the broker
    "connector": ROOT / "connector" / "src",
}
_SERVERS = ("rocketq.namesrv", "rocketq.controller", "rocketq.broker")
FORBIDDEN = {
    "client": (*_SERVERS, "rocketq.connector", "rocketq.server", "rocketq.tools"),
    "server": (*_SERVERS, "rocketq.connector", "rocketq.tools"),
    "tools": (*_SERVERS, "rocketq.connector", "rocketq.server"),
    "namesrv": ("rocketq.broker", "rocketq.connector", "rocketq.tools"),
    "controller": ("rocketq.namesrv", "rocketq.broker", "rocketq.connector", "rocketq.tools"),
    "broker": ("rocketq.namesrv", "rocketq.controller", "rocketq.connector", "rocketq.tools"),
    "connector": (*_SERVERS, "rocketq.server", "rocketq.tools"),
    "proxy": (*_SERVERS, "rocketq.connector", "rocketq.tools"),
}
#: the remoting library every server builds on (not the producer, consumer or admin of rocketq.client)
REMOTING_LIBRARY = (
    "rocketq.server",
    "rocketq.client.remoting",
    "rocketq.client.transport",
    "rocketq.client.errors",
)
#: package -> the only rocketq modules it may import (besides what FORBIDDEN already refuses)
MAY_IMPORT = {
    "client": ("rocketq.client",),
    "server": REMOTING_LIBRARY,
    "tools": ("rocketq.tools", "rocketq.client"),
    "namesrv": (*REMOTING_LIBRARY, "rocketq.namesrv", "rocketq.controller"),  # mqnamesrv embeds it
    "controller": (*REMOTING_LIBRARY, "rocketq.controller"),
    "broker": (*REMOTING_LIBRARY, "rocketq.broker"),
    "connector": ("rocketq.client", "rocketq.connector"),
    # the gRPC proxy reaches NameServers and brokers over remoting through the client library;
    # as a server it checks credentials with rocketq.server's ACL rules
    "proxy": ("rocketq.client", "rocketq.server", "rocketq.proxy"),
}
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


def _within(name: str, packages: Iterable[str]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in packages)


def _modules(package: str) -> list[Path]:
    return sorted(PACKAGES[package].rglob("*.py"))


def _check(package: str, path: Path, rel: str, in_remoting: bool) -> list[str]:
    found: list[str] = []
    for line, name in _imports(path):
        top = name.split(".")[0]
        where = f"{rel}:{line} imports {name}"
        if _within(name, FORBIDDEN[package]):
            found.append(f"{where}: {package} must not import that package")
        elif top == "rocketq" and not _within(name, MAY_IMPORT[package]):
            allowed = ", ".join(MAY_IMPORT[package])
            found.append(f"{where}: rocketq.{package} builds only on {allowed}")
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
        ("controller", "from rocketq.namesrv.config import NamesrvConfig\n", "controller must not import"),
        ("controller", "from rocketq.client.admin import Admin\n", "builds only on"),
        ("broker", "from rocketq.client.producer import Producer\n", "builds only on"),
        ("tools", "import rocketq.server.acl\n", "tools must not import"),
        ("tools", "from rocketq.broker.cli import main\n", "tools must not import"),
        ("client", "from rocketq.tools.dev import main\n", "client must not import"),
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


# ------------------------------------------------------------------------------ import cycles


@dataclass(frozen=True)
class ImportEdge:
    """``source`` imports ``target`` at ``path:line`` (deferred imports included)."""

    source: str
    target: str
    path: Path
    line: int


def _module_names(src_roots: Iterable[Path]) -> dict[str, Path]:
    """Every module under the source roots: dotted name -> file (a package is its ``__init__``)."""
    names: dict[str, Path] = {}
    for root in src_roots:
        for path in sorted(root.rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            if parts:
                names[".".join(parts)] = path
    return names


def _known(name: str, modules: dict[str, Path]) -> str | None:
    """``name`` or its longest prefix that is one of ``modules`` (``a.b.Klass`` -> ``a.b``)."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        candidate = ".".join(parts[:end])
        if candidate in modules:
            return candidate
    return None


def _import_targets(
    node: ast.Import | ast.ImportFrom, module: str, is_package: bool, modules: dict[str, Path]
) -> Iterator[str]:
    """The modules one import statement reaches (relative imports resolved)."""
    if isinstance(node, ast.Import):
        for alias in node.names:
            if (target := _known(alias.name, modules)) is not None:
                yield target
        return
    base = node.module or ""
    if node.level:
        package = module.split(".") if is_package else module.split(".")[:-1]
        anchor = package[: len(package) - (node.level - 1)]
        base = ".".join([*anchor, *([base] if base else [])])
    for alias in node.names:
        submodule = f"{base}.{alias.name}"  # "from pkg import name": the submodule pkg.name if there is one
        target = submodule if submodule in modules else _known(base, modules)
        if target is not None:
            yield target


def import_graph(src_roots: Iterable[Path]) -> list[ImportEdge]:
    """Every import between the modules under ``src_roots``: top level, in functions, under TYPE_CHECKING."""
    modules = _module_names(src_roots)
    edges: dict[tuple[str, str], ImportEdge] = {}
    for module, path in modules.items():
        is_package = path.name == "__init__.py"
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import | ast.ImportFrom):
                for target in _import_targets(node, module, is_package, modules):
                    if target != module:
                        edges.setdefault((module, target), ImportEdge(module, target, path, node.lineno))
    return list(edges.values())


def import_cycles(edges: list[ImportEdge]) -> list[list[ImportEdge]]:
    """The import circles: for each strongly connected component of two or more modules, its edges."""
    successors: dict[str, list[str]] = {}
    for edge in edges:
        successors.setdefault(edge.source, []).append(edge.target)
        successors.setdefault(edge.target, [])
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[set[str]] = []

    def connect(node: str) -> None:  # Tarjan's algorithm
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for succ in successors[node]:
            if succ not in index:
                connect(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component: set[str] = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(component)

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10 * len(successors) + 100))
    try:
        for node in sorted(successors):
            if node not in index:
                connect(node)
    finally:
        sys.setrecursionlimit(limit)
    cycles = [sorted((e for e in edges if e.source in c and e.target in c), key=_order) for c in components]
    return sorted(cycles, key=lambda cycle: _order(cycle[0]))


def _order(edge: ImportEdge) -> tuple[str, str]:
    return edge.source, edge.target


def _describe(cycle: list[ImportEdge], root: Path = ROOT) -> str:
    modules = sorted({e.source for e in cycle})
    lines = [f"circle of {len(modules)} modules: {', '.join(modules)}"]
    lines += [f"  {e.source} -> {e.target} ({e.path.relative_to(root)}:{e.line})" for e in cycle]
    return "\n".join(lines)


def test_no_import_cycles() -> None:
    cycles = import_cycles(import_graph(SRC_ROOTS))
    assert not cycles, "import circles (deferred imports count):\n" + "\n".join(map(_describe, cycles))


def _tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / "src" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root / "src"


@pytest.mark.parametrize(
    "files",
    [
        {  # a circle held together by an import deferred into a function
            "rocketq/pkg/__init__.py": "",
            "rocketq/pkg/a.py": "from rocketq.pkg.b import B\n",
            "rocketq/pkg/b.py": "def f():\n    from rocketq.pkg.a import A\n",
        },
        {  # ... or under TYPE_CHECKING, relative and through "from package import submodule"
            "rocketq/pkg/__init__.py": "",
            "rocketq/pkg/a.py": "from . import b\n",
            "rocketq/pkg/b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import A\n",
        },
        {  # three modules, "import x.y" form
            "rocketq/pkg/__init__.py": "",
            "rocketq/pkg/a.py": "import rocketq.pkg.b\n",
            "rocketq/pkg/b.py": "from rocketq.pkg import c\n",
            "rocketq/pkg/c.py": "from ..pkg.a import thing\n",
        },
    ],
)
def test_cycle_checker_finds_a_planted_circle(tmp_path: Path, files: dict[str, str]) -> None:
    cycles = import_cycles(import_graph([_tree(tmp_path, files)]))
    assert len(cycles) == 1
    modules = {e.source for e in cycles[0]}
    assert modules == {f"rocketq.pkg.{name}" for name in "abc" if f"rocketq/pkg/{name}.py" in files}
    assert _describe(cycles[0], tmp_path).startswith(f"circle of {len(modules)} modules: rocketq.pkg.a")


def test_cycle_checker_passes_an_acyclic_tree(tmp_path: Path) -> None:
    files = {
        "rocketq/pkg/__init__.py": "from rocketq.pkg.a import A\n",  # a package re-exporting is no circle
        "rocketq/pkg/a.py": "from rocketq.pkg.b import B\nimport json\n",
        "rocketq/pkg/b.py": "def f():\n    from rocketq.pkg import c\n",
        "rocketq/pkg/c.py": "import typing\nif typing.TYPE_CHECKING:\n    from rocketq.other import X\n",
        "rocketq/other.py": "X = 1\n",
    }
    edges = import_graph([_tree(tmp_path, files)])
    assert {(e.source, e.target) for e in edges} == {
        ("rocketq.pkg", "rocketq.pkg.a"),
        ("rocketq.pkg.a", "rocketq.pkg.b"),
        ("rocketq.pkg.b", "rocketq.pkg.c"),
        ("rocketq.pkg.c", "rocketq.other"),
    }
    assert import_cycles(edges) == []


@pytest.mark.parametrize("package", PACKAGES)
def test_every_module_has_a_docstring(package: str) -> None:
    missing = [
        str(p.relative_to(ROOT))
        for p in _modules(package)
        if p.stat().st_size > 0 and ast.get_docstring(ast.parse(p.read_text(encoding="utf-8"))) is None
    ]
    assert not missing, "modules without a docstring paragraph: " + ", ".join(missing)
