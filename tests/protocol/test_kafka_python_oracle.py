"""kafka-python as an independent oracle: its record batches and requests decode with
ours, ours decode with it (and pass its CRC check)."""

from __future__ import annotations

import datetime
import json
import uuid

import pytest

pytest.importorskip("kafka")

from kafka.protocol.consumer import FetchRequest as NewFetchRequest
from kafka.protocol.metadata import MetadataRequest as NewMetadataRequest
from kafka.protocol.old.fetch import FetchRequest as OldFetchRequest
from kafka.protocol.old.metadata import MetadataRequest as OldMetadataRequest
from kafka.protocol.old.metadata import MetadataResponse as OldMetadataResponse
from kafka.protocol.old.produce import ProduceRequest as OldProduceRequest
from kafka.protocol.producer import ProduceRequest as NewProduceRequest
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from protocol import apis, framing
from protocol.build import make
from protocol.compression import Codec
from protocol.records import build_batch, iter_records, parse_header, validate_batches

CODECS = [Codec.NONE, Codec.GZIP, Codec.SNAPPY, Codec.LZ4, Codec.ZSTD]
TS = 1_700_000_000_000


def _records(n=200):
    """Compressible, realistic records: keys, null keys, null values, headers."""
    out = []
    for i in range(n):
        key = None if i % 7 == 3 else f"user-{i % 13}".encode()
        value = None if i % 11 == 5 else json.dumps({"id": i, "event": "click", "page": f"/p/{i % 17}"}).encode()
        headers = [("trace", f"t{i}".encode()), ("empty", None)] if i % 3 == 0 else []
        out.append((key, value, headers))
    return out


def _kp_batch(codec, records, producer_id=-1, epoch=-1, seq=-1):
    b = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=False,
                                  producer_id=producer_id, producer_epoch=epoch, base_sequence=seq,
                                  batch_size=1 << 24)
    for i, (k, v, h) in enumerate(records):
        b.append(i, timestamp=TS + i, key=k, value=v, headers=h)
    return bytes(b.build())


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name)
def test_kafka_python_batches_decode_with_ours(codec):
    records = _records()
    batch = _kp_batch(codec, records, producer_id=1000, epoch=2, seq=5)
    [h] = validate_batches(batch)
    assert h.compression == codec, "kafka-python sent it uncompressed: records not compressible enough?"
    assert (h.record_count, h.producer_id, h.producer_epoch, h.base_sequence) == (len(records), 1000, 2, 5)
    got = list(iter_records(batch))
    assert [r.offset for r in got] == list(range(len(records)))
    assert [r.timestamp for r in got] == [TS + i for i in range(len(records))]
    assert [(r.key, r.value, list(r.headers)) for r in got] == [(k, v, list(hs)) for k, v, hs in records]


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name)
def test_our_batches_decode_with_kafka_python(codec):
    records = _records()
    batch = build_batch(records, timestamp=[TS + i for i in range(len(records))], compression=codec,
                        producer_id=7, producer_epoch=1, base_sequence=0, base_offset=100)
    kb = DefaultRecordBatch(batch)
    assert kb.validate_crc()
    assert kb.compression_type == codec
    assert (kb.base_offset, kb.producer_id, kb.producer_epoch, kb.base_sequence) == (100, 7, 1, 0)
    got = list(kb)
    assert [r.offset for r in got] == [100 + i for i in range(len(records))]
    assert [r.timestamp for r in got] == [TS + i for i in range(len(records))]
    assert [(r.key, r.value, [tuple(x) for x in r.headers]) for r in got] == [(k, v, list(hs)) for k, v, hs in records]


def _decode(frame: bytes):
    body = frame[4:]
    h = framing.parse_request_header(body)
    return h, framing.decode_request(h, body)


@pytest.mark.parametrize("version", [3, 5, 7, 8])
def test_old_produce_request(version):
    batch = _kp_batch(Codec.LZ4, _records(50))
    req = OldProduceRequest[version](transactional_id=None, acks=-1, timeout_ms=30000,
                                     topic_data=[("orders", [(0, batch), (3, batch)])])
    req.with_header(correlation_id=17, client_id="kafka-python")
    h, obj = _decode(req.encode(header=True, framed=True))
    assert (h.api_key, h.api_version, h.correlation_id, h.client_id) == (0, version, 17, "kafka-python")
    assert obj.acks == -1 and obj.timeout == datetime.timedelta(seconds=30) and obj.transactional_id is None
    [topic] = obj.topic_data
    assert topic.name == "orders"
    assert [(p.index, bytes(p.records)) for p in topic.partition_data] == [(0, batch), (3, batch)]
    assert len(validate_batches(topic.partition_data[1].records)) == 1


