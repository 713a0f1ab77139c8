"""tables.upkeep: compaction keeps rows and offsets, races with a writer, expiry, orphan files."""

from __future__ import annotations

import os
import statistics
import threading
import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.exceptions import CommitFailedException
from pyiceberg.table.snapshots import Operation
from pyiceberg.types import StringType

from tables.catalog import open_catalog
from tables.layout import KEY_VALUE_ARROW_SCHEMA
from tables.upkeep import (
    UpkeepSettings,
    compact,
    delete_orphan_files,
    expire_snapshots,
    run_topic_upkeep,
    run_upkeep,
)
from tables.writer import OFFSET_PREFIX, LeanTransaction, TableWriter, snapshot_offsets

TS = 1_700_000_000_000  # an hour boundary is 1_699_999_200_000
HOUR = 3_600_000
DAY = 24 * HOUR
#: compact from 5 small files, a target the tests' files are far below
SMALL = UpkeepSettings(min_input_files=5, target_file_bytes=8 << 20)


def rows(partition: int, start: int, n: int, *, ts: int = TS, value_bytes: int = 20) -> tuple[pa.Table, int]:
    """Rows of offsets [start, start + n) of ``partition`` and the next offset after them."""
    offs = list(range(start, start + n))
    t = pa.table({
        "partition": pa.array([partition] * n, pa.int32()),
        "offset": pa.array(offs, pa.int64()),
        "timestamp": pa.array([(ts + o) * 1000 for o in offs], pa.timestamp("us", tz="UTC")),
        "timestamp_type": pa.array([0] * n, pa.int32()),
        "key": pa.array([b"k%d" % o for o in offs], pa.binary()),
        "value": pa.array([(b"p%d-o%d-" % (partition, o)).ljust(value_bytes, b"x") for o in offs], pa.binary()),
        "headers": pa.array([[{"key": "h", "value": b"x"}]] * n, KEY_VALUE_ARROW_SCHEMA.field("headers").type),
    }, schema=KEY_VALUE_ARROW_SCHEMA)
    return t, start + n


def content(table) -> list[tuple[int, int, bytes]]:
    t = table.scan().to_arrow().sort_by([("partition", "ascending"), ("offset", "ascending")])
    return list(zip(t["partition"].to_pylist(), t["offset"].to_pylist(), t["value"].to_pylist(), strict=True))


def expected(ends: dict[int, int]) -> list[tuple[int, int, bytes]]:
    return [(p, o, (b"p%d-o%d-" % (p, o)).ljust(20, b"x")) for p in sorted(ends) for o in range(ends[p])]


def data_files(table) -> list[str]:
    return [t.file.file_path for t in table.scan().plan_files()]


def on_disk(table) -> set[str]:
    root = table.location().removeprefix("file://") + "/data"
    return {os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs}


@pytest.fixture
def catalog(tmp_path):
    return open_catalog(str(tmp_path / "logs"))


def fill(writer: TableWriter, commits: int, per: int, partitions=(0, 1), *, start: dict[int, int] | None = None):
    ends = dict(start or {p: 0 for p in partitions})
    for _ in range(commits):
        batch = {p: rows(p, ends[p], per) for p in partitions}
        writer.append(batch)
        ends = {p: batch[p][1] for p in partitions}
    return ends


def test_compaction_keeps_rows_order_and_offsets(catalog):
    w = TableWriter(catalog, "orders")
    ends = fill(w, 12, 50)
    table = w.refresh()
    before = content(table)
    assert len(data_files(table)) == 24
    report = compact(table, TS, SMALL)
    assert report.partitions_compacted == 2 and report.files_rewritten == 24 and report.files_written == 2
    assert report.conflicts == 0 and report.abandoned is None
    table.refresh()
    assert content(table) == before == expected(ends)
    files = data_files(table)
    assert len(files) == 2
    for path in files:  # each file sorted by offset, one Kafka partition
        t = pq.read_table(path.removeprefix("file://"))
        assert t["offset"].to_pylist() == sorted(t["offset"].to_pylist())
        assert len(set(t["partition"].to_pylist())) == 1
    snap = table.current_snapshot()
    assert snap.summary.operation == Operation.REPLACE
    props = snap.summary.additional_properties
    assert {k: v for k, v in props.items() if k.startswith(OFFSET_PREFIX)} == {
        "krait.offset.0": "600", "krait.offset.1": "600"}
    assert props["total-records"] == "1200" and props["total-data-files"] == "2"
    # the writer carries on from its stale table: its commit fails once and is made again
    assert w.append({0: rows(0, 600, 10)}) == {0: 610, 1: 600}
    assert content(w.refresh()) == expected({0: 610, 1: 600})


