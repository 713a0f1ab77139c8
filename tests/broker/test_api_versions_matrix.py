"""Every advertised version of the data-path APIs answers correctly over a socket, and the
Produce/Fetch error paths give Kafka's error codes."""

import threading
import time
import uuid

import pytest

from broker.tools.wire import WireClient
from protocol.apis import SUPPORTED, ApiKey
from protocol.errors import ErrorCode
from protocol.records import build_batch, iter_headers, iter_records


def _all_records(data):
    return [r for pos, _ in iter_headers(data) for r in iter_records(data, pos)]


def _conn(broker):
    return WireClient("127.0.0.1", broker.port, timeout=30)


def _create(conn, name, partitions=1, configs=None):
    r = conn.request(ApiKey.CREATE_TOPICS, 5, topics=[dict(name=name, num_partitions=partitions, replication_factor=1,
                                                           assignments=[], configs=[dict(name=k, value=v) for k, v in
                                                                                    (configs or {}).items()])],
                     timeout=10000, validate_only=False)
    assert r.topics[0].error_code == 0, r.topics[0]


def _produce(conn, topic, records, version=9, acks=1, partition=0):
    r = conn.request(ApiKey.PRODUCE, version, transactional_id=None, acks=acks, timeout=5000,
                     topic_data=[dict(name=topic, partition_data=[dict(index=partition, records=records)])])
    return r.responses[0].partition_responses[0]


def _fetch(conn, version, topic, topic_id, offset, max_wait=0, min_bytes=1, max_bytes=1 << 20):
    return conn.request(ApiKey.FETCH, version, replica_id=-1, max_wait=max_wait, min_bytes=min_bytes,
                        max_bytes=max_bytes, isolation_level=0, session_id=0, session_epoch=-1,
                        topics=[dict(topic=topic, topic_id=topic_id, partitions=[
                            dict(partition=0, current_leader_epoch=-1, fetch_offset=offset, log_start_offset=-1,
                                 partition_max_bytes=max_bytes)])],
                        forgotten_topics_data=[], rack_id="")


@pytest.fixture(scope="module")
def topic(broker):
    name = "matrix-" + uuid.uuid4().hex[:6]
    with _conn(broker) as c:
        _create(c, name)
        for i in range(3):
            assert _produce(c, name, build_batch([(b"k", b"v%d" % i)] * 2)).error_code == 0
        md = c.request(ApiKey.METADATA, 12, topics=[dict(name=name)], allow_auto_topic_creation=False,
                       include_topic_authorized_operations=False)
        return name, md.topics[0].topic_id


@pytest.mark.parametrize("version", range(SUPPORTED[ApiKey.METADATA].min_version, 13))
def test_metadata_every_version(broker, topic, version):
    name, topic_id = topic
    with _conn(broker) as c:
        r = c.request(ApiKey.METADATA, version, topics=[dict(name=name)], allow_auto_topic_creation=False)
        t = r.topics[0]
        assert t.error_code == 0 and t.name == name and len(t.partitions) == 1
        assert r.brokers[0].port == broker.port
        if version >= 10:
            assert t.topic_id == topic_id


@pytest.mark.parametrize("version", range(4, SUPPORTED[ApiKey.FETCH].max_version + 1))
def test_fetch_every_version(broker, topic, version):
    name, topic_id = topic
    with _conn(broker) as c:
        r = _fetch(c, version, name, topic_id, 2)
        p = r.responses[0].partitions[0]
        assert p.error_code == 0 and p.high_watermark == 6
        offsets = [rec.offset for rec in _all_records(p.records)] if p.records else []
        # the batch holding offset 2 starts at 2; whole batches only
        assert offsets[:4] == [2, 3, 4, 5]
        bad = _fetch(c, version, name, topic_id, 99).responses[0].partitions[0]
        assert bad.error_code == ErrorCode.offset_out_of_range


@pytest.mark.parametrize("version", range(3, 12))
def test_produce_every_served_version(broker, version):
    name = f"pv{version}-" + uuid.uuid4().hex[:6]
    with _conn(broker) as c:
        _create(c, name)
        p = _produce(c, name, build_batch([(None, b"x")] * 3), version=version)
        assert p.error_code == 0 and p.base_offset == 0
        p = _produce(c, name, build_batch([(None, b"y")]), version=version)
        assert p.base_offset == 3


def test_kafka_4_versions_are_advertised():
    # what Kafka 4.0 serves and clients use to recognise it (kafka-python infers 4.0 from ListOffsets v10)
    assert SUPPORTED[ApiKey.FETCH].max_version == 17 and SUPPORTED[ApiKey.LIST_OFFSETS].max_version == 10
    assert (SUPPORTED[ApiKey.DESCRIBE_LOG_DIRS].min_version, SUPPORTED[ApiKey.DESCRIBE_LOG_DIRS].max_version) == (1, 4)
    assert SUPPORTED[ApiKey.ALTER_REPLICA_LOG_DIRS].max_version == 2
    assert SUPPORTED[ApiKey.DESCRIBE_TOPIC_PARTITIONS].max_version == 0


