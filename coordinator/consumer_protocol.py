"""What the coordinator reads from the consumer protocol's embedded payloads, through kio's
generated ConsumerProtocolSubscription codec (``clients/ConsumerProtocolSubscription.json``).

Member metadata is opaque to the group protocol; only consumer groups (protocol type
``consumer``) carry a subscription the coordinator looks into, to know which topics a group
consumes (offset expiry and OffsetDelete keep those).
"""

from __future__ import annotations

import struct

from kio.schema.consumer_protocol_subscription.v0 import ConsumerProtocolSubscription
from kio.serial import entity_reader
from kio.serial.errors import SerialError

__all__ = ["decode_subscription_topics"]

_VERSION = struct.Struct(">h")
_read_subscription_v0 = entity_reader(ConsumerProtocolSubscription)


def decode_subscription_topics(metadata: bytes) -> set[str] | None:
    """Topics of a ConsumerProtocolSubscription of any version, or None when the bytes are not
    a subscription (the caller then assumes the member may consume any topic, as Kafka does
    when it cannot compute subscribedTopics).

    Like Kafka's GroupMetadata.computeSubscribedTopics, every version is read with the v0
    schema (topics, user data): each later version only appends fields to it, so this does
    not depend on which versions exist, and the appended bytes are ignored.
    """
    if len(metadata) < _VERSION.size or _VERSION.unpack_from(metadata)[0] < 0:
        return None
    try:
        subscription, _ = _read_subscription_v0(bytes(metadata), _VERSION.size)
    except (SerialError, ValueError):
        return None
    if subscription.topics is None:  # kio reads a null array although the schema forbids it
        return None
    return set(subscription.topics)
