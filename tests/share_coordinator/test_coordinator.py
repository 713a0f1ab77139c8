"""The share coordinator driven as the broker shell will drive it: kio requests in, responses
and records out, records replayed after a "restart"."""

from __future__ import annotations

import uuid

import pytest
from kio.schema.delete_share_group_state.v0 import request as delete_req
from kio.schema.errors import ErrorCode
from kio.schema.initialize_share_group_state.v0 import request as init_req
from kio.schema.read_share_group_state.v0 import request as read_req
from kio.schema.read_share_group_state_summary.v1 import request as summary_req
from kio.schema.write_share_group_state.v0 import request as v0
from kio.schema.write_share_group_state.v1 import request as write_req

from share_coordinator import ShareCoordinator, ShareCoordinatorConfig, StateBatch
from share_coordinator.records import (
    SHARE_SNAPSHOT_RECORD_TYPE,
    SHARE_UPDATE_RECORD_TYPE,
    decode_key,
    decode_snapshot_value,
    decode_update_value,
)

GROUP = "g1"
TOPIC = uuid.UUID("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0")
OTHER_TOPIC = uuid.UUID(int=7)


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000

    def __call__(self) -> int:
        return self.now


class Harness:
    """A coordinator with an in-memory __share_group_state: every write is appended and
    committed at once, unless told otherwise."""

    def __init__(self, **config) -> None:
        self.clock = Clock()
        self.config = ShareCoordinatorConfig(**config)
        self.log: dict[int, list[tuple[int, bytes, bytes | None]]] = {}
        self.c = self.new_coordinator()

    def new_coordinator(self) -> ShareCoordinator:
        c = ShareCoordinator(self.config, self.clock)
        for p in range(self.config.state_topic_num_partitions):
            c.load_partition(p, list(self.log.get(p, [])))
        return c

    def append(self, result_or_writes):
        writes = result_or_writes if isinstance(result_or_writes, list) else result_or_writes.writes
        for w in writes:
            log = self.log.setdefault(w.partition, [])
            first = len(log)
            log.extend((first + i, k, v) for i, (k, v) in enumerate(w.records))
            self.c.committed(w.partition, w.write_id, first)
        return result_or_writes

    def records(self, partition=None):
        p = self.c.partition_for(GROUP, TOPIC, 0) if partition is None else partition
        return self.log.get(p, [])

    # --- requests -------------------------------------------------------------------
    def init(self, partition=0, state_epoch=0, start_offset=-1, group=GROUP):
        req = init_req.InitializeShareGroupStateRequest(group_id=group, topics=(init_req.InitializeStateData(
            topic_id=TOPIC, partitions=(init_req.PartitionData(partition=partition, state_epoch=state_epoch,
                                                              start_offset=start_offset),)),))
        return self.append(self.c.initialize_state(req))

    def read(self, partition=0, leader_epoch=0):
        req = read_req.ReadShareGroupStateRequest(group_id=GROUP, topics=(read_req.ReadStateData(
            topic_id=TOPIC, partitions=(read_req.PartitionData(partition=partition, leader_epoch=leader_epoch),)),))
        return self.append(self.c.read_state(req))

    def write_request(self, batches, partition=0, leader_epoch=0, state_epoch=0, start_offset=-1, dcc=-1):
        return write_req.WriteShareGroupStateRequest(group_id=GROUP, topics=(write_req.WriteStateData(
            topic_id=TOPIC, partitions=(write_req.PartitionData(
                partition=partition, state_epoch=state_epoch, leader_epoch=leader_epoch, start_offset=start_offset,
                delivery_complete_count=dcc,
                state_batches=tuple(write_req.StateBatch(first_offset=f, last_offset=last, delivery_state=s,
                                                         delivery_count=n) for f, last, s, n in batches)),)),))

    def write(self, batches, **kw):
        return self.append(self.c.write_state(self.write_request(batches, **kw)))

    def delete(self, partition=0):
        req = delete_req.DeleteShareGroupStateRequest(group_id=GROUP, topics=(delete_req.DeleteStateData(
            topic_id=TOPIC, partitions=(delete_req.PartitionData(partition=partition),)),))
        return self.append(self.c.delete_state(req))

    def summary(self, partition=0):
        req = summary_req.ReadShareGroupStateSummaryRequest(group_id=GROUP, topics=(
            summary_req.ReadStateSummaryData(topic_id=TOPIC, partitions=(
                summary_req.PartitionData(partition=partition, leader_epoch=0),)),))
        return self.append(self.c.read_state_summary(req))


