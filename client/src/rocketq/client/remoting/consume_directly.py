"""ConsumeMessageDirectlyResult: the body a consumer client answers CONSUME_MESSAGE_DIRECTLY with.

JSON as Java's fastjson writes it::

    {"autoCommit":true,"consumeResult":"CR_SUCCESS","order":false,"remark":null,"spentTimeMills":3}

``consumeResult`` is one of Java's ``CMResult`` names; ``order`` says whether an orderly listener
consumed the message, ``autoCommit`` is its context's setting (always true for a concurrent one),
``remark`` carries the listener's exception when it raised, ``spentTimeMills`` the listener's time.
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass

from rocketq.client.errors import ProtocolError

__all__ = ["CMResult", "ConsumeMessageDirectlyResult"]


class CMResult(enum.Enum):
    CR_SUCCESS = "CR_SUCCESS"
    CR_LATER = "CR_LATER"
    CR_ROLLBACK = "CR_ROLLBACK"
    CR_COMMIT = "CR_COMMIT"
    CR_THROW_EXCEPTION = "CR_THROW_EXCEPTION"
    CR_RETURN_NULL = "CR_RETURN_NULL"


@dataclass(frozen=True, slots=True)
class ConsumeMessageDirectlyResult:
    consume_result: CMResult
    order: bool = False
    auto_commit: bool = True
    remark: str | None = None
    spent_time_mills: int = 0

    def encode(self) -> bytes:
        return json.dumps(
            {
                "autoCommit": self.auto_commit,
                "consumeResult": self.consume_result.value,
                "order": self.order,
                "remark": self.remark,
                "spentTimeMills": self.spent_time_mills,
            },
            separators=(",", ":"),
        ).encode()

    @classmethod
    def decode(cls, body: bytes) -> ConsumeMessageDirectlyResult:
        try:
            doc = json.loads(body)
            result = CMResult(doc["consumeResult"])
        except (ValueError, KeyError, TypeError) as exc:
            raise ProtocolError(f"bad ConsumeMessageDirectlyResult body {body[:200]!r}: {exc}") from exc
        remark = doc.get("remark")
        return cls(
            consume_result=result,
            order=bool(doc.get("order", False)),
            auto_commit=bool(doc.get("autoCommit", True)),
            remark=None if remark is None else str(remark),
            spent_time_mills=int(doc.get("spentTimeMills") or 0),
        )

    def __str__(self) -> str:
        """Java's ``toString``, which mqadmin prints."""
        return (
            f"ConsumeMessageDirectlyResult [order={str(self.order).lower()}, "
            f"autoCommit={str(self.auto_commit).lower()}, consumeResult={self.consume_result.value}, "
            f"remark={self.remark}, spentTimeMills={self.spent_time_mills}]"
        )
