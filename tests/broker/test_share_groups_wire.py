"""Share groups (KIP-932) over the wire against a broker process: ShareGroupHeartbeat
(join, a second member, leave, errors), ShareGroupDescribe and ListGroups, as a 4.2 client
sends them; ApiVersions lists them with ShareFetch and ShareAcknowledge; and the share
session and acknowledgement errors of ShareFetch / ShareAcknowledge."""

from __future__ import annotations

import uuid

from broker.tools.admin_client import RESOURCE_GROUP, AdminClient
from broker.tools.wire import WireClient
from protocol.apis import ApiKey
from protocol.errors import ErrorCode as E

HB, DESCRIBE = ApiKey.SHARE_GROUP_HEARTBEAT, ApiKey.SHARE_GROUP_DESCRIBE


def _topic(w: WireClient, partitions: int) -> str:
    name = f"share-{uuid.uuid4().hex[:8]}"
    r = w.request(ApiKey.CREATE_TOPICS, 7, timeout=15_000, validate_only=False, topics=[
        dict(name=name, num_partitions=partitions, replication_factor=1, assignments=[], configs=[])])
    assert r.topics[0].error_code == E.none, r.topics[0].error_message
    return name


def _hb(w: WireClient, group: str, member: str, epoch: int, topics: list[str] | None = None):
    return w.request(HB, 1, group_id=group, member_id=member, member_epoch=epoch, rack_id=None,
                     subscribed_topic_names=topics)


def _partitions(resp) -> list[int]:
    return sorted(p for tp in resp.assignment.topic_partitions for p in tp.partitions)


def test_share_group_over_the_wire(broker) -> None:
    with WireClient("127.0.0.1", broker.port, timeout=15, negotiate=False) as w:
        topic = _topic(w, 4)
        group = f"sg-{uuid.uuid4().hex[:8]}"
        m1, m2 = str(uuid.uuid4()), str(uuid.uuid4())

        first = _hb(w, group, m1, 0, [topic])
        assert first.error_code == E.none, first.error_message
        assert first.member_id == m1 and first.member_epoch == 1
        assert _partitions(first) == [0, 1, 2, 3]

        second = _hb(w, group, m2, 0, [topic])
        assert second.error_code == E.none and second.member_epoch == 2
        again = _hb(w, group, m1, 1)
        assert again.member_epoch == 2
        assert sorted(_partitions(again) + _partitions(second)) == [0, 1, 2, 3]
        assert len(_partitions(again)) == len(_partitions(second)) == 2

        # errors as Kafka answers them
        assert _hb(w, group, m1, 9).error_code == E.fenced_member_epoch
        assert _hb(w, group, "nobody", 2).error_code == E.unknown_member_id
        bad = _hb(w, group, m1, 0, None)
        assert bad.error_code == E.invalid_request
        assert bad.error_message == "SubscribedTopicNames must be set in first request."
        assert _hb(w, f"none-{group}", m1, 3).error_code == E.group_id_not_found

        d = w.request(DESCRIBE, 1, group_ids=[group, f"none-{group}"], include_authorized_operations=True)
        described, missing = d.groups
        assert described.error_code == E.none and described.group_state == "Stable"
        assert described.assignor_name == "simple" and described.group_epoch == 2
        assert {m.member_id for m in described.members} == {m1, m2}
        assert {tp.topic_name for m in described.members for tp in m.assignment.topic_partitions} == {topic}
        assert missing.error_code == E.group_id_not_found

        listed = w.request(ApiKey.LIST_GROUPS, 5, states_filter=[], types_filter=["share"])
        assert listed.error_code == E.none
        mine = [g for g in listed.groups if g.group_id == group]
        assert [(g.group_type, g.protocol_type, g.group_state) for g in mine] == [("share", "share", "Stable")]

        left = _hb(w, group, m2, -1)
        assert left.error_code == E.none and left.member_epoch == -1
        assert _partitions(_hb(w, group, m1, 2)) == [0, 1, 2, 3]
        assert _hb(w, group, m1, -1).error_code == E.none
        listed = w.request(ApiKey.LIST_GROUPS, 5, states_filter=["Empty"], types_filter=["share"])
        assert group in {g.group_id for g in listed.groups}

        versions = w.request(ApiKey.API_VERSIONS, 3, client_software_name="t", client_software_version="1")
        keys = {k.api_key for k in versions.api_keys}
        assert {HB, DESCRIBE, 78, 79} <= keys  # with ShareFetch and ShareAcknowledge
        # and the share.version feature, as a 4.2 cluster with share groups reports it
        assert [(f.name, f.min_version, f.max_version) for f in versions.supported_features] == [
            ("share.version", 0, 1)]
        assert [(f.name, f.min_version_level, f.max_version_level) for f in versions.finalized_features] == [
            ("share.version", 1, 1)]


def _topic_id(w: WireClient, topic: str):
    md = w.request(ApiKey.METADATA, 12, topics=[dict(name=topic, topic_id=None)], allow_auto_topic_creation=False,
                   include_topic_authorized_operations=False)
    return md.topics[0].topic_id


def _fetch(w: WireClient, group: str, member: str, epoch: int, topic_id, partitions, acks=None):
    return w.request(ApiKey.SHARE_FETCH, 1, group_id=group, member_id=member, share_session_epoch=epoch,
                     max_wait=0, min_bytes=1, max_bytes=1 << 20, max_records=100, batch_size=100,
                     topics=[dict(topic_id=topic_id, partitions=[
                         dict(partition_index=p, acknowledgement_batches=(acks or {}).get(p, [])) for p in partitions])],
                     forgotten_topics_data=[])


