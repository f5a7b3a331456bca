"""Bad input against a running NameServer process: it answers or hangs up, and never dies.

More than 1 000 inputs from a seeded generator: random bytes, truncated frames, oversize length
fields, corrupt headers (each on a fresh connection), unknown request codes and malformed requests
for real codes (many per connection).  Every answer must be REQUEST_CODE_NOT_SUPPORTED or
SYSTEM_ERROR with a remark; otherwise the server must close the connection.  Between batches a
route query on a separate, long-lived connection checks that other clients are still served.
"""

from __future__ import annotations

import json
import random
import socket
import struct
from collections.abc import Callable

from rocketq.client.remoting.codes import RequestCode, ResponseCode
from rocketq.client.remoting.command import RemotingCommand, SerializeType, decode_command, encode_command
from rocketq.client.remoting.frame import MAX_FRAME_LENGTH, FrameDecoder
from rocketq.client.testing import ServerProcess
from rocketq.client.transport.blocking import BlockingRemotingClient
from rocketq.namesrv.bodies import encode_register_body
from rocketq.namesrv.routeinfo import QueueConf

SEED = 20240611
HANDLED = {int(c) for c in (100, 101, 102, 103, 104, 105, 106, 205, 206, 216, 219, 224, 319, 322, 327)}
ERROR_CODES = {ResponseCode.REQUEST_CODE_NOT_SUPPORTED, ResponseCode.SYSTEM_ERROR}


def _valid_frame(rng: random.Random) -> bytes:
    cmd = RemotingCommand.request(
        rng.choice(sorted(HANDLED)), {"topic": "T" * rng.randint(1, 20)}, rng.randbytes(20)
    )
    cmd.opaque = rng.randint(1, 1 << 30)
    return encode_command(cmd, rng.choice(list(SerializeType)))


def random_bytes(rng: random.Random) -> bytes:
    return rng.randbytes(rng.randint(1, 300))


def truncated_frame(rng: random.Random) -> bytes:
    frame = _valid_frame(rng)
    return frame[: rng.randint(1, len(frame) - 1)]


def oversize_length(rng: random.Random) -> bytes:
    length = rng.choice(
        [MAX_FRAME_LENGTH + 1, rng.randint(MAX_FRAME_LENGTH + 1, 0x7FFFFFFF), -rng.randint(1, 1 << 31)]
    )
    return struct.pack(">i", length) + rng.randbytes(rng.randint(0, 64))


def corrupt_header(rng: random.Random) -> bytes:
    """A well-framed payload whose header is garbage (bad JSON, bad binary lengths, bad type)."""
    header = rng.choice(
        [
            rng.randbytes(rng.randint(0, 60)),
            b'{"code":' + rng.randbytes(8),
            b"[1,2,3]",
            struct.pack(">hbhiii", 105, 3, 401, 1, 0, rng.randint(100, 1 << 20)),
        ]
    )
    stype = rng.choice([0, 1, rng.randint(2, 255)])
    body = rng.randbytes(rng.randint(0, 40))
    return struct.pack(">iI", 4 + len(header) + len(body), (stype << 24) | len(header)) + header + body


def read_until_closed(sock: socket.socket) -> list[RemotingCommand]:
    decoder = FrameDecoder()
    responses: list[RemotingCommand] = []
    while True:
        data = sock.recv(65536)
        if not data:
            return responses
        responses += [decode_command(f) for f in decoder.feed(data)]


def check_error_response(resp: RemotingCommand) -> None:
    assert resp.is_response and resp.code in ERROR_CODES, resp
    assert resp.remark, resp


def one_shot(addr: tuple[str, int], payload: bytes) -> None:
    """Send one bad input on a fresh connection, half-close, read until the server hangs up."""
    with socket.create_connection(addr, timeout=10) as sock:
        try:
            sock.sendall(payload)
            sock.shutdown(socket.SHUT_WR)
            responses = read_until_closed(sock)
        except ConnectionResetError:
            return  # the server hung up while we were still sending: also a close
    for resp in responses:
        check_error_response(resp)


