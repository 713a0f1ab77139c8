"""``krait spark``: run the bundled Spark jobs (or any PySpark script) with the right Python
and the right Spark, from any shell.

    krait spark list
    krait spark topic_stats --log-dirs /var/lib/krait --output out/stats
    krait spark --master local[4] --conf spark.driver.memory=4g export --log-dirs ... --output ...
    krait spark my_job.py ARGS...

Two things go wrong when a job is started by hand outside an activated venv: the pip
installed ``spark-submit`` looks for Spark with whatever ``python3`` is on the PATH, and
Spark starts its Python workers with ``python3`` too, which has neither pyarrow nor the
data source. This command runs PySpark's own ``spark-submit`` with SPARK_HOME set to the
PySpark this interpreter imports, and PYSPARK_PYTHON / PYSPARK_DRIVER_PYTHON set to this
interpreter, unless the caller set them.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

__all__ = ["JOBS", "main", "spark_env", "submit_command"]

#: the bundled jobs: name -> what it does (each is spark_jobs/<name>.py)
JOBS = {
    "topic_stats": "records, bytes, codec mix, offset/time ranges, records-per-minute chart",
    "key_skew": "distinct keys, hottest keys, per-partition chart",
    "consumer_lag": "committed offsets against log end offsets, lag history chart",
    "rebalance_history": "each group's generations and rebalances from __consumer_offsets, timeline chart",
    "export": "records to Parquet, partitioned by topic/partition",
    "verify": "CRC and structure of every batch of every replica (exit 1 on errors)",
}

#: spark-submit options that take a value (the others before JOB are flags)
_VALUE_OPTIONS = {"--master", "--deploy-mode", "--conf", "-c", "--name", "--jars", "--packages", "--py-files",
                  "--files", "--driver-memory", "--executor-memory", "--executor-cores", "--num-executors",
                  "--driver-cores", "--properties-file", "--driver-java-options", "--driver-class-path",
                  "--total-executor-cores", "--queue", "--archives"}

_USAGE = """usage: krait spark [spark-submit options] JOB|SCRIPT.py [job arguments]
       krait spark list

Runs a bundled job (krait spark list) or your own PySpark script with PySpark's
spark-submit, this Python for the driver and the workers (PYSPARK_PYTHON), and
SPARK_HOME pointing at that PySpark. Options before JOB go to spark-submit
(--master, --conf k=v, --driver-memory ...); the rest to the job (--help lists them).
"""


class SparkSetupError(RuntimeError):
    """PySpark or Java is missing: the message says what to install."""


def spark_env(environ: dict[str, str] | None = None) -> dict[str, str]:
    """The environment spark-submit needs: SPARK_HOME from the PySpark this interpreter
    imports, PYSPARK_PYTHON / PYSPARK_DRIVER_PYTHON this interpreter (unless set)."""
    env = dict(os.environ if environ is None else environ)
    try:
        import pyspark
    except ImportError:
        raise SparkSetupError(
            f"krait spark needs PySpark in {sys.executable}: install the spark extra "
            "(`make test` does, or `pip install -e '.[spark]'`)") from None
    env.setdefault("SPARK_HOME", os.path.dirname(os.path.abspath(pyspark.__file__)))
    env.setdefault("PYSPARK_PYTHON", sys.executable)
    env.setdefault("PYSPARK_DRIVER_PYTHON", env["PYSPARK_PYTHON"])
    if not shutil.which("java", path=env.get("PATH")) and not env.get("JAVA_HOME"):
        raise SparkSetupError("Spark needs a Java runtime (17 or newer): none on PATH and JAVA_HOME is unset")
    return env


def job_script(name: str) -> str:
    """The path of a bundled job (``topic_stats`` or ``topic-stats``), or of a script."""
    if name.endswith(".py"):
        if not os.path.isfile(name):
            raise SparkSetupError(f"no such script: {name}")
        return os.path.abspath(name)
    import spark_jobs

    key = name.replace("-", "_")
    if key not in JOBS:
        raise SparkSetupError(f"unknown job {name!r}: the jobs are {', '.join(JOBS)} (or give a script.py)")
    return os.path.join(os.path.dirname(os.path.abspath(spark_jobs.__file__)), f"{key}.py")


def submit_command(argv: list[str], env: dict[str, str]) -> list[str]:
    """spark-submit's command line for ``[submit options] JOB [job args]``."""
    submit_opts: list[str] = []
    i = 0
    while i < len(argv) and argv[i].startswith("-"):
        opt = argv[i]
        takes_value = opt in _VALUE_OPTIONS and "=" not in opt
        submit_opts += argv[i: i + (2 if takes_value else 1)]
        i += 2 if takes_value else 1
    if i >= len(argv):
        raise SparkSetupError("no job given: krait spark list shows them")
    script = job_script(argv[i])
    if not any(o == "--master" or o.startswith("--master=") for o in submit_opts):
        submit_opts = ["--master", "local[*]", *submit_opts]
    submit = os.path.join(env["SPARK_HOME"], "bin", "spark-submit")
    return [submit, *submit_opts, script, *argv[i + 1:]]


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(_USAGE, file=sys.stderr)
        return 0 if argv else 2
    if argv[0] == "list":
        width = max(map(len, JOBS))
        for name, what in JOBS.items():
            print(f"{name:<{width}}  {what}")
        return 0
    try:
        env = spark_env()
        cmd = submit_command(argv, env)
    except SparkSetupError as e:
        print(f"krait spark: {e}", file=sys.stderr)
        return 2
    try:
        return subprocess.call(cmd, env=env)
    except KeyboardInterrupt:
        return 130
