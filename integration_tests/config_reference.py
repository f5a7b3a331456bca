"""Generates docs/configuration.md, the configuration reference, from the config parsers.

The keys and their defaults come from the parsers themselves: the broker's ``broker.conf`` key
table (:func:`rocketq.broker.config_keys.broker_conf_keys`), the NameServer's and the controller's
``config_to_properties`` of a default config, and their lists of keys accepted and ignored; the
TLS keys come from :data:`rocketq.client.transport.tls.TLS_KEYS`.  Only the meanings are written
here, one short phrase per key, grouped in sections.  :func:`render` fails when a parser key has
no meaning or a meaning names a key no parser reads, so the page cannot fall behind the code;
integration_tests/test_docs.py compares the page with :func:`render`.  Run
``python integration_tests/config_reference.py`` to rewrite the page after changing a parser.
"""

from __future__ import annotations

import enum
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

from rocketq.broker.config_keys import KeyOwner, broker_conf_keys
from rocketq.client.transport.tls import TLS_KEYS, TlsConfig
from rocketq.controller import config as controller_config
from rocketq.controller import config_update as controller_config_update
from rocketq.namesrv import config as namesrv_config
from rocketq.server.properties import parse_properties

PAGE = Path(__file__).resolve().parents[1] / "docs" / "configuration.md"

#: a section title and its keys' meanings, in page order
Sections = list[tuple[str, dict[str, str]]]

