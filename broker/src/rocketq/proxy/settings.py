"""The Settings a client gets back on its Telemetry stream (``GrpcClientSettingsManager``).

A 5.x SDK opens Telemetry and sends its own Settings (client type, topics or subscriptions, what
it would like); the server answers with the Settings that rule: for producers the exponential back-off
between send attempts, ``max_body_size`` and ``validate_message_type``; for consumers the receive
batch size, the long-polling timeout, ``fifo`` (the group's ``consumeMessageOrderly``) and the
back-off between deliveries (RocketMQ's delay levels, which a push consumer uses as the invisible
time of a failed message) whose ``max_attempts`` is the group's retryMaxTimes + 1.  ``metric.on``
is always false (the Python SDK waits for the ``metric`` field before a PushConsumer starts).  The Node SDK's
start-up blocks until this answer arrives, so it is sent for every Settings command, whatever its
client type.
"""

from __future__ import annotations

from google.protobuf.duration_pb2 import Duration

from rocketq.proxy.config import ProxyConfig
from rocketq.proxy.groups import GroupPolicy
from rocketq.proxy.v2 import definition_pb2 as pb

__all__ = ["CONSUMER_BACKOFF_S", "server_settings"]


def _duration(ms: int) -> Duration:
    return Duration(seconds=ms // 1000, nanos=(ms % 1000) * 1_000_000)


#: consumers' back-off between deliveries: RocketMQ's delay levels 1s ... 2h (``messageDelayLevel``)
CONSUMER_BACKOFF_S = (1, 5, 10, 30, 60, 120, 180, 240, 300, 360, 420, 480, 540, 600, 1200, 1800, 3600, 7200)


def _backoff(config: ProxyConfig, max_attempts: int) -> pb.RetryPolicy:
    return pb.RetryPolicy(
        max_attempts=max_attempts,
        exponential_backoff=pb.ExponentialBackoff(
            initial=_duration(config.grpc_client_producer_backoff_initial_millis),
            max=_duration(config.grpc_client_producer_backoff_max_millis),
            multiplier=config.grpc_client_producer_backoff_multiplier,
        ),
    )


def server_settings(
    client: pb.Settings, config: ProxyConfig, group: GroupPolicy | None = None
) -> pb.Settings:
    """The Settings answering ``client``'s (its client type, access point and request timeout kept);
    a consumer's ``fifo`` and ``max_attempts`` are its group's (``group``; without it: not FIFO,
    ``consumerMaxAttempts``)."""
    if group is None:
        group = GroupPolicy(fifo=False, max_attempts=config.consumer_max_attempts)
    out = pb.Settings(metric=pb.Metric(on=False))
    if client.HasField("client_type"):
        out.client_type = client.client_type
    if client.HasField("access_point"):
        out.access_point.CopyFrom(client.access_point)
    if client.HasField("request_timeout"):
        out.request_timeout.CopyFrom(client.request_timeout)
    if client.WhichOneof("pub_sub") == "subscription":
        sub = client.subscription
        out.backoff_policy.CopyFrom(
            pb.RetryPolicy(
                max_attempts=group.max_attempts,
                customized_backoff=pb.CustomizedBackoff(
                    next=[Duration(seconds=s) for s in CONSUMER_BACKOFF_S]
                ),
            )
        )
        out.subscription.CopyFrom(
            pb.Subscription(
                subscriptions=sub.subscriptions,
                fifo=group.fifo,
                receive_batch_size=config.grpc_client_consumer_long_polling_batch_size,
                long_polling_timeout=_duration(config.grpc_client_consumer_max_long_polling_timeout_millis),
            )
        )
        if sub.HasField("group"):
            out.subscription.group.CopyFrom(sub.group)
    else:
        out.backoff_policy.CopyFrom(_backoff(config, config.grpc_client_producer_max_attempts))
        out.publishing.CopyFrom(
            pb.Publishing(
                topics=client.publishing.topics,
                max_body_size=config.max_message_size,
                validate_message_type=config.enable_topic_message_type_check,
            )
        )
    return out
