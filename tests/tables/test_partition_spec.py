"""krait.iceberg.partition.spec at the table level (pyiceberg, no broker): a table created
with a configured spec, a spec change evolving the table (older files keep theirs, every row
read back once), a spec the table cannot take warned about once and the topic still
written, a decoded column partitioned by from the commit after the one that adds it, the
DLQ table on the default spec, and a compaction abandoned when the spec changed under it."""

from __future__ import annotations

import logging

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.schema import Schema
from pyiceberg.types import NestedField, StringType

from tables.catalog import open_catalog, table_identifier
from tables.layout import key_value_schema
from tables.modes import VALUE_SCHEMA_ID_PREFIX
from tables.topic_table import TopicTable
from tables.upkeep import compact
from tables.writer import TableWriter
from tests.tables.test_decoded import ORDER_V1, Registry, avro, order
from tests.tables.test_decoded import region as decoded_region
from tests.tables.test_upkeep import SMALL, content, expected, fill
from tests.tables.test_upkeep import rows as kv_rows

TS = 1_700_000_000_000  # 2023-11-14T22:13:20Z
HOUR = 3_600_000
DAY = 24 * HOUR


def spread(partition: int, start: int, n: int, step_ms: int) -> tuple[pa.Table, int]:
    """Rows of offsets [start, start + n), ``step_ms`` apart from TS on."""
    t, end = kv_rows(partition, start, n)
    ts = pa.array([(TS + o * step_ms) * 1000 for o in range(start, end)], pa.timestamp("us", tz="UTC"))
    return t.set_column(t.schema.get_field_index("timestamp"), t.schema.field("timestamp"), ts), end


def spec_of(table) -> list[tuple[str, str, str]]:
    """(field name, transform, source column) of the table's current spec."""
    schema = table.schema()
    return [(f.name, str(f.transform), schema.find_column_name(f.source_id)) for f in table.spec().fields]


def files(table) -> list[tuple[int, str]]:
    """(spec id, partition path) of each live data file."""
    return sorted((t.file.spec_id, t.file.file_path.split("/data/")[1].rsplit("/", 1)[0])
                  for t in table.scan().plan_files())


@pytest.fixture
def catalog(tmp_path):
    return open_catalog(str(tmp_path / "logs"))


def test_a_table_is_created_with_the_configured_day_spec(catalog):
    w = TableWriter(catalog, "daily", spec="(partition, day(timestamp))")
    assert spec_of(w.table) == [("partition", "identity", "partition"), ("timestamp_day", "day", "timestamp")]
    # 30 rows 4 hours apart: 5 days (2023-11-14 22:13 to 2023-11-19 18:13)
    for p in (0, 1):
        w.append({p: spread(p, 0, 30, 4 * HOUR)})
    table = w.refresh()
    assert content(table) == expected({0: 30, 1: 30})
    days = [f"timestamp_day=2023-11-{d}" for d in range(14, 20)]
    assert files(table) == sorted((0, f"partition={p}/{d}") for p in (0, 1) for d in days)
    # a filter on the timestamp prunes by day: only the files of the 16th are read
    lo, hi = "2023-11-16T00:00:00+00:00", "2023-11-17T00:00:00+00:00"
    scan = table.scan(row_filter=f"timestamp >= '{lo}' and timestamp < '{hi}'")
    assert {t.file.file_path.split("/data/")[1].split("/")[1] for t in scan.plan_files()} == {
        "timestamp_day=2023-11-16"}
    assert scan.to_arrow().num_rows == 2 * 6  # hours 2, 6, ..., 22 of the 16th


def test_a_table_is_created_with_the_configured_bucket_spec(catalog):
    w = TableWriter(catalog, "buckets", spec="(bucket(4, key))")
    assert spec_of(w.table) == [("key_bucket_4", "bucket[4]", "key")]
    w.append({0: kv_rows(0, 0, 100), 1: kv_rows(1, 0, 100)})
    table = w.refresh()
    assert content(table) == expected({0: 100, 1: 100})
    # no Kafka partition or hour in the layout: one file per bucket, a key in one of them
    # whatever its Kafka partition
    assert files(table) == [(0, f"key_bucket_4={b}") for b in range(4)]
    keys = [pq.read_table(t.file.file_path.removeprefix("file://"), columns=["key", "partition"])
            for t in table.scan().plan_files()]
    assert sum(len(set(k["key"].to_pylist())) for k in keys) == 100
    assert all(set(k["partition"].to_pylist()) == {0, 1} for k in keys)


