"""The checked-in ``apache.rocketmq.v2`` modules against the vendored ``.proto`` files.

Two checks.  Where grpcio-tools is installed, the modules are generated again
(:func:`rocketq.proxy.v2.generate.generate`) and must equal the checked-in files byte for byte.
Always, whatever is installed: the descriptors the modules register are compared with the
``.proto`` text, read by the small parser below: every message, enum and oneof, every field's name,
number, label and type, every enum value and every RPC with its streaming flags, both ways (nothing
missing, nothing extra).  The parser and the comparison are themselves tested on a planted drift.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from google.protobuf.descriptor import Descriptor, EnumDescriptor, FieldDescriptor, FileDescriptor

from rocketq.proxy.v2 import definition_pb2, service_pb2, service_pb2_grpc
from rocketq.proxy.v2.generate import GENERATED, HERE, PROTO_DIR, PROTO_FILES, generate

_SCALARS = {
    "double": FieldDescriptor.TYPE_DOUBLE,
    "float": FieldDescriptor.TYPE_FLOAT,
    "int64": FieldDescriptor.TYPE_INT64,
    "uint64": FieldDescriptor.TYPE_UINT64,
    "int32": FieldDescriptor.TYPE_INT32,
    "fixed64": FieldDescriptor.TYPE_FIXED64,
    "fixed32": FieldDescriptor.TYPE_FIXED32,
    "bool": FieldDescriptor.TYPE_BOOL,
    "string": FieldDescriptor.TYPE_STRING,
    "bytes": FieldDescriptor.TYPE_BYTES,
    "uint32": FieldDescriptor.TYPE_UINT32,
    "sfixed32": FieldDescriptor.TYPE_SFIXED32,
    "sfixed64": FieldDescriptor.TYPE_SFIXED64,
    "sint32": FieldDescriptor.TYPE_SINT32,
    "sint64": FieldDescriptor.TYPE_SINT64,
}


@dataclass
class ProtoText:
    """What a .proto file declares, keyed by the full names of messages and enums."""

    package: str = ""
    #: message -> {field name: (number, label, type)}; label is "repeated", "optional", "map" or ""
    fields: dict[str, dict[str, tuple[int, str, str]]] = field(default_factory=dict)
    #: message -> {oneof name: field names} (proto3 ``optional`` makes no oneof here)
    oneofs: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    enums: dict[str, dict[str, int]] = field(default_factory=dict)
    #: service -> {rpc: (request, client streams, response, server streams)}
    rpcs: dict[str, dict[str, tuple[str, bool, str, bool]]] = field(default_factory=dict)


_TOKEN = re.compile(r'"[^"]*"|[A-Za-z_][\w.]*|\d+|<|>|[{};=(),\[\]]|-')
_FIELD = re.compile(r"^(?:(optional|repeated) )?([\w.]+) (\w+) = (\d+)$")
_MAP = re.compile(r"^map < ([\w.]+) , ([\w.]+) > (\w+) = (\d+)$")
_RPC = re.compile(r"^rpc (\w+) \( (stream )?([\w.]+) \) returns \( (stream )?([\w.]+) \)$")


def parse_proto(text: str) -> ProtoText:
    """Read the declarations of a proto3 file (no options, no extensions: this file set has none)."""
    text = re.sub(r"//[^\n]*", "", text)
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    out = ProtoText()
    stack: list[tuple[str, str]] = []  # (kind, full name or oneof name)
    words: list[str] = []
    for tok in _TOKEN.findall(text):
        if tok not in "{};":
            words.append(tok)
            continue
        stmt = re.sub(r"\[.*\]", "", " ".join(words)).strip()  # drop field options
        words = []
        if tok == "}":
            if stmt:
                raise AssertionError(f"unparsed statement before '}}': {stmt!r}")
            stack.pop()
            continue
        _statement(out, stack, stmt, opens=tok == "{")
    assert not stack, f"unbalanced braces: {stack}"
    return out


def _scope(stack: list[tuple[str, str]]) -> str:
    for kind, name in reversed(stack):
        if kind in ("message", "enum", "service"):
            return name
    return ""


def _statement(out: ProtoText, stack: list[tuple[str, str]], stmt: str, *, opens: bool) -> None:
    if opens:
        kind, _, name = stmt.partition(" ")
        if kind == "oneof":
            out.oneofs.setdefault(_scope(stack), {})[name] = []
            stack.append(("oneof", name))
            return
        if kind == "rpc":  # ``rpc X(...) returns (...) {}``: an empty body
            _rpc(out, stack, stmt)
            stack.append(("rpc", name))
            return
        outer = _scope(stack) or out.package
        full = f"{outer}.{name}" if outer else name
        if kind == "message":
            out.fields[full] = {}
        elif kind == "enum":
            out.enums[full] = {}
        elif kind == "service":
            out.rpcs[full] = {}
        else:
            raise AssertionError(f"unparsed block {stmt!r}")
        stack.append((kind, full))
        return
    if not stmt or stmt.split()[0] in ("syntax", "import", "option", "reserved"):
        return
    if stmt.startswith("package "):
        out.package = stmt.split()[1]
        return
    if not stack:
        raise AssertionError(f"unparsed top-level statement {stmt!r}")
    kind, name = stack[-1]
    if kind == "rpc":
        return
    if kind == "service":
        _rpc(out, stack, stmt)
        return
    if kind == "enum":
        key, _, value = stmt.partition(" = ")
        out.enums[name][key] = int(value.replace("- ", "-"))
        return
    owner = _scope(stack)
    m = _MAP.match(stmt)
    if m:
        out.fields[owner][m.group(3)] = (int(m.group(4)), "map", f"{m.group(1)},{m.group(2)}")
    else:
        f = _FIELD.match(stmt)
        if not f:
            raise AssertionError(f"unparsed field in {owner}: {stmt!r}")
        out.fields[owner][f.group(3)] = (int(f.group(4)), f.group(1) or "", f.group(2))
        if kind == "oneof":
            out.oneofs[owner][name].append(f.group(3))


def _rpc(out: ProtoText, stack: list[tuple[str, str]], stmt: str) -> None:
    m = _RPC.match(stmt)
    if not m:
        raise AssertionError(f"unparsed rpc {stmt!r}")
    out.rpcs[_scope(stack)][m.group(1)] = (m.group(3), bool(m.group(2)), m.group(5), bool(m.group(4)))


def _type_of(fd: FieldDescriptor) -> str:
    if fd.message_type is not None:
        return str(fd.message_type.full_name)
    if fd.enum_type is not None:
        return str(fd.enum_type.full_name)
    return next(name for name, t in _SCALARS.items() if t == fd.type)


def _same_type(declared: str, full_name: str) -> bool:
    """A declared type name (scalar, short, dotted or qualified) names ``full_name``."""
    return declared == full_name or full_name.endswith("." + declared)


def _walk(messages: list[Descriptor], out: dict[str, Descriptor]) -> None:
    for m in messages:
        if m.GetOptions().map_entry:
            continue
        out[m.full_name] = m
        _walk(list(m.nested_types), out)


def _enums(file: FileDescriptor) -> dict[str, EnumDescriptor]:
    found = {e.full_name: e for e in file.enum_types_by_name.values()}
    messages: dict[str, Descriptor] = {}
    _walk(list(file.message_types_by_name.values()), messages)
    for m in messages.values():
        found.update({e.full_name: e for e in m.enum_types})
    return found


def compare(text: ProtoText, file: FileDescriptor) -> list[str]:
    """Every difference between the declarations and the registered descriptor, as sentences."""
    problems: list[str] = []
    if text.package != file.package:
        problems.append(f"package {file.package!r}, the .proto says {text.package!r}")
    messages: dict[str, Descriptor] = {}
    _walk(list(file.message_types_by_name.values()), messages)
    for name in sorted(set(messages) ^ set(text.fields)):
        where = "only in the generated module" if name in messages else "missing from the generated module"
        problems.append(f"message {name} {where}")
    for name in sorted(set(messages) & set(text.fields)):
        problems.extend(_compare_message(name, text, messages[name]))
    enums = _enums(file)
    for name in sorted(set(enums) ^ set(text.enums)):
        where = "only in the generated module" if name in enums else "missing from the generated module"
        problems.append(f"enum {name} {where}")
    for name in sorted(set(enums) & set(text.enums)):
        got = {v.name: v.number for v in enums[name].values}
        if got != text.enums[name]:
            problems.append(f"enum {name}: generated {got}, .proto {text.enums[name]}")
    services = {s.full_name: s for s in file.services_by_name.values()}
    for name in sorted(set(services) ^ set(text.rpcs)):
        problems.append(f"service {name} differs between the .proto and the generated module")
    for name in sorted(set(services) & set(text.rpcs)):
        got_rpcs = {
            m.name: (m.input_type.full_name, m.client_streaming, m.output_type.full_name, m.server_streaming)
            for m in services[name].methods
        }
        want = text.rpcs[name]
        for rpc in sorted(set(got_rpcs) | set(want)):
            g, w = got_rpcs.get(rpc), want.get(rpc)
            if (
                g is None
                or w is None
                or not (_same_type(w[0], g[0]) and w[1] == g[1] and _same_type(w[2], g[2]) and w[3] == g[3])
            ):
                problems.append(f"rpc {name}.{rpc}: generated {g}, .proto {w}")
    return problems


def _compare_message(name: str, text: ProtoText, desc: Descriptor) -> list[str]:
    problems: list[str] = []
    want = text.fields[name]
    got = {f.name: f for f in desc.fields}
    for fname in sorted(set(got) ^ set(want)):
        problems.append(f"field {name}.{fname} is in only one of the .proto and the generated module")
    for fname in sorted(set(got) & set(want)):
        fd, (number, label, declared) = got[fname], want[fname]
        if fd.number != number:
            problems.append(f"field {name}.{fname}: number {fd.number}, the .proto says {number}")
        if label == "map":
            entry = fd.message_type
            ok = entry is not None and entry.GetOptions().map_entry
            key, value = declared.split(",")
            if not ok or not (
                _same_type(key, _type_of(entry.fields_by_name["key"]))
                and _same_type(value, _type_of(entry.fields_by_name["value"]))
            ):
                problems.append(f"field {name}.{fname}: not the map<{declared}> of the .proto")
            continue
        repeated = fd.is_repeated
        if repeated != (label == "repeated"):
            problems.append(
                f"field {name}.{fname}: repeated={repeated}, the .proto says {label or 'singular'}"
            )
        optional = fd.containing_oneof is not None and fd.containing_oneof.name == f"_{fname}"
        if optional != (label == "optional"):
            problems.append(f"field {name}.{fname}: proto3 optional={optional}, the .proto says {label!r}")
        if not _same_type(declared, _type_of(fd)):
            problems.append(f"field {name}.{fname}: type {_type_of(fd)}, the .proto says {declared}")
    real_oneofs = {o.name: [f.name for f in o.fields] for o in desc.oneofs if not o.name.startswith("_")}
    if real_oneofs != text.oneofs.get(name, {}):
        problems.append(f"oneofs of {name}: generated {real_oneofs}, .proto {text.oneofs.get(name, {})}")
    return problems


_MODULES = {
    "apache/rocketmq/v2/definition.proto": definition_pb2,
    "apache/rocketmq/v2/service.proto": service_pb2,
}


@pytest.mark.parametrize("proto", PROTO_FILES)
def test_generated_descriptors_match_the_vendored_proto(proto: str) -> None:
    text = parse_proto((PROTO_DIR / proto).read_text())
    file = _MODULES[proto].DESCRIPTOR
    assert file.name == proto  # the published file name, not a flattened one
    assert text.fields
    assert compare(text, file) == []


def test_the_comparison_catches_planted_drift() -> None:
    original = (PROTO_DIR / "apache/rocketmq/v2/definition.proto").read_text()
    planted = {
        "renumbered field": original.replace("string message_group = 17;", "string message_group = 71;"),
        "renamed field": original.replace("int32 queue_id = 13;", "int32 queue_idx = 13;"),
        "retyped field": original.replace(
            "optional int64 queue_offset = 14;", "optional int32 queue_offset = 14;"
        ),
        "new enum value": original.replace(
            "TOPIC_NOT_FOUND = 40402;", "TOPIC_NOT_FOUND = 40402;\n  X_NEW = 1;"
        ),
        "new message": original + "\nmessage Extra { string a = 1; }\n",
        "optional dropped": original.replace("optional int64 queue_offset = 14;", "int64 queue_offset = 14;"),
    }
    for what, text in planted.items():
        assert text != original, what
        assert compare(parse_proto(text), definition_pb2.DESCRIPTOR), f"{what} went unnoticed"
    service = (PROTO_DIR / "apache/rocketmq/v2/service.proto").read_text()
    streaming = service.replace(
        "rpc AckMessage(AckMessageRequest) returns (AckMessageResponse)",
        "rpc AckMessage(AckMessageRequest) returns (stream AckMessageResponse)",
    )
    assert streaming != service
    assert compare(parse_proto(streaming), service_pb2.DESCRIPTOR)


def test_grpc_module_serves_every_rpc_of_the_proto() -> None:
    text = parse_proto((PROTO_DIR / "apache/rocketmq/v2/service.proto").read_text())
    rpcs = text.rpcs["apache.rocketmq.v2.MessagingService"]
    assert {"QueryRoute", "SendMessage", "ReceiveMessage", "Telemetry", "RecallMessage"} <= set(rpcs)
    for rpc in rpcs:
        assert callable(getattr(service_pb2_grpc.MessagingServiceServicer, rpc)), rpc


def test_vendored_protos_keep_their_license_header_and_pin() -> None:
    for proto in PROTO_FILES:
        head = (PROTO_DIR / proto).read_text()[:800]
        assert "Licensed to the Apache Software Foundation (ASF)" in head, proto
    pin = (HERE / "PIN").read_text()
    assert re.search(r"^commit = [0-9a-f]{40}$", pin, re.M) and re.search(r"^tag = v\d", pin, re.M)


def test_regenerated_modules_equal_the_checked_in_ones(tmp_path: Path) -> None:
    pytest.importorskip(
        "grpc_tools", reason="grpcio-tools is not installed here; the descriptor comparison above still ran"
    )
    generate(tmp_path)
    for name in GENERATED:
        assert (tmp_path / name).read_text() == (HERE / name).read_text(), f"{name} drifted from the .proto"