BROKER: Sections = [
    (
        "Identity and addressing",
        {
            "brokerClusterName": "cluster the broker belongs to (also a topic name)",
            "brokerName": "broker group: a master and its slaves share it",
            "brokerId": "0 = master, > 0 = slave (checked against `brokerRole`; unused in controller mode)",
            "brokerRole": "`ASYNC_MASTER`, `SYNC_MASTER` or `SLAVE` (unused in controller mode)",
            "brokerIP1": "address advertised to the NameServers and in message ids",
            "brokerIP2": "address advertised for the HA port (empty: `brokerIP1`)",
            "bindAddress": "address to listen on; `0.0.0.0` when `brokerIP1` is not a loopback address"
            " and this key is not given (rocketq key)",
            "listenPort": "remoting port; 0 = a free port, shown in the boot line",
            "namesrvAddr": "NameServers, `host:port` separated by `;`",
            "brokerPermission": "permission bits of the broker: 4 = read, 2 = write",
        },
    ),
    (
        "Replication",
        {
            "haListenPort": "the master's HA port; 0 = a free port (also when `listenPort` is 0)",
            "fastListenPort": "the VIP channel (RocketMQ 4.x's fast remoting server, 10909 for the default "
            "10911): every request except pulls, pops, peeks, notifications and polling info; clients with "
            "`vipChannelEnabled` reach it at the advertised port − 2, nothing more is registered. 0 = a free "
            "port (also when `listenPort` is 0). Java derives it and has no key (rocketq's key); a "
            "derived port that is taken only logs a warning, a configured one fails the start",
            "haMasterAddress": "a slave's master HA address (empty: learnt from the NameServer)",
            "haSendHeartbeatInterval": "ms between a slave's HA heartbeats",
            "haHousekeepingInterval": "ms after which an idle HA connection is dropped",
            "haTransferBatchSize": "bytes per HA transfer",
            "haMaxGapNotInSync": "bytes a slave may lag and still count for SYNC_MASTER",
            "haSlaveFallbehindMax": "RocketMQ's older name of `haMaxGapNotInSync`",
            "haSlaveTruncateDivergent": "a slave truncates (true) or refuses (false) a log that runs past its"
            " master's (rocketq key)",
        },
    ),
    (
        "Controller mode",
        {
            "enableControllerMode": "the controller decides role and broker id (docs/failover.md)",
            "controllerAddr": "every controller, `host:port` separated by `;`",
            "brokerHeartbeatInterval": "ms between heartbeats to the controller; in DLedger mode between the"
            " master's Alive entries (the master counts as dead after 3 x this)",
            "controllerHeartBeatTimeoutMills": "ms without a heartbeat before the controller counts the"
            " broker inactive; the master's lease is 0.8 x this",
            "sendHeartbeatTimeoutMillis": "ms, timeout of requests to the controller",
            "syncBrokerMetadataPeriod": "ms between replica-info polls",
            "checkSyncStateSetPeriod": "ms between SyncStateSet checks on the master",
            "brokerElectionPriority": "sent in the heartbeat; lower is preferred in an election",
            "allAckInSyncStateSet": "acknowledge only when every SyncStateSet member holds the message",
            "inSyncReplicas": "members (master included) that must hold a message",
            "minInSyncReplicas": "a smaller SyncStateSet refuses writes",
            "haMaxTimeSlaveNotCatchup": "ms a member may stay behind before it leaves the SyncStateSet",
        },
    ),
    (
        "DLedger mode",
        {
            "enableDLegerCommitLog": "the brokers of `dLegerPeers` form one group that elects its master;"
            " a send is acknowledged once a majority holds it (docs/dledger.md)",
            "dLegerGroup": "the group's name (RocketMQ sets it to `brokerName`)",
            "dLegerPeers": "every member, `n0-host:port;n1-host:port;...`: its id and Raft port",
            "dLegerSelfId": "this member's id in `dLegerPeers`; as a slave it registers as brokerId = its"
            " number + 1",
            "preferredLeaderId": "the member elected when the candidates' logs are equal; another master"
            " hands over to it once it holds the whole log",
        },
    ),
    (
        "Topics, groups and traces",
        {
            "autoCreateTopicEnable": "create unknown topics on first send (TBW102)",
            "autoCreateSubscriptionGroup": "create consumer groups on first use",
            "defaultTopicQueueNums": "queues of an auto-created topic",
            "traceTopicEnable": "create the message-trace topic at start",
            "msgTraceTopicName": "the message-trace topic",
            "registerNameServerPeriod": "ms between registrations with the NameServers (10 000-60 000)",
            "registerBrokerTimeoutMills": "ms, timeout of one registration",
        },
    ),
    (
        "Pulls, queues and thread pools",
        {
            "longPollingEnable": "park empty pulls up to the client's suspend timeout",
            "shortPollingTimeMills": "ms an empty pull is parked when long polling is off",
            "maxSuspendedPulls": "cap on parked pulls (rocketq key)",
            "maxTransferCountOnMessageInMemory": "messages per pull response",
            "maxTransferBytesOnMessageInMemory": "bytes per pull response",
            "sendMessageThreadPoolNums": "store worker threads for sends",
            "pullMessageThreadPoolNums": "store worker threads for pulls",
            "sendThreadPoolQueueCapacity": "queued sends before `[REJECTREQUEST]`",
            "pullThreadPoolQueueCapacity": "queued pulls before `[REJECTREQUEST]`",
            "queryThreadPoolQueueCapacity": "queued queries before `[REJECTREQUEST]`",
            "waitTimeMillsInSendQueue": "ms a send may wait in the queue before `[TIMEOUT_CLEAN_QUEUE]`",
            "waitTimeMillsInPullQueue": "ms a pull may wait in the queue",
        },
    ),
    (
        "Clients, offsets, delay levels, filters",
        {
            "channelExpiredTimeout": "ms without a heartbeat before a client is dropped",
            "rebalanceLockMaxLiveTime": "ms an orderly consumer's queue lock lives",
            "flushConsumerOffsetInterval": "ms between writes of consumerOffset.json",
            "flushDelayOffsetInterval": "ms between writes of delayOffset.json",
            "enablePropertyFilter": "allow SQL92 subscriptions",
        },
    ),
    (
        "Transactional messages",
        {
            "transactionTimeOut": "ms before an open half message is checked back",
            "transactionCheckMax": "check-backs before a half message is discarded",
            "transactionCheckInterval": "ms between check-back rounds",
            "rejectTransactionMessage": "refuse transactional sends",
            "transactionBatchMaxMessages": "messages per transactional batch (rocketq key)",
            "transactionBatchMaxBytes": "bytes per transactional batch (rocketq key)",
        },
    ),
    (
        "Timer messages and recall (docs/rocketmq5.md)",
        {
            "timerWheelEnable": "accept timer messages (`TIMER_DELIVER_MS`, `TIMER_DELAY_SEC`,"
            " `TIMER_DELAY_MS`)",
            "timerPrecisionMs": "ms per wheel slot, snapped down to 100, 200, 500 or 1000",
            "timerMaxDelaySec": "longest delay a timer message may ask for, in seconds",
            "timerRollWindowSlot": "slots ahead the wheel holds; longer delays are parked and rolled",
            "mappedFileSizeTimerLog": "bytes per timerlog segment",
            "timerFlushIntervalMs": "ms between flushes of the timer files and config/timercheck",
            "recallMessageEnable": "answer RECALL_MESSAGE (false: NO_PERMISSION)",
        },
    ),
    (
        "The gRPC proxy with the broker (docs/grpc.md)",
        {
            "enableProxy": (
                "start `mqproxy` with the broker, as RocketMQ's local mode (`mqbroker --enable-proxy`)"
            ),
            "grpcServerPort": "the gRPC port of that proxy",
        },
    ),
    (
        "POP consumption (docs/rocketmq5.md)",
        {
            "reviveQueueNum": (
                "queues of the revive topic rmq_sys_REVIVE_LOG_<cluster> (POP checkpoints, acks)"
            ),
            "reviveInterval": "ms between the revive service's rounds over the revive queues",
            "enableRetryTopicV2": "POP retry topics named %RETRY%group+topic instead of %RETRY%group_topic",
            "retrieveMessageFromPopRetryTopicV1": (
                "with enableRetryTopicV2, pops still read the V1 retry topic"
            ),
            "popFromRetryProbability": "% of pops that read the POP retry topic before the topic",
            "maxPopPollingSize": "pops and notifications that may wait (long polling) at once",
            "initPopOffsetByCheckMsgInMem": "initMode MAX starts at 0 while the whole queue is in memory",
            "popResponseReturnActualRetryTopic": "hand out retried messages under their retry topic",
            "popOrderBlockScope": "what a stuck orderly (FIFO) message holds back: `queue` (its whole"
            " queue, as RocketMQ) or `group` (only its own message group) (rocketq key)",
            "serverLoadBalancerEnable": "QUERY_ASSIGNMENT allocates queues among a group's consumers"
            " (`false`: every consumer gets every queue)",
            "defaultMessageRequestMode": "the request mode (`PULL` or `POP`) QUERY_ASSIGNMENT hands out for a"
            " topic and group without a mode set by SET_MESSAGE_REQUEST_MODE",
            "defaultPopShareQueueNum": "with `defaultMessageRequestMode=POP`: how many following consumers'"
            " queues a POP consumer also reads (`-1`: every queue, queue id -1)",
        },
    ),
    (
        "Slave reads and metadata",
        {
            "slaveReadEnable": "pull responses may suggest a slave to lagging consumers",
            "accessMessageInMemoryMaxRatio": "% of physical memory behind the log's end beyond which a"
            " consumer lags",
            "offsetCheckInSlave": "a slave corrects consumer offsets like a master",
            "slaveSyncInterval": "ms between a slave's copies of its master's metadata (rocketq key)",
        },
    ),
    (
        "Connection limits, ACL",
        {
            "writeBufferHighWaterMark": "bytes queued to a connection before the broker stops reading it",
            "writeBufferLowWaterMark": "bytes below which it reads again",
            "serverMaxInflightRequestsPerConnection": "requests in flight per connection",
            "serverMaxPendingFrameBytes": "bytes of one incoming frame",
            "serverMaxPendingFrameBytesTotal": "bytes of incoming frames of all connections",
            "aclEnable": "check every request against the plain ACL file (docs/security.md)",
            "aclFilePath": "the ACL file (empty: `$ROCKETMQ_HOME/conf/plain_acl.yml`)",
            "accessKey": "the account the broker signs its own requests with",
            "secretKey": "its secret (never printed)",
        },
    ),
    (
        "Store",
        {
            "storePathRootDir": "store root (commitlog/, consumequeue/, index/, config/)",
            "flushDiskType": "`ASYNC_FLUSH`, or `SYNC_FLUSH`: acknowledge after fsync (group commit)",
            "syncFlushTimeout": "ms; beyond it the answer is FLUSH_DISK_TIMEOUT (message stored)",
            "maxMessageSize": "bytes of a body (and a batch); larger sends get MESSAGE_ILLEGAL",
            "mappedFileSizeCommitLog": "bytes of a CommitLog file",
            "mappedFileSizeConsumeQueue": "bytes of a ConsumeQueue file (20 bytes per entry)",
            "flushIntervalCommitLog": "ms between CommitLog flushes (ASYNC_FLUSH)",
            "flushCommitLogLeastPages": "dirty pages before a CommitLog flush",
            "flushCommitLogThoroughInterval": "ms after which a CommitLog flush ignores the page minimum",
            "flushIntervalConsumeQueue": "ms between ConsumeQueue flushes",
            "flushConsumeQueueLeastPages": "dirty pages before a ConsumeQueue flush",
            "flushConsumeQueueThoroughInterval": "ms after which a ConsumeQueue flush ignores the page"
            " minimum",
            "commitLogPageCacheWindow": "bytes of CommitLog kept in the page cache behind the flushed end"
            " (0: all; rocketq key)",
            "osPageCacheBusyTimeOutMills": "ms the append lock may be held before `[PC_SYNCHRONIZED]`",
            "messageIndexEnable": "keep the IndexFile (query by key and unique key)",
            "maxHashSlotNum": "hash slots of an IndexFile",
            "maxIndexNum": "entries of an IndexFile",
            "defaultQueryMaxNum": "results of a key query",
            "fileReservedTime": "hours a CommitLog file is kept",
            "deleteWhen": "hours of the day when old files are deleted, e.g. `04;16`",
            "cleanResourceInterval": "ms between clean-up checks",
            "diskMaxUsedSpaceRatio": "% of the disk that triggers clean-up outside `deleteWhen`",
            "diskSpaceCleanForciblyRatio": "% of the disk that deletes files not yet expired",
            "diskSpaceWarningLevelRatio": "% of the disk that refuses writes",
            "deleteFileBatchMax": "files deleted per clean-up round",
            "deleteCommitLogFilesInterval": "ms between two file deletions",
            "destroyMapedFileIntervalForcibly": "ms after which a file still in use is deleted anyway",
            "checkCRCOnRecover": "check record CRCs when recovering after a crash",
            "messageDelayLevel": "delay of each level (units `s m h d`)",
            "replicaDispatchIntervalMs": "ms between a slave's dispatch rounds (rocketq key)",
        },
    ),
]

