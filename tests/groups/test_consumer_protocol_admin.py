"""KIP-848 consumer groups with the Java kafka-clients 4.3 jar next to librdkafka: a JVM
member (group.protocol=consumer) sharing a group with two librdkafka members, and the
admin side of both clients: describeConsumerGroups (ConsumerGroupDescribe for consumer
groups, DescribeGroups for classic ones), listing both types with and without type
filters, and deleting groups (NON_EMPTY_GROUP while they have members). KraitGroups.java
is compiled once for the module."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, ConsumerGroupState, ConsumerGroupType, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from tests.krait_harness import JavaProgram

from .members import (
    Member,
    SteadyProducer,
    all_seen,
    committed_redeliveries,
    create_topic,
    exact_cover,
    name,
    wait_for,
)

SOURCE = Path(__file__).with_name("KraitGroups.java")


@pytest.fixture(scope="module")
def java(tmp_path_factory):
    return JavaProgram(SOURCE.read_text(), "KraitGroups", tmp_path_factory.mktemp("java-groups"))


def java_member(java: JavaProgram, bootstrap: str, group: str, topic: str, member_name: str) -> Member:
    return Member(bootstrap, group, member_name,
                  argv=["java", "-cp", java.classpath, java.class_name, "member", bootstrap, group, topic, member_name])


def test_java_member_and_librdkafka_members_share_a_group(kb, java, members):
    topic = create_topic(kb.bootstrap, name("cg-java"), 6)
    group = name("g-java")
    jvm = java_member(java, kb.bootstrap, group, topic, "j0")
    members += [jvm, *(Member(kb.bootstrap, group, f"m{i}", topics=[topic]) for i in (1, 2))]
    wait_for(lambda: exact_cover(members, 6, per_member=2), 60, "two partitions for each of the three members")
    producer = SteadyProducer(kb.bootstrap, topic, 6, interval=0.01).start()
    try:
        wait_for(lambda: all(len(m.records()) > 10 for m in members), 30, "every member consuming")
        admin = AdminClient({"bootstrap.servers": kb.bootstrap})  # kept: its futures die with it
        d = admin.describe_consumer_groups([group])[group].result(15)
        assert d.type == ConsumerGroupType.CONSUMER
        assert sorted(m.client_id for m in d.members) == ["j0", "m1", "m2"]
        # the JVM leaves (close(): a heartbeat with epoch -1): its partitions move at once,
        # not after its session timeout
        jvm.close()
        assert jvm.proc.returncode == 0, "".join(jvm.stderr)[-2000:]
        left = time.monotonic()
        wait_for(lambda: exact_cover(members[1:], 6, per_member=3), 20, "the librdkafka members to take over")
        assert time.monotonic() - left < 4
    finally:
        produced = producer.stop()
    wait_for(lambda: produced <= all_seen(members), 30, "every produced record consumed")
    assert committed_redeliveries(members) == []
    assert not jvm.errors


def _code(future) -> int:
    with pytest.raises(KafkaException) as e:
        future.result(15)
    return e.value.args[0].code()


def test_describe_list_and_delete_both_group_types(kb, java, members):
    topic = create_topic(kb.bootstrap, name("cg-admin"), 4)
    new, classic = name("g-admin-consumer"), name("g-admin-classic")
    members += [Member(kb.bootstrap, new, f"m{i}", topics=[topic]) for i in range(2)]
    members.append(Member(kb.bootstrap, classic, "k0", "classic", topics=[topic]))
    wait_for(lambda: exact_cover(members[:2], 4, per_member=2) and exact_cover(members[2:], 4), 30,
             "both groups assigned")
    sent = SteadyProducer(kb.bootstrap, topic, 4).produce(40)
    wait_for(lambda: sent <= all_seen(members[:2]) and sent <= all_seen(members[2:]), 20, "both groups consuming")
    admin = AdminClient({"bootstrap.servers": kb.bootstrap})

    # librdkafka's describe: ConsumerGroupDescribe for the consumer group, DescribeGroups for the classic one
    futures = admin.describe_consumer_groups([new, classic])
    d = futures[new].result(15)
    assert d.type == ConsumerGroupType.CONSUMER
    assert d.state == ConsumerGroupState.STABLE
    assert d.partition_assignor == "uniform"
    assert sorted(m.client_id for m in d.members) == ["m0", "m1"]
    for m in d.members:
        parts = sorted(tp.partition for tp in m.assignment.topic_partitions)
        assert len(parts) == 2 and {tp.topic for tp in m.assignment.topic_partitions} == {topic}
        assert sorted(tp.partition for tp in m.target_assignment.topic_partitions) == parts
    assert sorted(tp.partition for m in d.members for tp in m.assignment.topic_partitions) == [0, 1, 2, 3]
    k = futures[classic].result(15)
    assert k.type == ConsumerGroupType.CLASSIC
    assert k.state == ConsumerGroupState.STABLE
    assert k.partition_assignor == "range"
    assert [m.client_id for m in k.members] == ["k0"]
    assert sorted(tp.partition for tp in k.members[0].assignment.topic_partitions) == [0, 1, 2, 3]

    # listing: both types side by side, and filtered by type
    def listed(**kw):
        r = admin.list_consumer_groups(**kw).result(15)
        assert not r.errors
        return {g.group_id: g for g in r.valid if g.group_id in (new, classic)}

    both = listed()
    assert both[new].type == ConsumerGroupType.CONSUMER and both[classic].type == ConsumerGroupType.CLASSIC
    assert both[new].state == both[classic].state == ConsumerGroupState.STABLE
    assert set(listed(types={ConsumerGroupType.CONSUMER})) == {new}
    assert set(listed(types={ConsumerGroupType.CLASSIC})) == {classic}
    assert set(listed(types={ConsumerGroupType.CONSUMER}, states={ConsumerGroupState.EMPTY})) == set()

    # the Java Admin's view
    run = java.run("admin", kb.bootstrap, new, classic, timeout=60)
    assert run.returncode == 0, run.stderr[-3000:]
    out = [line.split("\t") for line in run.stdout.splitlines()]
    groups = {x[1]: x[2:] for x in out if x[0] == "GROUP"}
    # type, state, assignor, group epoch, target assignment epoch, members
    assert groups[new][:3] == ["Consumer", "Stable", "uniform"]
    assert int(groups[new][3]) == int(groups[new][4]) > 0
    assert groups[new][5] == "2"
    assert groups[classic] == ["Classic", "Stable", "range", "-1", "-1", "1"]
    described = sorted(x[3:] for x in out if x[0] == "MEMBER" and x[1] == new)  # client, assignment, target, epoch
    assert [c for c, *_ in described] == ["m0", "m1"]
    assert all(a == t and len(a.split(",")) == 2 and e == groups[new][3] for _, a, t, e in described)
    assert sorted(",".join(a for _, a, _, _ in described).split(",")) == [f"{topic}:{p}" for p in range(4)]
    (k0,) = [x[3:] for x in out if x[0] == "MEMBER" and x[1] == classic]
    assert k0 == ["k0", ",".join(f"{topic}:{p}" for p in range(4)), "-", "-1"]
    lists = {(x[1], x[2]): x[3:] for x in out if x[0] == "LIST" and x[2] in (new, classic)}  # type, protocol, state
    assert lists == {
        ("all", new): ["Consumer", "consumer", "Stable"], ("all", classic): ["Classic", "consumer", "Stable"],
        ("consumer", new): ["Consumer", "consumer", "Stable"], ("classic", classic): ["Classic", "consumer", "Stable"],
    }

    # deleting: refused while members remain, then done for both types
    futures = admin.delete_consumer_groups([new, classic], request_timeout=15)
    assert _code(futures[new]) == KafkaError.NON_EMPTY_GROUP
    assert _code(futures[classic]) == KafkaError.NON_EMPTY_GROUP
    for m in members:
        m.close()
    wait_for(lambda: all(g.state == ConsumerGroupState.EMPTY for g in listed().values()) and len(listed()) == 2,
             20, "both groups empty")
    futures = admin.delete_consumer_groups([new, classic], request_timeout=15)
    futures[new].result(15)
    futures[classic].result(15)
    assert listed() == {}
    # their committed offsets went with them
    c = Consumer({"bootstrap.servers": kb.bootstrap, "group.id": new})
    try:
        committed = c.committed([TopicPartition(topic, p) for p in range(4)], timeout=10)
    finally:
        c.close()
    assert [tp.offset for tp in committed] == [-1001] * 4
    assert _code(admin.delete_consumer_groups([new], request_timeout=15)[new]) == KafkaError.GROUP_ID_NOT_FOUND
