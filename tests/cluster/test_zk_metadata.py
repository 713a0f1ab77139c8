"""ZkMetadata against a real ZooKeeper (the session's `zookeeper` fixture, a chroot per
test): what one client writes, in Kafka's layout, another client's ZkMetadata sees through
its watches; the writer sees its own change on return; conditional writes conflict as
Kafka's do; producer id blocks from concurrent brokers never overlap."""

from __future__ import annotations

import json
import threading
import time
import uuid

import pytest
from kazoo.client import KazooClient

from broker.cluster import zk_layout as zk
from broker.cluster.election import NO_LEADER, InvalidPartitionsError, PartitionState
from broker.cluster.zk_metadata import (
    ControllerMovedError,
    TopicExistsError,
    TopicMeta,
    UnknownTopicError,
    ZkMetadata,
)
from protocol.errors import ErrorCode


def _wait(cond, timeout: float = 10.0):
    deadline = time.monotonic() + timeout
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.02)


@pytest.fixture
def connect(zookeeper, zk_connect):
    root = KazooClient(hosts=zookeeper.connect)
    root.start(10)
    root.ensure_path("/" + zk_connect.partition("/")[2])
    root.stop()
    root.close()
    return zk_connect


@pytest.fixture
def clients(connect):
    made: list[KazooClient] = []

    def make() -> KazooClient:
        c = KazooClient(hosts=connect)
        c.start(10)
        made.append(c)
        return c

    yield make
    for c in made:
        c.stop()
        c.close()


@pytest.fixture
def pair(clients):
    """Two brokers' views on two sessions: (writer, watcher, raw kazoo client)."""
    changes: list[int] = []
    a = ZkMetadata(clients())
    b = ZkMetadata(clients(), on_change=lambda: changes.append(1))
    a.start()
    b.start()
    b.changes = changes
    yield a, b, clients()
    a.stop()
    b.stop()


def states_for(assignment: dict[int, tuple[int, ...]], cepoch: int = 1) -> dict[int, PartitionState]:
    return {p: PartitionState(r[0], 0, r, cepoch) for p, r in assignment.items()}


TID = uuid.UUID("517c94f6-2e40-467e-96d3-438ddad69e58")
ASSIGN = {0: (1, 2), 1: (2, 3), 2: (3, 1)}


def test_create_topic_is_seen_by_the_writer_at_once_and_by_another_broker(pair):
    a, b, raw = pair
    a.create_topic("orders", TID, ASSIGN, {"retention.ms": "1000"}, states_for(ASSIGN))
    # the writer's own view, before any watch had to fire
    assert a.topics["orders"] == TopicMeta("orders", TID, ASSIGN, {"retention.ms": "1000"}, {}, {})
    assert a.states[("orders", 0)] == PartitionState(1, 0, (1, 2), 1, 0)
    assert a.assignments() == {("orders", p): r for p, r in ASSIGN.items()}
    # the other broker, through its watches
    _wait(lambda: len([tp for tp in b.states if tp[0] == "orders"]) == 3)
    assert b.topics["orders"] == a.topics["orders"] and b.states == a.states
    assert b.changes and b.version >= 4
    # the znodes are Kafka's
    topic = json.loads(raw.get("/brokers/topics/orders")[0])
    assert topic == {"version": 3, "partitions": {"0": [1, 2], "1": [2, 3], "2": [3, 1]}, "adding_replicas": {},
                     "removing_replicas": {}, "topic_id": "UXyU9i5ARn6W00ON2taeWA"}
    assert json.loads(raw.get("/brokers/topics/orders/partitions/1/state")[0]) == {
        "version": 1, "leader": 2, "leader_epoch": 0, "controller_epoch": 1, "isr": [2, 3]}
    assert json.loads(raw.get("/config/topics/orders")[0]) == {"version": 1, "config": {"retention.ms": "1000"}}


