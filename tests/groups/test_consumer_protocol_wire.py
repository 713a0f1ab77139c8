"""ConsumerGroupHeartbeat (68) and ConsumerGroupDescribe (69) with bad input, at the wire
level: a stale epoch, an unknown member, an unknown assignor, a malformed regex, a join
without its required fields. Each is answered with Kafka's error code, and leaves the
group as it was: its member keeps heartbeating at the same epoch, describe still shows it
alone, and a rejected join never creates a group or a member."""

from __future__ import annotations

import time
import uuid

import pytest

from broker.tools.wire import WireClient
from protocol.apis import ApiKey
from protocol.errors import ErrorCode as E

from .members import create_topic, name, wait_for

HB, DESCRIBE = ApiKey.CONSUMER_GROUP_HEARTBEAT, ApiKey.CONSUMER_GROUP_DESCRIBE


def heartbeat(w: WireClient, group: str, member_id: str, epoch: int, *, version: int = 1, **fields):
    req = dict(group_id=group, member_id=member_id, member_epoch=epoch, instance_id=None, rack_id=None,
               rebalance_timeout=-1, subscribed_topic_names=None, subscribed_topic_regex=None,
               server_assignor=None, topic_partitions=None)
    req.update(fields)
    return w.request(HB, version, **req)


def join(w: WireClient, group: str, member_id: str, topic: str | None, **fields):
    fields = dict(dict(rebalance_timeout=10_000, subscribed_topic_names=[topic] if topic else None,
                       topic_partitions=[]), **fields)
    return heartbeat(w, group, member_id, 0, **fields)


def describe(w: WireClient, group: str):
    r = w.request(DESCRIBE, 0, group_ids=[group], include_authorized_operations=False)
    (g,) = r.groups
    return g


@pytest.fixture
def member(broker):
    """A member alone in a fresh group, reconciled to its two partitions: (wire, group, topic,
    member id, epoch)."""
    topic = create_topic(broker.bootstrap, name("wire-cg"), 2)
    group = name("g-wire")
    mid = str(uuid.uuid4())
    w = WireClient("127.0.0.1", broker.port, timeout=10)
    r = join(w, group, mid, topic)
    assert r.error_code == E.none, r.error_message
    assert r.member_id == mid and r.member_epoch >= 1
    epoch = r.member_epoch
    owned = [dict(topic_id=tp.topic_id, partitions=list(tp.partitions)) for tp in r.assignment.topic_partitions]
    assert sorted(p for tp in owned for p in tp["partitions"]) == [0, 1]
    # acknowledge the assignment (a full heartbeat with the owned partitions)
    r = heartbeat(w, group, mid, epoch, topic_partitions=owned)
    assert r.error_code == E.none and r.member_epoch == epoch
    yield w, group, topic, mid, epoch, owned
    heartbeat(w, group, mid, -1)
    w.close()


def _unharmed(w, group, mid, epoch, owned):
    r = heartbeat(w, group, mid, epoch, topic_partitions=owned)
    assert r.error_code == E.none, r.error_message
    assert r.member_epoch == epoch
    g = describe(w, group)
    assert g.error_code == E.none and g.group_state == "Stable"
    assert g.group_epoch == epoch
    assert [(m.member_id, m.member_epoch) for m in g.members] == [(mid, epoch)]
    assert sorted(p for tp in g.members[0].assignment.topic_partitions for p in tp.partitions) == [0, 1]


def test_stale_epoch_is_fenced(member):
    w, group, topic, mid, epoch, owned = member
    r = heartbeat(w, group, mid, epoch + 1, topic_partitions=owned)
    assert r.error_code == E.fenced_member_epoch
    # an older epoch that is not the previous one (or owning more than its assignment) is too
    r = heartbeat(w, group, mid, epoch - 1 if epoch > 1 else epoch + 7, topic_partitions=owned)
    assert r.error_code == E.fenced_member_epoch
    _unharmed(w, group, mid, epoch, owned)


def test_unknown_member_id(member):
    w, group, topic, mid, epoch, owned = member
    r = heartbeat(w, group, str(uuid.uuid4()), epoch)
    assert r.error_code == E.unknown_member_id
    r = heartbeat(w, group, str(uuid.uuid4()), -1)  # leaving as a member it does not know
    assert r.error_code == E.unknown_member_id
    _unharmed(w, group, mid, epoch, owned)


