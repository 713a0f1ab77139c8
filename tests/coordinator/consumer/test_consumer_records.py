"""KIP-848 records of __consumer_offsets: byte layouts from Kafka's JSON specs, round trips,
garbage, and a coordinator rebuilt from its own log (restart or coordinator move)."""

from __future__ import annotations

import uuid

import pytest

from coordinator import GroupCoordinator
from coordinator.consumer.group import (
    ClassicMemberMetadata,
    ConsumerGroup,
    ConsumerGroupMember,
    MemberState,
    TopicMetadata,
)
from coordinator.consumer.records import (
    ConsumerGroupKey,
    CurrentAssignmentValue,
    GroupEpochValue,
    MemberMetadataValue,
    PartitionMetadataValue,
    TargetAssignmentValue,
    assignment_epoch_record,
    current_assignment_record,
    decode_any_key,
    decode_record,
    encode_record,
    group_epoch_record,
    member_subscription_record,
    subscription_metadata_record,
    target_assignment_record,
)
from coordinator.records import OffsetCommitKey, RecordDecodeError, UnknownRecordVersion, encode_offset_commit_key

from ..harness import MemoryLog, request
from .cg import CG, Consumer, E

T = uuid.UUID("00010203-0405-0607-0809-0a0b0c0d0e0f")


def H(s: str) -> bytes:
    return bytes.fromhex(s.replace(" ", ""))


def test_key_bytes() -> None:
    k, v = encode_record(group_epoch_record("g", 5))
    assert k == H("0003 0001 67") and v == H("0000 00000005 00")
    k, _ = encode_record(current_assignment_record("g", ConsumerGroupMember("m")))
    assert k == H("0008 0001 67 0001 6d")
    assert decode_any_key(k) == ConsumerGroupKey(8, "g", "m")
    assert decode_any_key(H("0006 0001 67")) == ConsumerGroupKey(6, "g")
    assert decode_any_key(encode_offset_commit_key("g", "t", 1)) == OffsetCommitKey("g", "t", 1)
    with pytest.raises(UnknownRecordVersion):
        decode_any_key(H("0010 0001 67"))  # Kafka 4's regular-expression records: skipped


def test_value_bytes_follow_the_specs() -> None:
    member = ConsumerGroupMember(
        "m", member_epoch=3, previous_member_epoch=2, state=MemberState.UNREVOKED_PARTITIONS,
        assigned={T: frozenset({1, 0})}, pending_revocation={T: frozenset({2})},
    )
    _, v = encode_record(current_assignment_record("g", member))
    # version, epoch, previous epoch, state, AssignedPartitions (compact array: topic id,
    # compact int32 array, tags), PartitionsPendingRevocation, tags
    tp = T.bytes.hex()
    assert v == H(f"0000 00000003 00000002 01 02 {tp} 03 00000000 00000001 00 02 {tp} 02 00000002 00 00")
    _, v = encode_record(member_subscription_record("g", ConsumerGroupMember(
        "m", instance_id=None, rack_id="r", client_id="c", client_host="/h", subscribed_topic_names=frozenset({"b", "a"}),
        rebalance_timeout_ms=300, server_assignor="range")))
    # InstanceId null, RackId, ClientId, ClientHost, names (sorted), regex null, timeout, assignor, tags
    assert v == H("0000 00 0272 0263 032f68 03 0261 0262 00 0000012c 0672616e6765 00")
    _, v = encode_record(subscription_metadata_record("g", {"t": TopicMetadata(T, "t", 4)}))
    assert v == H(f"0000 02 {tp} 0274 00000004 01 00 00")
    _, v = encode_record(assignment_epoch_record("g", 7))
    assert v == H("0000 00000007 00")
    _, v = encode_record(target_assignment_record("g", "m", {T: frozenset({5})}))
    assert v == H(f"0000 02 {tp} 02 00000005 00 00")


@pytest.mark.parametrize(
    "record",
    [
        group_epoch_record("g", 9),
        subscription_metadata_record("g", {"a": TopicMetadata(T, "a", 3), "b": TopicMetadata(uuid.uuid4(), "b", 1)}),
        member_subscription_record("g", ConsumerGroupMember("m", instance_id="i", subscribed_topic_regex="x.*",
                                                             subscribed_topic_names=frozenset({"t"}))),
        assignment_epoch_record("g", -1),
        target_assignment_record("g", "m", {T: frozenset({0, 3}), uuid.uuid4(): frozenset({1})}),
        current_assignment_record("g", ConsumerGroupMember("m", member_epoch=-2, assigned={T: frozenset({4})})),
    ],
)
def test_round_trips_and_truncations(record) -> None:
    k, v = encode_record(record)
    key = decode_any_key(k)
    assert decode_record(key, v) == record
    assert decode_record(key, None) == (key, None)
    for n in range(len(v)):
        with pytest.raises(RecordDecodeError):
            decode_record(key, v[:n])
    with pytest.raises(RecordDecodeError):
        decode_record(key, v + b"\x00")