@pytest.mark.parametrize("version", [9, 11])
def test_new_produce_request(version):
    batch = _kp_batch(Codec.ZSTD, _records(50))
    T = NewProduceRequest
    req = T(transactional_id="tx-1", acks=1, timeout_ms=1500, topic_data=[
        T.TopicProduceData(name="orders", partition_data=[T.TopicProduceData.PartitionProduceData(index=2, records=batch)])])
    req.with_header(correlation_id=3, client_id="kp-new")
    h, obj = _decode(req.encode(version=version, header=True, framed=True))
    assert (h.api_version, h.client_id) == (version, "kp-new")
    assert obj.transactional_id == "tx-1" and obj.acks == 1
    assert bytes(obj.topic_data[0].partition_data[0].records) == batch
    assert obj.topic_data[0].partition_data[0].index == 2


@pytest.mark.parametrize("version", [4, 11])
def test_old_fetch_request(version):
    if version == 4:
        req = OldFetchRequest[4](-1, 500, 1, 52428800, 1, [("orders", [(0, 42, 1048576), (1, 7, 1024)])])
    else:
        req = OldFetchRequest[11](-1, 500, 1, 52428800, 1, 0, -1,
                                  [("orders", [(0, 5, 42, 0, 1048576)])], [("gone", [9])], "rack-a")
    req.with_header(correlation_id=9, client_id=None)
    h, obj = _decode(req.encode(header=True, framed=True))
    assert h.client_id in (None, "")
    assert obj.max_wait == datetime.timedelta(milliseconds=500) and obj.max_bytes == 52428800
    assert obj.isolation_level == 1
    t = obj.topics[0]
    assert t.topic == "orders"
    assert t.partitions[0].fetch_offset == 42
    if version == 11:
        assert t.partitions[0].current_leader_epoch == 5
        assert obj.rack_id == "rack-a"
        assert obj.forgotten_topics_data[0].topic == "gone" and obj.forgotten_topics_data[0].partitions == (9,)


@pytest.mark.parametrize("version", [12, 13, 16])
def test_new_fetch_request(version):
    T = NewFetchRequest
    tid = uuid.UUID(int=0xABC)
    req = T(replica_id=-1, max_wait_ms=100, min_bytes=1, max_bytes=1 << 20, isolation_level=0, session_id=0,
            session_epoch=-1, topics=[T.FetchTopic(topic="orders", topic_id=tid, partitions=[
                T.FetchTopic.FetchPartition(partition=4, current_leader_epoch=-1, fetch_offset=77, last_fetched_epoch=-1,
                                            log_start_offset=-1, partition_max_bytes=1 << 20)])],
            forgotten_topics_data=[], rack_id="")
    req.with_header(correlation_id=11, client_id="kp")
    h, obj = _decode(req.encode(version=version, header=True, framed=True))
    assert h.api_version == version
    t = obj.topics[0]
    if version >= 13:
        assert t.topic_id == tid
    else:
        assert t.topic == "orders"
    assert (t.partitions[0].partition, t.partitions[0].fetch_offset) == (4, 77)


@pytest.mark.parametrize("version", [0, 1, 5])
def test_old_metadata_request(version):
    req = OldMetadataRequest[version](["a", "b"]) if version < 4 else OldMetadataRequest[version](["a", "b"], True)
    req.with_header(correlation_id=1, client_id="kp")
    h, obj = _decode(req.encode(header=True, framed=True))
    assert [t.name for t in obj.topics] == ["a", "b"]


@pytest.mark.parametrize("version", [9, 12])
def test_new_metadata_request(version):
    T = NewMetadataRequest
    req = T(topics=[T.MetadataRequestTopic(name="a", topic_id=uuid.UUID(int=0))], allow_auto_topic_creation=True,
            include_topic_authorized_operations=True)
    req.with_header(correlation_id=1, client_id="kp")
    h, obj = _decode(req.encode(version=version, header=True, framed=True))
    assert [t.name for t in obj.topics] == ["a"]
    assert obj.allow_auto_topic_creation is True and obj.include_topic_authorized_operations is True
    # null topics = all topics
    req = T(topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    req.with_header(correlation_id=2, client_id="kp")
    assert _decode(req.encode(version=version, header=True, framed=True))[1].topics is None


def test_our_metadata_response_decodes_with_kafka_python():
    obj = make(apis.response_type(3, 5), throttle_time=0, cluster_id="krait", controller_id=1,
               brokers=[dict(node_id=1, host="localhost", port=9092, rack=None)],
               topics=[dict(error_code=0, name="orders", is_internal=False, partitions=[
                   dict(error_code=0, partition_index=0, leader_id=1, replica_nodes=[1], isr_nodes=[1], offline_replicas=[])])])
    frame = framing.encode_response(3, 5, 8, obj)
    resp = OldMetadataResponse[5].decode(frame[8:])
    assert resp.brokers[0][1:3] == ("localhost", 9092)
    assert resp.cluster_id == "krait"
    assert resp.topics[0][1] == "orders"


def test_batch_header_fields_match_kafka_python():
    batch = _kp_batch(Codec.GZIP, _records(20), producer_id=5, epoch=0, seq=10)
    h = parse_header(batch)
    kb = DefaultRecordBatch(batch)
    assert h.crc == kb.crc and h.attributes == kb.attributes and h.last_offset_delta == kb.last_offset_delta
    assert h.max_timestamp == kb.max_timestamp and h.base_timestamp == kb.first_timestamp
