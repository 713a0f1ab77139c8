"""Which __share_group_state partition holds a share-partition: Kafka's
``Utils.abs(key.asCoordinatorKey().hashCode()) % numPartitions``, the key being
``groupId:topicId:partition`` with Kafka's base64 topic id."""

from __future__ import annotations

import uuid

import pytest

from share_coordinator import ShareCoordinator, ShareCoordinatorConfig, partition_for


def java_hash(s: str) -> int:
    """String.hashCode by its definition: s[0]*31^(n-1) + ... + s[n-1], over UTF-16 code
    units, as a 32-bit two's complement int."""
    units = s.encode("utf-16-be")
    n = len(units) // 2
    total = sum(int.from_bytes(units[2 * i:2 * i + 2], "big") * 31 ** (n - 1 - i) for i in range(n))
    total %= 1 << 32
    return total - (1 << 32) if total >= 1 << 31 else total


def kafka_abs(n: int) -> int:
    return 0 if n == -(1 << 31) else abs(n)


TOPIC = uuid.UUID(bytes=bytes(range(16)))  # "AAECAwQFBgcICQoLDA0ODw"


@pytest.mark.parametrize(("group", "topic", "partition", "key"), [
    ("g", TOPIC, 3, "g:AAECAwQFBgcICQoLDA0ODw:3"),
    ("orders-share", TOPIC, 0, "orders-share:AAECAwQFBgcICQoLDA0ODw:0"),
    ("grüppe", uuid.UUID(int=0), 17, "grüppe:AAAAAAAAAAAAAAAAAAAAAA:17"),
    ("a", uuid.UUID(bytes=b"\xff" * 16), 2147483647, "a:_____________________w:2147483647"),
])
def test_partition_for_known_keys(group, topic, partition, key):
    for n in (50, 1, 7):
        assert partition_for(group, topic, partition, n) == kafka_abs(java_hash(key)) % n


def test_known_values():
    # Fixed numbers, so that a change of the rule (or of the key string) cannot pass unseen.
    assert java_hash("g:AAECAwQFBgcICQoLDA0ODw:3") == -720837766
    assert partition_for("g", TOPIC, 3, 50) == 16


def test_coordinator_uses_its_configured_partition_count():
    c = ShareCoordinator(ShareCoordinatorConfig(state_topic_num_partitions=7), lambda: 0)
    assert c.partition_for("g", TOPIC, 3) == kafka_abs(java_hash("g:AAECAwQFBgcICQoLDA0ODw:3")) % 7
