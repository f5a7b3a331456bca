"""Every wire constant and vocabulary type is defined once, in the module that owns it.

RocketMQ's request/response codes live in ``rocketq.client.remoting.codes``; permissions, the
master's broker id, pull sys flags, expression types, system topics and the small value types
(``MessageQueue``, ``TopicConfig``, ``DataVersion``, ``SubscriptionData``) in
``rocketq.client.remoting.vocabulary``.  Any other module of client, namesrv, broker or connector
that defines one of them again (a class of the same name, a module-level constant named after a
code or a vocabulary constant, a string literal spelling a system topic) fails this test; the fix
is to import the name from its owner.  The checker is plain AST work, so it is unit-tested on
snippets below as well as run over the tree.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

from rocketq.client.remoting import vocabulary
from rocketq.client.remoting.codes import RequestCode, ResponseCode

ROOT = Path(__file__).resolve().parents[1]
SRC_DIRS = [ROOT / c / "src" for c in ("client", "namesrv", "broker", "connector")]
OWNERS = {
    Path("rocketq/client/remoting/codes.py"),
    Path("rocketq/client/remoting/vocabulary.py"),
}
#: Classes that exist once, in an owner module.
OWNED_CLASSES = frozenset(
    {
        "RequestCode",
        "ResponseCode",
        "MessageQueue",
        "TopicConfig",
        "DataVersion",
        "SubscriptionData",
        "PullSysFlag",
        "Perm",
        "ExpressionType",
    }
)
#: Module-level names that would be a second definition of a code or a vocabulary constant.
OWNED_NAMES = frozenset(
    {m.name for m in RequestCode}
    | {m.name for m in ResponseCode}
    | {n for n in vocabulary.__all__ if n.isupper()}
    | {f"PERM_{m.name}" for m in vocabulary.Perm if m.name}
    | {f"FLAG_{m.name}" for m in vocabulary.PullSysFlag if m.name}
    | {f"PULL_SYS_FLAG_{m.name}" for m in vocabulary.PullSysFlag if m.name}
)
#: String values only the vocabulary may spell: system topic names and group topic prefixes.
OWNED_STRINGS = frozenset(
    str(getattr(vocabulary, n))
    for n in vocabulary.__all__
    if n.isupper() and isinstance(getattr(vocabulary, n), str) and n != "SUB_ALL" and n != "DEFAULT_CLUSTER"
)


def _exempt_strings(tree: ast.Module) -> set[int]:
    """Docstrings and the names listed in ``__all__`` (which may equal a topic's spelling)."""
    ids: set[int] = set()
    for stmt in tree.body:
        if "__all__" in set(_assigned_names(stmt)):
            ids.update(id(n) for n in ast.walk(stmt) if isinstance(n, ast.Constant))
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                ids.add(id(body[0].value))
    return ids


def _assigned_names(stmt: ast.stmt) -> Iterator[str]:
    targets: list[ast.expr] = []
    if isinstance(stmt, ast.Assign):
        targets = list(stmt.targets)
    elif isinstance(stmt, ast.AnnAssign):
        targets = [stmt.target]
    for target in targets:
        for node in ast.walk(target):
            if isinstance(node, ast.Name):
                yield node.id


def violations(source: str, where: str) -> list[str]:
    """The second definitions in one module's source, as ``where:line: what`` strings."""
    tree = ast.parse(source)
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name in OWNED_CLASSES:
            found.append(f"{where}:{node.lineno}: class {node.name} is defined by the vocabulary")
    for stmt in tree.body:
        for name in _assigned_names(stmt):
            if name.lstrip("_") in OWNED_NAMES:
                found.append(f"{where}:{stmt.lineno}: {name} redefines a wire constant")
    exempt = _exempt_strings(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in exempt:
            text = node.value
            # Prose (log lines, remarks) may name a topic; identifiers, prefixes and patterns may not.
            for owned in OWNED_STRINGS:
                if text == owned or (owned in text and not any(c.isspace() for c in text)):
                    found.append(f"{where}:{node.lineno}: string {node.value[:60]!r} spells {owned!r}")
    return found


def _src_modules() -> Iterator[tuple[Path, Path]]:
    for src in SRC_DIRS:
        for path in sorted(src.rglob("*.py")):
            yield path, path.relative_to(src)


def test_no_module_redefines_the_vocabulary() -> None:
    found: list[str] = []
    for path, rel in _src_modules():
        if rel in OWNERS:
            continue
        found.extend(violations(path.read_text(encoding="utf-8"), str(rel)))
    assert not found, "import these from rocketq.client.remoting.vocabulary/codes instead:\n" + "\n".join(
        found
    )


def test_the_owner_modules_exist() -> None:
    rels = {rel for _, rel in _src_modules()}
    assert rels >= OWNERS


@pytest.mark.parametrize(
    ("snippet", "what"),
    [
        ("MASTER_ID = 0\n", "MASTER_ID"),
        ("_MESSAGE_ILLEGAL = 13\n", "_MESSAGE_ILLEGAL"),
        ("PERM_WRITE: Final = 2\n", "PERM_WRITE"),
        ("FLAG_SUBSCRIPTION = 0x4\n", "FLAG_SUBSCRIPTION"),
        ("class MessageQueue:\n    pass\n", "class MessageQueue"),
        ("CREATE_TOPIC_KEY = 'TBW102'\n", "'TBW102'"),
        ("import re\nX = re.compile(r'^(%RETRY%|%DLQ%)')\n", "'%RETRY%'"),
        ("def f(g):\n    return '%DLQ%' + g\n", "'%DLQ%'"),
        ("def f():\n    return ('TBW102', 4)\n", "'TBW102'"),
    ],
)
def test_checker_finds_a_planted_second_definition(snippet: str, what: str) -> None:
    found = violations(snippet, "planted.py")
    assert found and any(what in f for f in found), found


def test_checker_passes_imports_and_docstrings() -> None:
    snippet = (
        '"""Mentions TBW102 and %RETRY% in prose."""\n'
        "from rocketq.client.remoting.vocabulary import MASTER_ID, retry_topic\n"
        "LOCAL_LIMIT = 13\n"
        "__all__ = ['SELF_TEST_TOPIC']\n"
        "LOG = 'half message parked in TRANS_CHECK_MAX_TIME_TOPIC'\n"
        "def f(group):\n"
        '    """Builds %RETRY% topics."""\n'
        "    return retry_topic(group), MASTER_ID\n"
    )
    assert violations(snippet, "ok.py") == []