TLS: dict[str, str] = {
    "tls.server.mode": "`disabled`, `permissive` or `enforcing`: what the remoting port accepts",
    "tlsMode": "alias of `tls.server.mode`",
    "tls.enable": "outgoing connections (registration, slave to master) use TLS",
    "tls.test.mode.enable": "accepted for compatibility (rocketq has no self-signed test certificate)",
    "tls.server.need.client.auth": "`none`, `optional` or `require` a client certificate",
    "tls.server.keyPath": "the server's private key (PEM)",
    "tls.server.keyPassword": "its password",
    "tls.server.certPath": "the server's certificate chain (PEM)",
    "tls.server.trustCertPath": "CA file for client certificates",
    "tls.client.keyPath": "the private key of outgoing connections' client certificate",
    "tls.client.keyPassword": "its password",
    "tls.client.certPath": "the client certificate of outgoing connections",
    "tls.client.trustCertPath": "CA file the peer's certificate is verified against",
    "tls.client.authServer": "verify the peer against the system's CAs when no trust file is given",
    "tls.config.file": "a properties file with these keys (keys given directly win)",
}

METRICS: dict[str, str] = {
    "metricsExporterType": "`DISABLE` or `PROM` (Prometheus)",
    "metricsPromExporterHost": "address of the exporter (empty: the broker's `brokerIP1`, the"
    " NameServer's bind address)",
    "metricsPromExporterPort": "port of the exporter; 0 = a free port",
}

