"""Kafka's ZooKeeper JSON (kafka.zk.ZkData), byte-compatible: each layout decodes what a
Kafka broker writes (the examples as Jackson prints them) and encodes to the same keys and
value types, compact as Jackson writes. Pure: no ZooKeeper here."""

from __future__ import annotations

import json
import uuid

import pytest

from broker.cluster import zk_layout as zk
from broker.cluster.election import NO_LEADER, PartitionState
from protocol.errors import KafkaError


def _types(v):
    if isinstance(v, dict):
        return {k: _types(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_types(x) for x in v]
    return type(v).__name__


def assert_same_json(ours: bytes, kafkas: bytes) -> None:
    """Same keys, values and JSON types (key order is free: Jackson writes a HashMap's),
    and Jackson's compact form."""
    a, b = json.loads(ours), json.loads(kafkas)
    assert a == b
    assert _types(a) == _types(b)
    assert b" " not in ours and b"\n" not in ours


def test_paths_are_kafkas():
    assert zk.topic_path("t") == "/brokers/topics/t"
    assert zk.partitions_path("t") == "/brokers/topics/t/partitions"
    assert zk.partition_path("t", 3) == "/brokers/topics/t/partitions/3"
    assert zk.partition_state_path("t", 3) == "/brokers/topics/t/partitions/3/state"
    assert zk.topic_config_path("t") == "/config/topics/t"
    assert zk.config_change_path() == "/config/changes/config_change_"
    assert zk.REASSIGN_PARTITIONS == "/admin/reassign_partitions"
    assert zk.PRODUCER_ID_BLOCK == "/latest_producer_id_block"
    for path in (zk.TOPICS, zk.CONFIG_TOPICS, zk.CONFIG_CHANGES, zk.PRODUCER_ID_BLOCK, zk.DELETE_TOPICS):
        assert path in zk.PERSISTENT_PATHS


# --- Uuid -----------------------------------------------------------------------------------------
def test_uuid_text_is_kafkas():
    # new Uuid(34L, 98L): most then least significant bits, base64url without padding
    u = uuid.UUID(int=(34 << 64) | 98)
    assert zk.encode_uuid(u) == "AAAAAAAAACIAAAAAAAAAYg"
    assert zk.decode_uuid("AAAAAAAAACIAAAAAAAAAYg") == u
    assert zk.encode_uuid(zk.ZERO_UUID) == "AAAAAAAAAAAAAAAAAAAAAA"
    # UuidTest's literal
    assert zk.encode_uuid(zk.decode_uuid("UXyU9i5ARn6W00ON2taeWA")) == "UXyU9i5ARn6W00ON2taeWA"
    assert zk.decode_uuid("UXyU9i5ARn6W00ON2taeWA") == uuid.UUID("517c94f6-2e40-467e-96d3-438ddad69e58")


def test_uuid_text_uses_the_url_safe_alphabet():
    u = uuid.UUID(bytes=b"\xfb\xff" * 8)
    text = zk.encode_uuid(u)
    assert "-" in text or "_" in text
    assert "+" not in text and "/" not in text and "=" not in text and len(text) == 22
    assert zk.decode_uuid(text) == u


@pytest.mark.parametrize("bad", ["A" * 43, "AAAAAA"])  # 32 bytes, 4 bytes (UuidTest.testFromStringWithInvalidInput)
def test_uuid_from_string_rejects_wrong_sizes(bad):
    with pytest.raises(ValueError):
        zk.decode_uuid(bad)


def test_random_topic_id_is_never_reserved_nor_dash_led():
    for _ in range(500):
        u = zk.random_topic_id()
        assert u not in (zk.ZERO_UUID, uuid.UUID(int=1))
        assert not zk.encode_uuid(u).startswith("-")


# --- topic znode ----------------------------------------------------------------------------------
KAFKA_TOPIC = (b'{"partitions":{"0":[1,2,3],"1":[2,3,1]},"topic_id":"UXyU9i5ARn6W00ON2taeWA",'
               b'"adding_replicas":{},"removing_replicas":{},"version":3}')


def test_topic_znode_decodes_kafkas_and_encodes_the_same():
    t = zk.decode_topic(KAFKA_TOPIC)
    assert t.topic_id == zk.decode_uuid("UXyU9i5ARn6W00ON2taeWA")
    assert t.partitions == {0: (1, 2, 3), 1: (2, 3, 1)} and t.adding == {} and t.removing == {}
    assert_same_json(zk.encode_topic(t.topic_id, t.partitions), KAFKA_TOPIC)


def test_topic_znode_during_a_reassignment():
    kafkas = (b'{"version":3,"partitions":{"0":[4,5,1,2],"1":[2,3]},"adding_replicas":{"0":[4,5]},'
              b'"removing_replicas":{"0":[1,2]},"topic_id":"AAAAAAAAACIAAAAAAAAAYg"}')
    t = zk.decode_topic(kafkas)
    assert t.adding == {0: (4, 5)} and t.removing == {0: (1, 2)} and t.partitions[1] == (2, 3)
    # a partition with nothing adding/removing is not listed, as TopicZNode.encode does
    ours = zk.encode_topic(t.topic_id, t.partitions, {0: (4, 5), 1: ()}, {0: (1, 2)})
    assert_same_json(ours, kafkas)


def test_old_topic_znodes_decode():
    # version 1 (before KIP-455) and version 2 (before topic ids)
    t = zk.decode_topic(b'{"version":1,"partitions":{"0":[0,1],"1":[1,0]}}')
    assert t.topic_id is None and t.partitions == {0: (0, 1), 1: (1, 0)} and t.adding == {}
    t = zk.decode_topic(b'{"version":2,"partitions":{"0":[0]},"adding_replicas":{},"removing_replicas":{}}')
    assert t.topic_id is None and t.partitions == {0: (0,)}
    # no topic id: no topic_id key at all
    assert "topic_id" not in json.loads(zk.encode_topic(None, {0: (1,)}))


# --- partition state ------------------------------------------------------------------------------
KAFKA_STATE = b'{"controller_epoch":1,"leader":1,"version":1,"leader_epoch":0,"isr":[1,2,3]}'


def test_partition_state_decodes_kafkas_and_encodes_the_same():
    s = zk.decode_partition_state(KAFKA_STATE, zk_version=4)
    assert s == PartitionState(1, 0, (1, 2, 3), 1, 4)
    assert_same_json(zk.encode_partition_state(s), KAFKA_STATE)


def test_partition_state_without_leader_and_with_recovery_state():
    s = PartitionState(NO_LEADER, 7, (2,), 3)
    assert json.loads(zk.encode_partition_state(s)) == {
        "version": 1, "leader": -1, "leader_epoch": 7, "controller_epoch": 3, "isr": [2]}
    # leader_recovery_state (KIP-704, RECOVERING = 1) is read past
    s = zk.decode_partition_state(b'{"version":1,"leader":2,"leader_epoch":8,"controller_epoch":3,"isr":[2],'
                                  b'"leader_recovery_state":1}')
    assert s == PartitionState(2, 8, (2,), 3)


# --- topic config and its change notification -----------------------------------------------------
def test_topic_config_is_kafkas():
    kafkas = b'{"version":1,"config":{"retention.ms":"1000","cleanup.policy":"compact"}}'
    assert zk.decode_config(kafkas) == {"retention.ms": "1000", "cleanup.policy": "compact"}
    assert_same_json(zk.encode_config({"retention.ms": "1000", "cleanup.policy": "compact"}), kafkas)
    assert zk.encode_config({}) == b'{"version":1,"config":{}}'
    assert zk.decode_config(b"") == {} and zk.decode_config(None) == {}
    # values are always strings (a java.util.Properties)
    assert json.loads(zk.encode_config({"segment.bytes": 1024}))["config"] == {"segment.bytes": "1024"}


def test_json_escapes_as_jackson():
    # Jackson writes UTF-8, not \\u escapes, and upper-case hex for control characters
    data = zk.encode_config({"k": "\u00e9t\u00e9\x1f\n", "b": "\\u001f"})
    assert "été".encode() in data
    assert b"\\u001F\\n" in data
    assert b'"\\\\u001f"' in data  # a literal backslash-u stays as written
    assert zk.decode_config(data) == {"k": "\u00e9t\u00e9\x1f\n", "b": "\\u001f"}


def test_config_change_notification_is_kafkas():
    kafkas = b'{"version":2,"entity_path":"topics/my-topic"}'
    assert zk.encode_config_change(zk.topic_entity_path("my-topic")) == kafkas
    assert zk.decode_config_change(kafkas) == "topics/my-topic"
    # version 1, still readable by Kafka's listener
    assert zk.decode_config_change(b'{"version":1,"entity_type":"topics","entity_name":"t"}') == "topics/t"


# --- reassignment and producer ids ----------------------------------------------------------------
def test_reassign_partitions_is_kafkas():
    kafkas = b'{"version":1,"partitions":[{"topic":"foo","partition":1,"replicas":[1,2]}]}'
    assert zk.decode_reassignment(kafkas) == {("foo", 1): (1, 2)}
    assert_same_json(zk.encode_reassignment({("foo", 1): (1, 2)}), kafkas)


def test_producer_id_block_is_kafkas():
    kafkas = b'{"version":1,"broker":0,"block_start":"0","block_end":"999"}'
    assert zk.decode_producer_id_block(kafkas) == (0, 0, 999)
    assert_same_json(zk.encode_producer_id_block(0, 0, 999), kafkas)
    big = zk.encode_producer_id_block(3, 2**62, 2**62 + 999)
    assert json.loads(big)["block_end"] == str(2**62 + 999)  # longs as strings: no float rounding


def test_registration_and_controller_are_unchanged():
    assert json.loads(zk.encode_controller(2, now_ms=5)) == {"version": 2, "brokerid": 2, "timestamp": "5",
                                                            "kraftControllerEpoch": -1}
    assert zk.encode_cluster_id("abc") == b'{"version":"1","id":"abc"}'


def test_next_producer_id_block_follows_kafkas_manager():
    assert zk.next_producer_id_block(None) == (0, 999) and zk.next_producer_id_block(b"") == (0, 999)
    assert zk.next_producer_id_block(zk.encode_producer_id_block(2, 1000, 1999)) == (2000, 2999)
    assert zk.next_producer_id_block(zk.encode_producer_id_block(2, 0, 9), block_size=5) == (10, 14)
    last = 2**63 - 1
    with pytest.raises(KafkaError, match="Have exhausted all producerIds."):
        zk.next_producer_id_block(zk.encode_producer_id_block(0, last - 1999, last - 999))


def test_reassignment_patch_of_a_topic_znode():
    t = zk.TopicAssignment(None, {0: (1, 2), 1: (2, 3)}, {1: (9,)}, {})
    started = t.with_partition(0, (3, 4, 1, 2), (3, 4), (1, 2))
    assert started.partitions == {0: (3, 4, 1, 2), 1: (2, 3)}
    assert started.adding == {0: (3, 4), 1: (9,)} and started.removing == {0: (1, 2)}
    done = started.with_partition(0, (3, 4))
    assert done.partitions[0] == (3, 4) and done.adding == {1: (9,)} and done.removing == {}


def test_log_dir_event_notification_is_kafkas():
    # LogDirEventNotificationSequenceZNode: a persistent sequential child, Jackson's JSON
    assert zk.log_dir_event_path() == "/log_dir_event_notification/log_dir_event_"
    assert zk.LOG_DIR_EVENT_NOTIFICATION in zk.PERSISTENT_PATHS
    assert zk.encode_log_dir_event(3) == b'{"version":1,"broker":3,"event":1}'
    assert zk.decode_log_dir_event(b'{"version":1,"broker":3,"event":1}') == 3
    assert zk.decode_log_dir_event(b"not json") is None
