"""Raw-socket behaviour: framing limits, malformed input, ApiVersions downgrade,
pipelining order. Uses protocol/ as the client codec."""

import socket
import struct

from protocol import apis, framing
from protocol.apis import ApiKey
from protocol.build import make


def _conn(broker):
    s = socket.create_connection(("127.0.0.1", broker.port), timeout=10)
    return s


def _recv_frame(s):
    head = b""
    while len(head) < 4:
        chunk = s.recv(4 - len(head))
        if not chunk:
            return None
        head += chunk
    (n,) = struct.unpack(">i", head)
    body = b""
    while len(body) < n:
        chunk = s.recv(n - len(body))
        if not chunk:
            return None
        body += chunk
    return body


def _metadata(s, cid, version=1):
    req = make(apis.request_type(ApiKey.METADATA, version), topics=None)
    s.sendall(framing.encode_request(ApiKey.METADATA, version, cid, req))


def _closed(s) -> bool:
    try:
        return s.recv(1) == b""
    except (ConnectionResetError, TimeoutError):
        return True


def test_api_versions_every_version(broker):
    with _conn(broker) as s:
        for v in range(5):
            req = make(apis.request_type(ApiKey.API_VERSIONS, v), client_software_name="t", client_software_version="1")
            s.sendall(framing.encode_request(ApiKey.API_VERSIONS, v, 100 + v, req))
            cid, resp = framing.decode_response(ApiKey.API_VERSIONS, v, _recv_frame(s))
            assert cid == 100 + v and resp.error_code == 0
            keys = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
            assert keys[ApiKey.PRODUCE] == (0, 11) and keys[ApiKey.FETCH] == (4, 17)


def test_api_versions_unknown_version_answers_v0_with_error(broker):
    with _conn(broker) as s:
        # header v2 fields for a future ApiVersions v9: body is not parsed
        s.sendall(struct.pack(">ihhih", 10 + 2, ApiKey.API_VERSIONS, 9, 77, -1) + b"\x00\x00")
        cid, resp = framing.decode_response(ApiKey.API_VERSIONS, 0, _recv_frame(s))
        assert cid == 77 and resp.error_code == 35  # UNSUPPORTED_VERSION
        assert any(k.api_key == ApiKey.METADATA for k in resp.api_keys)


def test_garbage_closes_only_that_connection(broker):
    good = _conn(broker)
    bad = _conn(broker)
    bad.sendall(struct.pack(">i", 6) + b"\xff\xff\x00\x01\x00")  # truncated header, then size says more
    bad.sendall(b"\x00")
    assert _closed(bad)
    _metadata(good, 5)
    assert framing.decode_response(ApiKey.METADATA, 1, _recv_frame(good))[0] == 5
    good.close()


def test_oversized_frame_is_refused_before_allocation(broker):
    with _conn(broker) as s:
        s.sendall(struct.pack(">i", 2**31 - 1) + b"\x00" * 16)
        assert _closed(s)
    with _conn(broker) as s:
        s.sendall(struct.pack(">i", -5))
        assert _closed(s)


def test_unknown_api_key_closes_connection(broker):
    with _conn(broker) as s:
        s.sendall(struct.pack(">ihhih", 10, 999, 0, 1, -1))
        assert _closed(s)


def test_pipelined_requests_answer_in_order(broker):
    with _conn(broker) as s:
        frames = b""
        for cid in range(50):
            if cid % 2:
                req = make(apis.request_type(ApiKey.API_VERSIONS, 3), client_software_name="t",
                           client_software_version="1")
                frames += framing.encode_request(ApiKey.API_VERSIONS, 3, cid, req)
            else:
                req = make(apis.request_type(ApiKey.METADATA, 4), topics=None)
                frames += framing.encode_request(ApiKey.METADATA, 4, cid, req)
        s.sendall(frames)
        seen = []
        for _ in range(50):
            body = _recv_frame(s)
            seen.append(struct.unpack_from(">i", body)[0])
        assert seen == list(range(50))