def test_unsupported_assignor(member):
    w, group, topic, mid, epoch, owned = member
    r = join(w, group, str(uuid.uuid4()), topic, server_assignor="no-such-assignor")
    assert r.error_code == E.unsupported_assignor
    assert "uniform" in r.error_message and "range" in r.error_message
    r = heartbeat(w, group, mid, epoch, server_assignor="no-such-assignor")  # and a member switching to it
    assert r.error_code == E.unsupported_assignor
    _unharmed(w, group, mid, epoch, owned)
    # the assignors it does support are accepted
    r = heartbeat(w, group, mid, epoch, server_assignor="range")
    assert r.error_code == E.none


def test_invalid_regular_expression(member, broker):
    w, group, topic, mid, epoch, owned = member
    r = join(w, group, str(uuid.uuid4()), None, subscribed_topic_regex="^wire-(unclosed")
    assert r.error_code == E.invalid_regular_expression
    r = heartbeat(w, group, mid, epoch, subscribed_topic_regex="[z-a]")
    assert r.error_code == E.invalid_regular_expression
    _unharmed(w, group, mid, epoch, owned)
    # a join with a bad regex creates no group
    other = name("g-wire-new")
    assert join(w, other, str(uuid.uuid4()), None, subscribed_topic_regex="*").error_code == \
        E.invalid_regular_expression
    assert describe(w, other).error_code == E.group_id_not_found


@pytest.mark.parametrize("missing", ["rebalance_timeout", "topic_partitions", "subscription", "member_id",
                                     "group_id", "blank_instance_id", "owned_partitions_on_join", "epoch"])
def test_join_without_required_fields_is_invalid(member, missing):
    w, group, topic, mid, epoch, owned = member
    new = str(uuid.uuid4())
    bad = {
        "rebalance_timeout": dict(rebalance_timeout=-1),
        "topic_partitions": dict(topic_partitions=None),
        "subscription": dict(subscribed_topic_names=None, subscribed_topic_regex=None),
        "member_id": dict(member_id=""),  # v1: the client names itself
        "group_id": dict(group_id=" "),
        "blank_instance_id": dict(instance_id=""),
        "owned_partitions_on_join": dict(topic_partitions=owned),
        "epoch": dict(member_epoch=-3),
    }[missing]
    fields = dict(group_id=group, member_id=new, member_epoch=0, instance_id=None, rack_id=None,
                  rebalance_timeout=10_000, subscribed_topic_names=[topic], subscribed_topic_regex=None,
                  server_assignor=None, topic_partitions=[])
    fields.update(bad)
    r = w.request(HB, 1, **fields)
    assert r.error_code == E.invalid_request, (missing, r)
    assert r.error_message
    _unharmed(w, group, mid, epoch, owned)


def test_describe_unknown_and_classic_groups(broker, member):
    w, group, topic, mid, epoch, owned = member
    unknown = name("g-none")
    r = w.request(DESCRIBE, 0, group_ids=[unknown, group], include_authorized_operations=False)
    assert [(g.group_id, g.error_code) for g in r.groups] == [(unknown, E.group_id_not_found), (group, E.none)]
    # a classic group is not a consumer group
    from confluent_kafka import Consumer

    classic = name("g-classic")
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": classic, "group.protocol": "classic",
                  "session.timeout.ms": 6000})
    c.subscribe([topic])
    try:
        wait_for(lambda: c.poll(0.1) is None and c.assignment(), 20, "the classic member's assignment")
        assert describe(w, classic).error_code == E.group_id_not_found
    finally:
        c.close()


def test_v0_join_names_the_member(broker, member):
    w, group, topic, mid, epoch, owned = member
    r = heartbeat(w, group, "", 0, version=0, rebalance_timeout=10_000, subscribed_topic_names=[topic],
                  topic_partitions=[])
    assert r.error_code == E.none
    assert r.member_id and r.member_id != mid and r.member_epoch == epoch + 1
    g = describe(w, group)
    assert sorted(m.member_id for m in g.members) == sorted([mid, r.member_id])
    assert heartbeat(w, group, r.member_id, -1, version=0).error_code == E.none


