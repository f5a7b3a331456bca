"""Regenerate the checked-in ``apache.rocketmq.v2`` modules from the vendored ``.proto`` files.

``python -m rocketq.proxy.v2.generate [OUT_DIR]`` runs protoc (from grpcio-tools, which is not a
runtime dependency: install it in a scratch environment) over ``proto/`` and writes
``definition_pb2.py``, ``service_pb2.py``, their ``.pyi`` stubs and ``service_pb2_grpc.py`` into
``OUT_DIR`` (default: this package).  protoc names imports after the proto package
(``from apache.rocketmq.v2 import ...``); :func:`localize_imports` points them at this package, the
only change made to protoc's output.  The test of the checked-in modules uses the same two steps.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

__all__ = ["GENERATED", "PACKAGE", "PROTO_DIR", "PROTO_FILES", "generate", "localize_imports"]

PACKAGE = "rocketq.proxy.v2"
HERE = Path(__file__).resolve().parent
PROTO_DIR = HERE / "proto"
PROTO_FILES = ("apache/rocketmq/v2/definition.proto", "apache/rocketmq/v2/service.proto")
#: the files kept from protoc's output (definition_pb2_grpc.py is empty: that file has no service)
GENERATED = (
    "definition_pb2.py",
    "definition_pb2.pyi",
    "service_pb2.py",
    "service_pb2.pyi",
    "service_pb2_grpc.py",
)
_PROTO_PACKAGE_IMPORT = "from apache.rocketmq.v2 import "


def localize_imports(text: str) -> str:
    """protoc's output with its imports of sibling modules pointed at :data:`PACKAGE`."""
    return text.replace(_PROTO_PACKAGE_IMPORT, f"from {PACKAGE} import ")


def generate(out_dir: Path) -> list[Path]:
    """Run protoc over the vendored files; write the :data:`GENERATED` modules into ``out_dir``."""
    import grpc_tools  # a build tool, not a runtime dependency
    from grpc_tools import protoc

    well_known = Path(grpc_tools.__file__).parent / "_proto"  # google/protobuf/*.proto
    with tempfile.TemporaryDirectory() as scratch:
        args = [
            "grpc_tools.protoc",
            f"-I{PROTO_DIR}",
            f"-I{well_known}",
            f"--python_out={scratch}",
            f"--pyi_out={scratch}",
            f"--grpc_python_out={scratch}",
            *PROTO_FILES,
        ]
        if protoc.main(args) != 0:
            raise RuntimeError(f"protoc failed on {', '.join(PROTO_FILES)} under {PROTO_DIR}")
        written = []
        for name in GENERATED:
            text = (Path(scratch) / "apache/rocketmq/v2" / name).read_text()
            target = out_dir / name
            target.write_text(localize_imports(text))
            written.append(target)
    return written


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    out_dir = Path(args[0]) if args else HERE
    for path in generate(out_dir):
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
