"""Fetch: stored batch bytes go from the segment file (one pread per partition) into the
response chunks untouched; the response is framed by protocol.fetch_codec, so record bytes
are never copied into a bigger buffer. Long poll: when fewer than min_bytes are available,
the request parks in the purgatory until an append to one of its partitions or max_wait.

Isolation (Kafka's FetchIsolation): consumers read up to the high watermark
(read_uncommitted) or the last stable offset (read_committed, isolation_level 1), followers
up to the log end. Every answer reports the partition's LSO; read_committed answers also
list the aborted transactions overlapping the batches returned (an empty list when none),
other answers send a null list, as Kafka does. The client drops the aborted records
itself, so the bytes still go out untouched. A read_committed fetch parked at the LSO
wakes when it moves: a marker append or a high watermark move notifies the partition.

Fetch sessions (KIP-227) are declined by answering session id 0, which every client
handles by sending full fetch requests.

With an authorizer (KafkaApis.handleFetchRequest): a consumer needs READ on each topic,
a follower CLUSTER_ACTION on the cluster; refused partitions answer
TOPIC_AUTHORIZATION_FAILED, whether the topic exists or not. Decided once per request,
not again on each long-poll pass.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from protocol.apis import ApiKey
from protocol.errors import ErrorCode, KafkaError
from protocol.fetch_codec import FetchPartition, FetchTopic, encode_fetch_response

from ..replica.manager import READ_COMMITTED
from ..security import access
from ..security.operations import AclOperation, ResourceType
from ..security.quotas import fetch_max_bytes, fetch_throttle
from . import handles

if TYPE_CHECKING:
    from ..broker import Broker
    from ..server import RequestContext


def _replica_id(req, version: int) -> int:
    """The fetching follower's broker id, -1 for consumers (KIP-903 moved it in v15)."""
    if version >= 15:
        state = getattr(req, "replica_state", None)
        return state.replica_id if state is not None else -1
    return getattr(req, "replica_id", -1)


#: ``denied`` value refusing every topic (a follower without CLUSTER_ACTION)
_ALL_DENIED = frozenset({None})


def _read_all(broker: Broker, req, version: int, denied: frozenset | set | None = None,
              max_bytes: int | None = None) -> tuple[list[FetchTopic], int, bool, list[tuple[str, int]]]:
    """One pass over the requested partitions: (topics, bytes read, any error, keys).
    ``denied``: topic names the caller may not fetch (or ``_ALL_DENIED``)."""
    reg = broker.registry
    replicas = broker.replicas
    replica_id = _replica_id(req, version)
    # followers read to the log end whatever they ask (Kafka's FetchIsolation.of)
    read_committed = replica_id < 0 and req.isolation_level == READ_COMMITTED
    remaining = req.max_bytes if max_bytes is None else max_bytes
    total = 0
    any_error = False
    keys = []
    topics = []
    first = True
    for t in req.topics:
        if version >= 13:
            info = reg.by_id.get(t.topic_id)
            name = info.name if info else ""
            topic_id = t.topic_id
        else:
            name = t.topic
            info = reg.get(name)
            topic_id = info.topic_id if info else None
        ft = FetchTopic(name, topic_id, [])
        topics.append(ft)
        for p in t.partitions:
            fp = FetchPartition(p.partition, records=b"")
            ft.partitions.append(fp)
            try:
                if denied and (info is not None or version < 13) and (denied is _ALL_DENIED or name in denied):
                    raise KafkaError(ErrorCode.topic_authorization_failed)
                if info is None:
                    raise KafkaError(ErrorCode.unknown_topic_id if version >= 13 else ErrorCode.unknown_topic_or_partition)
                keys.append((name, p.partition))
                limit = min(p.partition_max_bytes, max(remaining, 0))
                if replica_id >= 0:
                    got = replicas.follower_fetch(replica_id, name, p.partition, p.fetch_offset,
                                                  getattr(p, "last_fetched_epoch", -1),
                                                  getattr(p, "current_leader_epoch", -1), limit, first)
                    if got.diverging_epoch is not None:
                        fp.diverging_epoch = got.diverging_epoch
                        any_error = True  # answered at once: the follower must truncate first
                    # Kafka reports the leader's LSO to followers too (they do not use it)
                    fp.last_stable_offset = got.last_stable_offset
                else:
                    plog = replicas.partition(name, p.partition)
                    replicas.check_leader_epoch(getattr(p, "current_leader_epoch", -1), name, p.partition)
                    if remaining <= 0 and not first:
                        fp.high_watermark = plog.high_watermark
                        fp.last_stable_offset = plog.last_stable_offset
                        fp.log_start_offset = plog.log_start_offset
                        if read_committed:
                            fp.aborted_transactions = []  # no records, none of them aborted
                        continue
                    got = replicas.read(plog, p.fetch_offset, limit, min_one_batch=first,
                                        read_committed=read_committed)
                    fp.last_stable_offset = got.last_stable_offset
                    fp.aborted_transactions = got.aborted_transactions
            except KafkaError as exc:
                fp.error_code = exc.error_code
                any_error = True
                _error_details(broker, fp, name, p.partition, exc.error_code, version)
                continue
            fp.high_watermark, fp.log_start_offset = got.high_watermark, got.log_start_offset
            if got.records:
                fp.records = got.records
                total += len(got.records)
                remaining -= len(got.records)
                first = False
    return topics, total, any_error, keys