def only(result):
    """The single partition result of a response."""
    (topic,) = result.response().results
    (p,) = topic.partitions
    return p


def record_types(result):
    return [decode_key(k)[0] for w in result.writes for k, _ in w.records]


@pytest.fixture
def h():
    return Harness(state_topic_num_partitions=5, snapshot_update_records_per_snapshot=3)


def test_initialize_writes_a_snapshot(h):
    r = h.init(state_epoch=1, start_offset=-1)
    assert only(r).error_code is ErrorCode.none
    assert record_types(r) == [SHARE_SNAPSHOT_RECORD_TYPE]
    (w,) = r.writes
    assert w.partition == h.c.partition_for(GROUP, TOPIC, 0)
    v = decode_snapshot_value(w.records[0][1])
    assert (v.snapshot_epoch, v.state_epoch, v.leader_epoch, v.start_offset) == (0, 1, 0, -1)
    assert v.delivery_complete_count == -1  # no start offset, no lag yet
    assert v.create_timestamp == v.write_timestamp == h.clock.now

    v2 = decode_snapshot_value(h.init(state_epoch=2, start_offset=40).writes[0].records[0][1])
    assert (v2.snapshot_epoch, v2.start_offset, v2.delivery_complete_count) == (1, 40, 0)


def test_read_and_write_of_an_uninitialized_share_partition_are_invalid(h):
    p = only(h.read())
    assert p.error_code is ErrorCode.invalid_request
    assert p.error_message == "Read operation on uninitialized share partition not allowed."
    r = h.write([(0, 9, 2, 1)])
    assert only(r).error_code is ErrorCode.invalid_request
    assert r.writes == []


def test_write_then_read(h):
    h.init(start_offset=0)
    h.write([(0, 9, 0, 1), (10, 19, 2, 1)], start_offset=0)
    h.write([(5, 9, 2, 1)])
    p = only(h.read())
    assert p.error_code is ErrorCode.none and p.start_offset == 0 and p.state_epoch == 0
    assert [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in p.state_batches] == [
        (0, 4, 0, 1), (5, 19, 2, 1)]


def test_fencing(h):
    h.init(state_epoch=3)
    h.read(leader_epoch=5)
    assert only(h.read(leader_epoch=4)).error_code is ErrorCode.fenced_leader_epoch
    assert only(h.write([(0, 0, 2, 1)], leader_epoch=4, state_epoch=3)).error_code is ErrorCode.fenced_leader_epoch
    r = h.write([(0, 0, 2, 1)], leader_epoch=5, state_epoch=2)
    assert only(r).error_code is ErrorCode.fenced_state_epoch
    assert only(r).error_message == (
        "The share coordinator rejected the request because the share-group state epoch did not match.")
    assert r.writes == []
    assert only(h.init(state_epoch=2)).error_code is ErrorCode.fenced_state_epoch
    # -1 means "not given": never fenced.
    assert only(h.write([(0, 0, 2, 1)], leader_epoch=-1, state_epoch=-1)).error_code is ErrorCode.none
    assert only(h.write([(1, 1, 2, 1)], leader_epoch=6, state_epoch=3)).error_code is ErrorCode.none
    assert h.c.state(GROUP, TOPIC, 0).leader_epoch == 6


def test_read_records_a_new_leader_epoch_once(h):
    h.init()
    r = h.read(leader_epoch=2)
    assert record_types(r) == [SHARE_UPDATE_RECORD_TYPE]
    v = decode_update_value(r.writes[0].records[0][1])
    assert (v.leader_epoch, v.start_offset, v.state_batches, v.delivery_complete_count) == (2, -1, (), -1)
    assert h.read(leader_epoch=2).writes == []
    assert h.read(leader_epoch=-1).writes == []