def test_nothing_to_do_commits_nothing(catalog):
    w = TableWriter(catalog, "few")
    fill(w, 4, 10)
    table = w.refresh()
    n = len(table.snapshots())
    report = run_upkeep(table, TS, SMALL, orphans=True)
    assert not report and report.files_rewritten == 0
    assert len(table.refresh().snapshots()) == n + 0  # no compaction, nothing expired
    # a partition quiet for 15 minutes is compacted from 2 small files on
    report = compact(table, int(time.time() * 1000) + 16 * 60_000, SMALL)
    assert report.files_rewritten == 8 and len(data_files(table.refresh())) == 2


def test_the_hour_being_written_is_compacted_like_a_binary_counter(catalog):
    """Compacting after every 5 commits of 18-22 rows, an older (compacted) file is taken
    again only once about as many rows came after it: file sizes about double from the newest
    back, so the files of the hour and the rows rewritten grow as log2 of the commits, not
    linearly, and a commit a little larger than the next does not stop the run."""
    w = TableWriter(catalog, "counter")
    ends = {0: 0}
    rewritten = written = most_files = 0
    for r in range(16):  # 80 commits
        for c in range(5):
            n = 18 + (r + c) % 5
            ends = fill(w, 1, n, partitions=(0,), start=ends)
            written += n
        table = w.refresh()
        before = {t.file.file_path: t.file.record_count for t in table.scan().plan_files()}
        most_files = max(most_files, len(before))
        report = compact(table, TS, SMALL)
        assert report.partitions_compacted == 1, f"round {r}: {sorted(before.values())}"
        after = {t.file.file_path for t in table.refresh().scan().plan_files()}
        rewritten += sum(n for path, n in before.items() if path not in after)
        assert content(table) == expected(ends)
    assert most_files <= 5 + 5, most_files  # 5 new files and ~log2(16) compacted ones
    # rewriting every small file at each round would rewrite 8.5x the rows written
    assert rewritten <= 4 * written, (rewritten, written)
    counts = sorted((t.file.record_count for t in w.refresh().scan().plan_files()), reverse=True)
    assert len(counts) <= 3 and counts[0] >= written / 2, counts


def test_partitions_are_kafka_partition_and_hour(catalog):
    w = TableWriter(catalog, "hours")
    for i in range(6):  # each commit writes rows of two hours
        w.append({0: (pa.concat_tables([rows(0, 20 * i, 10)[0], rows(0, 20 * i + 10, 10, ts=TS + HOUR)[0]]),
                      20 * i + 20)})
    table = w.refresh()
    assert len(data_files(table)) == 12
    compact(table, TS, SMALL)
    table.refresh()
    assert len(data_files(table)) == 2  # one per hour
    assert [o for _, o, _ in content(table)] == list(range(120))


def test_a_schema_evolution_inside_an_hour(catalog):
    """Files before and after a new column are compacted apart, each keeping its schema."""
    w = TableWriter(catalog, "evolve")
    ends = fill(w, 6, 10, partitions=(0,))
    table = w.refresh()
    with table.update_schema() as u:
        u.add_column("extra", StringType())
    for _ in range(6):
        t, end = rows(0, ends[0], 10)
        t = t.append_column(pa.field("extra", pa.string()), pa.array([f"e{o}" for o in range(ends[0], end)]))
        table.append(t, snapshot_properties={"krait.offset.0": str(end)})
        ends[0] = end
    before = table.scan().to_arrow().sort_by("offset")
    report = compact(table, TS, SMALL)
    assert report.files_rewritten == 12 and report.files_written == 2
    after = table.refresh().scan().to_arrow().sort_by("offset")
    assert after.to_pylist() == before.to_pylist()
    assert after["extra"].to_pylist() == [None] * 60 + [f"e{o}" for o in range(60, 120)]
    assert len(data_files(table)) == 2


