"""Group coordinator behaviour over real sockets, driven at the protocol level where the
clients hide what we want to check: rebalance-timeout eviction, late commits, the time a
rebalance takes, session-timeout bounds, damaged __consumer_offsets data on disk."""

import struct
import threading
import time
import uuid
from pathlib import Path

from broker.tools.wire import WireClient
from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.records import build_batch


def _conn(broker):
    return WireClient("127.0.0.1", broker.port, timeout=60)


def _subscription(topic: str) -> bytes:
    # ConsumerProtocolSubscription v0: version, topics array, user data (null)
    t = topic.encode()
    return struct.pack(">hih", 0, 1, len(t)) + t + struct.pack(">i", -1)


def _join(conn, group, member_id="", rebalance_ms=10_000, session_ms=10_000, topic="t", version=5):
    return conn.request(ApiKey.JOIN_GROUP, version, group_id=group, session_timeout=session_ms,
                        rebalance_timeout=rebalance_ms, member_id=member_id, group_instance_id=None,
                        protocol_type="consumer", protocols=[dict(name="range", metadata=_subscription(topic))])


def _join_with_id(conn, group, **kw):
    r = _join(conn, group, **kw)
    if r.error_code == ErrorCode.member_id_required:
        r = _join(conn, group, member_id=r.member_id, **kw)
    return r


def _sync(conn, group, gen, member_id, assignments=()):
    return conn.request(ApiKey.SYNC_GROUP, 3, group_id=group, generation_id=gen, member_id=member_id,
                        group_instance_id=None, assignments=list(assignments))


def _commit(conn, group, gen, member_id, topic, offset):
    r = conn.request(ApiKey.OFFSET_COMMIT, 7, group_id=group, generation_id_or_member_epoch=gen, member_id=member_id,
                     group_instance_id=None, topics=[dict(name=topic, partitions=[
                         dict(partition_index=0, committed_offset=offset, committed_leader_epoch=-1,
                              committed_metadata="")])])
    return r.topics[0].partitions[0].error_code


def _find(conn, group):
    r = conn.request(ApiKey.FIND_COORDINATOR, 3, key=group, key_type=0)
    assert r.error_code == 0


def test_rebalance_timeout_evicts_member_and_its_late_commit_fails(broker):
    group = "evict-" + uuid.uuid4().hex[:6]
    topic = "evict-topic"
    a, b = _conn(broker), _conn(broker)
    a.request(ApiKey.METADATA, 9, topics=[dict(name=topic)], allow_auto_topic_creation=True)
    _find(a, group)
    ja = _join_with_id(a, group, rebalance_ms=2000)
    assert ja.error_code == 0 and ja.leader == ja.member_id
    s = _sync(a, group, ja.generation_id, ja.member_id, [dict(member_id=ja.member_id, assignment=b"")])
    assert s.error_code == 0
    assert _commit(a, group, ja.generation_id, ja.member_id, topic, 5) == 0
    # b joins; a "stops polling": it never rejoins. The join phase must end at a's
    # rebalance timeout (2 s), evicting a, and not wait for b's longer session.
    t0 = time.monotonic()
    jb = _join_with_id(b, group, rebalance_ms=2000)
    waited = time.monotonic() - t0
    assert jb.error_code == 0
    assert jb.generation_id == ja.generation_id + 1
    assert [m.member_id for m in jb.members] == [jb.member_id]
    assert 1.5 <= waited < 8, waited
    late = _commit(a, group, ja.generation_id, ja.member_id, topic, 9)
    assert late in (ErrorCode.unknown_member_id, ErrorCode.illegal_generation)
    hb = a.request(ApiKey.HEARTBEAT, 3, group_id=group, generation_id=ja.generation_id, member_id=ja.member_id,
                   group_instance_id=None)
    assert hb.error_code in (ErrorCode.unknown_member_id, ErrorCode.illegal_generation)
    a.close()
    b.close()


class _Member(threading.Thread):
    """A group member doing what a consumer does: join, sync, heartbeat, rejoin when told."""

    def __init__(self, broker, group, topic):
        super().__init__(daemon=True)
        self.conn = _conn(broker)
        self.group, self.topic = group, topic
        self.member_id = ""
        self.stop = threading.Event()
        self.joins: list[tuple[float, float, int]] = []  # (sent, answered, generation)

    def run(self):
        while not self.stop.is_set():
            sent = time.monotonic()
            j = _join(self.conn, self.group, member_id=self.member_id, rebalance_ms=60_000, topic=self.topic)
            if j.error_code == ErrorCode.member_id_required:
                self.member_id = j.member_id
                continue
            if j.error_code:
                continue
            self.member_id = j.member_id
            self.joins.append((sent, time.monotonic(), j.generation_id))
            plan = [dict(member_id=m.member_id, assignment=b"x") for m in j.members] if j.leader == j.member_id else []
            if _sync(self.conn, self.group, j.generation_id, self.member_id, plan).error_code:
                continue
            while not self.stop.is_set():
                hb = self.conn.request(ApiKey.HEARTBEAT, 3, group_id=self.group, generation_id=j.generation_id,
                                       member_id=self.member_id, group_instance_id=None)
                if hb.error_code:
                    break
                time.sleep(0.1)


