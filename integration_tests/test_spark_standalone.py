"""rocketq on a real Spark standalone cluster: a master and two one-core workers from the pyspark install.

What a user deploying rocketq does, end to end, with real processes:

* the wheel is built from the checkout (``pip wheel --no-deps``) and installed into a separate
  virtual environment for the cluster's Python (drivers and executors).  That environment reaches
  pyspark, pyarrow and numpy through a ``.pth`` line naming the main environment's site-packages
  (a plain path line: Python does not process the ``.pth`` files found there, so the checkout's
  editable rocketq stays invisible); the job checks that every executor imports rocketq from the
  wheel;
* ``spark-submit`` runs a streaming ETL (rocketq source → transform → exactly-once rocketq sink,
  ``Trigger.AvailableNow``) into a topic that does not exist yet (the broker auto-creates it);
* ``--py-files`` with a zip of rocketq, for an environment without rocketq: automatic lookup
  works once the driver sees the zip too (``PYTHONPATH``); see docs/deployment.md.

The cluster is started once per module; every process (master, workers, their executors and
Python workers, drivers) runs in its own process group and is killed in teardown.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rocketq.client.launcher import free_port
from rocketq.client.testing import SHORT_LIVED_JVM_OPTIONS
from rocketq.connector.testing import Cluster, create_topic, local_cluster, produce

_spec = importlib.util.spec_from_file_location("spark_deploy", Path(__file__).parent / "spark_deploy.py")
assert _spec is not None and _spec.loader is not None
deploy: Any = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(deploy)

pytestmark = [pytest.mark.spark, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[1]
ROWS = 40
JOB_TIMEOUT_S = 420.0

# The driver program given to spark-submit.  It waits for both executors, reports where the
# executors' Python imports rocketq from, then runs the ETL and prints its progress.  Timeouts are
# generous: the CI machine's two cores are shared with the rest of the suite.
JOB = r"""
import json, os, sys, time
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

name_server, in_topic, out_topic, checkpoint, want_executors = sys.argv[1:6]
spark = SparkSession.builder.appName("rocketq-standalone-etl").getOrCreate()
spark.sparkContext.setLogLevel("WARN")
deadline = time.monotonic() + 90
while spark.sparkContext._jsc.sc().getExecutorIds().size() < int(want_executors):
    if time.monotonic() > deadline:
        raise SystemExit("executors did not register in 90 s")
    time.sleep(0.5)

def where(_):
    import rocketq.connector, pyspark_rocketmq
    return [sys.executable, list(rocketq.connector.__path__)[0], pyspark_rocketmq.__file__]

print("WHERE " + json.dumps(spark.sparkContext.parallelize(range(4), 4).map(where).collect()), flush=True)
df = (spark.readStream.format("rocketmq").option("nameServer", name_server).option("topic", in_topic)
      .option("startingOffsets", "earliest").option("maxMessagesPerTrigger", "15")
      .option("pullTimeoutMs", "30000").load())
out = df.select(F.upper(F.col("body").cast("string")).alias("body"), F.col("keys"))
query = (out.writeStream.format("rocketmq").option("nameServer", name_server).option("topic", out_topic)
         .option("deliveryGuarantee", "exactlyOnce").option("checkpointLocation", checkpoint)
         .option("sendTimeoutMs", "20000").option("commitTimeoutMs", "60000")
         .trigger(availableNow=True).start())
query.awaitTermination()
print("ROWS " + json.dumps([p["numInputRows"] for p in query.recentProgress]), flush=True)
spark.stop()
"""


@pytest.fixture(scope="module")
def work_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    path = tmp_path_factory.mktemp("spark-standalone")
    yield path
    # the logs stay (pytest's retention policy removes them); the bulky parts go now
    for bulky in (*path.glob("*venv"), *path.glob("*/*venv"), *path.glob("**/scratch"), path / "rocketmq"):
        shutil.rmtree(bulky, ignore_errors=True)


@pytest.fixture(scope="module")
def spark_cluster(work_dir: Path) -> Iterator[str]:
    """``spark://`` URL of a master with two registered workers (1 core, 1 GiB each)."""
    env = deploy.spark_env(work_dir)
    spark_class = str(deploy.spark_home() / "bin" / "spark-class")
    started: list[Any] = []
    try:
        port = free_port()
        master = deploy.Daemon(
            "master",
            [spark_class, "org.apache.spark.deploy.master.Master",
             "--host", "127.0.0.1", "--port", str(port), "--webui-port", "0"],
            env, work_dir / "master.log",
        )  # fmt: skip
        started.append(master)
        master.wait_for(r"I have been elected leader")
        url = f"spark://127.0.0.1:{port}"
        for n in (1, 2):
            worker_dir = work_dir / f"worker-{n}"
            worker_dir.mkdir()
            worker = deploy.Daemon(
                f"worker-{n}",
                [spark_class, "org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1",
                 "--port", "0", "--webui-port", "0", "--cores", "1", "--memory", "1g",
                 "--work-dir", str(worker_dir)],
                env, work_dir / f"worker-{n}.log",
            )  # fmt: skip
            started.append(worker)
        for worker in started[1:]:
            worker.wait_for(r"Successfully registered with master")
        yield url
    finally:
        for daemon in reversed(started):
            daemon.kill()