def test_a_writer_commit_between_plan_and_commit(catalog, tmp_path):
    w = TableWriter(catalog, "race")
    ends = fill(w, 10, 20)
    upkeep_table = open_catalog(str(tmp_path / "logs")).load_table(w.identifier)

    def writer_commits(attempt: int) -> None:
        if attempt == 0:
            w.append({0: rows(0, ends[0], 7), 1: rows(1, ends[1], 3)})

    report = compact(upkeep_table, TS, SMALL, before_commit=writer_commits)
    assert report.conflicts == 1 and report.abandoned is None and report.files_rewritten == 20
    table = w.refresh()
    assert content(table) == expected({0: 207, 1: 203})
    # the compaction was made on the writer's snapshot, with its offsets
    snap = table.current_snapshot()
    assert snap.summary.operation == Operation.REPLACE
    assert snapshot_offsets(table) == {0: 207, 1: 203}
    assert table.snapshot_by_id(snap.parent_snapshot_id).summary.operation == Operation.APPEND
    assert len(data_files(table)) == 4  # 2 compacted + the writer's 2 new ones


def test_a_compaction_whose_files_went_meanwhile_is_abandoned(catalog, tmp_path):
    w = TableWriter(catalog, "gone")
    ends = fill(w, 10, 20)
    mine = open_catalog(str(tmp_path / "logs")).load_table(w.identifier)
    other = open_catalog(str(tmp_path / "logs")).load_table(w.identifier)

    def other_compacts_first(attempt: int) -> None:
        if attempt == 0:
            assert compact(other, TS, SMALL).files_rewritten == 20

    before = on_disk(mine)
    report = compact(mine, TS, SMALL, before_commit=other_compacts_first)
    assert report.abandoned and "left the table" in report.abandoned and report.files_rewritten == 0
    table = w.refresh()
    assert content(table) == expected(ends) and len(data_files(table)) == 2
    # the abandoned compaction's files are gone; the other's are there
    assert on_disk(table) == before | {p.removeprefix("file://") for p in data_files(table)}


def test_writer_threads_racing_compactions(catalog, tmp_path):
    """A writer appending as fast as it can while compactions run: every row once."""
    w = TableWriter(catalog, "busy")
    fill(w, 6, 10)
    stop = threading.Event()
    ends = {0: 60, 1: 60}
    errors: list[BaseException] = []

    def write() -> None:  # a commit every ~0.2 s (the broker's: every 10 s)
        try:
            while not stop.wait(0.2):
                batch = {p: rows(p, ends[p], 5) for p in (0, 1)}
                w.append(batch)
                ends.update({p: batch[p][1] for p in (0, 1)})
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    t = threading.Thread(target=write)
    t.start()
    upkeep = open_catalog(str(tmp_path / "logs")).load_table(w.identifier)
    reports = []
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and sum(r.files_rewritten > 0 for r in reports) < 3:
            reports.append(compact(upkeep.refresh(), TS, SMALL))
    finally:
        stop.set()
        t.join()
    assert not errors
    # compactions committed, some of them after losing a race with the writer
    assert sum(r.files_rewritten > 0 for r in reports) >= 1, [(r.files_rewritten, r.conflicts) for r in reports]
    assert w.conflicts + sum(r.conflicts for r in reports) > 0
    table = w.refresh()
    assert snapshot_offsets(table) == ends
    assert content(table) == expected(ends)


