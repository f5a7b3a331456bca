"""mqadmin's NameServer KV commands: updateKvConfig and deleteKvConfig (RocketMQ's names, letters
and output lines).

Both go to every NameServer of ``-n`` (PUT_KV_CONFIG / DELETE_KV_CONFIG), as Java's
``createAndUpdateKvConfig`` and ``deleteKvConfig`` do; a NameServer keeps the items in memory, or
in ``kvConfigPath`` when it is set.
"""

from __future__ import annotations

import argparse

from rocketq.client.admin import AsyncAdmin
from rocketq.client.cli.common import CommandGroup, Handler, out

__all__ = ["GROUP"]


async def _update_kv_config(admin: AsyncAdmin, a: argparse.Namespace) -> None:
    await admin.update_kv_config(a.namespace, a.key, a.value)
    out("create or update kv config to namespace success.")


async def _delete_kv_config(admin: AsyncAdmin, a: argparse.Namespace) -> None:
    await admin.delete_kv_config(a.namespace, a.key)
    out("delete kv config from namespace success.")


def _add_options(name: str, p: argparse.ArgumentParser) -> None:
    p.add_argument("-s", "--namespace", required=True, help="set the namespace")
    p.add_argument("-k", "--key", required=True, help="set the key name")
    if name == "updateKvConfig":
        p.add_argument("-v", "--value", required=True, help="set the key value")


_COMMANDS: dict[str, tuple[Handler, str]] = {
    "updateKvConfig": (_update_kv_config, "Create or update KV config"),
    "deleteKvConfig": (_delete_kv_config, "Delete KV config"),
}

GROUP = CommandGroup(commands=_COMMANDS, add_options=_add_options)
