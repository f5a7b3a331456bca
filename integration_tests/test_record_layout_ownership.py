"""Checks that the CommitLog record layout has one owner, ``rocketq.client.remoting.record_layout``.

Reads every module of client, broker and connector with :mod:`ast` (like
``test_dependency_direction.py``) and fails with the file, line and construct when a module other
than ``record_layout.py`` reads or writes stored-record fields by literal offset, or defines a
layout constant again:

* *record modules* (those importing the record codec: ``record_layout``, ``message``,
  ``message_view`` or the broker's ``record_batch``) may not pass a literal offset other than 0
  to ``unpack_from`` / ``pack_into``, nor add or subtract, index or slice with a literal that is a
  record position or header size (36, 84, 88, ... taken from ``record_layout`` itself), nor bind
  such a literal to a module- or class-level name (``_HDR = 88``);
* no module may define ``MAX_PROPERTIES*`` or a ``*MAGIC*`` constant with a literal, nor spell a
  magic code (``0xDAA320A7``, ``0xDAA320AB``, ``0xCBD43194``) as a number.

Modules that do not import the record codec (frames, ConsumeQueue units, IndexFile, checkpoint,
batch bodies) own other formats and keep their own offsets.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from rocketq.client.remoting import record_layout

ROOT = Path(__file__).resolve().parent.parent
COMPONENTS = ("client", "namesrv", "broker", "connector")
OWNER = "rocketq/client/remoting/record_layout.py"
RECORD_CODEC_MODULES = frozenset({
    "rocketq.client.remoting.record_layout",
    "rocketq.client.remoting.message",
    "rocketq.client.remoting.message_view",
    "rocketq.broker.store.record_batch",
})  # fmt: skip
_CODEC_PACKAGES = frozenset({"rocketq.client.remoting", "rocketq.broker.store"})
_SMALLEST_CHECKED = 12  # 0, 4 and 8 are too common (widths, alignment) to mean a record position
#: In arithmetic and indexing 12 and 16 are too common (hex dumps, struct sizes) to mean one either.
_SMALLEST_IN_ARITHMETIC = 20
#: Words of a name that holds a record position or size (``_HDR``, ``BORNTS``, ``BODY_POS``, ...).
_LAYOUT_WORDS = (
    "POS", "HDR", "HEADER", "HEAD", "BODY", "SYSFLAG", "FLAG", "BORN", "STORE", "RECONSUME", "PREPARED",
    "QUEUEID", "QUEUEOFFSET", "PHYSICAL", "TOTAL", "TOPIC", "PROP", "RECORD",
)  # fmt: skip

#: Record positions (every host layout) and header sizes: literals that betray a hand-made offset.
RECORD_OFFSETS = frozenset(
    value
    for value in (
        *(pos for layout in record_layout.HEADER_LAYOUTS for pos in layout.positions.values()),
        *(layout.size for layout in record_layout.HEADER_LAYOUTS),
        record_layout.HOST_FLAGS_BYTE_POS,
        record_layout.MIN_RECORD_SIZE,
    )
    if value >= _SMALLEST_CHECKED
)
ARITHMETIC_OFFSETS = frozenset(v for v in RECORD_OFFSETS if v >= _SMALLEST_IN_ARITHMETIC)
MAGIC_CODES = frozenset({record_layout.MAGIC_V1, record_layout.MAGIC_V2, record_layout.BLANK_MAGIC})
_OFFSET_CALLS = frozenset({"unpack_from", "pack_into"})


def _int(node: ast.AST | None) -> int | None:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    return None


def _imports_record_codec(tree: ast.Module) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module in RECORD_CODEC_MODULES:
            return True
        if isinstance(node, ast.ImportFrom) and node.module in _CODEC_PACKAGES:
            if any(f"{node.module}.{a.name}" in RECORD_CODEC_MODULES for a in node.names):
                return True
        if isinstance(node, ast.Import) and any(a.name in RECORD_CODEC_MODULES for a in node.names):
            return True
    return False


def _offset_arg(call: ast.Call) -> ast.expr | None:
    """The offset argument of ``struct.unpack_from(fmt, buf, off)`` or ``S.unpack_from(buf, off)``
    (and ``pack_into``), or None."""
    func = call.func
    if not isinstance(func, ast.Attribute) or func.attr not in _OFFSET_CALLS:
        return None
    for kw in call.keywords:
        if kw.arg == "offset":
            return kw.value
    on_module = isinstance(func.value, ast.Name) and func.value.id == "struct"
    index = 2 if on_module else 1
    return call.args[index] if len(call.args) > index else None


def _subscript_literals(node: ast.Subscript) -> Iterator[int]:
    index = node.slice
    bounds = (index.lower, index.upper) if isinstance(index, ast.Slice) else (index,)
    for bound in bounds:
        value = _int(bound)
        if value in ARITHMETIC_OFFSETS:
            yield value


_POSITION_LIKE = (ast.Name, ast.Attribute, ast.Subscript, ast.Call, ast.Constant)


def _offset_arithmetic(node: ast.BinOp) -> Iterator[int]:
    """A record-position literal added to or subtracted from a position-like operand (a name,
    attribute, subscript, call or number: ``starts + 36``, ``pos + 39``, ``88 + 3``); ``48 + x % 10``
    (an ASCII digit) has an arithmetic operand and is not one."""
    if not isinstance(node.op, ast.Add | ast.Sub):
        return
    for side, other in ((node.left, node.right), (node.right, node.left)):
        value = _int(side)
        if value in ARITHMETIC_OFFSETS and isinstance(other, _POSITION_LIKE):
            yield value


def _top_level_assignments(tree: ast.Module) -> Iterator[tuple[ast.stmt, list[ast.expr], ast.expr]]:
    """(statement, targets, value) of the assignments at module and class level."""
    bodies: list[list[ast.stmt]] = [tree.body]
    while bodies:
        for stmt in bodies.pop():
            if isinstance(stmt, ast.ClassDef):
                bodies.append(stmt.body)
            elif isinstance(stmt, ast.Assign):
                yield stmt, stmt.targets, stmt.value
            elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
                yield stmt, [stmt.target], stmt.value


def _pairs(targets: list[ast.expr], value: ast.expr) -> Iterator[tuple[str, ast.expr]]:
    """(name, value) for ``A = v`` and ``A, B = v, w``."""
    for target in targets:
        if isinstance(target, ast.Name):
            yield target.id, value
        elif isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple):
            if len(target.elts) != len(value.elts):
                continue
            for t, v in zip(target.elts, value.elts, strict=True):
                if isinstance(t, ast.Name):
                    yield t.id, v


def violations_in(source: str, name: str = "<snippet>") -> list[str]:
    """What a module of this source does against the single ownership of the record layout."""
    tree = ast.parse(source, filename=name)
    found: list[str] = []
    record_module = _imports_record_codec(tree)
    for node in ast.walk(tree):
        where = f"{name}:{getattr(node, 'lineno', 0)}"
        if _int(node) in MAGIC_CODES:
            found.append(f"{where}: magic code {_int(node):#x} spelled as a number (import it)")
        if not record_module:
            continue
        if isinstance(node, ast.Call) and (offset := _offset_arg(node)) is not None:
            literal = _int(offset)
            if literal:
                call = ast.unparse(node.func)
                found.append(f"{where}: {call}(..., {literal}) reads a record field at a literal offset")
                continue
        if isinstance(node, ast.Subscript):
            for position in _subscript_literals(node):
                found.append(f"{where}: record bytes indexed at literal position {position}")
        if isinstance(node, ast.BinOp):
            for number in _offset_arithmetic(node):
                found.append(f"{where}: literal record offset {number} in {ast.unparse(node)}")
    for stmt, targets, value in _top_level_assignments(tree):
        where = f"{name}:{stmt.lineno}"
        for target, bound in _pairs(targets, value):
            literal = _int(bound)
            if literal is None:
                continue
            if target != target.upper():
                continue  # not a constant: a field default or a local name
            if target.lstrip("_").startswith("MAX_PROPERTIES") or "MAGIC" in target:
                found.append(f"{where}: {target} = {literal} redefines a record layout limit or magic code")
            elif record_module and (
                target.endswith("_POS")
                or (literal in RECORD_OFFSETS and any(w in target.replace("_", "") for w in _LAYOUT_WORDS))
            ):
                found.append(f"{where}: {target} = {literal} redefines a record position or header size")
    return found


def _violations() -> list[str]:
    found: list[str] = []
    for component in COMPONENTS:
        for path in sorted((ROOT / component / "src").rglob("*.py")):
            if path.as_posix().endswith(OWNER):
                continue
            found += violations_in(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)))
    return found


def test_record_layout_has_one_owner() -> None:
    found = _violations()
    assert not found, "stored-record layout known outside record_layout.py:\n" + "\n".join(found)


def test_the_offsets_come_from_the_layout_module() -> None:
    assert {36, 39, 48, 84, 88, 100, 112} <= RECORD_OFFSETS
    assert not RECORD_OFFSETS & {0, 1, 2, 4, 8}


_CODEC_IMPORT = "from rocketq.client.remoting.message import decode_stored_message\n"


def test_literal_unpack_offsets_are_caught() -> None:
    snippet = _CODEC_IMPORT + (
        "import struct\n(flag,) = struct.unpack_from('>i', rec, 36)\n(n,) = S.unpack_from(buf, 4)\n"
    )
    found = violations_in(snippet)
    assert len(found) == 2 and "36" in found[0] and "4" in found[1]


def test_literal_positions_in_arithmetic_and_slices_are_caught() -> None:
    snippet = _CODEC_IMPORT + "a = _gather(a, starts + 84, 4)\nb = rec[36:40]\nc = data[pos + 39]\n"
    lines = sorted({f.split(": ")[0] for f in violations_in(snippet)})
    assert lines == ["<snippet>:2", "<snippet>:3", "<snippet>:4"]


def test_header_size_redefinitions_are_caught() -> None:
    snippet = _CODEC_IMPORT + "_HDR: Final = 88\nBORNTS, BORNHOST = 40, 48\nclass C:\n    BODY_POS = 7\n"
    found = violations_in(snippet)
    assert len(found) == 4 and all("redefines a record position" in f for f in found)


def test_limits_and_magic_codes_are_caught_in_any_module() -> None:
    snippet = "MAX_PROPERTIES = 32767\nif magic == 0xCBD43194:\n    pass\nMY_MAGIC = 5\n"
    found = violations_in(snippet)
    assert len(found) == 3
    assert any("0xcbd43194" in f for f in found) and any("MAX_PROPERTIES" in f for f in found)


def test_other_formats_and_named_offsets_pass() -> None:
    frame_module = (
        "import struct\nHEADER = struct.Struct('>ii')\n(n,) = HEADER.unpack_from(buf, 4)\nx = buf[pos + 20]\n"
    )
    assert violations_in(frame_module) == []
    named = _CODEC_IMPORT + (
        "from rocketq.client.remoting.record_layout import SYSFLAG_POS\n"
        "(flag,) = _INT32.unpack_from(rec, pos + SYSFLAG_POS)\n(size,) = _INT32.unpack_from(rec, 0)\n"
        "tail = p + 1\nx = data[p + 2]\n"
    )
    assert violations_in(named) == []