def test_member_that_does_not_revoke_is_fenced_at_its_rebalance_timeout(broker):
    """A member keeps heartbeating but never gives up the partition a new member's target
    assignment takes from it: at its rebalance timeout (2 s) it is removed, and the other
    member gets everything."""
    topic = create_topic(broker.bootstrap, name("wire-revoke"), 2)
    group = name("g-wire-revoke")
    a, b = str(uuid.uuid4()), str(uuid.uuid4())
    with WireClient("127.0.0.1", broker.port, timeout=10) as w:
        r = join(w, group, a, topic, rebalance_timeout=2000)
        ea = r.member_epoch
        owned = [dict(topic_id=tp.topic_id, partitions=list(tp.partitions)) for tp in r.assignment.topic_partitions]
        assert heartbeat(w, group, a, ea, topic_partitions=owned).error_code == E.none
        rb = join(w, group, b, topic, rebalance_timeout=2000)
        assert rb.error_code == E.none
        eb = rb.member_epoch
        assert eb == ea + 1 and list(rb.assignment.topic_partitions) == []  # its partition is still a's
        r = heartbeat(w, group, a, ea, topic_partitions=owned)
        assert r.error_code == E.none and r.member_epoch == ea  # asked to revoke one partition
        assert sum(len(tp.partitions) for tp in r.assignment.topic_partitions) == 1
        start = time.monotonic()
        seen_b = {"epoch": eb, "assignment": None}

        def fenced():
            r = heartbeat(w, group, a, ea, topic_partitions=owned)  # still owning both
            rb = heartbeat(w, group, b, seen_b["epoch"], topic_partitions=[])
            assert rb.error_code == E.none, rb
            seen_b["epoch"] = rb.member_epoch
            if rb.assignment is not None:
                seen_b["assignment"] = sorted(p for tp in rb.assignment.topic_partitions for p in tp.partitions)
            return r.error_code != E.none and r

        r = wait_for(fenced, 10, "the member that does not revoke to be fenced", interval=0.3)
        assert r.error_code == E.unknown_member_id
        assert 1.5 < time.monotonic() - start < 5
        wait_for(lambda: fenced() and seen_b["assignment"] == [0, 1], 5, "the other member to get everything")
        assert seen_b["epoch"] > eb
        g = describe(w, group)
        assert [m.member_id for m in g.members] == [b]


def test_offset_commit_and_fetch_check_the_member_epoch(member):
    """OffsetCommit v9+ / OffsetFetch v9+ of a consumer group carry the member epoch: the
    member's current epoch works; an epoch ahead of the coordinator's is STALE_MEMBER_EPOCH,
    an unknown member UNKNOWN_MEMBER_ID, and versions before 9 are refused
    (UNSUPPORTED_VERSION) for a member of the consumer protocol."""
    w, group, topic, mid, epoch, owned = member

    def commit(member_id, member_epoch, offset, version=9):
        r = w.request(ApiKey.OFFSET_COMMIT, version, group_id=group, generation_id_or_member_epoch=member_epoch,
                      member_id=member_id, group_instance_id=None, retention_time_ms=-1,
                      topics=[dict(name=topic, partitions=[dict(partition_index=0, committed_offset=offset,
                                                                committed_leader_epoch=-1, committed_metadata="")])])
        return r.topics[0].partitions[0].error_code

    def fetch(member_id, member_epoch):
        r = w.request(ApiKey.OFFSET_FETCH, 9, require_stable=False, groups=[dict(
            group_id=group, member_id=member_id, member_epoch=member_epoch,
            topics=[dict(name=topic, partition_indexes=[0])])])
        g = r.groups[0]
        return g.error_code, (g.topics[0].partitions[0].committed_offset if g.error_code == E.none else None)

    assert commit(mid, epoch, 5) == E.none
    assert commit(mid, epoch + 1, 6) == E.stale_member_epoch
    assert commit(str(uuid.uuid4()), epoch, 7) == E.unknown_member_id
    assert commit("", -1, 8) == E.unknown_member_id  # an "admin" commit while the group has members
    assert commit(mid, epoch, 9, version=8) == E.unsupported_version
    assert fetch(mid, epoch) == (E.none, 5)
    assert fetch(mid, epoch + 1) == (E.stale_member_epoch, None)
    assert fetch(str(uuid.uuid4()), epoch) == (E.unknown_member_id, None)
    assert fetch(None, -1) == (E.none, 5)  # without member (null): an admin's fetch
    _unharmed(w, group, mid, epoch, owned)
