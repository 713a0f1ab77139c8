"""tables.writer: exactly-once appends, read back by pyiceberg; restarts; concurrent writers."""

from __future__ import annotations

import threading

import pyarrow.compute as pc
import pytest

from protocol.compression import Codec
from protocol.records import build_batch, build_end_txn_marker
from tables.catalog import open_catalog
from tables.records import region_to_arrow
from tables.writer import OFFSET_PREFIX, TableWriter

TS = 1_700_000_000_000
HOUR = 3_600_000


def region(partition, start, n, *, per_batch=10, codec=Codec.NONE, ts=TS):
    """Rows of offsets [start, start + n) of ``partition``, values naming both."""
    bufs = []
    for base in range(start, start + n, per_batch):
        k = min(per_batch, start + n - base)
        bufs.append(build_batch([(b"k%d" % (base + i), b"p%d-o%d" % (partition, base + i), [("h", b"x")])
                                 for i in range(k)], base_offset=base, timestamp=[ts + (base + i) * 1000
                                                                                  for i in range(k)],
                                compression=codec))
    return region_to_arrow(b"".join(bufs), partition, start_offset=start)


def scan(writer):
    t = writer.refresh().scan().to_arrow().sort_by([("partition", "ascending"), ("offset", "ascending")])
    return t


@pytest.fixture
def catalog(tmp_path):
    return open_catalog(str(tmp_path / "logs"))


def test_append_reads_back_exactly(catalog):
    w = TableWriter(catalog, "orders.v1")
    assert w.committed_offsets() == {}
    r0, r1 = region(0, 0, 100), region(1, 0, 50, codec=Codec.ZSTD, ts=TS + 5 * HOUR)
    assert w.append({0: r0, 1: r1}) == {0: 100, 1: 50}
    t = scan(w)
    assert t.num_rows == 150
    assert t.to_pylist() == r0.table.to_pylist() + r1.table.to_pylist()
    snap = w.table.current_snapshot()
    assert {k: v for k, v in snap.summary.additional_properties.items() if k.startswith(OFFSET_PREFIX)} == {
        "krait.offset.0": "100", "krait.offset.1": "50"}
    assert len(w.table.snapshots()) == 1  # both partitions in one snapshot
    # partitioned by partition and hour: files under each
    paths = [task.file.file_path for task in w.table.scan().plan_files()]
    assert any("partition=0/timestamp_hour=" in p for p in paths) and any("partition=1/" in p for p in paths)
    # the next append carries the offsets of the partition not written
    w.append({0: region(0, 100, 20)})
    assert w.committed_offsets() == {0: 120, 1: 50}
    assert scan(w).num_rows == 170
    # pyiceberg filters by the columns too
    assert w.table.scan(row_filter="partition = 1 and offset >= 40").to_arrow().num_rows == 10


def test_restart_resumes_and_never_writes_a_row_twice(catalog, tmp_path):
    w = TableWriter(catalog, "t")
    w.append({0: region(0, 0, 30)})
    # a restart: a new catalog and writer on the same files
    w2 = TableWriter(open_catalog(str(tmp_path / "logs")), "t")
    assert w2.committed_offsets() == {0: 30}
    # a writer that re-reads from before the committed offset (a crash between commit and
    # bookkeeping): the rows already there are dropped
    assert w2.append({0: region(0, 20, 20)}) == {0: 40}
    # the same batch again: nothing new, no snapshot
    n = len(w2.table.snapshots())
    assert w2.append({0: region(0, 20, 20)}) is None and len(w2.refresh().snapshots()) == n
    offs = scan(w2)["offset"].to_pylist()
    assert offs == list(range(40))


def test_offsets_move_without_rows(catalog):
    """A region of only control batches (or aborted records) moves the offset alone."""
    w = TableWriter(catalog, "t")
    w.append({0: region(0, 0, 5)})
    buf = build_batch([(b"k", b"gone")], base_offset=5, timestamp=TS, producer_id=9, producer_epoch=0,
                      base_sequence=0, transactional=True) + build_end_txn_marker(
        producer_id=9, producer_epoch=0, coordinator_epoch=0, commit=False, timestamp=TS, base_offset=6)
    r = region_to_arrow(buf, 0, aborted=[(9, 5)], start_offset=5)
    assert r.table.num_rows == 0 and r.next_offset == 7
    assert w.append({0: r}) == {0: 7}
    assert w.committed_offsets() == {0: 7} and scan(w).num_rows == 5


def test_two_writers_on_different_partitions_commit_concurrently(tmp_path):
    """Two brokers (own catalog, own writer) on partitions 0 and 1 of one table, racing to
    create it and then to commit: nothing lost, nothing twice, every snapshot's offsets
    right."""
    logs = str(tmp_path / "logs")
    open_catalog(logs)  # the catalog database itself exists before (each broker's start-up makes it)
    rounds, per = 15, 20
    errors = []
    writers = {}
    start = threading.Barrier(2)

    def run(p):
        try:
            start.wait()
            w = writers[p] = TableWriter(open_catalog(logs), "shared")
            for i in range(rounds):
                w.append({p: region(p, i * per, per)})
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=run, args=(p,)) for p in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    w = writers[0]
    assert w.committed_offsets() == {0: rounds * per, 1: rounds * per}
    t = scan(w)
    for p in (0, 1):
        offs = t.filter(pc.equal(t["partition"], p))["offset"].to_pylist()
        assert offs == list(range(rounds * per))
    # every snapshot says exactly what it holds
    table = w.table
    for snap in table.snapshots():
        held = table.scan(snapshot_id=snap.snapshot_id).to_arrow()
        props = snap.summary.additional_properties
        for p in (0, 1):
            n = pc.sum(pc.equal(held["partition"], p)).as_py() or 0
            assert int(props.get(f"{OFFSET_PREFIX}{p}", 0)) == n
    print(f"conflicts retried: {writers[0].conflicts + writers[1].conflicts}")


def test_a_leadership_change_overlap_is_not_written_twice(catalog):
    """The old leader committed part of what the new leader now appends: a commit conflict
    makes the new one drop those rows."""
    old = TableWriter(catalog, "t")
    new = TableWriter(catalog, "t")
    new.committed_offsets()  # the new leader looked before the old one's last commit
    old.append({0: region(0, 0, 30)})
    assert new.append({0: region(0, 0, 50)}) == {0: 50}
    assert new.conflicts == 1
    assert scan(new)["offset"].to_pylist() == list(range(50))


def test_append_and_commit_rate(catalog):
    w = TableWriter(catalog, "rate")
    r = region(0, 0, 100_000, per_batch=500)
    import time

    t0 = time.perf_counter()
    w.append({0: r})
    rate = 100_000 / (time.perf_counter() - t0)
    print(f"append+commit: {rate:,.0f} records/s")
    assert scan(w).num_rows == 100_000


def test_pyiceberg_commit_retry_is_turned_off(catalog):
    """pyiceberg's own retry would re-apply stale offsets over another writer's commit."""
    w = TableWriter(catalog, "t")
    assert w.table.properties["commit.retry.num-retries"] == "0"
    w.table.transaction().set_properties({"commit.retry.num-retries": "4"}).commit_transaction()
    assert TableWriter(catalog, "t").table.properties["commit.retry.num-retries"] == "0"
