"""Detecting a store written by Java's DLedger CommitLog, which rocketq does not read.

Java's DLedger keeps the group's log under ``<storePathRootDir>/dledger-<selfId>/`` (``data`` for
the entries, ``index`` for their positions), in its own entry format around each message.
rocketq's DLedger mode keeps RocketMQ's plain CommitLog and its own Raft journal (``dledger-raft``);
starting on a Java DLedger store would serve an empty log beside the user's messages, so the
broker refuses to start and says what to do.
"""

from __future__ import annotations

from pathlib import Path

from rocketq.broker.dledger.raft import RAFT_DIR

__all__ = ["java_dledger_store", "java_store_error"]


def java_dledger_store(store_root: str) -> Path | None:
    """The first ``dledger-<id>`` folder of Java's DLedger under ``store_root`` (None: none)."""
    root = Path(store_root)
    if not root.is_dir():
        return None
    for child in sorted(root.glob("dledger-*")):
        if (
            child.name != RAFT_DIR
            and child.is_dir()
            and ((child / "data").exists() or (child / "index").exists())
        ):
            return child
    return None


def java_store_error(found: Path) -> str:
    return (
        f"{found} holds a CommitLog written by Java's DLedger (its entry format), which rocketq does "
        "not read: rocketq's DLedger mode keeps the plain CommitLog format. Start this member on an "
        "empty storePathRootDir (it copies the group's log from the master), or move the folder away"
    )
