"""JVM options for the short-lived Spark JVMs that tests start (drivers, executors, daemons).

A test's Spark driver lives for seconds to a minute: most of its CPU goes to start-up and to the
JIT compiling code that runs a handful of times.  On a small machine the optimizing compiler (C2)
competes with the job for the cores; stopping at the quick compiler (C1) and using the serial
collector starts the JVM and runs a small job markedly faster.  Tests pass these options to the
JVMs they start themselves (``spark.driver.extraJavaOptions``, ``spark.executor.extraJavaOptions``,
``SPARK_DAEMON_JAVA_OPTS``); nothing here changes what a job computes.
"""

from __future__ import annotations

__all__ = ["SHORT_LIVED_JVM_OPTIONS"]

#: C1 only, serial GC: JVM options of a Spark JVM that lives for a test
SHORT_LIVED_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
