"""The NameServer's namespaced key/value store (PUT/GET/DELETE_KV_CONFIG, GET_KVLIST_BY_NAMESPACE).

Values live in memory as ``namespace -> {key: value}``.  When a path is configured
(``kvConfigPath``) every change is written back as RocketMQ's ``kvConfig.json`` layout,
``{"configTable": {namespace: {key: value}}}``, through a temporary file, ``fsync`` and
``os.replace`` so a crash leaves either the old or the new file, never a torn one.  The
``ORDER_TOPIC_CONFIG`` namespace is the one RocketMQ itself reads: it maps topic names to
``"brokerName:queueNums;..."`` strings returned to clients as ``orderTopicConf``.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from pathlib import Path

from rocketq.namesrv.errors import NamesrvConfigError

log = logging.getLogger("rocketq.namesrv.kvconfig")


class KvConfigManager:
    """Namespaced string key/value pairs, optionally persisted as JSON."""

    def __init__(self, path: str | Path | None = None) -> None:
        self._lock = threading.RLock()
        self._path = Path(path).expanduser() if path else None
        self._table: dict[str, dict[str, str]] = {}

    def load(self) -> None:
        """Read the persisted table, if a path is configured and the file exists."""
        if self._path is None or not self._path.exists():
            return
        try:
            obj = json.loads(self._path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise NamesrvConfigError(f"cannot load KV config {self._path}: {exc}") from exc
        table = obj.get("configTable", {}) if isinstance(obj, dict) else {}
        if not isinstance(table, dict):
            raise NamesrvConfigError(f"KV config {self._path}: configTable is not an object")
        with self._lock:
            self._table = {
                str(ns): {str(k): str(v) for k, v in kv.items()}
                for ns, kv in table.items()
                if isinstance(kv, dict)
            }
        log.info("loaded KV config from %s (%d namespaces)", self._path, len(self._table))

    def _persist(self) -> None:
        if self._path is None:
            return
        text = json.dumps({"configTable": self._table}, indent=2, sort_keys=True, ensure_ascii=False)
        self._path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self._path.with_name(self._path.name + ".tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self._path)

    def put(self, namespace: str, key: str, value: str) -> None:
        with self._lock:
            old = self._table.setdefault(namespace, {}).get(key)
            self._table[namespace][key] = value
            self._persist()
        log.info("KV config put %s/%s=%s (was %s)", namespace, key, value, old)

    def get(self, namespace: str, key: str) -> str | None:
        with self._lock:
            return self._table.get(namespace, {}).get(key)

    def delete(self, namespace: str, key: str) -> bool:
        with self._lock:
            kv = self._table.get(namespace)
            if kv is None or key not in kv:
                return False
            del kv[key]
            if not kv:
                del self._table[namespace]
            self._persist()
        log.info("KV config deleted %s/%s", namespace, key)
        return True

    def namespace(self, namespace: str) -> dict[str, str]:
        """A copy of one namespace's pairs (empty when unknown)."""
        with self._lock:
            return dict(self._table.get(namespace, {}))
