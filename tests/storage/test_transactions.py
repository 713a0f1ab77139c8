"""Transactions in a partition log: the LSO, COMMIT/ABORT markers, the aborted-transaction
index, epoch fencing, verification guards and the producer-state snapshots."""

from __future__ import annotations

import os
import struct

import pytest
from crc32c import crc32c

from protocol.errors import ErrorCode
from protocol.records import build_batch, build_end_txn_marker, iter_headers, parse_control_batch, validate_batches
from storage.config import LogConfig
from storage.errors import (
    InvalidProducerEpochError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
    TransactionCoordinatorFencedError,
)
from storage.producer_state import read_snapshot
from storage.transactions import SENTINEL_GUARD
from storage.txn_index import AbortedTxn

from .helpers import append, batch, open_log


def txn(pid: int, seq: int, n: int = 1, *, epoch: int = 0, key: bytes = b"k", ts: int = 1000) -> bytearray:
    """A transactional data batch of ``n`` records from producer ``pid``."""
    return bytearray(build_batch([(key, b"v%d" % (seq + i)) for i in range(n)], timestamp=ts, producer_id=pid,
                                 producer_epoch=epoch, base_sequence=seq, transactional=True))


def end(plog, pid: int, commit: bool, *, epoch: int = 0, coord: int = 0, ts: int = 2000):
    return plog.append_control_batch(pid, epoch, coord, commit, timestamp=ts)


def txn_files(plog) -> list[str]:
    return sorted(n for n in os.listdir(plog.dir) if ".txnindex" in n)


def all_aborted(plog) -> list[AbortedTxn]:
    return [t for s in plog.segments for t in s.txn_index.all_aborted_txns()]


def test_lso_held_by_open_txn_released_by_commit_and_abort(tmp_path):
    plog = open_log(tmp_path)
    append(plog, batch(2))  # 0-1: no transaction
    assert plog.first_unstable_offset is None and plog.last_stable_offset == 2
    append(plog, txn(1, 0, 3))  # 2-4 open the transaction
    assert plog.high_watermark == 5
    assert plog.first_unstable_offset == 2 and plog.last_stable_offset == 2
    assert plog.has_ongoing_transaction(1) and not plog.has_ongoing_transaction(2)
    append(plog, batch(1))  # 5: others keep writing, the LSO stays
    append(plog, txn(1, 3))  # 6
    assert plog.last_stable_offset == 2
    r = end(plog, 1, commit=True)
    assert (r.base_offset, r.last_offset) == (7, 7) and plog.log_end_offset == 8
    assert plog.first_unstable_offset is None and plog.last_stable_offset == 8
    assert plog.collect_aborted_transactions(0, 8) == [] and txn_files(plog) == []  # a commit indexes nothing
    # the marker batch went in as written by the coordinator
    region = plog.read(7, 1000)
    [(_, h)] = list(iter_headers(region.read()))
    assert h.is_control and h.is_transactional and h.producer_id == 1 and h.base_offset == 7
    assert parse_control_batch(region.read()).commit

    append(plog, txn(1, 4, 2))  # 8-9
    assert plog.last_stable_offset == 8
    end(plog, 1, commit=False)  # 10
    assert plog.last_stable_offset == 11 == plog.high_watermark
    assert all_aborted(plog) == [AbortedTxn(1, 8, 10, 11)]
    assert plog.collect_aborted_transactions(0, 11) == [(1, 8)]
    assert plog.collect_aborted_transactions(10, 11) == [(1, 8)]
    assert plog.collect_aborted_transactions(11, 20) == [] and plog.collect_aborted_transactions(0, 8) == []
    path = plog.segments[0].txn_index.path
    assert os.path.basename(path) == "00000000000000000000.txnindex"
    assert open(path, "rb").read() == struct.pack(">hqqqq", 0, 1, 8, 10, 11)


