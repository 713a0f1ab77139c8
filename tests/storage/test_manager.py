import os
import uuid

import pytest

from protocol.records import iter_headers
from storage import checkpoints as ck
from storage.config import LogConfig
from storage.manager import LogManager, read_partition_metadata

from .helpers import append, batch, read_all


def test_create_load_shutdown_cycle(tmp_path):
    dirs = [str(tmp_path / "d1"), str(tmp_path / "d2")]
    m = LogManager(dirs, LogConfig(segment_bytes=2000))
    m.load()
    tid = uuid.UUID("12345678-1234-5678-1234-567812345678")
    logs = [m.create("orders", p, topic_id=tid) for p in range(4)]
    assert {os.path.dirname(pl.dir) for pl in logs} == set(dirs)  # spread over dirs
    meta = open(os.path.join(logs[0].dir, "partition.metadata")).read()
    assert meta == "version: 0\ntopic_id: EjRWeBI0VngSNFZ4EjRWeA\n"
    assert read_partition_metadata(logs[0].dir) == tid
    for pl in logs:
        for _ in range(20):
            append(pl, batch(2, value_size=60))
    m.get("orders", 1).delete_records_before(4)
    m.shutdown()
    for d in dirs:
        assert os.path.exists(os.path.join(d, ck.CLEAN_SHUTDOWN))
        rp = ck.read_checkpoint(os.path.join(d, ck.RECOVERY_POINT))
        assert set(rp.values()) == {40}
        assert os.path.exists(os.path.join(d, ck.REPLICATION_OFFSET))
    starts = {}
    for d in dirs:
        starts.update(ck.read_checkpoint(os.path.join(d, ck.LOG_START_OFFSET)))
    assert starts == {("orders", 1): 4}

    m2 = LogManager(dirs, LogConfig(segment_bytes=2000))
    m2.load()
    for d in dirs:
        assert not os.path.exists(os.path.join(d, ck.CLEAN_SHUTDOWN))  # removed: a crash is detectable
        assert m2.had_clean_shutdown[d]
    assert sorted(m2.partitions()) == [("orders", p) for p in range(4)]
    assert m2.get("orders", 1).log_start_offset == 4
    assert m2.get("orders", 2).log_end_offset == 40
    assert m2.get("orders", 0).topic_id == tid
    assert m2.get("nope", 0) is None
    assert m2.delete_topic("orders") == 4
    assert m2.partitions() == {}
    assert not any(n.startswith("orders") for d in dirs for n in os.listdir(d))


def test_unclean_restart_recovers(tmp_path):
    m = LogManager([str(tmp_path)], LogConfig())
    m.load()
    pl = m.create("t", 0)
    for _ in range(10):
        append(pl, batch(1))
    m.checkpoint()
    for seg in pl.segments:
        seg.offset_index.flush()
    with open(pl.active_segment.log_path, "ab") as f:
        f.write(b"\x00garbage-tail")
    m._unlock()  # what the kernel does for a crashed process
    m2 = LogManager([str(tmp_path)], LogConfig())
    m2.load()
    assert not m2.had_clean_shutdown[str(tmp_path)]
    assert m2.get("t", 0).log_end_offset == 10
    assert len(read_all(m2.get("t", 0))) == 10


def test_tasks_retention_flush_cleaner(tmp_path):
    now = [1000.0]
    m = LogManager([str(tmp_path)], LogConfig(segment_bytes=1000, retention_ms=60_000, file_delete_delay_ms=0),
                   clock=lambda: now[0])
    m.load()
    pl = m.create("logs", 0)
    co = m.create("__consumer_offsets", 0, LogConfig(segment_bytes=1000, cleanup_policy=frozenset({"compact"})))
    for i in range(30):
        append(pl, batch(1, value_size=100, ts=1_000_000))
        append(co, batch(1, keys=[b"\x00\x01g%d" % (i % 3)], values=[b"x" * 80], ts=1_000_000))
    assert m.run_flush() == 0
    assert pl.recovery_point == pl.active_segment.base_offset  # rolled segments fsynced
    assert m.run_cleaner() > 0
    assert len({r.key for r in read_all(co)}) == 3
    assert m.cleaner_offset("__consumer_offsets", 0) > 0
    m.checkpoint()
    assert ck.read_checkpoint(str(tmp_path / ck.CLEANER_OFFSET))
    now[0] = 1000.0 + 120
    assert m.run_retention() > 0
    assert pl.log_start_offset == 30 and pl.log_end_offset == 30
    assert not any(n.endswith(".deleted") for n in os.listdir(pl.dir))
    m.shutdown()