def test_share_fetch_and_acknowledge_refusals(broker) -> None:
    with WireClient("127.0.0.1", broker.port, timeout=15, negotiate=False) as w:
        topic = _topic(w, 1)
        tid = _topic_id(w, topic)
        r = w.request(ApiKey.PRODUCE, 9, transactional_id=None, acks=-1, timeout=5000, topic_data=[dict(
            name=topic, partition_data=[dict(index=0, records=_records(5))])])
        assert r.responses[0].partition_responses[0].error_code == E.none
        group, member = f"sg-{uuid.uuid4().hex[:8]}", str(uuid.uuid4())
        # no session yet: an incremental epoch and a close are refused, nothing else happens
        assert _fetch(w, group, member, 3, tid, [0]).error_code == E.share_session_not_found
        assert _fetch(w, group, member, -1, tid, [0]).error_code == E.share_session_not_found
        # acknowledgements cannot ride on the request that opens a session
        ack = [dict(first_offset=0, last_offset=0, acknowledge_types=[1])]
        assert _fetch(w, group, member, 0, tid, [0], {0: ack}).error_code == E.invalid_request
        opened = _fetch(w, group, member, 0, tid, [0])
        assert opened.error_code == E.none
        # share.auto.offset.reset=latest: the five records before the group came are not given
        assert [p.acquired_records for t in opened.responses for p in t.partitions] == [()]
        assert _fetch(w, group, member, 7, tid, [0]).error_code == E.invalid_share_session_epoch
        # acknowledging records nobody acquired: INVALID_RECORD_STATE for that partition
        got = _fetch(w, group, member, 1, tid, [0], {0: ack})
        assert got.error_code == E.none
        assert got.responses[0].partitions[0].acknowledge_error_code == E.invalid_record_state
        a = w.request(ApiKey.SHARE_ACKNOWLEDGE, 1, group_id=group, member_id=member, share_session_epoch=0,
                      topics=[dict(topic_id=tid, partitions=[dict(partition_index=0, acknowledgement_batches=ack)])])
        assert a.error_code == E.invalid_share_session_epoch
        a = w.request(ApiKey.SHARE_ACKNOWLEDGE, 1, group_id=group, member_id=member, share_session_epoch=2,
                      topics=[dict(topic_id=tid, partitions=[dict(partition_index=0, acknowledgement_batches=ack)])])
        assert a.error_code == E.none
        assert a.responses[0].partitions[0].error_code == E.invalid_record_state
        # malformed acknowledgement batches: INVALID_REQUEST for the partition, nothing lost,
        # and the session's epoch moves on as for any acknowledgement
        bad_batches = ([dict(first_offset=3, last_offset=1, acknowledge_types=[1])],     # last before first
                       [dict(first_offset=0, last_offset=4, acknowledge_types=[1, 1])],  # 2 types, 5 offsets
                       [dict(first_offset=0, last_offset=0, acknowledge_types=[9])])     # no such type
        for epoch, bad in enumerate(bad_batches, start=3):
            r = w.request(ApiKey.SHARE_ACKNOWLEDGE, 1, group_id=group, member_id=member, share_session_epoch=epoch,
                          topics=[dict(topic_id=tid, partitions=[dict(partition_index=0,
                                                                      acknowledgement_batches=bad)])])
            assert r.error_code == E.none
            assert r.responses[0].partitions[0].error_code == E.invalid_request, bad
        closed = _fetch(w, group, member, -1, tid, [0])
        assert closed.error_code == E.none
        assert _fetch(w, group, member, 4, tid, [0]).error_code == E.share_session_not_found


def _records(n: int) -> bytes:
    from protocol.records import build_batch

    return bytes(build_batch([(None, b"x%d" % i) for i in range(n)]))


def _set_group_config(broker, group: str, key: str, value: str) -> None:
    with AdminClient(broker.bootstrap) as admin:  # raises if refused
        admin.incremental_alter_configs(RESOURCE_GROUP, group, {key: value})


def test_group_configs_set_the_heartbeat_interval(broker) -> None:
    """share.heartbeat.interval.ms / consumer.heartbeat.interval.ms of a GROUP resource are
    what that group's members are told; other groups keep the broker's."""
    with WireClient("127.0.0.1", broker.port, timeout=15, negotiate=False) as w:
        topic = _topic(w, 1)
        share, other = f"sg-{uuid.uuid4().hex[:8]}", f"sg-{uuid.uuid4().hex[:8]}"
        _set_group_config(broker, share, "share.heartbeat.interval.ms", "7000")
        assert _hb(w, share, str(uuid.uuid4()), 0, [topic]).heartbeat_interval.total_seconds() == 7
        assert _hb(w, other, str(uuid.uuid4()), 0, [topic]).heartbeat_interval.total_seconds() == 5
        consumer = f"cg-{uuid.uuid4().hex[:8]}"
        _set_group_config(broker, consumer, "consumer.heartbeat.interval.ms", "6000")
        r = w.request(ApiKey.CONSUMER_GROUP_HEARTBEAT, 0, group_id=consumer, member_id=str(uuid.uuid4()),
                      member_epoch=0, instance_id=None, rack_id=None, rebalance_timeout=30000,
                      subscribed_topic_names=[topic], server_assignor=None, topic_partitions=[])
        assert r.error_code == E.none, r.error_message
        assert r.heartbeat_interval.total_seconds() == 6
