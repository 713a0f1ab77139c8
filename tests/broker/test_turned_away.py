"""A leadership change must not make an idempotent producer write its records twice (found
by the fault harness: tests/chaos, a disk-full leader). The new leader refused the producer's
first batches while it still followed (NOT_LEADER_OR_FOLLOWER), then a later batch of the
same producer arrived just after it took over: a sequence gap. Kafka's answer to a gap,
OUT_OF_ORDER_SEQUENCE_NUMBER, makes librdkafka bump its epoch and send every unacknowledged
record again under new sequences, including those this broker had already replicated. Here
the gap is answered NOT_LEADER_OR_FOLLOWER while the producer was turned away moments ago, so
the client retries in order: the replicated batch is found as a duplicate, the rest
appended. Real storage, a real ReplicaManager and Partition."""

from __future__ import annotations

import pytest

from broker.cluster.election import PartitionState
from broker.replica.manager import ReplicaManager
from broker.replica.partition import Partition
from protocol.errors import ErrorCode, KafkaError
from protocol.records import build_batch
from storage.config import LogConfig
from storage.manager import LogManager

PID, EPOCH = 1001, 0


def _batch(seq: int, value: bytes, base_offset: int = 0) -> bytearray:
    return bytearray(build_batch([(None, value)], base_offset=base_offset, producer_id=PID, producer_epoch=EPOCH,
                                 base_sequence=seq))


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def replica(tmp_path):
    logs = LogManager([str(tmp_path)], LogConfig(), replicated=True)
    rm = ReplicaManager(logs, broker_id=3)
    rm.turned_away._clock = clock = Clock()
    plog = logs.create("t", 0)
    part = rm.partitions[("t", 0)] = Partition("t", 0, plog, broker_id=3)
    # following broker 1, which wrote sequences 0 and 1 of the producer: both replicated here
    part.apply(PartitionState(1, 5, (1, 3), 1, 1), (1, 3), 0)
    plog.append_as_follower(_batch(0, b"a", 0))
    plog.append_as_follower(_batch(1, b"b", 1))
    yield rm, part, clock
    logs.shutdown()


def _code(fn) -> ErrorCode:
    with pytest.raises(KafkaError) as err:
        fn()
    return err.value.error_code


def test_a_gap_right_after_taking_over_is_retried_in_order(replica):
    rm, part, _ = replica
    # the client heard of the new leader before this broker did: sequence 2 is turned away
    assert _code(lambda: rm.append_records("t", 0, _batch(2, b"c"), 0)) == ErrorCode.not_leader_or_follower
    part.apply(PartitionState(3, 6, (3,), 1, 2), (1, 3), 0)  # now it leads
    # sequence 3 was in flight: a gap, answered "retry" rather than OUT_OF_ORDER_SEQUENCE_NUMBER
    assert _code(lambda: rm.append_records("t", 0, _batch(3, b"d"), 0)) == ErrorCode.not_leader_or_follower
    # the client retries from its oldest unacknowledged batch, with the same sequences:
    # sequence 1 (replicated here before the old leader failed) is a duplicate, not a new record
    dup = rm.append_records("t", 0, _batch(1, b"b"), 0)
    assert dup.duplicate and dup.base_offset == 1
    assert rm.append_records("t", 0, _batch(2, b"c"), 0).base_offset == 2
    assert rm.append_records("t", 0, _batch(3, b"d"), 0).base_offset == 3
    assert part.log.log_end_offset == 4


def test_a_gap_is_out_of_order_once_nothing_explains_it(replica):
    rm, part, clock = replica
    part.apply(PartitionState(3, 6, (3,), 1, 2), (1, 3), 1_000)
    # moments after taking over, the old leader may have refused the missing batch: "retry"
    assert _code(lambda: rm.append_records("t", 0, _batch(3, b"d"), 1_000)) == ErrorCode.not_leader_or_follower
    assert _code(lambda: rm.append_records("t", 0, _batch(3, b"d"), 10_900)) == ErrorCode.not_leader_or_follower
    # past the window, nothing refused here: a real gap
    assert _code(lambda: rm.append_records("t", 0, _batch(3, b"d"), 11_100)) == ErrorCode.out_of_order_sequence_number
    # refused here as a follower, leader again: both windows pass
    part.apply(PartitionState(1, 7, (1, 3), 1, 3), (1, 3), 20_000)
    assert _code(lambda: rm.append_records("t", 0, _batch(2, b"c"), 20_000)) == ErrorCode.not_leader_or_follower
    part.apply(PartitionState(3, 8, (3,), 1, 4), (1, 3), 20_000)
    clock.t += 11
    assert _code(lambda: rm.append_records("t", 0, _batch(3, b"d"), 31_000)) == ErrorCode.out_of_order_sequence_number


def test_a_gap_after_a_short_isr_grew_back_is_retried_in_order(tmp_path):
    """acks=all batches pipelined while the ISR is below min.insync.replicas: the first is
    refused unwritten (NOT_ENOUGH_REPLICAS), the ISR grows back, and the next one would
    leave a gap. It gets NOT_ENOUGH_REPLICAS too, so the client retries both in order
    instead of bumping its epoch (which would resend written, unacknowledged records)."""
    logs = LogManager([str(tmp_path)], LogConfig(min_insync_replicas=2), replicated=True)
    try:
        rm = ReplicaManager(logs, broker_id=3)
        plog = logs.create("t", 0)
        part = rm.partitions[("t", 0)] = Partition("t", 0, plog, broker_id=3)
        part.apply(PartitionState(3, 5, (3, 1), 1, 1), (1, 3), 0)
        assert rm.append_records("t", 0, _batch(0, b"a"), 0, acks=-1).base_offset == 0
        part.apply(PartitionState(3, 5, (3,), 1, 2), (1, 3), 0)  # broker 1 fell out of the ISR
        assert _code(lambda: rm.append_records("t", 0, _batch(1, b"b"), 0, acks=-1)) == ErrorCode.not_enough_replicas
        part.apply(PartitionState(3, 5, (3, 1), 1, 3), (1, 3), 0)  # and came back
        assert _code(lambda: rm.append_records("t", 0, _batch(2, b"c"), 0, acks=-1)) == ErrorCode.not_enough_replicas
        assert rm.append_records("t", 0, _batch(1, b"b"), 0, acks=-1).base_offset == 1
        assert rm.append_records("t", 0, _batch(2, b"c"), 0, acks=-1).base_offset == 2
        # an error the client does not retry (a record too large, say) is not remembered
        rm.turned_away.note(("t", 0), 77, ErrorCode.message_too_large)
        assert rm.turned_away.recent(("t", 0), 77) is None
    finally:
        logs.shutdown()