def test_creating_an_existing_topic_fails_and_changes_nothing(pair):
    a, b, raw = pair
    a.create_topic("t", TID, {0: (1,)}, {"a": "1"}, states_for({0: (1,)}))
    with pytest.raises(TopicExistsError, match="Topic 't' already exists.") as info:
        b.create_topic("t", uuid.uuid4(), {0: (2,), 1: (2,)}, {"a": "2"}, states_for({0: (2,), 1: (2,)}))
    assert info.value.error_code == ErrorCode.topic_already_exists
    assert zk.decode_topic(raw.get("/brokers/topics/t")[0]).topic_id == TID
    assert zk.decode_config(raw.get("/config/topics/t")[0]) == {"a": "1"}
    assert raw.get_children("/brokers/topics/t/partitions") == ["0"]


def test_a_left_over_config_node_is_overwritten(pair):
    a, _, raw = pair
    raw.create("/config/topics/old", zk.encode_config({"x": "y"}), makepath=True)
    a.create_topic("old", TID, {0: (1,)}, {"retention.ms": "5"}, states_for({0: (1,)}))
    assert a.topics["old"].configs == {"retention.ms": "5"}


def test_start_loads_existing_topics_before_returning(pair, clients):
    a, _, _ = pair
    a.create_topic("t1", TID, ASSIGN, {}, states_for(ASSIGN))
    a.create_topic("t2", uuid.uuid4(), {0: (1,)}, {"x": "1"}, states_for({0: (1,)}))
    late = ZkMetadata(clients())
    late.start()
    assert set(late.topics) == {"t1", "t2"} and late.topics["t2"].configs == {"x": "1"}
    assert late.states == a.states
    late.stop()


def test_topic_created_without_states_gets_them_later(pair):
    """Kafka's way: the topic znode first, the controller writes the states after."""
    a, b, raw = pair
    a.create_topic("later", TID, {0: (1, 2), 1: (2, 1)}, {}, {})
    assert "later" in a.topics and not any(tp[0] == "later" for tp in a.states)
    assert not raw.exists("/brokers/topics/later/partitions")
    _wait(lambda: "later" in b.topics)
    raw.create("/brokers/topics/later/partitions/1/state",
               zk.encode_partition_state(PartitionState(2, 0, (2, 1), 3)), makepath=True)
    _wait(lambda: ("later", 1) in b.states)
    assert b.states[("later", 1)] == PartitionState(2, 0, (2, 1), 3, 0) and ("later", 0) not in b.states
    _wait(lambda: ("later", 1) in a.states)


def test_delete_topic_then_create_it_again(pair):
    a, b, raw = pair
    a.create_topic("t", TID, ASSIGN, {"k": "v"}, states_for(ASSIGN))
    _wait(lambda: len(b.states) == 3)
    b.delete_topic("t")
    assert "t" not in b.topics and not b.states  # the deleter's view at once
    for path in ("/brokers/topics/t", "/config/topics/t"):
        assert not raw.exists(path)
    _wait(lambda: "t" not in a.topics and not a.states)
    with pytest.raises(UnknownTopicError, match="does not exist") as info:
        a.delete_topic("t")
    assert info.value.error_code == ErrorCode.unknown_topic_or_partition
    # the same name again: a new id, fewer partitions, watched afresh
    new_id = uuid.uuid4()
    a.create_topic("t", new_id, {0: (3,)}, {}, states_for({0: (3,)}))
    _wait(lambda: "t" in b.topics and b.topics["t"].topic_id == new_id and ("t", 0) in b.states)
    assert b.topics["t"].configs == {} and set(b.states) == {("t", 0)} and b.states[("t", 0)].leader == 3
    # and its states are still watched
    a.update_partition_state(("t", 0), PartitionState(3, 1, (3,), 2), 0)
    _wait(lambda: b.states[("t", 0)].leader_epoch == 1)


def test_topic_deleted_behind_our_back_is_dropped(pair):
    a, b, raw = pair
    a.create_topic("t", TID, ASSIGN, {}, states_for(ASSIGN))
    _wait(lambda: len(b.states) == 3)
    raw.delete("/brokers/topics/t", recursive=True)  # an operator's zookeeper-shell deleteall
    _wait(lambda: "t" not in a.topics and "t" not in b.topics and not a.states and not b.states)
    a.create_topic("t", TID, {0: (1,)}, {}, states_for({0: (1,)}))
    _wait(lambda: set(b.states) == {("t", 0)})