def _crashed_with_damage_below_the_recovery_point(log_dir: str) -> tuple[int, int]:
    """A log dir left by a crash: t-0 holds offsets 0-29 from log start 3, flushed and
    checkpointed (recovery point 30), then a byte of its second segment flips. Returns
    (log end offset, offset of the damaged batch)."""
    m = LogManager([log_dir], LogConfig(segment_bytes=1000))
    m.load()
    plog = m.create("t", 0)
    for _ in range(30):
        append(plog, batch(1, value_size=100))
    plog.delete_records_before(3)
    seg = plog.segments[1]
    assert plog.segments[0].base_offset == 0 and len(plog.segments) > 2
    with open(seg.log_path, "rb") as f:
        damaged = next(h for pos, h in iter_headers(f.read()) if pos <= 300 < pos + h.size)
    _crash(m)
    m.checkpoint()
    assert ck.read_checkpoint(os.path.join(log_dir, ck.RECOVERY_POINT)) == {("t", 0): 30}
    with open(seg.log_path, "r+b") as f:
        f.seek(300)
        b = f.read(1)
        f.seek(300)
        f.write(bytes([b[0] ^ 0xFF]))
    return plog.log_end_offset, damaged.base_offset


def test_bad_checkpoint_is_ignored(tmp_path, caplog):
    """A checkpoint that does not parse counts as absent, whole (as in Kafka's LogManager),
    and start-up goes on: recovery from offset 0 (every segment re-checked after the
    crash) and no log start offset."""
    good, bad = str(tmp_path / "good"), str(tmp_path / "bad")
    # with its checkpoints, the crashed log is trusted up to its recovery point
    end, _ = _crashed_with_damage_below_the_recovery_point(good)
    m = LogManager([good], LogConfig(segment_bytes=1000))
    m.load()
    plog = m.get("t", 0)
    assert (plog.log_start_offset, plog.log_end_offset) == (3, end)
    m.shutdown()

    end, damaged = _crashed_with_damage_below_the_recovery_point(bad)
    # each holds the right entry for t-0, but the file as a whole does not parse
    for name, offset in ((ck.RECOVERY_POINT, 30), (ck.LOG_START_OFFSET, 3)):
        with open(os.path.join(bad, name), "w") as f:
            f.write(f"0\n2\nt 0 {offset}\nbroken\n")
    m = LogManager([bad], LogConfig(segment_bytes=1000))
    m.load()
    assert sum("ignoring checkpoint" in r.getMessage() for r in caplog.records) == 2
    plog = m.get("t", 0)
    # recovered from 0: truncated at the damaged batch, the segments after it dropped
    assert (plog.log_start_offset, plog.log_end_offset) == (0, damaged) and damaged < end
    assert [r.offset for r in read_all(plog)] == list(range(damaged))
    m.create("u", 0)
    m.shutdown()
    # the next checkpoints are whole again
    assert ck.read_checkpoint(os.path.join(bad, ck.RECOVERY_POINT)) == {("t", 0): damaged, ("u", 0): 0}