def unknown_code_requests(rng: random.Random, n: int) -> list[RemotingCommand]:
    cmds = []
    for _ in range(n):
        code = rng.randint(-32768, 32767)
        while code in HANDLED:
            code = rng.randint(-32768, 32767)
        cmds.append(
            RemotingCommand.request(code, {"k": str(rng.random())}, rng.randbytes(rng.randint(0, 50)))
        )
    return cmds


def malformed_known_requests(rng: random.Random, n: int) -> list[RemotingCommand]:
    """Real codes with missing headers, non-numeric ids, corrupt register bodies, wrong CRCs."""
    reg = {"brokerName": "b", "brokerAddr": "h:1", "clusterName": "c", "haServerAddr": "h:2", "brokerId": "0"}
    cmds = []
    for _ in range(n):
        kind = rng.randrange(5)
        if kind == 0:
            code = rng.choice([101, 102, 103, 104, 105, 216, 219, 224, 322])
            cmds.append(RemotingCommand.request(code, {"junk": "x"}))
        elif kind == 1:
            cmds.append(
                RemotingCommand.request(103, {**reg, "brokerId": rng.choice(["x", "1.5", "", "9" * 30])})
            )
        elif kind == 2:
            body = rng.randbytes(rng.randint(1, 200))
            cmds.append(
                RemotingCommand.request(103, {**reg, "compressed": rng.choice(["true", "false"])}, body)
            )
        elif kind == 3:
            body = encode_register_body((1, 1, 0), {"T": QueueConf(4, 4, 6)})
            cmds.append(
                RemotingCommand.request(103, {**reg, "bodyCrc32": str(rng.randint(1, 1 << 30))}, body)
            )
        else:
            cmds.append(RemotingCommand.request(322, reg, b"{" + rng.randbytes(10)))
    return cmds


def pipelined(client: BlockingRemotingClient, addr: str, cmds: list[RemotingCommand]) -> None:
    for cmd in cmds:
        check_error_response(client.invoke(addr, cmd, 5000))


def test_garbage_never_kills_the_name_server(namesrv: ServerProcess) -> None:
    rng = random.Random(SEED)
    addr = (namesrv.host, namesrv.port)
    watcher = BlockingRemotingClient()
    attacker = BlockingRemotingClient(serialize_type=SerializeType.ROCKETMQ)
    register = RemotingCommand.request(
        RequestCode.REGISTER_BROKER,
        {
            "brokerName": "good",
            "brokerAddr": "127.0.0.1:1",
            "clusterName": "c",
            "haServerAddr": "",
            "brokerId": "0",
        },
        encode_register_body((1, 1, 0), {"Good": QueueConf(4, 4, 6)}),
    )
    assert watcher.invoke(namesrv.addr, register, 5000).code == ResponseCode.SUCCESS
    generators: list[Callable[[random.Random], bytes]] = [
        random_bytes,
        truncated_frame,
        oversize_length,
        corrupt_header,
    ]
    sent = 0
    try:
        for batch in range(8):
            for _ in range(100):
                one_shot(addr, rng.choice(generators)(rng))
                sent += 1
            pipelined(
                attacker, namesrv.addr, unknown_code_requests(rng, 25) + malformed_known_requests(rng, 25)
            )
            sent += 50
            query = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "Good"})
            resp = watcher.invoke(namesrv.addr, query, 5000)
            assert resp.code == ResponseCode.SUCCESS, f"batch {batch}: {resp}"
            assert json.loads(resp.body)["queueDatas"][0]["brokerName"] == "good"
            assert namesrv.is_alive(), namesrv.log_tail()
    finally:
        watcher.close()
        attacker.close()
    assert sent >= 1000
    assert namesrv.is_alive()
    assert "Traceback" not in namesrv.log_text()
