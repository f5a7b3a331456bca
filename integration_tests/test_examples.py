"""Every example in ``examples/`` that does not need Spark actually runs, within a time limit.

Each one runs as a subprocess of this interpreter against a freshly spawned ``mqnamesrv`` and
``mqbroker`` (``-n <addr>``); an example that starts its own servers (``--self-hosted`` below) runs
without arguments.  Spark examples are covered by the connector's own integration tests.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from rocketq.client.testing import spawn_broker, spawn_namesrv

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
TIME_LIMIT_S = 120
#: examples that start their own NameServers and brokers when given no address
SELF_HOSTED = {"two_groups.py"}


def _needs_spark(path: Path) -> bool:
    text = path.read_text(encoding="utf-8")
    return "pyspark" in text or "SparkSession" in text or "spark" in text.lower().split("\n\n", 1)[0]


NON_SPARK = sorted(p.name for p in EXAMPLES.glob("*.py") if not _needs_spark(p))


def test_the_non_spark_examples_are_known() -> None:
    assert {"producer_consumer.py", "two_groups.py"} <= set(NON_SPARK)


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, timeout=TIME_LIMIT_S, cwd=str(cwd), env=None
    )


@pytest.mark.parametrize("example", NON_SPARK)
def test_example_runs(example: str, tmp_path: Path) -> None:
    script = str(EXAMPLES / example)
    if example in SELF_HOSTED:
        done = _run([script], tmp_path)
    else:
        with spawn_namesrv(tmp_path) as ns, spawn_broker(tmp_path, ns.addr):
            done = _run([script, "-n", ns.addr], tmp_path)
    assert done.returncode == 0, f"{example} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    print(f"\n--- {example} ---\n{done.stdout[-1500:]}")
