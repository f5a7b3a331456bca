"""END_TRANSACTION (37): the producer's commit or rollback of a half message.

The Java producer sends it oneway (``endTransactionOneway``), both after its local transaction and
in answer to CHECK_TRANSACTION_STATE (``fromTransactionCheck=true``); a oneway request gets no
response whatever happens.  ``commitOrRollback`` 0 ("unknown") is logged and ignored, as RocketMQ
does; a slave refuses with SLAVE_NOT_AVAILABLE.  The store work runs off the event loop (a
SYNC_FLUSH put waits for the group commit): through ``offload`` when the broker passes its send
executor's ``run``, else ``asyncio.to_thread``.

rocketq extension: with the ext field ``rqRanges=true`` the body lists half-offset ranges
(:mod:`rocketq.client.remoting.txn_batch`) and the request ends all of them
(``TransactionalMessageService.end_transaction_ranges``); the response (when not oneway) carries
``rqEnded`` / ``rqSkipped`` and a remark with the counts.  A body that is not a valid ranges list
is answered MESSAGE_ILLEGAL.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Protocol, TypeVar

from rocketq.broker.store.status import PutMessageStatus
from rocketq.broker.transaction.ranged import RangedEndResult
from rocketq.broker.transaction.service import COMMIT_TYPE, ROLLBACK_TYPE, TransactionalMessageService
from rocketq.client.errors import HeaderError, MessageFormatError
from rocketq.client.remoting.codes import ResponseCode
from rocketq.client.remoting.command import RemotingCommand
from rocketq.client.remoting.headers import EndTransactionRequestHeader
from rocketq.client.remoting.txn_batch import ENDED_FIELD, RANGES_FIELD, SKIPPED_FIELD, decode_ranges_body

__all__ = ["process_end_transaction"]

log = logging.getLogger(__name__)

_T = TypeVar("_T")


class Offload(Protocol):
    """Runs a blocking call off the event loop (``BoundedExecutor.run``, ``asyncio.to_thread``)."""

    def __call__(self, fn: Callable[[], _T], /) -> Awaitable[_T]: ...


async def _to_thread(fn: Callable[[], _T]) -> _T:
    return await asyncio.to_thread(fn)


def _reply(cmd: RemotingCommand, code: int, remark: str | None) -> RemotingCommand | None:
    return None if cmd.is_oneway else cmd.make_response(code, remark)


async def process_end_transaction(
    service: TransactionalMessageService,
    cmd: RemotingCommand,
    *,
    offload: Offload | None = None,
    is_slave: bool = False,
    replicated: Callable[[int], Awaitable[PutMessageStatus]] | None = None,
    on_ended: Callable[[bool, int], None] | None = None,
) -> RemotingCommand | None:
    """Handle one END_TRANSACTION request (ranged with ``rqRanges=true``); None for oneway requests.

    ``on_ended(commit, count)`` is told how many half messages this request ended (metrics).
    """
    try:
        header = EndTransactionRequestHeader.from_ext_fields(cmd.ext_fields)
    except HeaderError as exc:
        log.warning("END_TRANSACTION with a bad header: %s", exc)
        return _reply(cmd, ResponseCode.SYSTEM_ERROR, str(exc))
    if is_slave:
        log.warning("END_TRANSACTION refused: this broker is a slave")
        return _reply(cmd, ResponseCode.SLAVE_NOT_AVAILABLE, "end transaction is forbidden on a slave")
    if cmd.ext_fields.get(RANGES_FIELD, "").lower() == "true":
        response = await _ranged(service, cmd, header, offload, on_ended)
        return await _after_replication(service, cmd, response, replicated)
    kind = header.commit_or_rollback
    source = "check answer" if header.from_transaction_check else "producer"
    if kind not in (COMMIT_TYPE, ROLLBACK_TYPE):
        log.warning(
            "END_TRANSACTION (%s) with state %d for %s: transaction still unknown, ignored (remark: %s)",
            source,
            kind,
            header.transaction_id or header.msg_id,
            cmd.remark,
        )
        return _reply(cmd, ResponseCode.SUCCESS, None)
    if kind == ROLLBACK_TYPE or header.from_transaction_check:
        log.info(
            "END_TRANSACTION (%s): %s %s",
            source,
            "commit" if kind == COMMIT_TYPE else "rollback",
            header.transaction_id or header.msg_id,
        )
    run = offload if offload is not None else _to_thread
    code, remark = await run(lambda: service.end_transaction(header))
    if on_ended is not None and code == ResponseCode.SUCCESS:
        on_ended(kind == COMMIT_TYPE, 1)
    if code == ResponseCode.SUCCESS and kind == COMMIT_TYPE and replicated is not None:
        remark = await _replication_remark(service, replicated)
    return _reply(cmd, code, remark)


async def _replication_remark(
    service: TransactionalMessageService, replicated: Callable[[int], Awaitable[PutMessageStatus]]
) -> str | None:
    """SYNC_MASTER: wait until a slave has everything stored so far (the commit included).

    As in RocketMQ's EndTransactionProcessor a commit stays SUCCESS when the slave wait fails (the
    commit is stored); the remark says how far it got."""
    status = await replicated(service.store.max_phy_offset)
    if status is PutMessageStatus.PUT_OK:
        return None
    log.warning("END_TRANSACTION commit stored but not replicated: %s", status.value)
    return f"committed; replication: {status.value}"


async def _after_replication(
    service: TransactionalMessageService,
    cmd: RemotingCommand,
    response: RemotingCommand | None,
    replicated: Callable[[int], Awaitable[PutMessageStatus]] | None,
) -> RemotingCommand | None:
    if replicated is None or response is None or response.code != ResponseCode.SUCCESS:
        return response
    remark = await _replication_remark(service, replicated)
    if remark is not None:
        response.remark = f"{response.remark}; {remark}" if response.remark else remark
    return response


async def _ranged(
    service: TransactionalMessageService,
    cmd: RemotingCommand,
    header: EndTransactionRequestHeader,
    offload: Offload | None,
    on_ended: Callable[[bool, int], None] | None = None,
) -> RemotingCommand | None:
    try:
        ranges = decode_ranges_body(cmd.body)
    except MessageFormatError as exc:
        log.warning("ranged END_TRANSACTION with a bad body: %s", exc)
        return _reply(cmd, ResponseCode.MESSAGE_ILLEGAL, str(exc))
    if ranges[0][0] != header.tran_state_table_offset:
        return _reply(
            cmd,
            ResponseCode.MESSAGE_ILLEGAL,
            "tranStateTableOffset must be the first half offset of the first range",
        )
    run = offload if offload is not None else _to_thread
    result: RangedEndResult = await run(lambda: service.end_transaction_ranges(header, ranges))
    if on_ended is not None and result.ended:
        on_ended(header.commit_or_rollback == COMMIT_TYPE, result.ended)
    log.info(
        "ranged END_TRANSACTION (%d ranges, state %d) of group %s: %s",
        len(ranges),
        header.commit_or_rollback,
        header.producer_group,
        result.remark,
    )
    if cmd.is_oneway:
        return None
    return cmd.make_response(
        result.code, result.remark, {ENDED_FIELD: str(result.ended), SKIPPED_FIELD: str(result.skipped)}
    )
