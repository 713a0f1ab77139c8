"""Where a group or a transactional id lives: Kafka's ``Utils.abs(key.hashCode()) % n``
(coordinator/placement.py), checked against values Kafka computes, and the legacy partition
that Krait's former rule (``hashCode & 0x7fffffff``) used instead."""

from __future__ import annotations

import random
import string

import pytest

from coordinator import partition_for_group
from coordinator.placement import (
    java_string_hash,
    kafka_abs,
    legacy_partition,
    legacy_partition_for_key,
    partition_for_key,
)
from txn_coordinator import partition_for_transactional_id

#: key -> (String.hashCode(), Utils.abs(h) % 50, Utils.toPositive(h) % 50, Utils.abs(h) % 7),
#: printed by a Java program calling org.apache.kafka.common.utils.Utils of kafka-clients 4.3.0
KAFKA = {
    "connect-file-sink": (-734210271, 21, 27, 4),
    "polygenelubricants": (-2147483648, 0, 0, 0),  # Integer.MIN_VALUE
    "polygenelubricants!": (-2147483615, 15, 33, 4),
    "my-group": (-1906497762, 12, 36, 1),
    "console-consumer-12345": (158455506, 6, 6, 6),
    "txn-1": (110810510, 10, 10, 6),
    "": (0, 0, 0, 0),
    "g": (103, 3, 3, 5),
    "\U0001f600": (1772899, 49, 49, 2),  # two UTF-16 code units
    "Aa": (2112, 12, 12, 5),
}


@pytest.mark.parametrize("key", list(KAFKA))
def test_placement_is_kafkas(key: str) -> None:
    h, p50, legacy50, p7 = KAFKA[key]
    assert java_string_hash(key) == h
    assert partition_for_key(key, 50) == partition_for_group(key, 50) == partition_for_transactional_id(key, 50) == p50
    assert partition_for_key(key, 7) == p7
    assert legacy_partition_for_key(key, 50) == legacy50


def test_kafka_abs() -> None:
    assert kafka_abs(-(2**31)) == 0  # Math.abs would overflow to Integer.MIN_VALUE
    assert kafka_abs(-(2**31) + 1) == 2**31 - 1
    assert kafka_abs(-5) == kafka_abs(5) == 5
    assert kafka_abs(0) == 0


def test_strings_hashing_to_integer_min_value_go_to_partition_zero() -> None:
    # Java's hash is h(prefix + c1 + c2) = 961 * h(prefix) + 31 * c1 + c2 (mod 2**32): solve
    # for c1, c2 after prefixes until one needs a single UTF-16 code unit each.
    rng = random.Random(31)
    found = []
    for _ in range(200_000):
        prefix = "".join(rng.choices(string.ascii_lowercase, k=10))
        x = (2**31 - 961 * java_string_hash(prefix)) % 2**32
        c1, c2 = divmod(x, 31)
        if c1 <= 0xFFFF and not 0xD800 <= c1 <= 0xDFFF:
            found.append(prefix + chr(c1) + chr(c2))
            if len(found) == 3:
                break
    assert len(found) == 3
    for s in ["polygenelubricants", *found]:
        assert java_string_hash(s) == -(2**31)
        assert partition_for_key(s, 50) == partition_for_key(s, 7) == legacy_partition_for_key(s, 50) == 0


def test_the_legacy_partition_is_the_only_other_place_a_key_was() -> None:
    rng = random.Random(23)
    for n in (1, 2, 3, 7, 50, 64, 1000):
        for _ in range(2000):
            key = "".join(rng.choice(string.printable) for _ in range(rng.randint(0, 24)))
            p = partition_for_key(key, n)
            assert legacy_partition_for_key(key, n) in (p, legacy_partition(p, n))
        for p in range(min(n, 64)):
            assert legacy_partition(legacy_partition(p, n), n) == p
    assert legacy_partition(21, 50) == 27 and legacy_partition(27, 50) == 21
    assert legacy_partition(0, 50) == 48  # 2**31 % 50 == 48: partition 0's negative keys were in 48
