"""The broker id a controller assigned to this store: ``<storePathRootDir>/brokerIdentity.json``.

RocketMQ 5 keeps it in ``brokerIdentity`` (``BrokerMetadata``); rocketq writes JSON
``{"clusterName", "brokerName", "brokerId"}`` atomically with a ``.bak`` (metadata.py's writer).
A store whose file names another cluster or group is treated as unregistered (a new id is asked
for) and logged.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass

from rocketq.broker.metadata import load_json_file, persist_json_file

__all__ = ["IDENTITY_FILE", "BrokerIdentity", "load_identity", "persist_identity"]

log = logging.getLogger(__name__)

IDENTITY_FILE = "brokerIdentity.json"


@dataclass(frozen=True, slots=True)
class BrokerIdentity:
    cluster_name: str
    broker_name: str
    broker_id: int


def load_identity(store_root: str) -> BrokerIdentity | None:
    doc = load_json_file(os.path.join(store_root, IDENTITY_FILE))
    if not isinstance(doc, dict):
        return None
    try:
        identity = BrokerIdentity(str(doc["clusterName"]), str(doc["brokerName"]), int(doc["brokerId"]))
    except (KeyError, TypeError, ValueError):
        log.error("%s in %s is not {clusterName, brokerName, brokerId}: %r", IDENTITY_FILE, store_root, doc)
        return None
    return identity if identity.broker_id >= 1 else None


def persist_identity(store_root: str, identity: BrokerIdentity) -> None:
    persist_json_file(
        os.path.join(store_root, IDENTITY_FILE),
        {
            "clusterName": identity.cluster_name,
            "brokerName": identity.broker_name,
            "brokerId": identity.broker_id,
        },
    )