def test_checkpoint_format(tmp_path):
    p = str(tmp_path / "cp")
    ck.write_checkpoint(p, {("a", 1): 5, ("b-x", 0): 7})
    assert open(p).read() == "0\n2\na 1 5\nb-x 0 7\n"
    assert ck.read_checkpoint(p) == {("a", 1): 5, ("b-x", 0): 7}
    for bad in ("1\n0\n", "0\n2\na 1 5\n", "0\n1\na x 5\n", ""):
        with open(p, "w") as f:
            f.write(bad)
        with pytest.raises(ck.CheckpointError):
            ck.read_checkpoint(p)
    assert ck.read_checkpoint(str(tmp_path / "missing")) == {}


def test_config_from_props():
    cfg = LogConfig.from_props({"segment.bytes": "1048576", "cleanup.policy": "compact,delete",
                                "message.timestamp.type": "LogAppendTime", "retention.ms": "-1"})
    assert cfg.segment_bytes == 1048576 and cfg.compact and cfg.delete and cfg.log_append_time
    assert LogConfig().to_props()["segment.bytes"] == "1073741824"
    assert LogConfig().to_props()["cleanup.policy"] == "delete"
    assert LogConfig().to_props()["max.message.bytes"] == "1048588"
    for props, msg in [({"segment.bytes": "abc"}, "segment.bytes"), ({"segment.bytes": "1"}, "at least 14"),
                       ({"cleanup.policy": "keep"}, "compact, delete"), ({"bogus.key": "1"}, "Unknown topic config"),
                       ({"min.cleanable.dirty.ratio": "2"}, "between"), ({"preallocate": "yes"}, "true or false"),
                       ({"message.timestamp.type": "Now"}, "CreateTime")]:
        with pytest.raises(ValueError, match=msg):
            LogConfig.from_props(props)
    assert LogConfig.from_props({"bogus": "1"}, strict=False) == LogConfig()


def test_second_manager_on_same_dir_is_refused(tmp_path):
    import pytest

    from storage.config import LogConfig
    from storage.manager import LogDirLockedError, LogManager

    a = LogManager([str(tmp_path)], LogConfig())
    a.load()
    b = LogManager([str(tmp_path)], LogConfig())
    with pytest.raises(LogDirLockedError, match="lock"):
        b.load()
    a.shutdown()
    c = LogManager([str(tmp_path)], LogConfig())
    c.load()  # released at shutdown
    c.shutdown()


# --- moving a partition between log dirs (AlterReplicaLogDirs) -------------------------------


def _two_dirs(tmp_path, **cfg):
    dirs = [str(tmp_path / "a"), str(tmp_path / "b")]
    m = LogManager(dirs, LogConfig(segment_bytes=cfg.pop("segment_bytes", 1500), **cfg))
    m.load()
    return m, dirs


def _values(plog):
    return [(r.offset, r.value) for r in read_all(plog)]


def _move_fully(m, move):
    while m.plan_move(move) > 0:
        move.copy()
    return m.complete_move(move)


