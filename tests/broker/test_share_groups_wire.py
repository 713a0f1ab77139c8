"""Share groups (KIP-932) over the wire against a broker process: ShareGroupHeartbeat
(join, a second member, leave, errors), ShareGroupDescribe and ListGroups, as a 4.2 client
sends them; and ApiVersions leaves both APIs out until ShareFetch exists (issue 25)."""

from __future__ import annotations

import uuid

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
        assert HB not in keys and DESCRIBE not in keys  # issue 25 turns them on with ShareFetch