NAMESRV: Sections = [
    (
        "NameServer",
        {
            "listenPort": "TCP port (`--listen-port`); 0 = a free port, shown in the boot line",
            "bindAddress": "address to listen on (`--bind`): other hosts need `0.0.0.0` or an address",
            "scanNotActiveBrokerInterval": "ms between scans for brokers that stopped registering",
            "brokerChannelExpiredTime": "ms without a registration after which a broker is dropped",
            "kvConfigPath": "file where the KV config is kept (empty: memory only)",
            "orderMessageEnable": "return `orderTopicConf` from the ORDER_TOPIC_CONFIG KV namespace",
            "serializeType": "header encoding of responses: `JSON` or `ROCKETMQ`",
            "maxInflightPerConnection": "requests processed at once per connection",
            "maxQueuedRequests": "requests processed at once in total; beyond it `SYSTEM_BUSY`",
            "writeBufferHighWaterMark": "bytes queued to a connection before the server stops reading it",
            "writeBufferLowWaterMark": "bytes below which it reads again",
            "serverMaxPendingFrameBytes": "bytes of one incoming frame",
            "serverMaxPendingFrameBytesTotal": "bytes of incoming frames of all connections",
            "enableControllerInNamesrv": "run a controller inside the NameServer, configured by the"
            " controller keys below (all but `listenPort`)",
            "aclEnable": "check every request against the plain ACL file (docs/security.md)",
            "aclFilePath": "the ACL file (empty: `$ROCKETMQ_HOME/conf/plain_acl.yml`)",
            **METRICS,
        },
    ),
]