def test_add_partitions(pair):
    a, b, raw = pair
    a.create_topic("t", TID, {0: (1, 2)}, {}, states_for({0: (1, 2)}))
    b.add_partitions("t", {1: (2, 1), 2: (1, 2)}, states_for({1: (2, 1), 2: (1, 2)}))
    assert b.topics["t"].assignment == {0: (1, 2), 1: (2, 1), 2: (1, 2)} and len(b.states) == 3
    _wait(lambda: len(a.states) == 3 and len(a.topics["t"].assignment) == 3)
    assert a.topics["t"].topic_id == TID
    assert zk.decode_topic(raw.get("/brokers/topics/t")[0]).topic_id == TID
    with pytest.raises(InvalidPartitionsError, match="numbered from 3"):
        a.add_partitions("t", {4: (1, 2)}, {})
    with pytest.raises(InvalidPartitionsError, match="can only be increased"):
        a.add_partitions("t", {}, {})
    with pytest.raises(UnknownTopicError):
        a.add_partitions("nope", {0: (1,)}, {})


def test_conditional_state_update_and_conflict(pair):
    a, b, _ = pair
    a.create_topic("t", TID, {0: (1, 2, 3)}, {}, states_for({0: (1, 2, 3)}))
    _wait(lambda: ("t", 0) in b.states)
    tp = ("t", 0)
    old = b.states[tp]
    assert old.zk_version == 0
    # the leader (b) shrinks the ISR; the controller (a) concurrently moves leadership
    stored = b.update_partition_state(tp, PartitionState(1, 0, (1, 2), 1, old.zk_version), old.zk_version)
    assert stored == PartitionState(1, 0, (1, 2), 1, 1) and b.states[tp] == stored
    lost = a.update_partition_state(tp, PartitionState(2, 1, (2, 3), 2), 0)
    assert lost is None
    assert a.states[tp] == stored  # refreshed from ZooKeeper before returning
    # retried at the right version
    won = a.update_partition_state(tp, PartitionState(2, 1, (2,), 2), a.states[tp].zk_version)
    assert won is not None and won.zk_version == 2
    _wait(lambda: b.states[tp] == won)
    assert b.read_partition_state(tp) == won and b.read_partition_state(("t", 9)) is None
    assert a.update_partition_state(("gone", 0), won, 0) is None


def test_controller_writes_are_fenced_by_the_controller_epoch(pair):
    a, _, raw = pair
    raw.create("/controller_epoch", b"1")
    _, epoch_stat = raw.get("/controller_epoch")
    a.create_topic("t", TID, {0: (1, 2)}, {}, states_for({0: (1, 2)}))
    tp = ("t", 0)
    ok = a.update_partition_state(tp, PartitionState(2, 1, (2,), 1), 0, controller_epoch_zk_version=epoch_stat.version)
    assert ok is not None and ok.zk_version == 1
    raw.set("/controller_epoch", b"2")  # another controller was elected
    with pytest.raises(ControllerMovedError) as info:
        a.update_partition_state(tp, PartitionState(NO_LEADER, 2, (2,), 1), 1,
                                 controller_epoch_zk_version=epoch_stat.version)
    assert info.value.error_code == ErrorCode.not_controller
    assert zk.decode_partition_state(raw.get("/brokers/topics/t/partitions/0/state")[0]).leader == 2
    # a stale state version under the current epoch: None, as without the fence
    assert a.update_partition_state(tp, PartitionState(1, 2, (1,), 2), 0, controller_epoch_zk_version=1) is None


def test_topic_configs_and_change_notifications(pair):
    a, b, raw = pair
    a.create_topic("t", TID, {0: (1,)}, {"retention.ms": "1"}, states_for({0: (1,)}))
    _wait(lambda: "t" in b.topics)
    before = set(raw.get_children("/config/changes"))
    b.set_topic_configs("t", {"retention.ms": "2", "cleanup.policy": "compact"})
    assert b.topics["t"].configs == {"retention.ms": "2", "cleanup.policy": "compact"}
    _wait(lambda: a.topics["t"].configs == {"retention.ms": "2", "cleanup.policy": "compact"})
    new = sorted(set(raw.get_children("/config/changes")) - before)
    assert len(new) == 1 and new[0].startswith("config_change_") and len(new[0]) == len("config_change_") + 10
    assert json.loads(raw.get(f"/config/changes/{new[0]}")[0]) == {"version": 2, "entity_path": "topics/t"}
    a.set_topic_configs("t", {})
    _wait(lambda: b.topics["t"].configs == {})
    with pytest.raises(UnknownTopicError):
        a.set_topic_configs("nope", {"a": "b"})
    assert not raw.exists("/config/topics/nope")


