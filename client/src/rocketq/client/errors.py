"""Error hierarchy shared by every rocketq component.

``RocketQError`` is the root; each component's ``errors.py`` derives from it.  Errors that come
from the wire carry the RocketMQ response code and remark, and say whether a retry may help.
Expected outcomes (a pull that found nothing, a send that timed out flushing) are status enums,
not exceptions.
"""

from __future__ import annotations


class RocketQError(Exception):
    """Root of all rocketq errors."""

    retriable: bool = False


class ProtocolError(RocketQError):
    """Bytes on the wire or on disk do not follow the RocketMQ format."""


class FrameError(ProtocolError):
    """A remoting frame is malformed (bad length, oversize, bad header)."""


class HeaderError(ProtocolError):
    """A command header is missing a required field or has a value of the wrong type."""


class MessageFormatError(ProtocolError):
    """A stored message record, properties string or batch body is malformed."""


class RemotingError(RocketQError):
    """A transport-level failure: connect, send, timeout, closed connection."""

    retriable = True


class RemotingTimeoutError(RemotingError):
    """No response arrived within the request timeout."""


class RemotingConnectError(RemotingError):
    """Could not connect to the remote address."""


class ClientError(RocketQError):
    """A client API was used wrongly (bad argument, wrong state)."""


# --------------------------------------------------------------------------------------------
# Client API errors (producer, consumers, admin).  Errors from a broker or NameServer carry the
# wire response code and remark; ``retriable`` comes from the table below, which follows the Java
# producer's list of codes it retries on another broker (A.3.1) plus the transient pull codes.
# --------------------------------------------------------------------------------------------

# Response codes a retry (usually against another broker) may cure.  Plain ints so that this
# module keeps importing nothing from ``remoting`` (which imports it).
_RETRIABLE_CODES: frozenset[int] = frozenset(
    {
        1,  # SYSTEM_ERROR
        2,  # SYSTEM_BUSY
        14,  # SERVICE_NOT_AVAILABLE
        16,  # NO_PERMISSION (e.g. a broker whose write permission was wiped)
        17,  # TOPIC_NOT_EXIST
        20,  # PULL_RETRY_IMMEDIATELY
        25,  # SUBSCRIPTION_NOT_LATEST
        204,  # NO_BUYER_ID
        205,  # NOT_IN_CURRENT_UNIT
    }
)


class MQClientError(ClientError):
    """A client-side failure that is not a broker answer (bad state, bad argument, no broker).

    ``code`` is a client pseudo code when one applies (``-1`` otherwise), ``remark`` the detail.
    """

    def __init__(self, remark: str, *, code: int = -1) -> None:
        super().__init__(remark)
        self.code = code
        self.remark = remark


class NoRouteError(MQClientError):
    """The NameServer knows no route for a topic (or no NameServer answered)."""

    retriable = True

    def __init__(self, topic: str, detail: str = "") -> None:
        text = (
            f"No route info of this topic: {topic}\n"
            "Check that the NameServer address list is right (several addresses are separated "
            "by ';', e.g. \"10.0.0.1:9876;10.0.0.2:9876\") and that the topic exists "
            "(mqadmin updateTopic) or the broker has autoCreateTopicEnable=true."
        )
        if detail:
            text = f"{text}\n{detail}"
        super().__init__(text, code=17)
        self.topic = topic


class NameServerUnreachableError(NoRouteError):
    """No NameServer of the address list answered a route request (a transport failure: the
    topic may well exist).  ``__cause__`` is the last transport error."""


class MQBrokerError(RocketQError):
    """A broker or NameServer answered a request with a non-success response code.

    ``code`` and ``remark`` are exactly what the server sent; ``broker_addr`` is the address the
    request went to.  Use :meth:`for_code` to build one: it picks the registered subclass for the
    code, so callers can ``except TopicNotExistError``.
    """

    _by_code: dict[int, type[MQBrokerError]] = {}
    code_value: int | None = None

    def __init__(self, code: int, remark: str | None, broker_addr: str | None = None) -> None:
        where = f" from {broker_addr}" if broker_addr else ""
        super().__init__(f"CODE: {code} DESC: {remark or ''}{where}")
        self.code = code
        self.remark = remark or ""
        self.broker_addr = broker_addr
        self.retriable = code in _RETRIABLE_CODES

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if cls.code_value is not None:
            MQBrokerError._by_code[cls.code_value] = cls

    @staticmethod
    def for_code(code: int, remark: str | None, broker_addr: str | None = None) -> MQBrokerError:
        cls = MQBrokerError._by_code.get(code, MQBrokerError)
        return cls(code, remark, broker_addr)


class SystemBusyError(MQBrokerError):
    code_value = 2


class MessageIllegalError(MQBrokerError):
    code_value = 13


class ServiceNotAvailableError(MQBrokerError):
    code_value = 14


class NoPermissionError(MQBrokerError):
    code_value = 16


class TopicNotExistError(MQBrokerError):
    code_value = 17


class SubscriptionError(MQBrokerError):
    """The broker rejected the consumer's subscription (parse failure, unknown or stale)."""

    code_value = 23


class SubscriptionNotExistError(SubscriptionError):
    code_value = 24


class SubscriptionNotLatestError(SubscriptionError):
    code_value = 25


class SubscriptionGroupNotExistError(SubscriptionError):
    code_value = 26