def test_a_spec_change_evolves_the_table_and_every_row_is_read_once(catalog, tmp_path):
    w = TableWriter(catalog, "orders")  # the default spec: (partition, hour(timestamp))
    w.append({0: kv_rows(0, 0, 20), 1: kv_rows(1, 0, 20)})
    snapshots = len(w.table.snapshots())
    w.spec = "(bucket(4, key))"
    w.append({0: kv_rows(0, 20, 20), 1: kv_rows(1, 20, 20)})
    table = w.refresh()
    assert spec_of(table) == [("key_bucket_4", "bucket[4]", "key")]
    # the spec changed in a commit of its own (no snapshot), then the append (one snapshot)
    assert len(table.snapshots()) == snapshots + 1
    assert files(table) == [(0, "partition=0/timestamp_hour=2023-11-14-22"),
                            (0, "partition=1/timestamp_hour=2023-11-14-22"),
                            *((1, f"key_bucket_4={b}") for b in range(4))]
    assert content(table) == expected({0: 40, 1: 40})

    # another writer (a broker leading other partitions) still on the table as it was: its
    # own spec update fails on the concurrent one, finds the spec already there, appends
    other = TableWriter(open_catalog(str(tmp_path / "logs")), "orders", spec="(bucket(4, key))")
    w.spec = other.spec = "(partition, day(timestamp))"
    assert w.append({0: kv_rows(0, 40, 20)}) == {0: 60, 1: 40}
    assert other.append({1: kv_rows(1, 40, 20)}) == {0: 60, 1: 60}
    assert other.conflicts == 1
    table = w.refresh()
    assert spec_of(table) == [("partition", "identity", "partition"), ("timestamp_day", "day", "timestamp")]
    assert sorted(table.specs()) == [0, 1, 2]  # one spec per change, none twice
    assert [f for f in files(table) if f[0] == 2] == [(2, "partition=0/timestamp_day=2023-11-14"),
                                                      (2, "partition=1/timestamp_day=2023-11-14")]
    assert content(table) == expected({0: 60, 1: 60})
    # back to the first spec: Iceberg reuses it, and the partition fields' ids
    w.spec = "(partition, hour(timestamp))"
    w.append({0: kv_rows(0, 60, 5)})
    table = w.refresh()
    assert table.spec().spec_id == 0 and sorted(table.specs()) == [0, 1, 2]
    assert content(table) == expected({0: 65, 1: 60})


def test_a_spec_the_table_cannot_take_is_warned_once_and_the_table_keeps_its_spec(catalog, caplog):
    caplog.set_level(logging.INFO, logger="krait.tables")
    w = TableWriter(catalog, "shop.orders", spec="(day(created_at))")  # no such column: the default spec
    assert spec_of(w.table) == [("partition", "identity", "partition"), ("timestamp_hour", "hour", "timestamp")]
    ends = fill(w, 3, 10)
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, warnings
    assert "shop.orders" in warnings[0].getMessage() and "krait.iceberg.partition.spec" in warnings[0].getMessage()
    assert "created_at" in warnings[0].getMessage()
    assert content(w.refresh()) == expected(ends)
    # a transform the column's type does not take: warned once more, for this value
    w.spec = "(hour(key))"
    ends = fill(w, 2, 10, start=ends)
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 2 and "hour cannot partition the binary column key" in warnings[1].getMessage()
    assert spec_of(w.refresh())[1] == ("timestamp_hour", "hour", "timestamp")
    assert content(w.table) == expected(ends)


