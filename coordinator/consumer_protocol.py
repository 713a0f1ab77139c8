"""The consumer protocol's embedded payloads (Kafka's ConsumerProtocol), through kio's
generated codecs (``clients/ConsumerProtocolSubscription.json`` and
``ConsumerProtocolAssignment.json``).

Member metadata is opaque to the group protocol; only consumer groups (protocol type
``consumer``) carry a subscription the coordinator looks into: a classic group to know which
topics it consumes (offset expiry and OffsetDelete keep those), and the online migration
between classic and consumer groups (KIP-848) to turn a classic member's JoinGroup metadata
into a subscription and its SyncGroup assignment into partitions, and back.

Both payloads start with an int16 version. As in Kafka, a version newer than the ones known
is read with the newest known schema (later versions only append fields), a negative one or
bytes too short for the schema are malformed (:class:`ConsumerProtocolError`), and trailing
bytes are ignored. Lengths are checked against the bytes before kio reads them
(protocol/bounds.py), since the metadata comes from clients.
"""

from __future__ import annotations

import importlib
import io
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from typing import Any

from kio.serial import entity_reader, entity_writer
from kio.serial.errors import SerialError

from protocol.bounds import check_entity
from protocol.build import make
from protocol.errors import DecodeError

__all__ = [
    "ConsumerProtocolError",
    "Subscription",
    "TopicPartitions",
    "decode_assignment",
    "decode_subscription",
    "decode_subscription_topics",
    "encode_assignment",
    "protocol_version",
]

_VERSION = struct.Struct(">h")
#: the newest ConsumerProtocolSubscription / ConsumerProtocolAssignment version kio knows
HIGHEST_VERSION = 3

#: (topic name, partitions), as the consumer protocol lists them
TopicPartitions = tuple[tuple[str, tuple[int, ...]], ...]


class ConsumerProtocolError(ValueError):
    """Bytes that are not a consumer protocol payload (Kafka's SchemaException)."""


@dataclass(frozen=True, slots=True)
class Subscription:
    """A ConsumerProtocolSubscription (the fields a version lacks have their defaults)."""

    version: int
    topics: tuple[str, ...]
    user_data: bytes | None = None
    owned_partitions: TopicPartitions = ()
    generation_id: int = -1
    rack_id: str | None = None


@cache
def _schema(kind: str, version: int) -> type:
    module = importlib.import_module(f"kio.schema.consumer_protocol_{kind}.v{version}")
    return getattr(module, f"ConsumerProtocol{kind.capitalize()}")  # type: ignore[no-any-return]


def protocol_version(data: bytes) -> int:
    """The version a payload starts with (Kafka's ConsumerProtocol.deserializeVersion)."""
    if len(data) < _VERSION.size:
        raise ConsumerProtocolError("Buffer underflow while parsing consumer protocol's header")
    return int(_VERSION.unpack_from(data)[0])


def _read(kind: str, data: bytes) -> tuple[int, Any]:
    data = bytes(data)
    version = protocol_version(data)
    if version < 0:
        raise ConsumerProtocolError(f"Unsupported {kind} version {version}")
    cls = _schema(kind, min(version, HIGHEST_VERSION))
    try:
        check_entity(cls, data, _VERSION.size)
        entity, _ = entity_reader(cls)(data, _VERSION.size)
    except (DecodeError, SerialError, ValueError, IndexError, OverflowError) as exc:
        raise ConsumerProtocolError(f"Buffer underflow while parsing consumer protocol's {kind}: {exc}") from None
    return version, entity


def _topic_partitions(items: Any) -> TopicPartitions:
    return tuple((str(tp.topic), tuple(int(p) for p in tp.partitions)) for tp in items or ())


def decode_subscription(data: bytes) -> Subscription:
    """Kafka's deserializeConsumerProtocolSubscription."""
    version, s = _read("subscription", data)
    if s.topics is None:  # kio reads a null array although the schema forbids it
        raise ConsumerProtocolError("null topics in the subscription")
    return Subscription(
        version=version,
        topics=tuple(s.topics),
        user_data=s.user_data,
        owned_partitions=_topic_partitions(getattr(s, "owned_partitions", ())),
        generation_id=int(getattr(s, "generation_id", -1)),
        rack_id=getattr(s, "rack_id", None),
    )


def decode_assignment(data: bytes) -> TopicPartitions:
    """The partitions of a ConsumerProtocolAssignment (Kafka's
    deserializeConsumerProtocolAssignment; the user data is not kept)."""
    _, a = _read("assignment", data)
    return _topic_partitions(a.assigned_partitions)


def encode_assignment(partitions: Iterable[tuple[str, Iterable[int]]], version: int) -> bytes:
    """A ConsumerProtocolAssignment of ``version`` (clamped to the known ones, as Kafka's
    serializeAssignment does) without user data. Topics and partitions are sorted."""
    version = min(max(version, 0), HIGHEST_VERSION)
    cls = _schema("assignment", version)
    tp_cls = _schema_nested("assignment", version)
    entity = make(
        cls,
        assigned_partitions=[
            make(tp_cls, topic=topic, partitions=sorted(ps)) for topic, ps in sorted(partitions, key=lambda tp: tp[0])
        ],
        user_data=None,
    )
    buf = io.BytesIO()
    buf.write(_VERSION.pack(version))
    entity_writer(cls)(buf, entity)
    return buf.getvalue()


@cache
def _schema_nested(kind: str, version: int) -> type:
    module = importlib.import_module(f"kio.schema.consumer_protocol_{kind}.v{version}.data")
    return module.TopicPartition  # type: ignore[no-any-return]


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
    cls = _schema("subscription", 0)
    data = bytes(metadata)
    try:
        check_entity(cls, data, _VERSION.size)
        subscription, _ = entity_reader(cls)(data, _VERSION.size)
    except (DecodeError, SerialError, ValueError, IndexError, OverflowError):
        return None
    if subscription.topics is None:  # kio reads a null array although the schema forbids it
        return None
    return set(subscription.topics)