def _describe(conn, group):
    return conn.request(ApiKey.DESCRIBE_GROUPS, 5, groups=[group], include_authorized_operations=False).groups[0]


def test_ten_member_rebalance_completes_as_soon_as_all_rejoin(broker):
    group = "ten-" + uuid.uuid4().hex[:6]
    n = 10
    admin = _conn(broker)
    _find(admin, group)
    members = [_Member(broker, group, "t") for _ in range(n)]
    for m in members:
        m.start()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        d = _describe(admin, group)
        if d.group_state == "Stable" and len(d.members) == n:
            break
        time.sleep(0.1)
    assert d.group_state == "Stable" and len(d.members) == n
    # every member's thread has recorded the join of the generation that became Stable
    # (a follower's thread may still be between its JoinGroup response and its bookkeeping)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and len({m.joins[-1][2] if m.joins else -1 for m in members}) != 1:
        time.sleep(0.01)
    gen = members[0].joins[-1][2]
    assert all(m.joins[-1][2] == gen for m in members)
    # a new member joins: all ten learn it from their next heartbeat and rejoin; the join
    # phase must end with the last of them, far sooner than the 60 s rebalance timeout
    newcomer = _Member(broker, group, "t")
    newcomer.start()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        d = _describe(admin, group)
        if d.group_state == "Stable" and len(d.members) == n + 1:
            break
        time.sleep(0.05)
    assert d.group_state == "Stable" and len(d.members) == n + 1
    everyone = members + [newcomer]
    # as above: a member's thread may still be recording its join of the new generation
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not all(any(j[2] > gen for j in m.joins) for m in everyone):
        time.sleep(0.01)
    rejoins = [next(j for j in m.joins if j[2] > gen) for m in everyone]
    last_sent = max(j[0] for j in rejoins)
    last_answered = max(j[1] for j in rejoins)
    took = last_answered - last_sent
    print(f"\n{n + 1}-member rebalance: last JoinGroup sent -> all JoinGroup responses: {took * 1000:.1f} ms")
    assert took < 10.0  # behaviour, not speed: far below the 60 s rebalance timeout it must not wait for
    for m in everyone:
        m.stop.set()
    for m in everyone:
        m.join(10)
        m.conn.close()
    admin.close()


def test_session_timeout_bounds(broker):
    c = _conn(broker)
    group = "bounds-" + uuid.uuid4().hex[:6]
    _find(c, group)
    assert _join(c, group, session_ms=1000).error_code == ErrorCode.invalid_session_timeout
    assert _join(c, group, session_ms=1_800_001).error_code == ErrorCode.invalid_session_timeout
    c.close()


def test_garbage_in_offsets_log_does_not_stop_the_broker(fresh_broker):
    from confluent_kafka import Consumer, Producer, TopicPartition

    bs = fresh_broker.bootstrap
    p = Producer({"bootstrap.servers": bs})
    p.produce("g-data", value=b"x")
    p.flush(10)
    c = Consumer({"bootstrap.servers": bs, "group.id": "survivor"})
    c.commit(offsets=[TopicPartition("g-data", 0, 1)], asynchronous=False)
    c.close()
    assert fresh_broker.stop() == 0
    # garbage records (valid batch CRC, nonsense keys and values) and a torn tail in
    # every __consumer_offsets partition
    garbage = build_batch([(b"\x00\x01garbage", b"\xff" * 7), (b"\x00\x09", b"x"), (None, b"y")])
    for d in Path(fresh_broker.log_dir).glob("__consumer_offsets-*"):
        seg = sorted(d.glob("*.log"))[-1]
        size = seg.stat().st_size
        fixed = bytearray(garbage)
        struct.pack_into(">q", fixed, 0, 10_000 + size)  # an offset beyond anything there
        with open(seg, "ab") as f:
            f.write(bytes(fixed))
            f.write(b"\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00")
    fresh_broker.start()
    c = Consumer({"bootstrap.servers": bs, "group.id": "survivor"})
    assert c.committed([TopicPartition("g-data", 0)], timeout=10)[0].offset == 1
    c.close()
    c = Consumer({"bootstrap.servers": bs, "group.id": "newcomer"})
    c.commit(offsets=[TopicPartition("g-data", 0, 1)], asynchronous=False)
    assert c.committed([TopicPartition("g-data", 0)], timeout=10)[0].offset == 1
    c.close()
