"""Wire behaviour: framing limits, malformed input, ApiVersions downgrade, pipelining
order. Well-formed requests go through the shared wire client; malformed ones are
written byte by byte on raw sockets."""

import socket
import struct

from broker.tools.wire import WireClient
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


def _client(broker):
    return WireClient("127.0.0.1", broker.port, timeout=10, negotiate=False)


def _closed(s) -> bool:
    try:
        return s.recv(1) == b""
    except (ConnectionResetError, TimeoutError):
        return True


def test_api_versions_every_version(broker):
    with _client(broker) as c:
        for v in range(5):
            resp = c.request(ApiKey.API_VERSIONS, v, client_software_name="t", client_software_version="1")
            assert resp.error_code == 0
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
    with _client(broker) as good, _conn(broker) as bad:
        bad.sendall(struct.pack(">i", 6) + b"\xff\xff\x00\x01\x00")  # truncated header, then size says more
        bad.sendall(b"\x00")
        assert _closed(bad)
        assert good.request(ApiKey.METADATA, 1, topics=None).brokers[0].port == broker.port


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
    with _client(broker) as c:
        sent = []
        for i in range(50):
            if i % 2:
                sent.append(c.send(ApiKey.API_VERSIONS, 3, client_software_name="t", client_software_version="1"))
            else:
                sent.append(c.send(ApiKey.METADATA, 4, topics=None))
        seen = [struct.unpack_from(">i", c.receive_frame())[0] for _ in range(50)]
        assert seen == sent


def test_corrupt_batch_gets_corrupt_message(broker):
    from protocol.records import build_batch

    with _client(broker) as c:
        c.request(ApiKey.METADATA, 4, topics=[dict(name="wire-corrupt")], allow_auto_topic_creation=True)
        batch = bytearray(build_batch([(b"k", b"v")]))
        batch[-1] ^= 0xFF  # flip a record byte: CRC no longer matches
        for records, want in [(bytes(batch), 2), (build_batch([(b"k", b"v")]), 0)]:
            resp = c.request(ApiKey.PRODUCE, 7, acks=1, timeout=1000, transactional_id=None,
                             topic_data=[dict(name="wire-corrupt", partition_data=[dict(index=0, records=records)])])
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
    with _client(broker) as good:
        assert good.request(ApiKey.METADATA, 1, topics=None).brokers[0].port == broker.port


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