@pytest.fixture(scope="module")
def wheel(work_dir: Path) -> Path:
    """The rocketq wheel built from the checkout, checked for packages and entry points."""
    dist = work_dir / "dist"
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--disable-pip-version-check", "-q",
         "-w", str(dist), str(ROOT)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert build.returncode == 0, f"pip wheel failed:\n{build.stdout}\n{build.stderr}"
    (path,) = dist.glob("rocketq-*.whl")
    with zipfile.ZipFile(path) as whl:
        names = whl.namelist()
        entry_points = next(whl.read(n).decode() for n in names if n.endswith(".dist-info/entry_points.txt"))
    for package in ("client", "server", "namesrv", "controller", "broker", "connector"):
        assert f"rocketq/{package}/py.typed" in names, (
            f"the wheel lacks rocketq.{package}: {sorted(names)[:20]}"
        )
    assert "pyspark_rocketmq/__init__.py" in names
    assert not any(n == "rocketq/__init__.py" for n in names), "rocketq must stay a namespace package"
    for script in ("mqnamesrv", "mqbroker", "mqadmin", "mqcontroller", "rocketq"):
        assert re.search(rf"^{script} = ", entry_points, re.M), (
            f"entry point {script} missing:\n{entry_points}"
        )
    return path


@pytest.fixture(scope="module")
def wheel_python(work_dir: Path, wheel: Path) -> Path:
    """Python of a separate venv with the wheel installed (and pyspark/pyarrow/numpy reachable)."""
    venv = work_dir / "wheel-venv"
    python: Path = deploy.deps_only_venv(venv)
    install = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-index",
         "--ignore-installed", "--disable-pip-version-check", "-q", str(wheel)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert install.returncode == 0, f"installing the wheel failed:\n{install.stdout}\n{install.stderr}"
    clean_env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    probe = subprocess.run(
        [str(python), "-c", "import rocketq.connector.source, pyspark_rocketmq, pyspark; "
         "print(list(rocketq.connector.__path__)[0]); print(pyspark_rocketmq.DefaultSource.name())"],
        capture_output=True, text=True, timeout=120, env=clean_env,
    )  # fmt: skip
    assert probe.returncode == 0, f"the wheel's venv cannot import rocketq:\n{probe.stderr}"
    connector_dir, name = probe.stdout.split()
    assert Path(connector_dir).is_relative_to(venv), f"rocketq resolves to {connector_dir}, not to the wheel"
    assert name == "rocketmq"
    return python


@pytest.fixture(scope="module")
def mq(work_dir: Path) -> Iterator[Cluster]:
    """NameServer + broker (auto-creation on) with ``ROWS`` keyed messages in topic ``EtlIn``."""
    with local_cluster(work_dir / "rocketmq", autoCreateTopicEnable=True) as cluster:
        create_topic(cluster, "EtlIn", 4)
        produce(cluster, "EtlIn", [f"k{i % 5}:{i}".encode() for i in range(ROWS)],
                keys=[f"k{i % 5}" for i in range(ROWS)])  # fmt: skip
        yield cluster


def expected_rows() -> list[tuple[str, str | None]]:
    return sorted((f"K{i % 5}:{i}", f"k{i % 5}") for i in range(ROWS))