@pytest.mark.parametrize("version", range(1, SUPPORTED[ApiKey.LIST_OFFSETS].max_version + 1))
def test_list_offsets_every_version(broker, topic, version):
    name, _ = topic
    # -4 earliest local (v8+): the whole log is local; -5 latest tiered (v9+): nothing is tiered
    cases = [(-2, 0, 0), (-1, 6, 0)] + ([(-4, 0, 0)] if version >= 8 else []) + ([(-5, -1, -1)] if version >= 9 else [])
    with _conn(broker) as c:
        for ts, want, epoch in cases:
            kw = dict(replica_id=-1, isolation_level=0, timeout=1000,
                      topics=[dict(name=name, partitions=[dict(partition_index=0, timestamp=ts, current_leader_epoch=-1)])])
            r = c.request(ApiKey.LIST_OFFSETS, version, **kw)
            part = r.topics[0].partitions[0]
            assert part.error_code == 0 and part.offset == want and part.timestamp == -1
            if version >= 4:
                assert part.leader_epoch == epoch


def test_produce_error_codes(broker):
    name = "errs-" + uuid.uuid4().hex[:6]
    with _conn(broker) as c:
        _create(c, name, configs={"max.message.bytes": "1000"})
        _create(c, name + "-compact", configs={"cleanup.policy": "compact"})
        assert _produce(c, name, build_batch([(None, b"x" * 2000)])).error_code == ErrorCode.message_too_large
        assert _produce(c, name, build_batch([(None, b"x")]), acks=5).error_code == ErrorCode.invalid_required_acks
        assert _produce(c, name, build_batch([(None, b"x")], base_offset=7)).error_code == ErrorCode.invalid_record
        assert _produce(c, name + "-compact", build_batch([(None, b"x")])).error_code == ErrorCode.invalid_record
        assert _produce(c, name + "-compact", build_batch([(b"k", b"x")])).error_code == 0
        assert _produce(c, "no-such-topic-" + name, build_batch([(None, b"x")])).error_code == \
            ErrorCode.unknown_topic_or_partition
        assert _produce(c, name, build_batch([(None, b"x")]), partition=9).error_code == \
            ErrorCode.unknown_topic_or_partition
        # after all those refusals the log is untouched
        assert _produce(c, name, build_batch([(None, b"ok")])).base_offset == 0


def test_fetch_long_poll_wakes_on_append(broker):
    name = "poll-" + uuid.uuid4().hex[:6]
    with _conn(broker) as c, _conn(broker) as p:
        _create(c, name)
        result = {}

        def fetch():
            t0 = time.monotonic()
            result["resp"] = _fetch(c, 12, name, None, 0, max_wait=10_000, min_bytes=1)
            result["took"] = time.monotonic() - t0

        t = threading.Thread(target=fetch)
        t.start()
        time.sleep(0.5)
        assert "resp" not in result  # parked: nothing to read yet
        _produce(p, name, build_batch([(None, b"wake")]))
        t.join(10)
        assert 0.4 < result["took"] < 5
        recs = list(iter_records(result["resp"].responses[0].partitions[0].records))
        assert [r.value for r in recs] == [b"wake"]
        # and an empty long poll returns after max_wait
        t0 = time.monotonic()
        r = _fetch(c, 12, name, None, 1, max_wait=300, min_bytes=1)
        assert 0.25 < time.monotonic() - t0 < 3 and not r.responses[0].partitions[0].records


def test_topic_compression_type_recompresses(broker):
    from protocol.compression import Codec
    from protocol.records import parse_header

    name = "recompress-" + uuid.uuid4().hex[:6]
    with _conn(broker) as c:
        _create(c, name, configs={"compression.type": "zstd"})
        sent = build_batch([(b"k%d" % i, b"v" * 50, [("h", b"x")]) for i in range(5)], timestamp=[1000 + i for i in
                                                                                             range(5)], compression=Codec.GZIP)
        assert _produce(c, name, sent).error_code == 0
        data = _fetch(c, 12, name, None, 0).responses[0].partitions[0].records
        assert parse_header(data).compression == Codec.ZSTD
        got = _all_records(data)
        assert [(r.offset, r.key, r.value, r.headers, r.timestamp) for r in got] == \
            [(i, b"k%d" % i, b"v" * 50, (("h", b"x"),), 1000 + i) for i in range(5)]


def test_fetch_v17_with_a_replica_directory_id(broker, topic):
    # v17 adds the tagged ReplicaDirectoryId (KIP-853, sent by KRaft followers); a consumer's
    # fetch carrying it is answered like any other
    name, topic_id = topic
    with _conn(broker) as c:
        r = c.request(ApiKey.FETCH, 17, replica_id=-1, max_wait=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
                      session_id=0, session_epoch=-1, forgotten_topics_data=[], rack_id="",
                      topics=[dict(topic_id=topic_id, partitions=[
                          dict(partition=0, current_leader_epoch=-1, fetch_offset=0, log_start_offset=-1,
                               partition_max_bytes=1 << 20, replica_directory_id=uuid.uuid4())])])
        p = r.responses[0].partitions[0]
        assert r.responses[0].topic_id == topic_id and p.error_code == 0 and p.high_watermark == 6
        assert [rec.offset for rec in _all_records(p.records)] == list(range(6))