def test_a_column_the_append_adds_is_partitioned_by_from_the_next_commit(catalog, caplog):
    caplog.set_level(logging.WARNING, logger="krait.tables")
    w = TableWriter(catalog, "regions", spec="(region)")
    assert spec_of(w.table)[0] == ("partition", "identity", "partition")  # no region column yet
    kv = key_value_schema()
    wider = Schema(*kv.fields, NestedField(kv.highest_field_id + 1, "region", StringType(), required=False))

    def with_region(p: int, start: int) -> tuple[pa.Table, int]:
        t, end = kv_rows(p, start, 6)
        return t.append_column("region", pa.array([f"r{o % 3}" for o in range(start, end)])), end

    w.append({0: with_region(0, 0)}, schema=wider)
    assert spec_of(w.table)[0] == ("partition", "identity", "partition")  # this append's files: the old spec
    w.append({0: with_region(0, 6)}, schema=wider)
    assert spec_of(w.table) == [("region", "identity", "region")]
    assert files(w.refresh())[-3:] == [(1, f"region=r{i}") for i in range(3)]
    assert not caplog.records  # nothing to warn about: the column came
    t = w.table.scan().to_arrow().sort_by("offset")
    assert t["offset"].to_pylist() == list(range(12))
    assert t["region"].to_pylist() == [f"r{o % 3}" for o in range(12)]


def test_the_dlq_table_keeps_the_default_spec(catalog):
    reg = Registry()
    reg.add(1, ORDER_V1)
    t = TopicTable(catalog, "orders", reg, mode=VALUE_SCHEMA_ID_PREFIX, spec="(bucket(2, region))")
    r = decoded_region(0, [avro(ORDER_V1, order(i), 1) for i in range(4)] + [b"not avro"])
    t.append({0: (r.table, r.next_offset)}, VALUE_SCHEMA_ID_PREFIX, "(bucket(2, region))")
    r = decoded_region(0, [avro(ORDER_V1, order(i), 1) for i in range(5, 9)] + [b"nor this"], start=5)
    assert t.append({0: (r.table, r.next_offset)}, VALUE_SCHEMA_ID_PREFIX, "(bucket(2, region))") == {0: 10}
    assert spec_of(t.main.refresh()) == [("region_bucket_2", "bucket[2]", "region")]
    dlq = catalog.load_table(table_identifier("orders~dlq"))
    assert spec_of(dlq) == [("partition", "identity", "partition"), ("timestamp_hour", "hour", "timestamp")]
    assert sorted(dlq.scan().to_arrow()["offset"].to_pylist()) == [4, 9]
    assert sorted(t.main.table.scan().to_arrow()["id"].to_pylist()) == [0, 1, 2, 3, 5, 6, 7, 8]


def test_a_compaction_is_abandoned_when_the_spec_changed_under_it(catalog, tmp_path):
    w = TableWriter(catalog, "compacted")
    ends = fill(w, 6, 10)
    upkeep_table = open_catalog(str(tmp_path / "logs")).load_table(w.identifier)

    def writer_changes_the_spec(attempt: int) -> None:
        if attempt == 0:  # an append moves the snapshot: the compaction is retried on the new spec
            w.spec = "(bucket(4, key))"
            w.append({0: kv_rows(0, ends[0], 10)})

    report = compact(upkeep_table, TS, SMALL, before_commit=writer_changes_the_spec)
    assert report.abandoned == "the table's partition spec changed meanwhile" and report.files_rewritten == 0
    table = w.refresh()
    assert content(table) == expected({0: ends[0] + 10, 1: ends[1]})
    specs = [spec_id for spec_id, _ in files(table)]
    assert specs.count(0) == 12 and set(specs) == {0, 1}  # the small files stay, not rewritten


def test_the_table_spec_is_shown_in_the_config_syntax(catalog):
    """krait tables shows a table's spec as the config key is written: what was configured,
    whatever order and spelling of the transforms Iceberg stores."""
    from tables.inspect import summarize
    from tables.layout import spec_text

    for spec in ("(partition, hour(timestamp))", "(day(timestamp), bucket(4, key))", "(truncate(10, key))", "()",
                 "(partition, month(timestamp))", "(year(timestamp))"):
        w = TableWriter(catalog, f"t{abs(hash(spec))}", spec=spec)
        assert spec_text(w.table.schema(), w.table.spec()) == spec
        assert summarize(w.table).partition_spec == spec