def test_aborts_with_other_txns_open_and_across_segments(tmp_path):
    plog = open_log(tmp_path, LogConfig(segment_bytes=600))
    append(plog, txn(1, 0))  # pid 1 opens at 0
    for _i in range(4):
        append(plog, batch(1, value_size=200))  # rolls a few segments
    t2 = plog.log_end_offset
    append(plog, txn(2, 0, 2))  # pid 2 opens at t2
    assert plog.last_stable_offset == 0
    m2 = end(plog, 2, commit=False).base_offset
    # pid 1 is still open: the LSO written with pid 2's abort is pid 1's first offset
    assert all_aborted(plog) == [AbortedTxn(2, t2, m2, 0)]
    assert plog.last_stable_offset == 0
    for _i in range(3):
        append(plog, batch(1, value_size=200))
    m1 = end(plog, 1, commit=False).base_offset
    assert plog.last_stable_offset == plog.log_end_offset == m1 + 1
    assert len(plog.segments) > 3
    # pid 1's abort is indexed in the marker's segment; a fetch from the first segment finds it
    assert plog.segments[-1].txn_index.all_aborted_txns() == [AbortedTxn(1, 0, m1, m1 + 1)]
    assert sorted(plog.collect_aborted_transactions(0, 1)) == [(1, 0)]
    assert sorted(plog.collect_aborted_transactions(0, plog.log_end_offset)) == [(1, 0), (2, t2)]
    assert plog.collect_aborted_transactions(m2 + 1, m1) == [(1, 0)]
    # a transaction without data (AddPartitions, then abort) completes nothing
    n = len(all_aborted(plog))
    end(plog, 3, commit=False)
    assert len(all_aborted(plog)) == n and plog.last_stable_offset == plog.log_end_offset


def test_marker_epoch_fencing(tmp_path):
    plog = open_log(tmp_path)
    append(plog, txn(5, 0, epoch=2))
    leo = plog.log_end_offset
    with pytest.raises(InvalidProducerEpochError) as e:
        end(plog, 5, commit=True, epoch=1)  # older than the producer's epoch
    assert e.value.error_code == ErrorCode.invalid_producer_epoch
    assert plog.log_end_offset == leo and plog.has_ongoing_transaction(5)
    end(plog, 5, commit=True, epoch=2, coord=3)
    assert plog.producer_state.producers[5].coordinator_epoch == 3
    append(plog, txn(5, 1, epoch=2))
    leo = plog.log_end_offset
    with pytest.raises(TransactionCoordinatorFencedError) as e:
        end(plog, 5, commit=False, epoch=2, coord=2)  # a zombie coordinator
    assert e.value.error_code == ErrorCode.transaction_coordinator_fenced
    assert plog.log_end_offset == leo and plog.last_stable_offset == leo - 1
    # the coordinator aborting a timed-out transaction bumps the epoch: the marker's epoch wins
    end(plog, 5, commit=False, epoch=3, coord=4)
    e5 = plog.producer_state.producers[5]
    assert (e5.epoch, e5.coordinator_epoch, e5.current_txn_first_offset) == (3, 4, -1)
    with pytest.raises(InvalidProducerEpochError):
        append(plog, txn(5, 2, epoch=2))  # the zombie producer is fenced
    append(plog, txn(5, 0, epoch=3))  # the new epoch starts at sequence 0


def test_transactional_batch_checks(tmp_path):
    plog = open_log(tmp_path)
    append(plog, txn(1, 0, 2))
    with pytest.raises(InvalidTxnStateError) as e:
        append(plog, batch(1, pid=1, epoch=0, seq=2))  # non-transactional while its transaction is open
    assert e.value.error_code == ErrorCode.invalid_txn_state
    with pytest.raises(OutOfOrderSequenceError):
        append(plog, txn(1, 5))
    append(plog, txn(9, 0, epoch=4))
    with pytest.raises(InvalidProducerEpochError):
        append(plog, txn(9, 1, epoch=3))  # a transactional batch from an older epoch
    assert append(plog, txn(1, 2)).base_offset == 3
    # a retried transactional batch is a duplicate, as for idempotent producers
    assert append(plog, txn(1, 2)).duplicate
    end(plog, 1, commit=True)
    append(plog, batch(1, pid=1, epoch=0, seq=3))  # idempotent again once the transaction ended
    # a marker for a producer without an open transaction completes nothing
    m = bytearray(build_end_txn_marker(producer_id=1, producer_epoch=0, coordinator_epoch=0, commit=True, timestamp=1))
    hs = validate_batches(m, from_client=False)
    assert plog.producer_state.prepare(hs, plog.log_end_offset, m)[2].completed == []
    with pytest.raises(ValueError):
        plog.producer_state.prepare(hs, plog.log_end_offset)  # a marker needs its bytes