CONTROLLER: Sections = [
    (
        "Controller",
        {
            "controllerType": "`DLedger` or `jRaft`: both run rocketq's Raft",
            "controllerDLegerGroup": "name of the controller group",
            "controllerDLegerPeers": "`n0-host:port[:raftPort];n1-...`: every controller's id, address and"
            " Raft port (default port + 10000)",
            "controllerDLegerSelfId": "this controller's id among the peers",
            "controllerStorePath": "directory of the Raft journal (empty: memory only)",
            "listenPort": "remoting port (empty: the self peer's port; 0 = a free port)",
            "scanNotActiveBrokerInterval": "ms between scans for inactive brokers",
            "controllerHeartBeatTimeoutMills": "ms without a heartbeat before a broker is inactive, when"
            " its heartbeat does not say",
            "enableElectUncleanMaster": "elect outside the SyncStateSet when no member is alive (may lose"
            " acknowledged messages)",
            "notifyBrokerRoleChanged": "push NOTIFY_BROKER_ROLE_CHANGED to the brokers after an election",
            "electMasterMaxRetryCount": "attempts of an election that races with another change",
            "controllerCommitTimeoutMills": "ms a write waits for a Raft majority (rocketq key)",
            "controllerRaftMinTimeoutMs": "ms, lower bound of the Raft election timeout (rocketq key)",
            "controllerRaftMaxTimeoutMs": "ms, upper bound of the Raft election timeout (rocketq key)",
            "controllerRaftLeaderFallbackTimeoutMs": "ms after which a leader cut off from the majority"
            " steps down (rocketq key)",
        },
    ),
]

#: defaults that depend on the machine, written as a reader should read them
MACHINE_DEFAULTS = {
    "brokerName": "the host name",
    "storePathRootDir": "`~/store`",
    "haListenPort": "listenPort + 1",
    "fastListenPort": "listenPort − 2",
}


def _text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, enum.Enum):
        return str(value.value)
    if value is None:
        return ""
    return str(value)


def tls_defaults() -> dict[str, str]:
    """The TLS keys with the defaults of :class:`TlsConfig`."""
    tls = TlsConfig()
    return {key: _text(getattr(tls, field)) for key, field in TLS_KEYS.items()}


def broker_defaults() -> dict[str, str]:
    """The keys ``broker.conf`` acts on, with their defaults."""
    return {k.key: k.default for k in broker_conf_keys() if k.owner is not KeyOwner.IGNORED}


def broker_ignored() -> frozenset[str]:
    return frozenset(k.key for k in broker_conf_keys() if k.owner is KeyOwner.IGNORED)


def namesrv_defaults() -> dict[str, str]:
    return parse_properties(namesrv_config.config_to_properties(namesrv_config.NamesrvConfig()))


def controller_defaults() -> dict[str, str]:
    return parse_properties(controller_config.config_to_properties(controller_config.ControllerConfig()))


def _check(what: str, defaults: Mapping[str, str], meanings: Mapping[str, str]) -> None:
    missing = sorted(set(defaults) - set(meanings))
    unknown = sorted(set(meanings) - set(defaults))
    if missing or unknown:
        raise ValueError(
            f"{what}: keys the parser reads without a meaning here: {missing}; "
            f"meanings of keys the parser does not read: {unknown}"
        )


def _merged(sections: Sections) -> dict[str, str]:
    merged: dict[str, str] = {}
    for _, meanings in sections:
        merged.update(meanings)
    return merged


def _default_cell(key: str, default: str) -> str:
    if key in MACHINE_DEFAULTS:
        return MACHINE_DEFAULTS[key]
    return f"`{default}`" if default else "–"


def _table(defaults: Mapping[str, str], meanings: Mapping[str, str]) -> list[str]:
    lines = ["| key | default | meaning |", "|---|---|---|"]
    for key, meaning in meanings.items():
        lines.append(f"| `{key}` | {_default_cell(key, defaults[key])} | {meaning} |")
    return [*lines, ""]