def test_move_partition_to_other_dir(tmp_path):
    from protocol.records import build_batch

    m, (a, b) = _two_dirs(tmp_path)
    tid = uuid.uuid4()
    plog = m.create("t", 0, topic_id=tid)
    assert m.log_dir_of("t", 0) == a
    for i in range(30):
        append(plog, bytearray(build_batch([(b"k", b"v%d" % i)], producer_id=7, producer_epoch=0, base_sequence=i)))
    plog.delete_records_before(3)
    before = _values(plog)
    assert len(plog.segments) > 1
    assert m.start_move("t", 0, a) is None  # already there: nothing to do

    move = m.start_move("t", 0, b)
    assert os.path.basename(move.dir).startswith("t-0.") and move.dir.endswith("-future")
    assert m.start_move("t", 0, b) is None  # same destination: the move in progress goes on
    assert m.plan_move(move) > 0
    move.copy()  # the bulk pass (a worker thread in the broker)
    assert move.size_bytes > 0 and move.log_end_offset == 30
    # appends during the copy reach the new dir through the final pass
    for i in range(30, 35):
        append(m.get("t", 0), bytearray(build_batch([(b"k", b"v%d" % i)], producer_id=7, producer_epoch=0,
                                                    base_sequence=i)))
    before = _values(m.get("t", 0))
    assert m.complete_move(move)
    moved = m.get("t", 0)
    assert m.log_dir_of("t", 0) == b and os.path.dirname(moved.dir) == b
    assert _values(moved) == before and moved.log_start_offset == 3 and moved.log_end_offset == 35
    assert moved.topic_id == tid and read_partition_metadata(moved.dir) == tid
    assert not os.path.exists(os.path.join(a, "t-0"))
    assert not [n for d in (a, b) for n in os.listdir(d) if n.endswith(("-future", "-delete"))]
    assert m.moves() == {}
    # checkpoints follow the partition
    assert ("t", 0) not in ck.read_checkpoint(os.path.join(a, ck.RECOVERY_POINT))
    assert ck.read_checkpoint(os.path.join(b, ck.LOG_START_OFFSET)) == {("t", 0): 3}
    # the producer state came along: the next sequence is accepted, a duplicate is detected
    dup = append(moved, bytearray(build_batch([(b"k", b"v34")], producer_id=7, producer_epoch=0, base_sequence=34)))
    assert dup.duplicate
    append(moved, batch(1))
    m.shutdown()

    m2 = LogManager([a, b], LogConfig(segment_bytes=1500))
    m2.load()
    assert m2.log_dir_of("t", 0) == b and m2.get("t", 0).log_end_offset == 36
    assert _values(m2.get("t", 0))[:32] == before
    m2.shutdown()


def test_move_errors_and_cancel(tmp_path):
    from storage.manager import LogDirNotFoundError

    m, (a, b) = _two_dirs(tmp_path)
    plog = m.create("t", 0)
    append(plog, batch(5))
    with pytest.raises(LogDirNotFoundError):
        m.start_move("t", 0, str(tmp_path / "elsewhere"))
    with pytest.raises(KeyError):
        m.start_move("nope", 0, b)
    move = m.start_move("t", 0, b)
    m.plan_move(move)
    move.copy()
    # moving back to where it is cancels the move in progress (Kafka removes the future replica)
    assert m.start_move("t", 0, a) is None
    assert move.cancelled and not os.path.exists(move.dir) and m.moves() == {}
    assert not m.complete_move(move) and m.log_dir_of("t", 0) == a
    # deleting the topic cancels its move too
    move = m.start_move("t", 0, b)
    m.delete_topic("t")
    assert move.cancelled and not [n for n in os.listdir(b) if n.startswith("t-")]
    m.shutdown()


def _crash(m):
    for plog in m.partitions().values():
        plog.flush()
    m._unlock()  # what the kernel does for a crashed process


def test_leftover_future_dir_is_discarded_when_current_exists(tmp_path):
    m, (a, b) = _two_dirs(tmp_path)
    plog = m.create("t", 0)
    for _ in range(20):
        append(plog, batch(1))
    move = m.start_move("t", 0, b)
    m.plan_move(move)
    move.copy()
    _crash(m)  # before the commit: the source is still the partition

    m2 = LogManager([a, b], LogConfig(segment_bytes=1500))
    m2.load()
    assert m2.log_dir_of("t", 0) == a and m2.get("t", 0).log_end_offset == 20
    assert not os.path.exists(move.dir) and not [n for n in os.listdir(b) if n.startswith("t-0")]
    m2.shutdown()


def test_committed_future_dir_is_completed_at_startup(tmp_path):
    m, (a, b) = _two_dirs(tmp_path)
    plog = m.create("t", 0)
    for _ in range(20):
        append(plog, batch(1))
    expected = _values(plog)
    move = m.start_move("t", 0, b)
    while m.plan_move(move) > 0:
        move.copy()
    # the crash hits between the two renames of complete_move: the source is already a
    # -delete dir, the copy is still named -future
    plog.flush()
    plog.close()
    move.plan(plog, final=True)
    move.copy()
    move.sync_dir()
    m._checkpoint_dir(b, {("t", 0): plog})
    os.replace(plog.dir, os.path.join(a, "t-0.0123456789abcdef0123456789abcdef-delete"))
    m._unlock()

    m2 = LogManager([a, b], LogConfig(segment_bytes=1500))
    m2.load()
    assert m2.log_dir_of("t", 0) == b and _values(m2.get("t", 0)) == expected
    assert not [n for d in (a, b) for n in os.listdir(d) if n.endswith(("-future", "-delete"))]
    m2.shutdown()