def test_reassignment_fields(pair):
    a, b, raw = pair
    a.create_topic("t", TID, {0: (1, 2), 1: (2, 3)}, {}, states_for({0: (1, 2), 1: (2, 3)}))
    meta = a.set_reassignment("t", 0, (3, 4, 1, 2), adding=(3, 4), removing=(1, 2))
    assert meta.assignment[0] == (3, 4, 1, 2) and meta.adding == {0: (3, 4)} and meta.removing == {0: (1, 2)}
    # b learns of the topic through its ZooKeeper watch: wait for that before looking at it
    _wait(lambda: "t" in b.topics and b.topics["t"].adding == {0: (3, 4)})
    doc = json.loads(raw.get("/brokers/topics/t")[0])
    assert doc["adding_replicas"] == {"0": [3, 4]} and doc["removing_replicas"] == {"0": [1, 2]}
    done = b.set_reassignment("t", 0, (3, 4))
    assert done.assignment[0] == (3, 4) and done.adding == {} and done.removing == {}
    assert done.topic_id == TID
    _wait(lambda: a.topics["t"].assignment[0] == (3, 4) and a.topics["t"].adding == {})
    with pytest.raises(UnknownTopicError):
        a.set_reassignment("t", 7, (1,))


def test_producer_id_blocks_never_overlap(clients):
    metas = [ZkMetadata(clients()) for _ in range(2)]
    assert metas[0].allocate_producer_id_block(0) == (0, 999)
    got: list[tuple[int, int]] = []
    lock = threading.Lock()

    def run(md: ZkMetadata, broker: int) -> None:
        for _ in range(15):
            block = md.allocate_producer_id_block(broker)
            with lock:
                got.append(block)

    threads = [threading.Thread(target=run, args=(metas[i % 2], i)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    blocks = sorted(got)
    assert len(blocks) == 60
    assert all(end - start == 999 for start, end in blocks)
    # consecutive and disjoint: together exactly [1000, 61000)
    assert [s for s, _ in blocks] == list(range(1000, 61000, 1000))
    data = json.loads(metas[0].zk.get("/latest_producer_id_block")[0])
    assert data["block_start"] == "60000" and data["block_end"] == "60999" and data["version"] == 1
    assert metas[1].allocate_producer_id_block(7, block_size=10) == (61000, 61009)


def test_producer_id_block_on_an_empty_kafka_node(clients):
    """Kafka creates /latest_producer_id_block empty at start-up (createTopLevelPaths)."""
    c = clients()
    c.ensure_path("/latest_producer_id_block")
    assert ZkMetadata(c).allocate_producer_id_block(1) == (0, 999)


def test_on_change_stops_after_stop(pair):
    a, b, _ = pair
    a.create_topic("t", TID, {0: (1,)}, {}, states_for({0: (1,)}))
    _wait(lambda: ("t", 0) in b.states)
    b.stop()
    seen, version = len(b.changes), b.version
    a.create_topic("u", TID, {0: (1,)}, {}, states_for({0: (1,)}))
    a.update_partition_state(("t", 0), PartitionState(1, 1, (1,), 1), 0)
    _wait(lambda: "u" in a.topics)
    time.sleep(0.3)  # give a (wrongly) live watch the time to fire
    assert len(b.changes) == seen and b.version == version and "u" not in b.topics


def test_many_partitions_and_topics_converge(pair):
    a, b, _ = pair
    for i in range(5):
        assignment = {p: (1 + p % 3, 1 + (p + 1) % 3) for p in range(20)}
        a.create_topic(f"bulk-{i}", uuid.uuid4(), assignment, {}, states_for(assignment))
    _wait(lambda: len(b.states) == 100)
    for i in range(0, 5, 2):
        a.delete_topic(f"bulk-{i}")
    _wait(lambda: len(b.states) == 40 and set(b.topics) == {"bulk-1", "bulk-3"})
    assert b.states == a.states and b.topics == a.topics