def test_cadence_n_updates_then_a_snapshot(h):
    h.init(start_offset=0)  # snapshot, epoch 0
    kinds = [record_types(h.write([(i, i, 2, 1)]))[0] for i in range(8)]
    # N = 3: three updates, then a snapshot (which restarts the count), and so on.
    assert kinds == [1, 1, 1, 0, 1, 1, 1, 0]
    snapshots = [decode_snapshot_value(v) for _, k, v in h.records() if decode_key(k)[0] == 0]
    assert [s.snapshot_epoch for s in snapshots] == [0, 1, 2]
    # The snapshot holds everything combined so far.
    assert snapshots[-1].state_batches == (StateBatch(0, 7, 2, 1),)


def test_every_write_is_a_snapshot_with_zero_updates_per_snapshot():
    h = Harness(state_topic_num_partitions=1, snapshot_update_records_per_snapshot=0)
    h.init()
    assert [record_types(h.write([(i, i, 2, 1)]))[0] for i in range(3)] == [0, 0, 0]


def test_snapshot_keeps_unchanged_fields_and_prunes_below_start(h):
    h.init(start_offset=100, state_epoch=1)
    h.write([(100, 109, 2, 1), (110, 119, 0, 2), (120, 129, 0, 1)], leader_epoch=1, state_epoch=1, dcc=0)
    h.write([(100, 109, 2, 1)], leader_epoch=1, state_epoch=1, dcc=10)
    h.write([(120, 129, 2, 1)], leader_epoch=1, state_epoch=1, start_offset=110, dcc=10)
    r = h.write([], leader_epoch=-1, state_epoch=-1)  # the 4th write: a snapshot
    (v,) = [decode_snapshot_value(v) for _, v in r.writes[0].records]
    assert (v.state_epoch, v.leader_epoch, v.start_offset, v.delivery_complete_count) == (1, 1, 110, 10)
    assert v.state_batches == (StateBatch(110, 119, 0, 2), StateBatch(120, 129, 2, 1))


def test_replay_after_restart_gives_the_same_read(h):
    h.init(start_offset=0, state_epoch=2)
    h.read(leader_epoch=3)
    for i in range(7):
        h.write([(i * 10, i * 10 + 9, 2 if i % 2 else 0, 1 + i % 3)], leader_epoch=3, state_epoch=2,
                start_offset=5 if i == 4 else -1, dcc=i)
    before = (only(h.read(leader_epoch=3)), only(h.summary()), h.c.state(GROUP, TOPIC, 0))
    h.c = h.new_coordinator()  # "restart": a new coordinator loads the log
    after = (only(h.read(leader_epoch=3)), only(h.summary()), h.c.state(GROUP, TOPIC, 0))
    assert after == before
    assert only(h.read(leader_epoch=2)).error_code is ErrorCode.fenced_leader_epoch


def test_delete(h):
    assert only(h.delete()).error_code is ErrorCode.none  # nothing to delete: no record
    assert h.records() == []
    h.init()
    r = h.delete()
    (w,) = r.writes
    assert decode_key(w.records[0][0])[0] == SHARE_SNAPSHOT_RECORD_TYPE and w.records[0][1] is None
    assert only(h.read()).error_code is ErrorCode.invalid_request
    h.c = h.new_coordinator()
    assert h.c.state(GROUP, TOPIC, 0) is None


def test_summary(h):
    p = only(h.summary())
    assert (p.error_code, p.start_offset, p.state_epoch, p.leader_epoch, p.delivery_complete_count) == (
        ErrorCode.none, -1, 0, 0, -1)
    h.init(state_epoch=4, start_offset=10)
    h.write([(10, 14, 2, 1)], leader_epoch=7, state_epoch=4, dcc=5)
    r = h.summary()
    assert r.writes == []
    p = only(r)
    assert (p.start_offset, p.state_epoch, p.leader_epoch, p.delivery_complete_count) == (10, 4, 7, 5)


