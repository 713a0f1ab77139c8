"""Transactions across the life of a log: crash recovery, truncation, follower appends,
compaction, retention and log-dir moves keep the ``.txnindex`` files, the open
transactions and the LSO right."""

from __future__ import annotations

import os

import pytest

from protocol.records import ATTR_DELETE_HORIZON, iter_headers, iter_records
from storage.cleaner import clean_log, first_uncleanable_offset
from storage.config import LogConfig
from storage.log import PartitionLog
from storage.manager import LogManager
from storage.txn_index import AbortedTxn

from .helpers import append, batch, open_log
from .test_transactions import end, txn

CFG = LogConfig(segment_bytes=700)


def history(plog: PartitionLog) -> dict[str, int]:
    """Three producers, commits and aborts over several segments; pid 3 stays open.
    Returns the first offsets of the transactions by name."""
    first = {}
    first["A"] = append(plog, txn(1, 0, 2)).base_offset
    append(plog, batch(1, value_size=150))
    first["B"] = append(plog, txn(2, 0)).base_offset
    end(plog, 1, commit=False)  # A aborted while B is open
    append(plog, batch(1, value_size=150))
    first["C"] = append(plog, txn(3, 0)).base_offset  # never ends
    end(plog, 2, commit=True)
    first["D"] = append(plog, txn(1, 2, 2)).base_offset
    for _ in range(3):
        append(plog, batch(1, value_size=150))
    end(plog, 1, commit=False)
    first["E"] = append(plog, txn(2, 1)).base_offset
    end(plog, 2, commit=False, coord=1)
    return first


def state(plog: PartitionLog) -> dict:
    ps = plog.producer_state
    return dict(
        index=[(s.base_offset, s.txn_index.all_aborted_txns()) for s in plog.segments],
        files={n: open(os.path.join(plog.dir, n), "rb").read() for n in os.listdir(plog.dir) if n.endswith(".txnindex")},
        lso=plog.last_stable_offset, fuo=plog.first_unstable_offset, leo=plog.log_end_offset,
        ongoing=dict(ps.ongoing), aborted=plog.collect_aborted_transactions(plog.log_start_offset, plog.log_end_offset),
        producers={pid: (e.epoch, e.last_seq, e.coordinator_epoch, e.current_txn_first_offset)
                   for pid, e in ps.producers.items()},
    )


def _unlink_matching(d: str, suffix: str, only: str | None = None) -> None:
    for n in os.listdir(d):
        if n.endswith(suffix) and (only is None or n.startswith(only)):
            os.unlink(os.path.join(d, n))


def test_history_is_what_kafka_would_index(tmp_path):
    plog = open_log(tmp_path, CFG)
    f = history(plog)
    s = state(plog)
    assert len(plog.segments) >= 3
    entries = [t for _, ts in s["index"] for t in ts]
    assert [(t.producer_id, t.first_offset) for t in entries] == [(1, f["A"]), (1, f["D"]), (2, f["E"])]
    assert entries[0].last_stable_offset == f["B"]  # B was open when A aborted
    assert entries[1].last_stable_offset == f["C"] and entries[2].last_stable_offset == f["C"]
    assert s["lso"] == s["fuo"] == f["C"] and s["ongoing"] == {f["C"]: 3}
    assert s["producers"][2] == (0, 1, 1, -1)


@pytest.mark.parametrize("case", ["everything-lost", "snapshots-lost", "active-index-lost", "nothing-lost"])
def test_crash_recovery_rebuilds_txn_index_and_lso(tmp_path, case):
    plog = open_log(tmp_path, CFG)
    history(plog)
    want = state(plog)
    # the segment holding the last abort marker is the one a crash leaves unflushed
    rp = plog.segments[-1].base_offset
    if case == "everything-lost":
        rp = 0
        _unlink_matching(plog.dir, ".txnindex")
        _unlink_matching(plog.dir, ".snapshot")
    elif case == "snapshots-lost":
        _unlink_matching(plog.dir, ".snapshot")  # pid 3's transaction opened segments ago: a full replay finds it
    elif case == "active-index-lost":
        _unlink_matching(plog.dir, ".txnindex", only=f"{rp:020d}")
    # no close(): the crash; the clean-shutdown marker is gone
    again = open_log(tmp_path, CFG, clean_shutdown=False, recovery_point=rp)
    assert state(again) == want
    again.close()
    assert state(open_log(tmp_path, CFG)) == want


