"""A throwaway certificate authority and server certificate for TLS tests, made with ``openssl``.

TLS tests need a CA that clients trust and a server certificate it signed for 127.0.0.1 (EC P-256
keys: quick to make).  :func:`make_server_certs` writes them into a directory with the
``openssl`` command (the caller skips its test when :func:`has_openssl` is false).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

__all__ = ["has_openssl", "make_server_certs"]

_EC_KEY = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")
_CA_EXTENSIONS = (
    "-addext",
    "basicConstraints=critical,CA:TRUE",
    "-addext",
    "keyUsage=critical,keyCertSign,cRLSign",
)


def has_openssl() -> bool:
    """Whether the ``openssl`` command is installed."""
    return shutil.which("openssl") is not None


def make_server_certs(directory: Path, *, ip: str = "127.0.0.1", days: int = 1) -> dict[str, str]:
    """A CA (``ca.pem``) and a server certificate and key for ``ip`` signed by it (``s.pem``,
    ``s.key``) in ``directory``; their paths as ``{"ca": ..., "cert": ..., "key": ...}``."""

    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=directory, check=True, capture_output=True, timeout=60)

    directory.mkdir(parents=True, exist_ok=True)
    openssl("req", "-x509", *_EC_KEY, *_CA_EXTENSIONS, "-keyout", "ca.key", "-out", "ca.pem",
            "-days", str(days), "-subj", "/CN=ca")  # fmt: skip
    openssl("req", *_EC_KEY, "-keyout", "s.key", "-out", "s.csr", "-subj", f"/CN={ip}")
    (directory / "s.ext").write_text(f"subjectAltName=IP:{ip}\n", encoding="utf-8")
    openssl("x509", "-req", "-in", "s.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
            "-out", "s.pem", "-days", str(days), "-extfile", "s.ext")  # fmt: skip
    return {
        "ca": str(directory / "ca.pem"),
        "cert": str(directory / "s.pem"),
        "key": str(directory / "s.key"),
    }
