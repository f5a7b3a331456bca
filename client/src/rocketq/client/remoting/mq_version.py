"""RocketMQ's client versions as the wire carries them: ordinals of Java's ``MQVersion.Version``.

Every remoting command carries the sender's ``version``, an ordinal of ``MQVersion.Version``,
which brokers report back in consumerConnection / producerConnection (Java's mqadmin prints it as
the enum name, ``MQVersion.getVersionDesc``).  From ``V4_9_4`` (401, what rocketq's own clients
send) to ``V5_9_9`` the enum lists each release ``x.y.z`` right after its ``x.y.z-SNAPSHOT``, so
a release's ordinal is ``401 + 2 * (releases since 4.9.4)``; this module maps that range both
ways and leaves other numbers as numbers.  ``V5_0_0`` (413) is the first version of RocketMQ 5,
whose SDKs speak gRPC to a proxy.
"""

from __future__ import annotations

import re
from typing import Final

from rocketq.client.remoting.command import DEFAULT_VERSION

__all__ = ["V4_9_4", "V5_0_0", "release_ordinal", "version_name"]

#: ``MQVersion.Version.V4_9_4.ordinal()``
V4_9_4: Final = DEFAULT_VERSION
_FIRST, _LAST = 494, 599  # 4.9.4 .. 5.9.9 as x*100 + y*10 + z
#: ``MQVersion.Version.V5_0_0.ordinal()``
V5_0_0: Final = V4_9_4 + 2 * (500 - _FIRST)
_RELEASE_RE = re.compile(r"^\s*v?(\d)[._](\d)[._](\d)\s*$", re.IGNORECASE)


def release_ordinal(text: str) -> int | None:
    """The ordinal of release ``x.y.z`` (or ``Vx_y_z``) between 4.9.4 and 5.9.9, else None."""
    found = _RELEASE_RE.match(text)
    if found is None:
        return None
    index = int(found[1]) * 100 + int(found[2]) * 10 + int(found[3])
    if not _FIRST <= index <= _LAST:
        return None
    return V4_9_4 + 2 * (index - _FIRST)


def version_name(version: int) -> str:
    """``V5_1_2`` for a release's ordinal between V4_9_4 and V5_9_9, else the number as text."""
    steps, snapshot = divmod(version - V4_9_4, 2)
    index = _FIRST + steps
    if version < V4_9_4 or snapshot or index > _LAST:
        return str(version)
    return f"V{index // 100}_{index // 10 % 10}_{index % 10}"