def test_tagged_fields_are_skipped() -> None:
    # ConsumerGroupMemberMetadataValue with its tag 0 (ClassicMemberMetadata) set, as Kafka's
    # generated code writes a nullable struct in a tagged field: size + 1, presence byte 1
    _, v = encode_record(member_subscription_record("g", ConsumerGroupMember("m", client_id="c")))
    classic = H("01 00001388 02 0672616e6765 03 0001 00 00")  # session, [("range", 0001)], tags
    tagged = v[:-1] + bytes([1, 0, len(classic)]) + classic
    _, value = decode_record(ConsumerGroupKey(5, "g", "m"), tagged)
    assert isinstance(value, MemberMetadataValue) and value.client_id == "c"
    assert value.classic == ClassicMemberMetadata(5000, (("range", b"\x00\x01"),))
    member = ConsumerGroupMember("m", client_id="c", classic=value.classic)
    assert encode_record(member_subscription_record("g", member))[1] == tagged
    # a null struct (presence 0) and unknown tags are skipped
    _, value = decode_record(ConsumerGroupKey(5, "g", "m"), v[:-1] + H("02 00 01 00 05 02 abcd"))
    assert isinstance(value, MemberMetadataValue) and value.classic is None
    with pytest.raises(RecordDecodeError):
        decode_record(ConsumerGroupKey(5, "g", "m"), v[:-1] + H("01 00 02 01 00"))
    assert isinstance(decode_record(ConsumerGroupKey(3, "g"), H("0000 00000001 00"))[1], GroupEpochValue)
    assert isinstance(decode_record(ConsumerGroupKey(4, "g"), H("0000 01 00"))[1], PartitionMetadataValue)
    assert isinstance(decode_record(ConsumerGroupKey(7, "g", "m"), H("0000 01 00"))[1], TargetAssignmentValue)
    assert isinstance(decode_record(ConsumerGroupKey(8, "g", "m"), H("0000 00000001 00000000 00 01 01 00"))[1],
                      CurrentAssignmentValue)
    with pytest.raises(UnknownRecordVersion):
        decode_record(ConsumerGroupKey(3, "g"), H("0001 00000001 00"))


# --- restart -------------------------------------------------------------------------------------


def reloaded(h: CG, extra: list[tuple[bytes | None, bytes | None]] | None = None) -> GroupCoordinator:
    """A new coordinator (a restarted broker) loaded from ``h``'s log."""
    c = GroupCoordinator(h.config, h.clock, MemoryLog(), topics=lambda: h.topics)
    parts = set(h.log.partitions)
    c.start_loading(parts)
    for p in sorted(parts):
        recs = list(h.log.partitions[p]) + (list(extra or []) if p == h.c.partition_for("g") else [])
        c.load_partition(p, [(i, k, v) for i, (k, v) in enumerate(recs)])
        c.finished_loading(p)
    return c


def snapshot(c: GroupCoordinator) -> dict:
    out = {}
    for g in c.groups():
        assert isinstance(g, ConsumerGroup)
        out[g.group_id] = (
            g.state, g.group_epoch, g.assignment_epoch, dict(g.members), dict(g.target_assignment),
            dict(g.static_members), {t: dict(ps) for t, ps in g.partition_epochs.items()},
            dict(g.subscription_metadata), dict(g.offsets), g.preferred_assignor(),
        )
    return out


def test_a_restarted_coordinator_has_the_same_groups() -> None:
    h = CG(topics={"t": 6, "u": 3})
    a, b = Consumer("a", instance_id="ia", assignor="range"), Consumer("b", topics=["t", "u"])
    c = Consumer("c", group="g2", topics=None, regex="u|t")
    h.settle([a, b])
    h.heartbeat(c)
    h.c.offset_commit(  # an offset of a member at its epoch
        request("offset_commit", 9, group_id="g", generation_id_or_member_epoch=a.epoch, member_id="a",
                topics=[{"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 7}]}]),
        lambda r: None)
    d = Consumer("d")
    h.heartbeat(d)  # mid-reconciliation: d waits, a and b must revoke
    h.heartbeat(a)
    assert h.group().members["a"].state is MemberState.UNREVOKED_PARTITIONS
    h.leave(Consumer("gone"))  # unknown: nothing written
    before = snapshot(h.c)
    c2 = reloaded(h)
    assert snapshot(c2) == before
    # the reloaded members carry on without rejoining
    h.c, appends = c2, h.log.appends
    h.settle([a, b, d])
    assert h.group().state.value == "Stable" and h.log.appends == appends  # c2 writes to its own log
    # their sessions restarted at the load: silent members are fenced after 45 s
    h.advance(46_000)
    assert not h.group("g2").members


def test_deleted_groups_and_members_stay_deleted() -> None:
    h = CG()
    a, b = Consumer("a"), Consumer("b")
    h.settle([a, b])
    h.leave(a)
    h.heartbeat(Consumer("x", group="tmp"))
    h.leave(Consumer("x", group="tmp"))
    box: list = []
    h.c.delete_groups(request("delete_groups", 2, groups_names=["tmp"]), box.append)
    assert box[0].results[0].error_code == E.none
    c2 = reloaded(h)
    assert snapshot(c2) == snapshot(h.c)
    assert c2.group("tmp") is None and list(c2.group("g").members) == ["b"]


def test_garbage_in_the_log_is_skipped() -> None:
    h = CG()
    h.heartbeat(Consumer("a"))
    bad = [
        (H("0003 0001 67"), H("0000 ffff")),  # truncated value
        (H("0008 0001 67 0001 7a"), H("0005 00")),  # unknown value version
        (H("0005 0001 67 0001 7a"), None),  # tombstone for an unknown member
        (H("0003 0001 67"), None),  # a group tombstone while it has members: refused
    ]
    c2 = reloaded(h, bad)
    assert list(c2.group("g").members) == ["a"] and c2.group("g").group_epoch == 1


def test_a_static_member_away_during_a_restart_comes_back_with_its_partitions() -> None:
    h = CG()
    a, b = Consumer("a1", instance_id="ia"), Consumer("b")
    h.settle([a, b])
    mine = set(a.owned)
    h.leave(a, epoch=-2)
    c2 = reloaded(h)
    assert snapshot(c2) == snapshot(h.c)
    assert c2.group("g").members["a1"].member_epoch == -2
    h.c = c2
    a2 = Consumer("a2", instance_id="ia")
    assert h.heartbeat(a2).error_code == E.none and a2.owned == mine
    h.settle([a2, b])