def test_partitions_not_loaded_or_loading():
    h = Harness(state_topic_num_partitions=5)
    p = h.c.partition_for(GROUP, TOPIC, 0)
    h.c.unload(p)
    assert only(h.read()).error_code is ErrorCode.not_coordinator
    h.c.start_loading(p)
    assert only(h.init()).error_code is ErrorCode.coordinator_load_in_progress
    h.c.finish_loading(p)
    assert only(h.init()).error_code is ErrorCode.none
    h.c.shutdown()
    assert only(h.read()).error_code is ErrorCode.coordinator_not_available


def test_invalid_requests(h):
    assert only(h.init(partition=-1)).error_code is ErrorCode.invalid_request
    empty = write_req.WriteShareGroupStateRequest(group_id=GROUP, topics=())
    assert h.c.write_state(empty).response().results == ()
    no_group = h.write_request([], partition=0)
    no_group = write_req.WriteShareGroupStateRequest(group_id="", topics=no_group.topics)
    assert h.c.write_state(no_group).response().results == ()


def test_unknown_topic_partition():
    c = ShareCoordinator(ShareCoordinatorConfig(state_topic_num_partitions=1), Clock(),
                         partition_exists=lambda t, p: t == TOPIC and p < 2)
    c.load_partition(0, [])
    h = Harness(state_topic_num_partitions=1)
    h.c = c
    assert only(h.init(partition=1)).error_code is ErrorCode.none
    assert only(h.init(partition=2)).error_code is ErrorCode.unknown_topic_or_partition


def test_failed_write_is_undone(h):
    h.init()
    h.write([(0, 9, 0, 1)])
    p = h.c.partition_for(GROUP, TOPIC, 0)
    r1 = h.c.write_state(h.write_request([(0, 9, 2, 1)]))
    r2 = h.c.write_state(h.write_request([(10, 19, 2, 1)]))
    assert h.c.write_failed(p, r1.writes[0].write_id) == [r1.writes[0].write_id, r2.writes[0].write_id]
    assert only(h.read()).state_batches[0].delivery_state == 0
    failed = only_response(r1, {r1.writes[0].write_id: ErrorCode.not_coordinator})
    assert failed.error_code is ErrorCode.not_coordinator


def only_response(result, failed):
    (topic,) = result.response(failed).results
    (p,) = topic.partitions
    return p


def test_cold_partitions_are_snapshotted_once():
    h = Harness(state_topic_num_partitions=1, cold_partition_snapshot_interval_ms=10_000)
    h.c = h.new_coordinator()
    h.init(start_offset=0)
    assert h.c.next_deadline_ms() == h.clock.now + 10_000
    h.clock.now += 12_000
    (w,) = h.append(h.c.poll())
    v = decode_snapshot_value(w.records[0][1])
    assert (v.snapshot_epoch, v.write_timestamp, v.create_timestamp) == (1, h.clock.now, h.clock.now - 12_000)
    h.clock.now += 12_000
    assert h.c.poll() == []  # already a cold copy: not again


def test_deleted_topics_get_tombstones_and_redundant_offset(h):
    h.init()
    p = h.c.partition_for(GROUP, TOPIC, 0)
    for _ in range(5):
        h.write([(0, 0, 2, 1)])
    assert h.c.last_redundant_offset(p) == 4  # the latest snapshot: everything before is superseded
    writes = h.append(h.c.on_topics_deleted({TOPIC, OTHER_TOPIC}))
    assert [(w.partition, w.records[0][1]) for w in writes] == [(p, None)]
    assert h.c.state(GROUP, TOPIC, 0) is None


def test_write_v0_request_has_no_delivery_complete_count(h):
    h.init()
    req = v0.WriteShareGroupStateRequest(group_id=GROUP, topics=(v0.WriteStateData(topic_id=TOPIC, partitions=(
        v0.PartitionData(partition=0, state_epoch=0, leader_epoch=0, start_offset=-1, state_batches=()),)),))
    r = h.append(h.c.write_state(req))
    assert only(r).error_code is ErrorCode.none
    assert r.response().__version__ == 0