def _key_list(keys: Iterable[str]) -> str:
    return ", ".join(f"`{k}`" for k in sorted(keys))


def _component(
    title: str, intro: str, defaults: Mapping[str, str], sections: Sections, level: str = "###"
) -> list[str]:
    lines = [f"## {title}", "", intro, ""]
    for name, meanings in sections:
        lines += [f"{level} {name}", "", *_table(defaults, meanings)]
    return lines


def render() -> str:
    """The page's text; ValueError when the meanings and a parser's keys differ."""
    broker = broker_defaults()
    tls = tls_defaults()
    broker_sections = [*BROKER, ("TLS", TLS), ("Metrics", METRICS)]
    _check("broker.conf", broker, _merged(broker_sections))
    namesrv = {**namesrv_defaults(), **tls}
    namesrv_sections = [*NAMESRV, ("TLS", TLS)]
    _check("namesrv.properties", namesrv, _merged(namesrv_sections))
    controller = controller_defaults()
    _check("controller.conf", controller, _merged(CONTROLLER))
    lines = [
        "# Configuration reference",
        "",
        "<!-- Generated by `python integration_tests/config_reference.py` from the config parsers;"
        " do not edit by hand. -->",
        "",
        "Every key the broker, the NameServer and the controller read, with its default and what it"
        " does. The files use RocketMQ's camelCase keys in Java properties syntax (`key=value`), so a"
        " RocketMQ `broker.conf`, `namesrv.properties` or `controller.conf` works unchanged. Times are"
        " in milliseconds unless the meaning says otherwise; keys marked *rocketq key* are not"
        " RocketMQ's. Ready-made files are in `examples/conf/`"
        " ([cluster-deployment.md](cluster-deployment.md)).",
        "",
        *_component(
            "Broker (`broker.conf`, `mqbroker -c`)",
            "An unknown key is logged as a warning and ignored; a bad value stops the broker with a"
            " message naming the key. `mqbroker -p` prints the effective configuration.",
            broker,
            broker_sections,
        ),
        "### Accepted and ignored",
        "",
        "Keys RocketMQ users often carry, accepted without effect: " + _key_list(broker_ignored()) + ".",
        "",
        *_component(
            "NameServer (`namesrv.properties`, `mqnamesrv -c`)",
            "`mqnamesrv -o key=value` sets one key; `--listen-port` and `--bind` override `listenPort`"
            " and `bindAddress`. The NameServer listens on 127.0.0.1 unless told otherwise. An unknown"
            " key is logged and ignored. `mqnamesrv -p` prints the effective configuration.",
            namesrv,
            namesrv_sections,
        ),
        "### Accepted and ignored",
        "",
        "Keys of RocketMQ's NamesrvConfig and NettyServerConfig, accepted without effect: "
        + _key_list(namesrv_config.IGNORED_KEYS)
        + ".",
        "",
        *_component(
            "Controller (`controller.conf`, `mqcontroller -c`)",
            "The same keys configure a controller embedded in the NameServer"
            " (`enableControllerInNamesrv=true` in `namesrv.properties`), except `listenPort`, which"
            " stays the NameServer's. `mqcontroller -o key=value` sets one key; `mqcontroller -p`"
            " prints the effective configuration. "
            + _key_list(controller_config_update.RUNTIME_KEYS)
            + " also change while the controller runs, with `mqadmin updateControllerConfig`"
            " (written into the `-c` file; [failover.md](failover.md)).",
            controller,
            CONTROLLER,
        ),
        "### Accepted and ignored",
        "",
        "Keys of RocketMQ's ControllerConfig and NettyServerConfig, accepted without effect: "
        + _key_list(controller_config.IGNORED_KEYS)
        + ".",
    ]
    return "\n".join(lines) + "\n"


def documented_keys() -> frozenset[str]:
    """Every key the parsers accept, including those accepted and ignored."""
    return frozenset(
        {
            *broker_defaults(),
            *broker_ignored(),
            *namesrv_defaults(),
            *namesrv_config.IGNORED_KEYS,
            *controller_defaults(),
            *controller_config.IGNORED_KEYS,
            *TLS_KEYS,
        }
    )


def main() -> int:
    PAGE.write_text(render(), encoding="utf-8")
    print(f"wrote {PAGE}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())


__all__ = ["PAGE", "documented_keys", "render"]