def _error_details(broker: Broker, fp: FetchPartition, topic: str, partition: int, code: int, version: int) -> None:
    """Where the partition's leader is now (KIP-951's CurrentLeader, v12+), and the
    leader's offsets for a follower that fell out of range."""
    if code in (ErrorCode.not_leader_or_follower, ErrorCode.fenced_leader_epoch) and version >= 12:
        state = broker.cluster_states().get((topic, partition))
        if state is not None:
            fp.current_leader = (state.leader, state.leader_epoch)
    elif code == ErrorCode.offset_out_of_range:
        offsets = broker.replicas.local_offsets(topic, partition)
        if offsets is not None:
            fp.high_watermark, fp.last_stable_offset, fp.log_start_offset = offsets


@handles(ApiKey.FETCH, versions=(4, 17))
def fetch(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    version = ctx.version
    correlation_id = ctx.header.correlation_id
    if getattr(req, "session_id", 0) != 0 and getattr(req, "session_epoch", -1) > 0:
        chunks, _ = encode_fetch_response(version, correlation_id, [], error_code=ErrorCode.fetch_session_id_not_found)
        return chunks
    denied = None if broker.authorizer is None else _denied(broker, ctx, req, version)
    consumer = _replica_id(req, version) < 0
    ctx.metric_name = "FetchConsumer" if consumer else "FetchFollower"
    # a consumer's fetch is capped to what its quota allows in one window (Kafka)
    max_bytes = fetch_max_bytes(broker, ctx, req.max_bytes) if consumer else req.max_bytes
    topics, total, any_error, keys = _read_all(broker, req, version, denied, max_bytes)
    max_wait = req.max_wait.total_seconds()
    if total >= req.min_bytes or max_wait <= 0 or any_error or not keys:
        return _answer(broker, ctx, consumer, topics)
    return _long_poll(broker, ctx, req, consumer, max_bytes, max_wait, keys, denied)


def _answer(broker: Broker, ctx: RequestContext, consumer: bool, topics: list[FetchTopic]) -> list:
    """The response; a consumer over its byte rate gets an empty one carrying the throttle
    time instead, and is muted (KafkaApis: fetchContext.getThrottledResponse)."""
    version, correlation_id = ctx.version, ctx.header.correlation_id
    chunks, size = encode_fetch_response(version, correlation_id, topics)
    if consumer:
        throttle = fetch_throttle(broker, ctx, size)
        if throttle > 0:
            ctx.conn.mute(throttle)
            return encode_fetch_response(version, correlation_id, [], throttle_time_ms=throttle)[0]
        fetched = broker.metrics.fetched
        for ft in topics:
            for fp in ft.partitions:
                if not fp.error_code:
                    fetched(ft.name, len(fp.records) if fp.records else 0)
    return chunks


def _denied(broker: Broker, ctx: RequestContext, req, version: int) -> frozenset | set:
    """The topics this fetch may not read: all of them for a follower without
    CLUSTER_ACTION, else those without READ."""
    if _replica_id(req, version) >= 0:
        return frozenset() if access.authorize_cluster(broker, ctx, AclOperation.CLUSTER_ACTION) else _ALL_DENIED
    if version >= 13:
        by_id = broker.registry.by_id
        names = [info.name for t in req.topics if (info := by_id.get(t.topic_id)) is not None]
    else:
        names = [t.topic for t in req.topics]
    allowed = access.authorized_names(broker, ctx, AclOperation.READ, ResourceType.TOPIC, names)
    return {n for n in names if n not in allowed}


async def _long_poll(broker: Broker, ctx: RequestContext, req, consumer, max_bytes, max_wait, keys, denied=None):
    version = ctx.version
    deadline = time.monotonic() + max_wait
    watched = len(keys)
    broker.metrics.delay("Fetch", watched)
    try:
        while True:
            woke = await broker.replicas.wait_for_appends(keys, deadline - time.monotonic())
            topics, total, any_error, keys = _read_all(broker, req, version, denied, max_bytes)
            if not woke or total >= req.min_bytes or any_error or time.monotonic() >= deadline or broker.stopping:
                return _answer(broker, ctx, consumer, topics)
    finally:
        broker.metrics.delay("Fetch", watched, -1)