def test_expiry_keeps_the_offsets_when_the_writers_snapshots_go(catalog, tmp_path):
    w = TableWriter(catalog, "exp")
    ends = fill(w, 10, 20)
    table = w.refresh()
    compact(table, TS, SMALL)
    table.refresh()
    small_files = on_disk(table) - {p.removeprefix("file://") for p in data_files(table)}
    assert len(small_files) == 20
    meta = table.location().removeprefix("file://") + "/metadata"
    lists_before = {f for f in os.listdir(meta) if f.startswith("snap-")}
    later = int(time.time() * 1000) + DAY
    # the defaults keep the current snapshot and its parent
    report = expire_snapshots(table, later, UpkeepSettings(snapshot_retention_ms=HOUR))
    assert report.snapshots_expired == 9 and len(table.refresh().snapshots()) == 2
    assert all(os.path.exists(f) for f in small_files)  # the kept parent uses them
    # only the compaction left: it carries the offsets, so nothing is appended again
    report = expire_snapshots(table, later, UpkeepSettings(snapshot_retention_ms=HOUR, min_snapshots=1))
    assert report.snapshots_expired == 1 and len(table.refresh().snapshots()) == 1
    assert not any(os.path.exists(f) for f in small_files)
    assert len(lists_before - {f for f in os.listdir(meta) if f.startswith("snap-")}) == 10
    # the manifests left on disk are the ones the remaining snapshot lists
    manifests = {m.manifest_path.removeprefix("file://") for m in table.current_snapshot().manifests(table.io)}
    assert {os.path.join(meta, f) for f in os.listdir(meta) if f.endswith(".avro") and not f.startswith("snap-")} \
        == manifests
    assert content(table) == expected(ends)
    w2 = TableWriter(open_catalog(str(tmp_path / "logs")), "exp")
    assert w2.committed_offsets() == ends
    assert w2.append({0: rows(0, 150, 60)}) == {0: 210, 1: 200}
    assert content(w2.refresh()) == expected({0: 210, 1: 200})


def test_expiry_keeps_young_snapshots_and_the_one_with_offsets(catalog):
    w = TableWriter(catalog, "young")
    fill(w, 5, 10)
    table = w.refresh()
    now = int(time.time() * 1000)
    assert not expire_snapshots(table, now, UpkeepSettings())  # 5 days: all young
    # a snapshot without offsets on top (something else's): the one below is kept for them
    with table.transaction() as tx, tx.update_snapshot().fast_append():
        pass
    table.refresh()
    report = expire_snapshots(table, now + DAY, UpkeepSettings(snapshot_retention_ms=HOUR, min_snapshots=1))
    assert report.snapshots_expired == 4 and len(table.refresh().snapshots()) == 2
    assert snapshot_offsets(table) == {0: 50, 1: 50}


def test_orphans_of_a_failed_commit_are_deleted_once_old(catalog, tmp_path):
    w = TableWriter(catalog, "orph")
    ends = fill(w, 6, 10)
    stale = open_catalog(str(tmp_path / "logs")).load_table(w.identifier)
    fill(w, 1, 10, start=ends)
    ends = {0: 70, 1: 70}
    # a commit on a stale base fails and leaves its Parquet files
    with pytest.raises(CommitFailedException):
        stale.append(rows(0, 999, 5)[0])
    table = w.refresh()
    compact(table, TS, SMALL)  # the small files now only used by older snapshots: not orphans
    table.refresh()
    used = {p.removeprefix("file://") for p in data_files(table)}
    orphans = on_disk(table) - used - _used_by_any_snapshot(table)
    assert len(orphans) == 1
    assert not delete_orphan_files(table, int(time.time() * 1000), UpkeepSettings())  # too young
    report = delete_orphan_files(table, int(time.time() * 1000) + 4 * DAY, UpkeepSettings())
    assert report.orphans_deleted == 1 and report.orphan_bytes_deleted > 0
    assert not (orphans & on_disk(table))
    assert content(table.refresh()) == expected(ends)
    # every snapshot still reads
    for s in table.snapshots():
        table.scan(snapshot_id=s.snapshot_id).to_arrow()


