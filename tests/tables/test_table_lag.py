"""Table lag for operators, on a real broker process: ``/metrics`` reports each led partition's
table offset and lag, ``krait tables`` lists the table (snapshots, records, per-partition
lag), ``krait topics --describe`` prints the lag under the topic, and a topic whose mode
went back to ``disabled`` keeps its table, whose lag then grows with what is produced."""

from __future__ import annotations

import contextlib
import io
import re
import time
import urllib.request

import pytest
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic

from broker.tools import tables_cli, topics_cli
from tables.lag import partition_lag
from tests.krait_harness import BrokerProcess, free_port
from tests.tables.test_table_topics import _log_ends, _produce, _wait_for


def _metric(http: int, name: str, topic: str, partition: int) -> float | None:
    text = urllib.request.urlopen(f"http://127.0.0.1:{http}/metrics", timeout=10).read().decode()
    m = re.search(rf'^{name}{{partition="{partition}",topic="{topic}"}} (\S+)$', text, re.M)
    return None if m is None else float(m.group(1))


def _run(main, *argv: str) -> str:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(list(argv))
    assert rc == 0, err.getvalue()
    return out.getvalue()


def test_partition_lag_counts_from_the_table_offset_or_the_log_start():
    assert partition_lag(0, 10, 0, 10, None, 5_000).offsets == 0
    lag = partition_lag(0, 10, 0, 15, 2_000, 5_000)
    assert (lag.offsets, lag.seconds, lag.table_offset) == (5, 3.0, 10)
    # never written: from the log start; records deleted before the table got them are not lag
    assert partition_lag(1, None, 4, 9, 4_000, 5_000).offsets == 5
    assert partition_lag(1, 2, 4, 9, None, 5_000) == partition_lag(1, 4, 4, 9, None, 5_000)


@pytest.mark.timeout(180)
def test_metrics_tables_cli_and_describe_report_the_lag(tmp_path):
    log_dir = str(tmp_path / "logs")
    http = free_port()
    b = BrokerProcess(log_dir, {"krait.iceberg.commit.interval.ms": "300", "krait.http.listener": f"127.0.0.1:{http}",
                                "transaction.state.log.num.partitions": "1", "offsets.topic.num.partitions": "1"})
    b.start()
    topic = "lagged"
    try:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        admin.create_topics([NewTopic(topic, 2, 1, config={"krait.iceberg.mode": "key_value"})])[topic].result(30)
        _produce(b.bootstrap, topic, [f"v{i}" for i in range(100)])
        ends = _log_ends(b.bootstrap, topic)
        _wait_for(log_dir, topic, ends)

        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and _metric(http, "krait_iceberg_table_offset", topic, 0) != ends[0]:
            time.sleep(0.3)
        for p in (0, 1):
            assert _metric(http, "krait_iceberg_table_offset", topic, p) == ends[p]
            assert _metric(http, "krait_iceberg_table_lag_offsets", topic, p) == 0
            assert _metric(http, "krait_iceberg_table_lag_seconds", topic, p) == 0

        out = _run(tables_cli.main, "--bootstrap-server", b.bootstrap)
        assert f"Table: krait.{topic}\tTopic: {topic}\tMode: key_value\t" in out
        assert "Records: 100\t" in out
        assert "\tPartitionSpec: (partition, hour(timestamp))\n" in out
        for p in (0, 1):
            assert f"\tPartition: {p}\tTableOffset: {ends[p]}\tLogEnd: {ends[p]}\tLagOffsets: 0\tLagSeconds: 0.0" in out
        described = _run(topics_cli.main, "--bootstrap-server", b.bootstrap, "--describe", "--topic", topic)
        assert f"\tTable: krait.{topic}\tTopic: {topic}\tMode: key_value" in described
        assert "\t\tPartition: 0\tTableOffset:" in described

        # the mode back to disabled: the table stays, and falls behind what is produced next
        res = ConfigResource("topic", topic, incremental_configs=[ConfigEntry(
            "krait.iceberg.mode", "disabled", incremental_operation=AlterConfigOpType.SET)])
        admin.incremental_alter_configs([res])[res].result(30)
        time.sleep(1.0)  # a few commit intervals: the driver has seen the change
        _produce(b.bootstrap, topic, [f"w{i}" for i in range(60)])
        later = _log_ends(b.bootstrap, topic)
        time.sleep(1.0)
        out = _run(tables_cli.main, "--bootstrap-server", b.bootstrap, "--snapshots")
        assert "Mode: disabled" in out
        behind = {int(m[0]): (int(m[1]), int(m[2]), float(m[3])) for m in re.findall(
            r"Partition: (\d+)\tTableOffset: (\d+)\tLogEnd: \d+\tLagOffsets: (\d+)\tLagSeconds: ([\d.]+)", out)}
        assert {p: v[0] for p, v in behind.items()} == ends
        assert sum(v[1] for v in behind.values()) == sum(later.values()) - sum(ends.values()) == 60
        assert all(v[2] > 0 for p, v in behind.items() if v[1])
        assert "\tSnapshot: " in out and "Operation: append" in out
        # no metric for a topic no longer kept as a table
        assert _metric(http, "krait_iceberg_table_lag_offsets", topic, 0) is None
    finally:
        b.kill()
