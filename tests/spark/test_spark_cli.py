"""``krait spark``: the bundled jobs with the right Python and Spark from any shell, and a
clear error naming PYSPARK_PYTHON when Spark's workers would run a Python without the
data source's modules. (Every job test in test_jobs.py runs its job through `krait spark`
from a fresh shell's environment: see conftest.job_runs.)"""

from __future__ import annotations

import os
import subprocess
import sys
import venv

import pytest

from broker.tools.spark_cli import JOBS, spark_env, submit_command
from spark_jobs.datasource import WORKER_MODULES, check_workers_python
from tests.spark.conftest import fresh_shell_env

KRAIT = os.path.join(os.path.dirname(sys.executable), "krait")


def test_list_and_unknown_job():
    r = subprocess.run([KRAIT, "spark", "list"], capture_output=True, text=True, env=fresh_shell_env(), timeout=60)
    assert r.returncode == 0
    assert [line.split()[0] for line in r.stdout.splitlines()] == list(JOBS)
    r = subprocess.run([KRAIT, "spark", "nosuch", "--log-dirs", "x"], capture_output=True, text=True,
                       env=fresh_shell_env(), timeout=60)
    assert r.returncode == 2 and "unknown job 'nosuch'" in r.stderr


def test_submit_command_splits_spark_options_from_the_job_and_its_arguments():
    env = spark_env(fresh_shell_env())
    assert env["PYSPARK_PYTHON"] == sys.executable == env["PYSPARK_DRIVER_PYTHON"]
    assert os.path.isfile(os.path.join(env["SPARK_HOME"], "bin", "spark-submit"))
    cmd = submit_command(["--conf", "a=b", "--verbose", "topic-stats", "--log-dirs", "d", "--master", "m"], env)
    assert cmd[1:6] == ["--master", "local[*]", "--conf", "a=b", "--verbose"]
    assert cmd[6].endswith(os.path.join("spark_jobs", "topic_stats.py"))
    assert cmd[7:] == ["--log-dirs", "d", "--master", "m"]  # after the job: the job's own
    assert submit_command(["--master=local[2]", "verify"], env)[1] == "--master=local[2]"
    assert spark_env({**fresh_shell_env(), "PYSPARK_PYTHON": "/opt/py"})["PYSPARK_DRIVER_PYTHON"] == "/opt/py"


@pytest.fixture(scope="module")
def bare_python(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A Python without pyarrow, numba or spark_jobs: a new venv without site-packages."""
    d = str(tmp_path_factory.mktemp("bare-venv"))
    venv.create(d, with_pip=False, system_site_packages=False)
    return os.path.join(d, "bin", "python")


def test_workers_without_the_modules_fail_early_naming_pyspark_python(spark, bare_python, monkeypatch):
    sc = spark.sparkContext
    saved = sc.pythonExec
    try:
        sc.pythonExec = bare_python
        monkeypatch.setenv("PYSPARK_PYTHON", bare_python)
        with pytest.raises(RuntimeError) as e:
            check_workers_python(spark)
        msg = str(e.value)
        assert f"PYSPARK_PYTHON={bare_python!r}" in msg and f"PYSPARK_PYTHON={sys.executable}" in msg
        # (spark_jobs itself may be found: from the working directory, the repo root)
        assert all(m in msg for m in WORKER_MODULES if m != "spark_jobs") and "krait spark" in msg
        # unset: the driver's own interpreter serves the local workers instead
        monkeypatch.delenv("PYSPARK_PYTHON")
        check_workers_python(spark)
        assert sc.pythonExec == sys.executable
    finally:
        sc.pythonExec = saved