def test_move_follows_retention_during_the_copy(tmp_path):
    m, (a, b) = _two_dirs(tmp_path, file_delete_delay_ms=0)
    plog = m.create("t", 0)
    for _ in range(40):
        append(plog, batch(1, value_size=100))
    move = m.start_move("t", 0, b)
    m.plan_move(move)
    move.copy()
    first = os.path.basename(plog.segments[0].log_path)
    assert os.path.exists(os.path.join(move.dir, first))
    plog.delete_records_before(plog.segments[1].base_offset)  # the first segment goes
    plog.delete_pending(force=True)
    expected = _values(plog)
    assert m.complete_move(move)
    moved = m.get("t", 0)
    assert first not in os.listdir(moved.dir) and _values(moved) == expected
    assert moved.size_bytes == sum(os.path.getsize(os.path.join(moved.dir, n)) for n in os.listdir(moved.dir)
                                   if n.endswith(".log"))
    m.shutdown()


def test_failed_copy_leaves_the_partition_where_it_was(tmp_path, monkeypatch):
    import errno

    import storage.log_dir_move as log_dir_move

    m, (a, b) = _two_dirs(tmp_path)
    plog = m.create("t", 0)
    for _ in range(20):
        append(plog, batch(1))
    expected = _values(plog)
    move = m.start_move("t", 0, b)

    def disk_full(*args):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(log_dir_move, "_copy_range", disk_full)
    assert not m.complete_move(move)
    monkeypatch.undo()
    again = m.get("t", 0)
    assert m.log_dir_of("t", 0) == a and again.dir == os.path.join(a, "t-0") and _values(again) == expected
    append(again, batch(1))  # reopened and writable
    assert not [n for n in os.listdir(b) if n.startswith("t-0")]
    m.shutdown()


def test_failure_after_the_commit_is_settled_at_the_next_start(tmp_path, monkeypatch):
    from storage.errors import KafkaStorageError

    m, (a, b) = _two_dirs(tmp_path)
    plog = m.create("t", 0)
    for _ in range(20):
        append(plog, batch(1))
    expected = _values(plog)
    move = m.start_move("t", 0, b)
    real_replace = os.replace

    def replace(src, dst):
        if str(src).endswith("-future"):
            raise OSError(5, "Input/output error")
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    assert not m.complete_move(move)
    monkeypatch.undo()
    # nothing may be written until a restart settles which copy is the partition
    with pytest.raises(KafkaStorageError):
        append(m.get("t", 0), batch(1))
    assert os.path.isdir(move.dir)  # the committed copy is kept
    m.shutdown()

    m2 = LogManager([a, b], LogConfig(segment_bytes=1500))
    m2.load()
    assert m2.log_dir_of("t", 0) == b and _values(m2.get("t", 0)) == expected
    assert not [n for d in (a, b) for n in os.listdir(d) if n.endswith(("-future", "-delete"))]
    m2.shutdown()


def test_high_watermark_checkpoint_alone(tmp_path):
    """replication-offset-checkpoint on its own schedule (Kafka's
    replica.high.watermark.checkpoint.interval.ms): only that file is written."""
    m = LogManager([str(tmp_path)], LogConfig())
    m.load()
    pl = m.create("t", 0)
    for _ in range(3):
        append(pl, batch(2))
    m.checkpoint_high_watermarks()
    assert ck.read_checkpoint(os.path.join(str(tmp_path), ck.REPLICATION_OFFSET)) == {("t", 0): 6}
    assert not os.path.exists(os.path.join(str(tmp_path), ck.RECOVERY_POINT))
    m.shutdown()
