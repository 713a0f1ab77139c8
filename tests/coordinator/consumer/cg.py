"""Test doubles for KIP-848 consumer groups: a coordinator with a fake clock, an in-memory
log and a mutable topic table, and :class:`Consumer`, a client that heartbeats the way the
Java consumer does (full request on join, then only what changed; it drops revoked
partitions as soon as an assignment without them arrives and reports what it owns)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from coordinator import CoordinatorConfig, GroupCoordinator
from coordinator.consumer.group import ConsumerGroup

from ..harness import Box, E, FakeClock, MemoryLog, request

__all__ = ["CG", "Consumer", "E", "owners_disjoint"]

TP = tuple[uuid.UUID, int]


@dataclass
class Consumer:
    """What a consumer-protocol client remembers."""

    member_id: str
    group: str = "g"
    topics: list[str] | None = field(default_factory=lambda: ["t"])
    regex: str | None = None
    instance_id: str | None = None
    rack_id: str | None = None
    assignor: str | None = None
    rebalance_timeout: int = 30_000
    epoch: int = 0
    owned: set[TP] = field(default_factory=set)
    #: False: the client keeps partitions it was asked to revoke (a stuck poll loop)
    revokes: bool = True
    last: Any = None

    def owned_field(self) -> list[dict[str, Any]]:
        by: dict[uuid.UUID, list[int]] = {}
        for t, p in sorted(self.owned, key=lambda tp: (str(tp[0]), tp[1])):
            by.setdefault(t, []).append(p)
        return [{"topic_id": t, "partitions": ps} for t, ps in by.items()]


def owners_disjoint(consumers: list[Consumer]) -> None:
    seen: dict[TP, str] = {}
    for c in consumers:
        for tp in c.owned:
            assert tp not in seen, f"{tp} owned by {seen[tp]} and {c.member_id}"
            seen[tp] = c.member_id


class TxnMemoryLog(MemoryLog):
    """MemoryLog that also takes transactional batches (TxnOffsetCommit)."""

    def append(self, partition: int, records: list[tuple[bytes, bytes | None]], **_: Any) -> None:
        super().append(partition, records)


class CG:
    def __init__(self, topics: dict[str, int] | None = None, **cfg: Any) -> None:
        self.clock = FakeClock()
        self.log = TxnMemoryLog()
        self.topics: dict[str, tuple[uuid.UUID, int]] = {}
        for name, n in (topics or {"t": 6}).items():
            self.add_topic(name, n)
        self.config = CoordinatorConfig(**cfg)
        self.c = GroupCoordinator(self.config, self.clock, self.log, topics=lambda: self.topics)

    # --- topics ---------------------------------------------------------------------------
    def add_topic(self, name: str, partitions: int) -> uuid.UUID:
        tid = self.topics[name][0] if name in self.topics else uuid.uuid4()
        self.topics[name] = (tid, partitions)
        return tid

    def tid(self, name: str) -> uuid.UUID:
        return self.topics[name][0]

    def tps(self, name: str, *partitions: int) -> set[TP]:
        return {(self.tid(name), p) for p in partitions}

    # --- raw requests -----------------------------------------------------------------------
    def raw(self, v: int = 1, client_id: str = "cid", **fields: Any) -> Any:
        fields.setdefault("group_id", "g")
        box = Box()
        self.c.consumer_group_heartbeat(
            request("consumer_group_heartbeat", v, **fields), box, client_id=client_id, client_host="/10.0.0.1"
        )
        return box.value

    def group(self, gid: str = "g") -> ConsumerGroup:
        g = self.c.group(gid)
        assert isinstance(g, ConsumerGroup), g
        return g

    def advance(self, ms: int) -> None:
        self.clock.t += ms
        self.c.poll()

    # --- a client's heartbeat -----------------------------------------------------------------
    def heartbeat(self, cl: Consumer, *, full: bool | None = None, v: int = 1) -> Any:
        """One heartbeat of ``cl``: a full request when joining (or ``full``), else only the
        epoch and what it owns; applies the response like a client."""
        join = cl.epoch == 0
        full = join if full is None else full
        fields: dict[str, Any] = dict(
            group_id=cl.group, member_id=cl.member_id, member_epoch=cl.epoch,
            topic_partitions=[] if join else cl.owned_field(),
        )
        if full:
            fields.update(
                instance_id=cl.instance_id, rack_id=cl.rack_id, rebalance_timeout=cl.rebalance_timeout,
                subscribed_topic_names=cl.topics, server_assignor=cl.assignor,
            )
            if v >= 1:
                fields["subscribed_topic_regex"] = cl.regex
        resp = self.raw(v=v, **fields)
        cl.last = resp
        if resp.error_code == E.none:
            cl.member_id = resp.member_id
            cl.epoch = resp.member_epoch
            if resp.assignment is not None:
                new = {(tp.topic_id, p) for tp in resp.assignment.topic_partitions for p in tp.partitions}
                cl.owned = new if cl.revokes else cl.owned | new
        elif resp.error_code in (E.fenced_member_epoch, E.unknown_member_id):
            cl.epoch, cl.owned = 0, set()  # the client abandons its partitions and rejoins
        return resp

    def leave(self, cl: Consumer, epoch: int = -1) -> Any:
        resp = self.raw(group_id=cl.group, member_id=cl.member_id, member_epoch=epoch, instance_id=cl.instance_id,
                        topic_partitions=None)
        if resp.error_code == E.none:
            cl.epoch, cl.owned = 0, set()
        return resp

    def settle(self, consumers: list[Consumer], rounds: int = 10) -> None:
        """Heartbeat everybody in turn until the group is Stable, checking at every step that
        no partition has two owners (clients) and the coordinator's index agrees."""
        for _ in range(rounds):
            for cl in consumers:
                self.heartbeat(cl)
                owners_disjoint(consumers)
                self.check_owners()
            g = self.group(consumers[0].group)
            if g.state.value == "Stable" and all(cl.epoch == g.group_epoch for cl in consumers):
                return
        raise AssertionError(f"group did not settle: {self.group(consumers[0].group).state}")

    def check_owners(self, gid: str = "g") -> None:
        """The coordinator's ownership index: assigned + pending revocation, no overlap."""
        g = self.group(gid)
        seen: dict[TP, str] = {}
        for mid, m in g.members.items():
            for a in (m.assigned, m.pending_revocation):
                for t, ps in a.items():
                    for p in ps:
                        assert (t, p) not in seen, f"{(t, p)} owned by {seen[(t, p)]} and {mid}"
                        seen[(t, p)] = mid
                        assert g.current_partition_epoch(t, p) == m.member_epoch
        assert sum(len(ps) for ps in g.partition_epochs.values()) == len(seen)

    def assignment(self, cl: Consumer) -> set[TP]:
        m = self.group(cl.group).members[cl.member_id]
        return {(t, p) for t, ps in m.assigned.items() for p in ps}
