"""The share-group offset admin APIs (DescribeShareGroupOffsets, AlterShareGroupOffsets,
DeleteShareGroupOffsets) and ``krait share-groups`` against a broker process, after real
consumption by the Java KafkaShareConsumer: the start offset moves past accepted records, lag
is the high watermark minus the start offset minus the delivery-complete count, altering
offsets is refused while the group has a member and makes the next consumer start from the
new offset, and the CLI prints what kafka-share-groups.sh prints."""

from __future__ import annotations

import io
import uuid

from confluent_kafka import Producer

from broker.tools import share_groups_cli
from broker.tools.command import run
from broker.tools.wire import WireClient
from protocol.apis import ApiKey
from protocol.errors import ErrorCode as E
from tests.share.share_members import Member
from tests.share.test_share_consumers import _topic


def _produce(bootstrap: str, topic: str, values: list[str]) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for v in values:
        p.produce(topic, v.encode(), partition=0)
    assert p.flush(30) == 0


def _describe(w: WireClient, group: str, topics=None):
    r = w.request(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 1, groups=[dict(group_id=group, topics=topics)])
    return r.groups[0]


def _cli(bootstrap: str, *args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    rc = run("krait share-groups", "", share_groups_cli._parser, share_groups_cli._body,
             ["--bootstrap-server", bootstrap, *args], out, err)
    return rc, out.getvalue(), err.getvalue()


def test_share_group_offsets_describe_alter_delete(fresh_broker, worker_program) -> None:
    bootstrap = fresh_broker.bootstrap
    topic = _topic(bootstrap, 1)
    group = f"sgo-{uuid.uuid4().hex[:6]}"
    _produce(bootstrap, topic, [f"v-{i}" for i in range(10)])
    m = Member(worker_program, bootstrap, group, topic, idle_exit_ms=3000)
    m.wait()
    assert sorted(r["o"] for r in m.records if r["a"] == "ACCEPT") == list(range(10))
    _produce(bootstrap, topic, [f"v-{i}" for i in range(10, 15)])

    with WireClient("127.0.0.1", fresh_broker.port, timeout=15) as w:
        # every accepted record is behind the start offset; 5 new records are the lag
        g = _describe(w, group)
        assert g.error_code == E.none
        [t] = g.topics
        assert t.topic_name == topic
        [p] = t.partitions
        # (the start offset moves past accepted records as the share-partition writes it; the
        # ones behind it count as delivery-complete until then: either way 5 are left)
        assert (p.partition_index, p.lag, p.error_code) == (0, 5, E.none)
        start = p.start_offset
        assert 0 <= start <= 10
        assert p.leader_epoch >= 0
        # named topics; an unknown topic has no offset (-1), not an error
        g = _describe(w, group, [dict(topic_name=topic, partitions=[0]), dict(topic_name="nope", partitions=[0])])
        got = {(t.topic_name, q.partition_index): (q.start_offset, q.error_code) for t in g.topics for q in t.partitions}
        assert got == {(topic, 0): (start, E.none), ("nope", 0): (-1, E.none)}

        # the CLI's default describe: kafka-share-groups.sh's table
        rc, out, err = _cli(bootstrap, "--describe", "--group", group)
        assert rc == 0, (out, err)
        gw, tw = max(15, len(group)), max(15, len(topic))
        assert out == (f"\n{'GROUP':<{gw}} {'TOPIC':<{tw}} {'PARTITION':<10} {'START-OFFSET':<13} LAG"
                       f"\n{group:<{gw}} {topic:<{tw}} {'0':<10} {start!s:<13} 5\n")
        rc, out, _ = _cli(bootstrap, "--list")
        assert group in out.split("\n")
        rc, out, err = _cli(bootstrap, "--describe", "--group", group, "--state")
        assert err == f"\nShare group '{group}' has no active members.\n"
        assert out.split("\n")[1].split() == ["GROUP", "COORDINATOR", "(ID)", "STATE", "#MEMBERS"]
        assert out.split("\n")[2].split()[-2:] == ["Empty", "0"]

        # a member joined: altering and deleting are refused (NON_EMPTY_GROUP)
        member = str(uuid.uuid4())
        hb = w.request(ApiKey.SHARE_GROUP_HEARTBEAT, 1, group_id=group, member_id=member, member_epoch=0,
                       rack_id=None, subscribed_topic_names=[topic])
        assert hb.error_code == E.none
        r = w.request(ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, group_id=group, topics=[
            dict(topic_name=topic, partitions=[dict(partition_index=0, start_offset=3)])])
        assert (r.error_code, r.error_message) == (E.non_empty_group, "The group is not empty.")
        r = w.request(ApiKey.DELETE_SHARE_GROUP_OFFSETS, 0, group_id=group, topics=[dict(topic_name=topic)])
        assert (r.error_code, r.error_message) == (E.non_empty_group, "The group is not empty.")
        rc, out, err = _cli(bootstrap, "--reset-offsets", "--group", group, "--topic", topic, "--to-offset", "3",
                            "--execute")
        assert (rc, out, err) == (1, "", f"Share group '{group}' is not empty.\n")
        w.request(ApiKey.SHARE_GROUP_HEARTBEAT, 1, group_id=group, member_id=member, member_epoch=-1,
                  rack_id=None, subscribed_topic_names=None)

        # other groups: unknown ones are GROUP_ID_NOT_FOUND
        r = w.request(ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, group_id="no-such-group", topics=[
            dict(topic_name=topic, partitions=[dict(partition_index=0, start_offset=3)])])
        assert r.error_code == E.group_id_not_found

        # the CLI's dry run plans, --execute alters
        rc, out, _ = _cli(bootstrap, "--reset-offsets", "--group", group, "--topic", topic, "--to-offset", "3",
                          "--dry-run")
        plan = f"\n{'GROUP':<30} {'TOPIC':<30} {'PARTITION':<10} {'NEW-OFFSET':<15}\n" \
               f"{group:<30} {topic:<30} {'0':<10} {'3':<15}\n"
        assert (rc, out) == (0, plan)
        assert _describe(w, group).topics[0].partitions[0].start_offset == start
        rc, out, _ = _cli(bootstrap, "--reset-offsets", "--group", group, "--topic", topic, "--to-offset", "3",
                          "--execute")
        assert (rc, out) == (0, plan)
        p = _describe(w, group).topics[0].partitions[0]
        assert (p.start_offset, p.lag) == (3, 12)

    # a consumer now starts from offset 3
    m = Member(worker_program, bootstrap, group, topic, idle_exit_ms=3000)
    m.wait()
    assert sorted(r["o"] for r in m.records) == list(range(3, 15))

    with WireClient("127.0.0.1", fresh_broker.port, timeout=15) as w:
        assert _describe(w, group).topics[0].partitions[0].lag == 0
        # delete the topic's offsets: the group has none left; an unknown topic is refused
        rc, out, _ = _cli(bootstrap, "--delete-offsets", "--group", group, "--topic", topic, "--topic", "nope")
        tw = max(15, len(topic))
        assert out == (f"\n{'TOPIC':<{tw}} STATUS\n{'nope':<{tw}} Error: This server does not host this "
                       f"topic-partition.\n{topic:<{tw}} Successful\n")
        assert rc == 1
        assert _describe(w, group).topics == ()
        rc, out, _ = _cli(bootstrap, "--describe", "--group", group)
        assert out == f"\nShare group '{group}' has no offset information.\n"
        rc, out, _ = _cli(bootstrap, "--delete", "--group", group)
        assert (rc, out) == (0, f"Deletion of requested share groups ('{group}') was successful.\n")
