"""The consumer-protocol subscription as the coordinator reads it (through kio's codec):
Kafka's bytes, every version, and what is not a subscription."""

from __future__ import annotations

import random

from coordinator.consumer_protocol import decode_subscription_topics

from .harness import subscription

H = bytes.fromhex


def test_kio_writes_the_bytes_of_the_spec() -> None:
    # ConsumerProtocolSubscription.json, hand-encoded: int16 version | []string topics |
    # nullable bytes user data (| v1+ []{string topic, []int32 partitions} owned partitions
    # | v2+ int32 generation | v3+ nullable string rack).
    v0 = H("0000" "00000002" "000161" "00026262" "ffffffff")
    assert subscription(["a", "bb"]) == v0
    v3 = H(
        "0003" "00000001" "000161" "00000002" "5544"
        + "00000001" + "000161" + "00000002" "00000000" "00000007"
        + "00000009" + "0002" + b"r1".hex()
    )
    built = subscription(
        ["a"], 3, user_data=b"UD", owned_partitions=[{"topic": "a", "partitions": [0, 7]}],
        generation_id=9, rack_id="r1",
    )
    assert built == v3
    assert decode_subscription_topics(v0) == {"a", "bb"}
    assert decode_subscription_topics(v3) == {"a"}


def test_every_version_and_newer_ones() -> None:
    for version in range(4):
        assert decode_subscription_topics(subscription(["x", "y"], version, user_data=b"u")) == {"x", "y"}
    # A version newer than any we know is read by its v0 prefix, as Kafka reads it.
    future = H("0009") + subscription(["z"], 3, generation_id=1)[2:] + b"new fields"
    assert decode_subscription_topics(future) == {"z"}
    assert decode_subscription_topics(subscription([])) == set()


def test_what_is_not_a_subscription() -> None:
    assert decode_subscription_topics(b"") is None
    assert decode_subscription_topics(b"\x00") is None
    assert decode_subscription_topics(H("ffff") + subscription(["a"])[2:]) is None  # negative version
    assert decode_subscription_topics(H("0000" "ffffffff" "ffffffff")) is None  # null topic array
    assert decode_subscription_topics(H("0000" "00000001" "0002" "ff")) is None  # truncated topic
    assert decode_subscription_topics(H("0000" "00000001" "0001" "ff" "ffffffff")) is None  # not UTF-8
    # Kafka reads the user data too (v0 schema): a subscription cut off before it is garbage
    assert decode_subscription_topics(H("0000" "00000001" "000161")) is None
    rng = random.Random(11)
    good = subscription(["orders", "payments"], 1, user_data=b"abc")
    for _ in range(3000):
        b = bytearray(good)
        b[rng.randrange(len(b))] = rng.randrange(256)
        result = decode_subscription_topics(bytes(b))
        assert result is None or isinstance(result, set)
