"""What each request code needs under plain ACL: admin codes, and (resource, permission) pairs.

Resources are topic names, and ``%RETRY%<group>`` for a consumer group (RocketMQ's
PlainAccessValidator.parse names groups by their retry topic).  The data codes follow
RocketMQ 4.x (sends need PUB on the topic, or SUB on the group when the topic is a retry topic;
pulls need SUB on the topic and the group; a heartbeat needs SUB on each consumer group and each
subscribed topic...); the batch, reply and lite-pull codes are checked like their plain twins.

The admin codes are RocketMQ's ``Permission.ADMIN_CODE`` (create/update topic, broker config
update, delete topic in the broker, create/delete subscription group) extended with every request
that changes or reveals the cluster's configuration: deleting topics in the NameServer,
wiping/adding write permission, offset resets, config and full-table reads, KV config writes,
broker (un)registration, file-cleaning triggers, the ACL admin codes and the controller's
configuration codes.
"""

from __future__ import annotations

from rocketq.client.remoting import lenient_json
from rocketq.client.remoting.codes import RequestCode as RC
from rocketq.client.remoting.command import RemotingCommand
from rocketq.client.remoting.vocabulary import RETRY_GROUP_TOPIC_PREFIX, retry_topic
from rocketq.server.acl.plain_config import AclPerm

__all__ = ["ADMIN_CODES", "is_admin_code", "required_resources"]

ADMIN_CODES: frozenset[int] = frozenset(
    {
        # RocketMQ 4.x Permission.ADMIN_CODE
        RC.UPDATE_AND_CREATE_TOPIC,
        RC.UPDATE_BROKER_CONFIG,
        RC.DELETE_TOPIC_IN_BROKER,
        RC.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
        RC.DELETE_SUBSCRIPTIONGROUP,
        # rocketq's additions
        RC.UPDATE_AND_CREATE_TOPIC_LIST,
        RC.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST,
        RC.UPDATE_AND_CREATE_STATIC_TOPIC,
        RC.DELETE_TOPIC_IN_NAMESRV,
        RC.REGISTER_TOPIC_IN_NAMESRV,
        RC.WIPE_WRITE_PERM_OF_BROKER,
        RC.ADD_WRITE_PERM_OF_BROKER,
        RC.RESET_CONSUMER_OFFSET_IN_CONSUMER,
        RC.RESET_CONSUMER_OFFSET_IN_BROKER,
        RC.RESET_CONSUMER_CLIENT_OFFSET,
        RC.INVOKE_BROKER_TO_RESET_OFFSET,
        RC.CLONE_GROUP_OFFSET,
        RC.GET_BROKER_CONFIG,
        RC.GET_ALL_TOPIC_CONFIG,
        RC.GET_ALL_CONSUMER_OFFSET,
        RC.GET_ALL_DELAY_OFFSET,
        RC.GET_ALL_SUBSCRIPTIONGROUP_CONFIG,
        RC.PUT_KV_CONFIG,
        RC.DELETE_KV_CONFIG,
        RC.REGISTER_BROKER,
        RC.UNREGISTER_BROKER,
        RC.BROKER_HEARTBEAT,
        RC.UPDATE_NAMESRV_CONFIG,
        RC.GET_NAMESRV_CONFIG,
        RC.TRIGGER_DELETE_FILES,
        RC.CLEAN_EXPIRED_CONSUMEQUEUE,
        RC.CLEAN_UNUSED_TOPIC,
        RC.DELETE_EXPIRED_COMMITLOG,
        RC.RESET_MASTER_FLUSH_OFFSET,
        RC.UPDATE_AND_CREATE_ACL_CONFIG,
        RC.DELETE_ACL_CONFIG,
        RC.GET_BROKER_CLUSTER_ACL_INFO,
        RC.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG,
        RC.UPDATE_CONTROLLER_CONFIG,
        RC.GET_CONTROLLER_CONFIG,
        RC.CLEAN_BROKER_DATA,
    }
)

_SEND_CODES = frozenset(
    {
        RC.SEND_MESSAGE,
        RC.SEND_MESSAGE_V2,
        RC.SEND_BATCH_MESSAGE,
        RC.SEND_REPLY_MESSAGE,
        RC.SEND_REPLY_MESSAGE_V2,
    }
)
_PULL_CODES = frozenset({RC.PULL_MESSAGE, RC.LITE_PULL_MESSAGE})


def is_admin_code(code: int) -> bool:
    return code in ADMIN_CODES


def _field(cmd: RemotingCommand, *names: str) -> str:
    for name in names:
        value = cmd.ext_fields.get(name)
        if value:
            return value
    raise ValueError(f"request code {cmd.code} lacks the {' or '.join(names)} header field")


def _heartbeat_resources(body: bytes) -> list[tuple[str, AclPerm]]:
    try:
        data = lenient_json.loads(body) if body else {}
    except Exception as exc:  # any malformed body is a refusal, not a crash
        raise ValueError(f"unreadable heartbeat body ({exc})") from None
    needed: list[tuple[str, AclPerm]] = []
    consumers = data.get("consumerDataSet") if isinstance(data, dict) else None
    for consumer in consumers or []:
        if not isinstance(consumer, dict):
            raise ValueError("unreadable heartbeat body (consumer entry is not an object)")
        needed.append((retry_topic(str(consumer.get("groupName", ""))), AclPerm.SUB))
        for sub in consumer.get("subscriptionDataSet") or []:
            if isinstance(sub, dict) and sub.get("topic"):
                needed.append((str(sub["topic"]), AclPerm.SUB))
    return needed


def required_resources(cmd: RemotingCommand) -> list[tuple[str, AclPerm]]:
    """The (resource, permission) pairs a request needs; ValueError when a field is missing."""
    code = cmd.code
    if code in _SEND_CODES:
        topic = _field(cmd, "b", "topic")
        if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):  # a consumer re-sending to its group
            return [(topic, AclPerm.SUB)]
        return [(topic, AclPerm.PUB)]
    if code == RC.CONSUMER_SEND_MSG_BACK:
        return [(_field(cmd, "originTopic"), AclPerm.PUB), (retry_topic(_field(cmd, "group")), AclPerm.SUB)]
    if code in _PULL_CODES:
        return [(_field(cmd, "topic"), AclPerm.SUB), (retry_topic(_field(cmd, "consumerGroup")), AclPerm.SUB)]
    if code == RC.QUERY_MESSAGE:
        return [(_field(cmd, "topic"), AclPerm.SUB)]
    if code == RC.HEART_BEAT:
        return _heartbeat_resources(cmd.body)
    if code in (RC.UNREGISTER_CLIENT, RC.GET_CONSUMER_LIST_BY_GROUP):
        group = cmd.ext_fields.get("consumerGroup")
        return [(retry_topic(group), AclPerm.SUB)] if group else []
    if code == RC.UPDATE_CONSUMER_OFFSET:
        return [
            (retry_topic(_field(cmd, "consumerGroup")), AclPerm.SUB),
            (_field(cmd, "topic"), AclPerm.SUB),
        ]
    return []
