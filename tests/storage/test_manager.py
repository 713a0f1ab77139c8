import os
import uuid

import pytest

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


def test_bad_checkpoint_is_ignored(tmp_path):
    with open(tmp_path / ck.RECOVERY_POINT, "w") as f:
        f.write("0\n5\nbroken\n")
    m = LogManager([str(tmp_path)], LogConfig())
    m.load()
    m.create("t", 0)
    m.shutdown()


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