def test_recovery_of_a_torn_marker_reopens_its_transaction(tmp_path):
    plog = open_log(tmp_path, CFG)
    f = history(plog)
    seg = plog.segments[-1]
    marker = plog.log_end_offset - 1
    assert seg.txn_index.all_aborted_txns()[-1] == AbortedTxn(2, f["E"], marker, f["C"])
    os.truncate(seg.log_path, seg.size - 5)  # the ABORT marker of E is torn
    again = open_log(tmp_path, CFG, clean_shutdown=False, recovery_point=seg.base_offset)
    assert again.log_end_offset == marker
    assert again.producer_state.ongoing == {f["C"]: 3, f["E"]: 2}
    assert (2, f["E"]) not in again.collect_aborted_transactions(0, marker)
    assert again.has_ongoing_transaction(2) and again.last_stable_offset == f["C"]
    end(again, 2, commit=True, coord=1)  # the coordinator finishes it its own way
    assert again.producer_state.ongoing == {f["C"]: 3}


def test_truncate_to_drops_later_txn_index_entries(tmp_path):
    plog = open_log(tmp_path, CFG)
    f = history(plog)
    marker_e = plog.log_end_offset - 1
    plog.truncate_to(marker_e)
    assert [t.producer_id for _, ts in state(plog)["index"] for t in ts] == [1, 1]
    assert plog.producer_state.ongoing == {f["C"]: 3, f["E"]: 2}
    plog.truncate_to(f["D"] + 2)  # after D's data: its marker and everything later go, D is open again
    assert [t.first_offset for _, ts in state(plog)["index"] for t in ts] == [f["A"]]
    assert plog.producer_state.ongoing == {f["C"]: 3, f["D"]: 1}
    assert plog.last_stable_offset == f["C"]
    want = state(plog)
    plog.close()
    assert state(open_log(tmp_path, CFG)) == want
    plog = open_log(tmp_path, CFG)
    plog.truncate_to(f["C"])  # C's data and B's COMMIT go: B is open again
    assert plog.producer_state.ongoing == {f["B"]: 2}
    assert plog.last_stable_offset == plog.first_unstable_offset == f["B"] and plog.log_end_offset == f["C"]
    plog.truncate_to(f["B"])  # A's ABORT came after B started: A is open again, unindexed
    assert plog.producer_state.ongoing == {f["A"]: 1} and plog.last_stable_offset == f["A"]
    assert [t for _, ts in state(plog)["index"] for t in ts] == [] and state(plog)["files"] == {
        f"{0:020d}.txnindex": b""}
    plog.truncate_to(f["A"])
    assert plog.first_unstable_offset is None and plog.last_stable_offset == plog.log_end_offset == 0


def _replicate(leader: PartitionLog, follower: PartitionLog, max_bytes: int) -> None:
    while follower.log_end_offset < leader.log_end_offset:
        region = leader.read(follower.log_end_offset, max_bytes, max_offset=leader.high_watermark)
        follower.append_as_follower(region.read())


def test_follower_append_matches_the_leader(tmp_path):
    leader = PartitionLog(str(tmp_path / "leader" / "t-0"), "t", 0, CFG)
    history(leader)
    follower = PartitionLog(str(tmp_path / "follower" / "t-0"), "t", 0, CFG, replicated=True, high_watermark=0)
    _replicate(leader, follower, 250)
    assert [s.base_offset for s in follower.segments] == [s.base_offset for s in leader.segments]
    # the follower's LSO waits for its high watermark
    assert follower.last_stable_offset == 0
    follower.update_high_watermark(leader.high_watermark)
    assert state(follower) == state(leader)
    # and it survives a restart (snapshots and indexes written by the follower)
    follower.close()
    again = PartitionLog(str(tmp_path / "follower" / "t-0"), "t", 0, CFG)
    assert state(again) == state(leader)


def _records(plog: PartitionLog) -> list[tuple]:
    """(offset, key, value, control) of every record, markers included."""
    out = []
    off = plog.log_start_offset
    while off < plog.log_end_offset:
        region = plog.read(off, 1 << 20)
        data = region.read()
        for pos, h in iter_headers(data):
            out += [(r.offset, r.key, r.value, h.is_control) for r in iter_records(data, pos)]
            off = h.next_offset
    return out