def _used_by_any_snapshot(table) -> set[str]:
    return {t.file.file_path.removeprefix("file://") for s in table.snapshots()
            for t in table.scan(snapshot_id=s.snapshot_id).plan_files()}


def test_orphan_scan_keeps_files_of_every_kept_snapshot(catalog):
    """Files removed by two successive compactions stay while a snapshot uses them."""
    w = TableWriter(catalog, "chain")
    ends = fill(w, 6, 10)
    table = w.refresh()
    compact(table, TS, SMALL)
    ends = fill(w, 6, 10, start=ends)
    compact(table.refresh(), TS, SMALL)
    table.refresh()
    assert _used_by_any_snapshot(table) == on_disk(table)
    report = delete_orphan_files(table, int(time.time() * 1000) + 4 * DAY, UpkeepSettings())
    assert report.orphans_deleted == 0
    for s in table.snapshots():
        table.scan(snapshot_id=s.snapshot_id).to_arrow()
    assert content(table) == expected(ends)


def test_run_upkeep_and_settings_from_config(catalog):
    cfg = {"krait.iceberg.compaction.target.file.bytes": 1 << 20, "krait.iceberg.compaction.min.input.files": 3,
           "krait.iceberg.snapshot.retention.ms": HOUR, "krait.iceberg.orphan.file.age.ms": DAY}
    s = UpkeepSettings.from_config(cfg)
    assert (s.target_file_bytes, s.min_input_files, s.snapshot_retention_ms, s.orphan_age_ms) == (1 << 20, 3, HOUR, DAY)
    w = TableWriter(catalog, "all")
    ends = fill(w, 4, 10)
    table = w.refresh()
    report = run_upkeep(table, int(time.time() * 1000) + 2 * DAY, s)
    assert report.files_rewritten == 8 and report.snapshots_expired == 3
    assert table.properties["write.metadata.delete-after-commit.enabled"] == "true"
    assert table.properties["commit.retry.num-retries"] == "0"
    assert content(table) == expected(ends)
    assert snapshot_offsets(table) == ends
    # the driver's call: by topic, on the catalog; a topic without a table yet is None
    assert run_topic_upkeep(catalog, "all", settings=s) is not None
    assert run_topic_upkeep(catalog, "no.table.yet", settings=s) is None


@pytest.mark.skipif(not os.environ.get("KRAIT_UPKEEP_MEASURE"), reason="a measurement: KRAIT_UPKEEP_MEASURE=1")
def test_measure_scan_before_and_after(catalog):
    """The figures of the module doc: 360 commits of 1,000 rows, scanned before and after."""
    w = TableWriter(catalog, "measure")
    table = w.table
    for i in range(360):  # what the writer commits, through the transaction that does not copy metadata
        tx = LeanTransaction(table)
        tx.append(rows(0, i * 1000, 1000, value_bytes=100)[0], snapshot_properties={"krait.offset.0": str(i * 1000 + 1000)})
        tx.commit_transaction()
    assert snapshot_offsets(table.refresh()) == {0: 360_000}

    def scan_s() -> float:
        times = []
        for _ in range(3):
            t0 = time.perf_counter()
            n = table.scan().to_arrow().num_rows
            times.append(time.perf_counter() - t0)
            assert n == 360_000
        return statistics.median(times)

    files_before, before = len(data_files(table)), scan_s()
    sizes = [t.file.file_size_in_bytes for t in table.scan().plan_files()]
    t0 = time.perf_counter()
    report = compact(table, TS, UpkeepSettings())
    took = time.perf_counter() - t0
    table.refresh()
    files_after, after = len(data_files(table)), scan_s()
    print(f"\nbefore: {files_before} files (median {statistics.median(sizes)} B), scan {before:.3f} s; "
          f"after: {files_after} files ({report.bytes_written} B), scan {after:.3f} s; compaction {took:.3f} s")
    assert files_after == 1 and content(table) == [(0, o, v) for o, v in enumerate(
        [(b"p0-o%d-" % o).ljust(100, b"x") for o in range(360_000)])]
