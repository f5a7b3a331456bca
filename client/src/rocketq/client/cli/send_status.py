"""mqadmin sendMsgStatus (RocketMQ's name and options): timed sends to one broker group.

``sendMsgStatus -b brokerName [-s messageSize] [-c count]`` sends ``count`` (50) messages of
``messageSize`` (128) bytes to the broker's own topic and prints one line per send as Java does,
``rt=<ms>ms, SendResult=SendResult [sendStatus=..., msgId=..., offsetMsgId=..., messageQueue=...,
queueOffset=...]``.
"""

from __future__ import annotations

import argparse

from rocketq.client.admin import AsyncAdmin
from rocketq.client.admin_send_status import send_msg_status
from rocketq.client.cli.common import CommandGroup, Handler, out
from rocketq.client.model import SendResult

__all__ = ["GROUP"]


def _result_str(r: SendResult) -> str:
    mq = r.message_queue
    queue = f"MessageQueue [topic={mq.topic}, brokerName={mq.broker_name}, queueId={mq.queue_id}]"
    return (
        f"SendResult [sendStatus={r.send_status.value}, msgId={r.msg_id}, offsetMsgId={r.offset_msg_id}, "
        f"messageQueue={queue}, queueOffset={r.queue_offset}]"
    )


async def _send_msg_status(admin: AsyncAdmin, a: argparse.Namespace) -> None:
    for rt_ms, result in await send_msg_status(
        admin, a.broker_name, message_size=a.message_size, count=a.count
    ):
        out(f"rt={rt_ms}ms, SendResult={_result_str(result)}")


def _add_options(name: str, p: argparse.ArgumentParser) -> None:
    p.add_argument("-b", "--brokerName", dest="broker_name", required=True, help="Broker Name e.g. broker-a")
    p.add_argument(
        "-s", "--messageSize", dest="message_size", type=int, default=128, help="Message Size, Default: 128"
    )
    p.add_argument("-c", "--count", type=int, default=50, help="send message count, Default: 50")


_COMMANDS: dict[str, tuple[Handler, str]] = {
    "sendMsgStatus": (_send_msg_status, "Send msg to broker."),
}

GROUP = CommandGroup(commands=_COMMANDS, add_options=_add_options)