def test_cleaner_drops_aborted_records_and_retires_markers(tmp_path):
    cfg = LogConfig(segment_bytes=400, cleanup_policy=("compact",), delete_retention_ms=1000)
    plog = open_log(tmp_path, cfg, clock=lambda: 10.0)
    append(plog, txn(1, 0, key=b"a"))  # a=v0, committed
    commit_at = end(plog, 1, commit=True).base_offset
    aborted_first = append(plog, txn(1, 1, key=b"a")).base_offset  # a=v1 then aborted: must not hide a=v0
    append(plog, txn(1, 2, key=b"b"))
    abort_at = end(plog, 1, commit=False).base_offset
    for i in range(6):
        append(plog, batch(1, keys=[b"f%d" % i], value_size=100))
    plog.roll()
    assert len(plog.segments) > 2
    now = 10_000
    assert clean_log(plog, now) is not None
    recs = _records(plog)
    data = {k: v for _, k, v, control in recs if not control}
    assert data[b"a"] == b"v0" and b"b" not in data and b"v1" not in data.values()
    assert [o for o, _, _, control in recs if control] == [commit_at, abort_at]  # markers kept
    # the kept ABORT marker's transaction is in the cleaned segment's index
    assert [t for s in plog.segments for t in s.txn_index.all_aborted_txns()] == [
        AbortedTxn(1, aborted_first, abort_at, abort_at + 1)]

    # next pass: no data of the aborted transaction is left, its marker gets a delete horizon
    clean_log(plog, now)
    headers = {h.base_offset: h for s in plog.segments for _, h in s.iter_headers()}
    assert headers[abort_at].attributes & ATTR_DELETE_HORIZON and headers[abort_at].base_timestamp == now + 1000
    assert not headers[commit_at].attributes & ATTR_DELETE_HORIZON  # a=v0 of its transaction is still there
    assert [t for s in plog.segments for t in s.txn_index.all_aborted_txns()] == []
    clean_log(plog, now + 999)
    assert abort_at in [o for o, *_ in _records(plog)]
    # after the horizon, the marker goes
    clean_log(plog, now + 1000)
    assert abort_at not in [o for o, *_ in _records(plog)] and commit_at in [o for o, *_ in _records(plog)]
    assert {k: v for _, k, v, c in _records(plog) if not c}[b"a"] == b"v0"
    # everything survives a restart (the cleaned segments' files were swapped in whole)
    plog.close()
    again = open_log(tmp_path, cfg, clock=lambda: 10.0)
    assert _records(again) == _records(plog)


def test_open_transaction_bounds_the_cleaner(tmp_path):
    cfg = LogConfig(segment_bytes=400, cleanup_policy=("compact",))
    plog = open_log(tmp_path, cfg)
    for _i in range(3):
        append(plog, batch(1, keys=[b"x"], value_size=100))
    first = append(plog, txn(4, 0, key=b"x")).base_offset
    for _i in range(8):
        append(plog, batch(1, keys=[b"x"], value_size=100))
    plog.roll()
    assert plog.last_stable_offset == first
    assert first_uncleanable_offset(plog, 0) == first
    clean_log(plog, 0)
    assert first in [o for o, *_ in _records(plog)]  # the open transaction's data is untouched


def test_retention_and_delete_records_take_the_txn_index_along(tmp_path):
    cfg = LogConfig(segment_bytes=500, file_delete_delay_ms=0)
    plog = open_log(tmp_path, cfg)
    append(plog, txn(1, 0))
    end(plog, 1, commit=False)
    first_seg = plog.segments[0]
    for _i in range(8):
        append(plog, batch(1, value_size=100))
    name = os.path.basename(first_seg.txn_index.path)
    assert os.path.exists(first_seg.txn_index.path)
    plog.delete_records_before(plog.segments[2].base_offset)
    assert name + ".deleted" in os.listdir(plog.dir) and name not in os.listdir(plog.dir)
    plog.delete_pending(force=True)
    assert not [n for n in os.listdir(plog.dir) if "txnindex" in n]
    assert plog.collect_aborted_transactions(plog.log_start_offset, plog.log_end_offset) == []


def test_log_dir_move_copies_the_txn_index(tmp_path):
    dirs = [str(tmp_path / "a"), str(tmp_path / "b")]
    m = LogManager(dirs, CFG)
    m.load()
    plog = m.create("t", 0)
    f = history(plog)
    want = state(plog)
    move = m.start_move("t", 0, dirs[1])
    while m.plan_move(move) > 0:
        move.copy()
    assert m.complete_move(move)
    moved = m.get("t", 0)
    assert os.path.dirname(moved.dir) == dirs[1]
    assert state(moved) == want
    end(moved, 3, commit=False)
    assert (3, f["C"]) in moved.collect_aborted_transactions(0, moved.log_end_offset)
    m.shutdown()


def test_manager_restart_after_a_crash_without_snapshots(tmp_path):
    """The whole broker path: no clean-shutdown marker, snapshots lost, a torn tail."""
    d = str(tmp_path / "logs")
    m = LogManager([d], CFG)
    m.load()
    plog = m.create("t", 0)
    f = history(plog)
    append(plog, txn(1, 4))  # pid 1 opens another transaction in the active segment
    want = state(plog)
    m.checkpoint()
    _unlink_matching(plog.dir, ".snapshot")
    with open(plog.active_segment.log_path, "ab") as fh:
        fh.write(b"\x00torn")
    m._unlock()  # the crash
    m2 = LogManager([d], CFG)
    m2.load()
    assert not m2.had_clean_shutdown[d]
    again = m2.get("t", 0)
    assert state(again) == want
    assert again.producer_state.ongoing == {f["C"]: 3, want["leo"] - 1: 1}
    m2.shutdown()
