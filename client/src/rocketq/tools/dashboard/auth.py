"""Who may change state through the dashboard: users with salted password hashes, basic auth.

The users file is YAML (``--users users.yml``)::

    users:
      alice: "scrypt$16384$8$1$<salt, base64>$<hash, base64>"   # rocketq dashboard hash-password
    login_required_for_reads: false                              # optional; GETs are open by default

A password is stored as ``scrypt$N$r$p$salt$hash`` (:func:`hashlib.scrypt`, a random 16-byte
salt, a 32-byte key); :func:`hash_password` makes one, :func:`verify_password` checks one in
constant time.  :class:`UserStore` checks an ``Authorization: Basic`` header against the file;
a header that verified once is remembered (by its SHA-256) so that a page's requests do not each
pay the deliberately slow key derivation.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import yaml

__all__ = ["UserStore", "UsersFileError", "hash_password", "verify_password"]

_SCRYPT_N, _SCRYPT_R, _SCRYPT_P = 16384, 8, 1
_KEY_BYTES = 32
_SALT_BYTES = 16
_MAXMEM = 64 * 1024 * 1024
_VERIFIED_CACHE_MAX = 256


class UsersFileError(ValueError):
    """The users file cannot be read or has a malformed entry."""


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def hash_password(password: str, *, salt: bytes | None = None) -> str:
    """``scrypt$N$r$p$salt$hash`` of ``password`` with a fresh random salt."""
    salt = os.urandom(_SALT_BYTES) if salt is None else salt
    key = hashlib.scrypt(
        password.encode("utf-8"), salt=salt, n=_SCRYPT_N, r=_SCRYPT_R, p=_SCRYPT_P, maxmem=_MAXMEM,
        dklen=_KEY_BYTES,
    )  # fmt: skip
    return f"scrypt${_SCRYPT_N}${_SCRYPT_R}${_SCRYPT_P}${_b64(salt)}${_b64(key)}"


def _parse(stored: str) -> tuple[int, int, int, bytes, bytes]:
    parts = stored.split("$")
    if len(parts) != 6 or parts[0] != "scrypt":
        raise UsersFileError("a password must be 'scrypt$N$r$p$salt$hash' (rocketq dashboard hash-password)")
    try:
        n, r, p = int(parts[1]), int(parts[2]), int(parts[3])
        salt, key = base64.b64decode(parts[4], validate=True), base64.b64decode(parts[5], validate=True)
    except (ValueError, binascii.Error) as exc:
        raise UsersFileError(f"malformed password hash: {exc}") from exc
    if n < 2 or n & (n - 1) or not (r > 0 and p > 0 and salt and key):
        raise UsersFileError("malformed password hash: N must be a power of 2, r, p, salt and hash set")
    return n, r, p, salt, key


def verify_password(password: str, stored: str) -> bool:
    """Whether ``password`` matches the ``scrypt$...`` string ``stored``."""
    n, r, p, salt, key = _parse(stored)
    got = hashlib.scrypt(password.encode("utf-8"), salt=salt, n=n, r=r, p=p, maxmem=_MAXMEM, dklen=len(key))
    return hmac.compare_digest(got, key)


@dataclass
class UserStore:
    """The users allowed to change state (empty: nobody may)."""

    users: Mapping[str, str] = field(default_factory=dict)  # name -> scrypt string
    login_required_for_reads: bool = False
    _verified: dict[bytes, str] = field(default_factory=dict, repr=False)

    @classmethod
    def load(cls, path: str | Path) -> UserStore:
        try:
            doc = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError) as exc:
            raise UsersFileError(f"cannot read the users file {path}: {exc}") from exc
        if not isinstance(doc, dict) or not isinstance(doc.get("users"), dict):
            raise UsersFileError(f"{path}: expected a mapping with 'users: {{name: scrypt-hash}}'")
        users: dict[str, str] = {}
        for name, stored in doc["users"].items():
            if not isinstance(stored, str):
                raise UsersFileError(f"{path}: the password of {name!r} must be a string from hash-password")
            try:
                _parse(stored)
            except UsersFileError as exc:
                raise UsersFileError(f"{path}: user {name!r}: {exc}") from exc
            users[str(name)] = stored
        return cls(users, bool(doc.get("login_required_for_reads", False)))

    def check(self, authorization: str | None) -> str | None:
        """The user named by a valid ``Basic`` ``authorization`` header, else None."""
        if not authorization or not authorization.startswith("Basic ") or not self.users:
            return None
        digest = hashlib.sha256(authorization.encode("utf-8")).digest()
        cached = self._verified.get(digest)
        if cached is not None and cached in self.users:
            return cached
        try:
            user, sep, password = (
                base64.b64decode(authorization[6:], validate=True).decode("utf-8").partition(":")
            )
        except (ValueError, binascii.Error):
            return None
        stored = self.users.get(user)
        if not sep or stored is None or not verify_password(password, stored):
            return None
        if len(self._verified) >= _VERIFIED_CACHE_MAX:
            self._verified.clear()
        self._verified[digest] = user
        return user