def spark_submit(
    work: Path, master: str, python: Path, args: list[str], *, py_files: Path | None = None, tag: str
) -> str:
    """Run the job with spark-submit (client mode); return its output, fail with it on error."""
    job = work / "etl_job.py"
    job.write_text(JOB, encoding="utf-8")
    extra = {"PYSPARK_PYTHON": str(python), "PYSPARK_DRIVER_PYTHON": str(python)}
    submit = [str(deploy.spark_home() / "bin" / "spark-submit"), "--master", master,
              "--conf", "spark.executor.memory=512m", "--conf", "spark.driver.memory=512m",
              "--conf", f"spark.driver.extraJavaOptions={SHORT_LIVED_JVM_OPTIONS}",
              "--conf", f"spark.executor.extraJavaOptions={SHORT_LIVED_JVM_OPTIONS}",
              "--conf", "spark.ui.enabled=false", "--conf", "spark.ui.showConsoleProgress=false",
              "--conf", "spark.sql.shuffle.partitions=2",
              "--conf", f"spark.local.dir={work / 'scratch'}"]  # fmt: skip
    if py_files is not None:
        submit += ["--py-files", str(py_files)]
        # the driver-side Python workers (data source lookup, streaming source runner) do not get
        # --py-files: the driver's environment must see the zip as well
        extra["PYTHONPATH"] = str(py_files)
    log = work / f"driver-{tag}.log"
    driver = deploy.Daemon(f"driver-{tag}", [*submit, str(job), *args], deploy.spark_env(work, **extra), log)
    try:
        driver.popen.wait(JOB_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        pass
    finally:
        driver.kill()
    if driver.popen.returncode != 0:
        raise AssertionError(
            f"spark-submit ({tag}) failed ({driver.popen.returncode}), log {log}:\n{driver.relevant_log()}"
        )
    return str(driver.log_text())


def job_lines(out: str, prefix: str) -> list[Any]:
    (line,) = [ln for ln in out.splitlines() if ln.startswith(prefix + " ")]
    value = json.loads(line[len(prefix) + 1 :])
    assert isinstance(value, list)
    return value


def test_wheel_on_standalone_cluster_exactly_once_into_new_topic(
    spark_cluster: str, wheel_python: Path, mq: Cluster, work_dir: Path
) -> None:
    run = work_dir / "run-wheel"
    run.mkdir()
    args = [mq.namesrv_addr, "EtlIn", "EtlOutEos", str(run / "checkpoint"), "2"]
    out = spark_submit(run, spark_cluster, wheel_python, args, tag="wheel")

    venv = wheel_python.parent.parent
    for executable, connector_dir, lookup_module in job_lines(out, "WHERE"):
        assert executable == str(wheel_python), f"an executor ran {executable}, not the wheel's venv"
        assert Path(connector_dir).is_relative_to(venv), f"an executor imported rocketq from {connector_dir}"
        assert Path(lookup_module).is_relative_to(venv), f"an executor imported {lookup_module}"
    batches = job_lines(out, "ROWS")
    assert sum(batches) == ROWS and len(batches) >= 3, f"rows per micro-batch: {batches}"
    assert deploy.read_topic(mq, "EtlOutEos") == expected_rows()


def test_py_files_zip_for_an_environment_without_rocketq(
    spark_cluster: str, wheel_python: Path, mq: Cluster, work_dir: Path
) -> None:
    run = work_dir / "run-pyfiles"
    run.mkdir()
    bare_python = deploy.deps_only_venv(run / "bare-venv")
    no_rocketq = subprocess.run(
        [str(bare_python), "-c", "import rocketq.connector"], capture_output=True, timeout=60
    )
    assert no_rocketq.returncode != 0, "the bare venv must not see rocketq"
    # the zip is made from the wheel's install, with directory entries (a namespace package needs them)
    site = next((wheel_python.parent.parent / "lib").glob("python3*/site-packages"))
    zip_path = run / "rocketq.zip"
    subprocess.run(
        [sys.executable, "-m", "zipfile", "-c", str(zip_path), "rocketq", "pyspark_rocketmq"],
        cwd=site, check=True, timeout=120,
    )  # fmt: skip
    args = [mq.namesrv_addr, "EtlIn", "EtlOutZip", str(run / "checkpoint"), "2"]
    out = spark_submit(run, spark_cluster, bare_python, args, py_files=zip_path, tag="pyfiles")
    for executable, connector_dir, _ in job_lines(out, "WHERE"):
        assert executable == str(bare_python)
        assert "rocketq.zip" in connector_dir, f"an executor imported rocketq from {connector_dir}"
    assert deploy.read_topic(mq, "EtlOutZip") == expected_rows()


def test_zip_without_directory_entries_names_the_fix(wheel: Path, tmp_path: Path) -> None:
    """A .whl (no directory entries) on the path finds pyspark_rocketmq but not the rocketq namespace."""
    bare_python = deploy.deps_only_venv(tmp_path / "bare-venv")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"PYTHONPATH": str(wheel)}
    done = subprocess.run(
        [str(bare_python), "-c", "import pyspark_rocketmq; pyspark_rocketmq.DefaultSource"],
        capture_output=True, text=True, timeout=120, env=env,
    )  # fmt: skip
    assert done.returncode != 0, "a .whl on PYTHONPATH is not expected to provide the rocketq namespace"
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("ModuleNotFoundError: pyspark_rocketmq was found at"), done.stderr
    assert "directory entries" in last and "python -m zipfile -c" in last, last