def test_transaction_verification_guard(tmp_path):
    plog = open_log(tmp_path)
    # the broker verifies with the coordinator: without the guard stored for it, refused
    with pytest.raises(InvalidTxnStateError, match="not part of an ongoing transaction"):
        append(plog, txn(1, 0), verification_guard=SENTINEL_GUARD)
    guard = plog.maybe_start_transaction_verification(1, 0, 0)
    assert plog.verification_guard(1) is guard and guard is not SENTINEL_GUARD
    # while verifying, a higher sequence than the lowest seen is refused
    with pytest.raises(OutOfOrderSequenceError):
        append(plog, txn(1, 3), verification_guard=guard)
    append(plog, txn(1, 0), verification_guard=guard)
    assert plog.verification_guard(1) is SENTINEL_GUARD  # used up by the first append
    # the transaction is open: no verification needed for the rest of it
    assert plog.maybe_start_transaction_verification(1, 1, 0) is SENTINEL_GUARD
    append(plog, txn(1, 1), verification_guard=SENTINEL_GUARD)
    # a guard from before an abort does not open the next transaction
    stale = guard
    end(plog, 1, commit=False)
    with pytest.raises(InvalidTxnStateError):
        append(plog, txn(1, 2), verification_guard=stale)
    # without verification (guard None) the storage takes transactional batches as they come
    append(plog, txn(1, 2))
    plog.producer_state.maybe_create_verification_state_entry(7, 5, 0, now_ms=0)
    assert plog.producer_state.remove_expired(10**9, 1000) >= 0 and 7 not in plog.producer_state.verifications


def _snapshot_entries(path: str) -> dict[int, tuple]:
    data = open(path, "rb").read()
    version, crc, count = struct.unpack_from(">hIi", data)
    assert version == 1 and crc == crc32c(data[6:])
    out = {}
    for i in range(count):
        e = struct.unpack_from(">qhiqiqiq", data, 10 + 46 * i)
        out[e[0]] = e[1:]
    return out


def test_snapshot_round_trip_with_ongoing_txn(tmp_path):
    plog = open_log(tmp_path)
    append(plog, txn(2, 0, ts=1000))  # 0
    end(plog, 2, commit=True, coord=4, ts=5000)  # 1
    append(plog, txn(1, 0, 2, ts=1500))  # 2-3, left open
    plog.close()
    entries = _snapshot_entries(os.path.join(plog.dir, f"{4:020d}.snapshot"))
    # epoch, lastSequence, lastOffset, offsetDelta, timestamp, coordinatorEpoch, currentTxnFirstOffset
    assert entries[2] == (0, 0, 0, 0, 5000, 4, -1)  # the marker's timestamp, as Kafka writes it
    assert entries[1] == (0, 1, 3, 1, 1500, -1, 2)
    again = open_log(tmp_path)
    assert again.first_unstable_offset == 2 and again.last_stable_offset == 2
    assert again.producer_state.ongoing == {2: 1}
    assert append(again, txn(1, 0, 2)).duplicate  # the open transaction's last batch is known
    end(again, 1, commit=False)
    assert again.last_stable_offset == again.log_end_offset == 5
    assert all_aborted(again) == [AbortedTxn(1, 2, 4, 5)]


