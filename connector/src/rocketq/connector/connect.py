"""Spark Connect (and cluster) helpers: check that the server side can load rocketq, then register it.

With Spark Connect the data source runs in the *server's* Python environments — the server
driver's (data source lookup, planning, the streaming source runner) and its executors' (reads and
writes) — never in the client's.  A server without rocketq answers ``format("rocketmq")`` with
``[DATA_SOURCE_NOT_FOUND] Failed to find the data source: rocketmq``, which names neither the
Python that was searched nor the fix.  :func:`probe_server` runs a tiny Python UDF on the server
that reports its interpreter, its host and whether it can import the connector;
:func:`register_remote` turns a failed probe into an error that says what to install where, and
otherwise registers the source explicitly (which also covers a server whose lookup ran before
rocketq was installed: Spark caches the lookup once per server JVM).

Theory of operation: the probe's function is compiled from source into a throw-away module name,
so cloudpickle ships it *by value* — a function of this module would be pickled by reference and
fail on a server without rocketq with a bare ``ModuleNotFoundError`` instead of an answer.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from rocketq.connector.errors import ConnectorError

__all__ = [
    "PROBE_SOURCE",
    "ServerEnvironmentError",
    "ServerPython",
    "explain_missing",
    "probe_server",
    "register_remote",
]

#: Source of the probe: one function, ``rocketq_server_probe() -> str`` (JSON), that runs in any
#: Python (it needs neither rocketq nor pyspark) and reports whether that Python can load rocketq.
PROBE_SOURCE = """
def rocketq_server_probe():
    import importlib, json, pkgutil, socket, sys
    answer = {"executable": sys.executable, "host": socket.gethostname(), "version": sys.version.split()[0],
              "connector_path": None, "error": None,
              "lookup_visible": any(m.name == "pyspark_rocketmq" for m in pkgutil.iter_modules())}
    try:
        answer["connector_path"] = importlib.import_module("rocketq.connector.source").__file__
        importlib.import_module("pyspark_rocketmq").DefaultSource
    except Exception as exc:
        answer["error"] = f"{type(exc).__name__}: {exc}"
    return json.dumps(answer)
"""


class ServerEnvironmentError(ConnectorError):
    """The Spark server's Python cannot load rocketq; the message names that Python and the fix."""


@dataclass(frozen=True)
class ServerPython:
    """What the probe found in one Python worker of the Spark server (or cluster)."""

    executable: str
    host: str
    version: str
    connector_path: str | None
    error: str | None
    lookup_visible: bool  # pkgutil.iter_modules() lists pyspark_rocketmq (automatic lookup finds it)

    @property
    def ok(self) -> bool:
        return self.error is None and self.lookup_visible

    @classmethod
    def from_json(cls, text: str) -> ServerPython:
        """Parse what the probe function returned."""
        answer = json.loads(text)
        return cls(
            executable=str(answer["executable"]),
            host=str(answer["host"]),
            version=str(answer["version"]),
            connector_path=answer["connector_path"],
            error=answer["error"],
            lookup_visible=bool(answer["lookup_visible"]),
        )


def _probe_function() -> Any:
    namespace: dict[str, Any] = {"__name__": "rocketq_server_probe"}
    exec(compile(PROBE_SOURCE, "<rocketq server probe>", "exec"), namespace)
    return namespace["rocketq_server_probe"]


def probe_server(spark: Any) -> ServerPython:
    """Run the probe in a Python worker of ``spark``.

    ``spark`` is a classic or a Spark Connect session: two unrelated classes in PySpark 4.3, hence
    ``Any``.
    """
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType

    probe = F.udf(_probe_function(), StringType())
    row = spark.range(1).select(probe().alias("probe")).first()
    if row is None:
        raise ServerEnvironmentError("the server probe returned no row")
    return ServerPython.from_json(row["probe"])


def explain_missing(info: ServerPython) -> str:
    """The error text for a server whose Python cannot load rocketq."""
    problem = info.error or "pkgutil.iter_modules() does not list pyspark_rocketmq"
    return (
        f"the Spark server's Python cannot load the rocketmq data source: {info.executable} "
        f"(Python {info.version}) on host {info.host}: {problem}. Install the rocketq wheel into that "
        f"environment ('{info.executable} -m pip install rocketq-<version>-py3-none-any.whl'; it is the "
        "interpreter named by PYSPARK_PYTHON / spark.pyspark.python where the server was started), on the "
        "server host and on every executor host, then restart the server: Spark looks Python data "
        "sources up once per server process. Installing rocketq on the client only, or shipping it with "
        "addArtifacts, is not enough. See docs/deployment.md."
    )


def register_remote(spark: Any) -> ServerPython:
    """Check that the server can load rocketq, then ``spark.dataSource.register`` the source.

    Needs rocketq on the client (the class is sent by reference).  Raises
    :class:`ServerEnvironmentError` with what to install where when the server cannot load it.
    """
    info = probe_server(spark)
    if info.error is not None:
        raise ServerEnvironmentError(explain_missing(info))
    from rocketq.connector.source import RocketMQDataSource

    spark.dataSource.register(RocketMQDataSource)
    return info
