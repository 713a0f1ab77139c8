"""Fixtures for the Spark tests: one local[2] session for the whole run, the test log dirs,
and the spark-submit job runs (started together at the beginning, checked by the job tests,
so their JVM start-ups overlap instead of adding up)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys

import pytest

from tests.krait_harness import spawn
from tests.spark import helpers

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
JAVA = shutil.which("java") or (os.path.join(os.environ["JAVA_HOME"], "bin", "java") if os.environ.get("JAVA_HOME") else None)

pytestmark = pytest.mark.spark


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    spark_dir = os.path.dirname(os.path.abspath(__file__))
    for item in items:
        if str(item.fspath).startswith(spark_dir):
            item.add_marker(pytest.mark.spark)
            if JAVA is None:
                item.add_marker(pytest.mark.skip(reason="Spark tests need a Java runtime (no `java` on PATH or JAVA_HOME)"))


def fresh_shell_env() -> dict[str, str]:
    """A login shell's environment without the venv: what `krait spark` must work from."""
    path = ["/usr/local/bin", "/usr/bin", "/bin"]
    if JAVA and os.path.dirname(JAVA) not in path:
        path.append(os.path.dirname(JAVA))
    env = {"PATH": os.pathsep.join(path), "HOME": os.environ.get("HOME", "/tmp"), "LANG": "C.UTF-8"}
    if os.environ.get("JAVA_HOME"):
        env["JAVA_HOME"] = os.environ["JAVA_HOME"]
    return env


def _env() -> dict[str, str]:
    env = dict(os.environ)
    # the executors' Python must be this interpreter (the venv with numba, pyarrow, spark_jobs)
    env["PYSPARK_PYTHON"] = sys.executable
    env["PYSPARK_DRIVER_PYTHON"] = sys.executable
    return env


@pytest.fixture(scope="session")
def spark():
    os.environ.update({k: v for k, v in _env().items() if k.startswith("PYSPARK")})
    from pyspark.sql import SparkSession

    from spark_jobs.datasource import register

    s = (SparkSession.builder.master("local[2]").appName("krait-spark-tests")
         .config("spark.ui.enabled", "false")
         .config("spark.driver.memory", "1g")
         .config("spark.sql.shuffle.partitions", "2")
         .config("spark.sql.session.timeZone", "UTC")
         .config("spark.ui.showConsoleProgress", "false")
         .getOrCreate())
    s.sparkContext.setLogLevel("ERROR")
    register(s)
    yield s
    s.stop()


@pytest.fixture(scope="session")
def rich_log_dir(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, list[dict]]:
    d = str(tmp_path_factory.mktemp("rich-logs"))
    return d, helpers.build_rich_log_dir(d)


JOBS = ("topic_stats", "key_skew", "consumer_lag", "export", "verify")


@pytest.fixture(scope="session")
def job_runs(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """Start every job under spark-submit on one log dir; values are (Popen, output dir, log dir)."""
    log_dir = str(tmp_path_factory.mktemp("job-logs"))
    helpers.build_jobs_log_dir(log_dir)
    out_root = tmp_path_factory.mktemp("job-out")
    krait = os.path.join(os.path.dirname(sys.executable), "krait")
    runs = {}
    for job in JOBS:
        out = str(out_root / job)
        extra = ["--topics", "orders"] if job in ("export", "key_skew") else []
        cmd = [krait, "spark", "--master", "local[1]", "--driver-memory", "512m", "--conf", "spark.ui.enabled=false",
               job, "--log-dirs", log_dir, "--output", out, *extra]
        logf = open(str(out_root / f"{job}.log"), "wb")  # closed by wait_job
        # as from a fresh shell: no venv on the PATH, no PYSPARK_* or SPARK_HOME, another directory.
        # `krait spark` dies with this process; in a process group of its own, so that the end
        # of the session also kills spark-submit's JVM (its child) and the JVM's Python workers
        proc = spawn(cmd, cwd=str(out_root), env=fresh_shell_env(), stdout=logf, stderr=subprocess.STDOUT,
                     start_new_session=True)
        runs[job] = (proc, out, log_dir, logf)
    yield runs
    for proc, *_ in runs.values():
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # the JVM and its Python workers too
        except ProcessLookupError:
            pass
        proc.wait()


def wait_job(runs: dict, job: str, timeout: float = 240) -> tuple[int, str, str, str]:
    """Wait for a job's spark-submit; returns (exit code, console output, output dir, log dir)."""
    proc, out, log_dir, logf = runs[job]
    try:
        rc = proc.wait(timeout=timeout)
    finally:
        logf.close()
    with open(logf.name, encoding="utf-8", errors="replace") as f:
        text = f.read()
    return rc, text, out, log_dir


@pytest.fixture(scope="session", autouse=True)
def _start_jobs_early(request: pytest.FixtureRequest) -> None:
    """Launch the spark-submit runs at session start when job tests are selected."""
    if any("test_jobs" in item.nodeid for item in request.session.items):
        request.getfixturevalue("job_runs")