def test_corrupt_batch_gets_corrupt_message(broker):
    from protocol.records import build_batch

    with _conn(broker) as s:
        req = make(apis.request_type(ApiKey.METADATA, 4), topics=[dict(name="wire-corrupt")],
                   allow_auto_topic_creation=True)
        s.sendall(framing.encode_request(ApiKey.METADATA, 4, 1, req))
        _recv_frame(s)
        batch = bytearray(build_batch([(b"k", b"v")]))
        batch[-1] ^= 0xFF  # flip a record byte: CRC no longer matches
        for cid, (records, want) in enumerate([(bytes(batch), 2), (build_batch([(b"k", b"v")]), 0)]):
            preq = make(apis.request_type(ApiKey.PRODUCE, 7), acks=1, timeout=1000, transactional_id=None,
                        topic_data=[dict(name="wire-corrupt", partition_data=[dict(index=0, records=records)])])
            s.sendall(framing.encode_request(ApiKey.PRODUCE, 7, 10 + cid, preq))
            _, resp = framing.decode_response(ApiKey.PRODUCE, 7, _recv_frame(s))
            part = resp.responses[0].partition_responses[0]
            assert part.error_code == want
            if want == 0:
                assert part.base_offset == 0  # the corrupt batch consumed no offsets


def test_random_bodies_for_every_api_never_take_the_broker_down(broker):
    """Valid headers with random or truncated bodies, for every served (api, version): each
    connection either gets an answer or is closed; the broker keeps serving others."""
    import random

    rng = random.Random(1234)
    sent = 0
    for key, r in apis.SUPPORTED.items():
        for v in range(r.served_from, r.max_version + 1):
            for _ in range(3):
                with _conn(broker) as s:
                    s.settimeout(5)
                    header = struct.pack(">hhih", key, v, 99, 1) + b"x"
                    if apis.request_type(key, v).__flexible__:
                        header += b"\x00"
                    body = bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 64)))
                    s.sendall(struct.pack(">i", len(header) + len(body)) + header + body)
                    sent += 1
                    try:
                        s.recv(1 << 16)  # an answer or EOF
                    except (ConnectionResetError, TimeoutError):
                        pass  # or a request validly parked (a random Fetch may ask to wait for days)
    assert sent > 300
    with _conn(broker) as good:
        _metadata(good, 7)
        assert framing.decode_response(ApiKey.METADATA, 1, _recv_frame(good))[0] == 7


def test_produce_v0_to_v2_get_unsupported_version_per_partition(broker):
    from protocol.records import build_batch

    req = make(apis.request_type(ApiKey.PRODUCE, 3), transactional_id=None, acks=1, timeout=1000,
               topic_data=[dict(name="legacy", partition_data=[dict(index=0, records=build_batch([(None, b"x")]))])])
    v3 = framing.encode_request(ApiKey.PRODUCE, 3, 5, req, client_id="old")[4:]
    head = 8 + 2 + len(b"old")
    for version in (0, 1, 2):
        frame = struct.pack(">hhi", ApiKey.PRODUCE, version, 40 + version) + v3[8:head] + v3[head + 2:]
        with _conn(broker) as s:
            s.sendall(struct.pack(">i", len(frame)) + frame)
            body = _recv_frame(s)
        cid, ntopics, nlen = struct.unpack_from(">iih", body)
        assert cid == 40 + version and ntopics == 1 and body[10:10 + nlen] == b"legacy"
        pos = 10 + nlen
        nparts, index, error, base = struct.unpack_from(">iihq", body, pos)
        assert (nparts, index, error, base) == (1, 0, 35, -1)  # UNSUPPORTED_VERSION
        pos += 18 + (8 if version >= 2 else 0) + (4 if version >= 1 else 0)
        assert pos == len(body)