def test_reads_snapshots_written_before_transactions(tmp_path):
    """A snapshot as the pre-transaction writer (and Kafka, for idempotent producers)
    wrote it: coordinatorEpoch -1, currentTxnFirstOffset -1. And one Kafka wrote with a
    transaction open: the transaction is open after loading."""
    plog = open_log(tmp_path)
    append(plog, batch(3, pid=77, epoch=2, seq=10, ts=1234))
    append(plog, txn(8, 0, ts=1300))
    plog.close()
    path = os.path.join(plog.dir, f"{4:020d}.snapshot")
    rows = [(77, 2, 12, 2, 2, 1234, -1, -1), (8, 0, 0, 3, 0, 1300, -1, 3)]
    body = struct.pack(">i", len(rows)) + b"".join(struct.pack(">qhiqiqiq", *r) for r in rows)
    with open(path, "wb") as f:
        f.write(struct.pack(">hI", 1, crc32c(body)) + body)
    [e77, e8] = read_snapshot(path)
    assert (e77.producer_id, e77.current_txn_first_offset, e77.coordinator_epoch, e77.last_seq) == (77, -1, -1, 12)
    again = open_log(tmp_path)
    assert again.last_sequence(77) == 12
    assert append(again, batch(3, pid=77, epoch=2, seq=10)).duplicate  # its last batch, from the snapshot
    assert again.first_unstable_offset == 3 and again.last_stable_offset == 3
    end(again, 8, commit=True)
    assert again.last_stable_offset == again.log_end_offset


def test_non_transactional_logs_get_no_new_files(tmp_path):
    plog = open_log(tmp_path, LogConfig(segment_bytes=500))
    for i in range(20):
        append(plog, batch(1, pid=1, epoch=0, seq=i))
    plog.close()
    again = open_log(tmp_path, LogConfig(segment_bytes=500), clean_shutdown=False, recovery_point=0)
    assert txn_files(again) == [] and again.first_unstable_offset is None
    assert again.last_stable_offset == again.high_watermark == 20
    assert again.producer_state.prepare([], 0)[2] is None  # the default path records nothing


def test_log_append_time_marker_and_replicated_lso(tmp_path):
    """On a replicated log the LSO is bounded by the high watermark, and a completed
    transaction keeps it until the high watermark passes its marker (Kafka's
    unreplicated transactions)."""
    plog = open_log(tmp_path, replicated=True, high_watermark=0)
    append(plog, batch(2))
    assert plog.last_stable_offset == 0 == plog.high_watermark
    plog.maybe_increment_high_watermark(2)
    append(plog, txn(1, 0, 2))  # 2-3
    end(plog, 1, commit=True)  # 4
    assert plog.first_unstable_offset == 2  # decided, but the marker is above the HW
    plog.maybe_increment_high_watermark(4)
    assert plog.first_unstable_offset == 2 and plog.last_stable_offset == 2
    plog.maybe_increment_high_watermark(5)
    assert plog.first_unstable_offset is None and plog.last_stable_offset == 5


def test_coordinator_origin_checks_epochs_only(tmp_path):
    """The group coordinator writes TxnOffsetCommit records as transactional batches with
    the producer's id and epoch and sequence 0 every time (Kafka's origin COORDINATOR):
    never duplicates, never out of sequence, but fenced by epoch; the marker ends them."""
    plog = open_log(tmp_path)
    for i in range(3):
        b = txn(6, 0, epoch=1, key=b"g%d" % i)
        r = plog.append(b, validate_batches(b), coordinator=True)
        assert not r.duplicate and r.base_offset == i
    assert plog.last_stable_offset == 0
    b = txn(6, 0, epoch=0)
    with pytest.raises(InvalidProducerEpochError):
        plog.append(b, validate_batches(b), coordinator=True)
    end(plog, 6, commit=True, epoch=1)
    assert plog.last_stable_offset == plog.log_end_offset == 4
    # from a client, the same retry is a duplicate
    assert append(plog, txn(7, 0)).base_offset == 4 and append(plog, txn(7, 0)).duplicate
