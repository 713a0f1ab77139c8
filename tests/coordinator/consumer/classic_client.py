"""A classic-protocol consumer for the migration tests (KIP-848's online upgrade and
downgrade): it joins, syncs and heartbeats the way the Java consumer's ConsumerCoordinator
does, with real ConsumerProtocol payloads.

* eager (``range``, subscription v0): it gives up every partition before it rejoins;
* cooperative (``cooperative-sticky``, subscription v3): it reports the partitions it owns in
  its JoinGroup metadata, keeps them across the rebalance, gives up those its SyncGroup
  assignment no longer has, and then rejoins at once.

Its partitions change only when a SyncGroup answers (or when it revokes before joining), so
the tests can check at every step that no partition has two owners, whichever protocol the
owners use.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from coordinator.consumer_protocol import decode_assignment, decode_subscription, encode_assignment, protocol_version

from ..harness import Box, request, subscription
from .cg import CG, Consumer, E

__all__ = ["Classic", "ClassicConsumer", "check_owners"]

TPN = tuple[str, int]  # (topic name, partition)


@dataclass
class ClassicConsumer:
    """What a classic consumer remembers."""

    client_id: str
    group: str = "g"
    topics: list[str] = field(default_factory=lambda: ["t"])
    cooperative: bool = False
    instance_id: str | None = None
    member_id: str = ""
    generation: int = -1
    protocol: str | None = None
    owned: set[TPN] = field(default_factory=set)
    session: int = 10_000
    rebalance: int = 30_000
    #: the protocol names it offers (default: its assignor's)
    names: list[str] | None = None

    def protocols(self) -> list[tuple[str, bytes]]:
        if self.cooperative:
            by: dict[str, list[int]] = {}
            for t, p in sorted(self.owned):
                by.setdefault(t, []).append(p)
            meta = subscription(self.topics, 3, generation_id=self.generation,
                                owned_partitions=[{"topic": t, "partitions": ps} for t, ps in by.items()])
            return [(n, meta) for n in self.names or ["cooperative-sticky"]]
        return [(n, subscription(self.topics)) for n in self.names or ["range"]]


def check_owners(h: CG, classics: list[ClassicConsumer], consumers: list[Consumer] = ()) -> None:  # type: ignore[assignment]
    """No partition owned by two clients, whichever protocol they use."""
    names = {tid: name for name, (tid, _) in h.topics.items()}
    seen: dict[TPN, str] = {}
    owners = [(cl.client_id, set(cl.owned)) for cl in classics]
    owners += [(c.member_id, {(names[t], p) for t, p in c.owned}) for c in consumers]
    for who, owned in owners:
        for tp in owned:
            assert tp not in seen, f"{tp} owned by {seen[tp]} and {who}"
            seen[tp] = who


class Classic:
    """Classic requests against ``h``'s coordinator, applied to the clients like the Java
    consumer applies the responses."""

    def __init__(self, h: CG) -> None:
        self.h = h

    # --- raw requests ---------------------------------------------------------------------
    def join(self, cl: ClassicConsumer, v: int = 9, **extra: Any) -> Box:
        """JoinGroup (answering MEMBER_ID_REQUIRED like the client); an eager client revokes
        everything first."""
        if not cl.cooperative:
            cl.owned = set()
        fields: dict[str, Any] = dict(
            group_id=cl.group, session_timeout=cl.session, rebalance_timeout=cl.rebalance, member_id=cl.member_id,
            group_instance_id=cl.instance_id, protocol_type="consumer",
            protocols=[{"name": n, "metadata": m} for n, m in cl.protocols()],
        )
        fields.update(extra)
        box = Box()
        self.h.c.join_group(request("join_group", v, **fields), box, client_id=cl.client_id, client_host="/10.0.0.2")
        if box.done and box.value.error_code == E.member_id_required:
            cl.member_id = box.value.member_id
            return self.join(cl, v, **extra)
        return box

    def sync(self, cl: ClassicConsumer, assignments: dict[str, bytes] | None = None, v: int = 5) -> Any:
        box = Box()
        req = request(
            "sync_group", v, group_id=cl.group, generation_id=cl.generation, member_id=cl.member_id,
            group_instance_id=cl.instance_id, protocol_type="consumer", protocol_name=cl.protocol,
            assignments=[{"member_id": m, "assignment": a} for m, a in (assignments or {}).items()],
        )
        self.h.c.sync_group(req, box)
        return box

    def heartbeat(self, cl: ClassicConsumer) -> Any:
        box = Box()
        self.h.c.heartbeat(request("heartbeat", 4, group_id=cl.group, generation_id=cl.generation,
                                   member_id=cl.member_id, group_instance_id=cl.instance_id), box)
        return box.value.error_code

    def leave(self, *cls: ClassicConsumer) -> Any:
        box = Box()
        self.h.c.leave_group(request("leave_group", 5, group_id=cls[0].group, members=[
            {"member_id": c.member_id, "group_instance_id": c.instance_id} for c in cls]), box)
        for c in cls:
            c.owned, c.member_id, c.generation = set(), "", -1
        return box.value

    def commit(self, cl: ClassicConsumer, offset: int, v: int = 8) -> Any:
        box = Box()
        self.h.c.offset_commit(request(
            "offset_commit", v, group_id=cl.group, generation_id_or_member_epoch=cl.generation,
            member_id=cl.member_id, group_instance_id=cl.instance_id,
            topics=[{"name": "t", "partitions": [{"partition_index": 0, "committed_offset": offset}]}],
        ), box)
        return box.value.topics[0].partitions[0].error_code

    # --- applying responses -----------------------------------------------------------------
    @staticmethod
    def absorb_join(cl: ClassicConsumer, resp: Any) -> None:
        assert resp.error_code == E.none, resp
        cl.member_id, cl.generation, cl.protocol = resp.member_id, resp.generation_id, resp.protocol_name

    @staticmethod
    def absorb_sync(cl: ClassicConsumer, resp: Any) -> bool:
        """Take the assignment; True when the client gave partitions up (a cooperative client
        then rejoins)."""
        assert resp.error_code == E.none, resp
        new = {(t, p) for t, ps in decode_assignment(resp.assignment) for p in ps}
        revoked = bool(cl.owned - new)
        cl.owned = new
        return revoked

    # --- a client's poll loop ---------------------------------------------------------------
    def rejoin(self, cl: ClassicConsumer, rounds: int = 6) -> None:
        """JoinGroup then SyncGroup against a consumer group (which answers both at once)
        until the client is in sync."""
        for _ in range(rounds):
            resp = self.join(cl).value
            if resp.error_code in (E.unknown_member_id, E.fenced_instance_id):
                cl.member_id, cl.owned, cl.generation = "", set(), -1
                continue
            self.absorb_join(cl, resp)
            s = self.sync(cl).value
            if s.error_code in (E.rebalance_in_progress, E.illegal_generation, E.unknown_member_id):
                continue
            if self.absorb_sync(cl, s) and cl.cooperative:
                continue
            return
        raise AssertionError(f"{cl.client_id} did not get in sync")

    def poll(self, cl: ClassicConsumer) -> Any:
        """One heartbeat; rejoin when told to (or when the coordinator forgot the member)."""
        err = self.heartbeat(cl)
        if err in (E.unknown_member_id, E.illegal_generation, E.fenced_instance_id):
            cl.member_id, cl.owned, cl.generation = "", set(), -1
        if err != E.none:
            self.rejoin(cl)
        return err

    # --- a classic group ----------------------------------------------------------------------
    def form(self, cls: list[ClassicConsumer]) -> None:
        """Everybody (re)joins a classic group; the leader assigns ranges of each topic's
        partitions in real ConsumerProtocolAssignments; everybody syncs."""
        boxes = [self.join(cl) for cl in cls]
        for _ in range(100):
            if all(b.done for b in boxes):
                break
            self.h.advance(3000)
        resps = [b.value for b in boxes]
        for cl, r in zip(cls, resps, strict=True):
            self.absorb_join(cl, r)
        leader_id = resps[0].leader
        assignment = self.range_assign(next(r for r in resps if r.member_id == leader_id).members)
        order = [cl for cl in cls if cl.member_id != leader_id] + [cl for cl in cls if cl.member_id == leader_id]
        syncs = {cl.client_id: self.sync(cl, assignment if cl.member_id == leader_id else None) for cl in order}
        for cl in cls:
            self.absorb_sync(cl, syncs[cl.client_id].value)

    def range_assign(self, members: Any) -> dict[str, bytes]:
        """Kafka's RangeAssignor, roughly: each topic's partitions in ranges over its
        subscribers (by member id), in the consumer protocol version of their metadata."""
        metas = {m.member_id: bytes(m.metadata) for m in members}
        subs = {mid: decode_subscription(meta) for mid, meta in metas.items()}
        out: dict[str, list[tuple[str, list[int]]]] = {mid: [] for mid in subs}
        for topic in sorted({t for s in subs.values() for t in s.topics}):
            who = sorted(mid for mid, s in subs.items() if topic in s.topics)
            n = self.h.topics[topic][1]
            for i, mid in enumerate(who):
                lo, hi = n * i // len(who), n * (i + 1) // len(who)
                if hi > lo:
                    out[mid].append((topic, list(range(lo, hi))))
        return {mid: encode_assignment(tps, protocol_version(metas[mid])) for mid, tps in out.items()}
