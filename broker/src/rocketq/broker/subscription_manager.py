"""Subscription group configs (``config/subscriptionGroup.json``).

A consumer group must exist on the broker before it may pull.  With
``autoCreateSubscriptionGroup=true`` (RocketMQ's default) a group is created with default settings
the first time it is seen; otherwise it must be created with UPDATE_AND_CREATE_SUBSCRIPTIONGROUP
and pulls from unknown groups fail with SUBSCRIPTION_GROUP_NOT_EXIST.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from rocketq.broker.metadata import SubscriptionGroupConfig
from rocketq.client.remoting.vocabulary import SYSTEM_GROUPS, DataVersion, validate_group

__all__ = ["SubscriptionGroupConfig", "SubscriptionGroupManager"]


class SubscriptionGroupManager:
    """The group table; ``persist`` receives the subscriptionGroup.json document after each change."""

    def __init__(
        self, *, auto_create: bool = True, persist: Callable[[dict[str, object]], None] | None = None
    ) -> None:
        self._auto_create = auto_create
        self._persist = persist
        self._table: dict[str, SubscriptionGroupConfig] = {
            g: SubscriptionGroupConfig(group_name=g) for g in SYSTEM_GROUPS
        }
        self.data_version = DataVersion.now()

    def find(self, group: str) -> SubscriptionGroupConfig | None:
        """The group's config, auto-creating it when allowed; None if it does not exist."""
        sgc = self._table.get(group)
        if sgc is None and self._auto_create and validate_group(group) is None:  # never auto-create "../x"
            sgc = SubscriptionGroupConfig(group_name=group)
            self.update(sgc)
        return sgc

    def get(self, group: str) -> SubscriptionGroupConfig | None:
        return self._table.get(group)

    def update(self, sgc: SubscriptionGroupConfig) -> None:
        if self._table.get(sgc.group_name) == sgc:
            return
        self._table[sgc.group_name] = sgc
        self._changed()

    def delete(self, group: str) -> bool:
        if self._table.pop(group, None) is None:
            return False
        self._changed()
        return True

    def replace_all(self, table: Mapping[str, SubscriptionGroupConfig], data_version: DataVersion) -> bool:
        """A slave's copy of its master's groups (SlaveSynchronize): replace the table and take the
        master's data version, unless that version is the one held already (then False)."""
        if data_version == self.data_version:
            return False
        self._table = dict(table)
        self.data_version = data_version
        if self._persist is not None:
            self._persist(self.encode())
        return True

    def groups(self) -> list[str]:
        return sorted(self._table)

    def _changed(self) -> None:
        self.data_version = self.data_version.bumped()
        if self._persist is not None:
            self._persist(self.encode())

    def encode(self) -> dict[str, object]:
        return {
            "dataVersion": self.data_version.to_obj(),
            "subscriptionGroupTable": {g: c.to_json() for g, c in sorted(self._table.items())},
        }

    def load(self, doc: Mapping[str, Any] | None) -> None:
        if not doc:
            return
        for name, obj in (doc.get("subscriptionGroupTable") or {}).items():
            if isinstance(obj, Mapping):
                self._table[name] = SubscriptionGroupConfig.from_json({"groupName": name, **obj})
        self.data_version = DataVersion.from_obj(doc.get("dataVersion") or DataVersion.now().to_obj())
