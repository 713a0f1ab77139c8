"""The Fetch fast-path encoder agrees byte for byte with kio for every served version."""

import uuid

import pytest

from protocol import apis, framing
from protocol.build import make
from protocol.fetch_codec import FetchPartition, FetchTopic, encode_fetch_response
from protocol.records import build_batch


def _topics():
    recs = build_batch([(b"k", b"v" * 100)] * 3, compression=0)
    return [
        FetchTopic("alpha", uuid.UUID(int=12345), [
            FetchPartition(0, 0, 10, 10, 0, None, -1, recs),
            FetchPartition(1, 1, -1, -1, -1, None, -1, None),
            FetchPartition(2, 0, 5, 5, 2, [(7, 3), (8, 4)], -1, b""),
        ]),
        FetchTopic("beta-é", uuid.UUID(int=99), [FetchPartition(0, 0, 1, 1, 0, [], -1, recs + recs)]),
    ]


@pytest.mark.parametrize("version", range(apis.SUPPORTED[apis.ApiKey.FETCH].min_version, apis.SUPPORTED[apis.ApiKey.FETCH].max_version + 1))
def test_fast_path_matches_kio(version):
    topics = _topics()
    chunks, total = encode_fetch_response(version, 42, topics, throttle_time_ms=3, error_code=0, session_id=0)
    fast = b"".join(bytes(c) for c in chunks)
    assert len(fast) == total
    rtype = apis.response_type(apis.ApiKey.FETCH, version)
    obj = make(rtype, throttle_time=3, error_code=0, session_id=0, responses=[
        dict(topic=t.name, topic_id=t.topic_id, partitions=[
            dict(partition_index=p.partition_index, error_code=p.error_code, high_watermark=p.high_watermark,
                 last_stable_offset=p.last_stable_offset, log_start_offset=p.log_start_offset,
                 aborted_transactions=None if p.aborted_transactions is None else
                 [dict(producer_id=a, first_offset=b) for a, b in p.aborted_transactions],
                 preferred_read_replica=p.preferred_read_replica,
                 records=None if p.records is None else bytes(p.records))
            for p in t.partitions])
        for t in topics])
    slow = framing.encode_response(apis.ApiKey.FETCH, version, 42, obj)
    assert fast == slow
    # and kio reads our bytes back
    cid, decoded = framing.decode_response(apis.ApiKey.FETCH, version, fast[4:])
    assert cid == 42
    assert bytes(decoded.responses[0].partitions[0].records) == bytes(topics[0].partitions[0].records)


@pytest.mark.parametrize("version", [12, 15, 16, 17])
def test_diverging_epoch_and_current_leader_tags_decode_with_kio(version):
    """The follower's truncation signal (KIP-320/595) and the leader hint are tagged fields."""
    topics = [FetchTopic("t", uuid.UUID(int=7), [
        FetchPartition(0, 0, 10, 10, 0, None, -1, b"", diverging_epoch=(3, 120)),
        FetchPartition(1, 6, -1, -1, -1, None, -1, None, current_leader=(2, 9)),
        FetchPartition(2, 0, 5, 5, 0, None, -1, b"", diverging_epoch=(1, 4), current_leader=(1, 2)),
    ])]
    chunks, total = encode_fetch_response(version, 7, topics)
    fast = b"".join(bytes(c) for c in chunks)
    assert len(fast) == total
    _, decoded = framing.decode_response(apis.ApiKey.FETCH, version, fast[4:])
    p0, p1, p2 = decoded.responses[0].partitions
    assert (p0.diverging_epoch.epoch, p0.diverging_epoch.end_offset) == (3, 120)
    assert (p1.current_leader.leader_id, p1.current_leader.leader_epoch) == (2, 9)
    assert p0.current_leader.leader_id == -1 and p1.diverging_epoch.epoch == -1
    assert (p2.diverging_epoch.epoch, p2.current_leader.leader_epoch) == (1, 2)
