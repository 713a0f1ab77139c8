"""Partition: one partition's replication state on this broker in cluster mode (Kafka's
Partition): whether this broker leads or follows it at which leader epoch, the ISR and
replica assignment from ZooKeeper, and, on the leader, each follower's log end offset and
last caught-up time, from which the high watermark (min LEO over the ISR) and the ISR
changes follow (``replica.lag.time.max.ms``).

An ISR change this leader proposes is pending until ZooKeeper's answer is known; if the
answer is lost (a connection loss after the write left) the change may or may not have
landed. Either way the high watermark is computed over the maximal ISR, the committed ISR
and the proposed one together (Kafka's KIP-497): a replica being added counts at once, a
replica being removed until its removal is confirmed, so every ISR that ZooKeeper may hold
has every record acknowledged. ``min.insync.replicas`` is checked against the committed ISR.

Pure bookkeeping over a PartitionLog: no ZooKeeper and no event loop here. The
ReplicaManager applies state from ZooKeeper, and writes the ISR changes this proposes.
"""

from __future__ import annotations

from dataclasses import dataclass

from storage.log import PartitionLog

from ..cluster.election import NO_LEADER, PartitionState

TopicPartition = tuple[str, int]


@dataclass(slots=True)
class FollowerState:
    """What the leader knows of one follower (Kafka's Replica state)."""

    #: the follower's log end offset: the offset of its last fetch (-1 until it fetches)
    leo: int = -1
    last_caught_up_ms: int = 0
    #: the leader's LEO and the time at the follower's previous fetch (Kafka's rule: a
    #: fetch reaching the LEO the leader had at the previous fetch proves the follower was
    #: caught up at that time)
    prev_leader_leo: int = -1
    prev_fetch_ms: int = 0


class Partition:
    def __init__(self, topic: str, index: int, log: PartitionLog, broker_id: int) -> None:
        self.topic = topic
        self.index = index
        self.tp: TopicPartition = (topic, index)
        self.log = log
        self.broker_id = broker_id
        self.leader_id = NO_LEADER
        self.leader_epoch = -1
        #: the epoch this broker's current, unbroken run as leader began at: an acks=all
        #: append of any epoch since then is still in the log (only a follower truncates)
        self.leading_since_epoch = -1
        #: wall-clock ms when this broker last became the leader (-1: never)
        self.leading_since_ms = -1
        #: the offset this broker's leadership started at (its first offset of the epoch)
        self.epoch_start_offset = 0
        self.isr: frozenset[int] = frozenset()
        self.assignment: tuple[int, ...] = ()
        #: replicas a reassignment is taking away: never taken (back) into the ISR
        self.removing: frozenset[int] = frozenset()
        #: the ZooKeeper state this broker last applied (its zk_version fences our updates)
        self.state: PartitionState | None = None
        self.followers: dict[int, FollowerState] = {}
        #: the ISR of a change written to ZooKeeper and not yet confirmed (or whose outcome
        #: was lost): counted with ``isr`` until a state from ZooKeeper settles it
        self.pending_isr: frozenset[int] | None = None

    @property
    def is_leader(self) -> bool:
        # a replica in a failed log dir leads nothing here, whatever ZooKeeper still says (KIP-112)
        return self.leader_id == self.broker_id and not self.log.offline

    @property
    def isr_update_pending(self) -> bool:
        return self.pending_isr is not None

    @property
    def maximal_isr(self) -> frozenset[int]:
        """The committed ISR with the pending change's members (KIP-497)."""
        return self.isr if self.pending_isr is None else self.isr | self.pending_isr

    def propose_isr(self, isr: set[int] | frozenset[int]) -> PartitionState:
        """An ISR change to write: pending from now on; the state to write, fenced by the
        zk_version of the state this change derives from."""
        new = self.with_isr(isr)
        self.pending_isr = frozenset(new.isr)
        return new

    # --- role changes (from ZooKeeper) ------------------------------------------------------
    def apply(self, state: PartitionState, assignment: tuple[int, ...], now_ms: int) -> str | None:
        """Take the partition state from ZooKeeper; returns "leader" or "follower" when this
        broker's role or the leader epoch changed (the caller starts or moves fetching),
        else None (an ISR-only change, or nothing new).

        A state at or below the znode version already applied brings nothing new (a view
        that has not caught up with our own write yet): the pending change stays pending,
        else a sync during the write would drop its members from the maximal ISR. Any
        newer state settles the pending change, landed or not."""
        self.assignment = tuple(assignment)
        cur = self.state
        if cur is not None and 0 <= state.zk_version <= cur.zk_version:
            return None
        new_epoch = state.leader_epoch != self.leader_epoch or state.leader != self.leader_id
        self.state = state
        self.isr = frozenset(state.isr)
        self.pending_isr = None
        if not new_epoch:
            return None
        # the epoch right after ours, still ours: nobody led in between (a view that
        # skipped an epoch cannot tell, and another leader may have made our followers
        # truncate what they held)
        unbroken = self.is_leader and state.leader_epoch == self.leader_epoch + 1
        was_leader = self.is_leader
        self.leader_id = state.leader
        self.leader_epoch = state.leader_epoch
        if self.is_leader:
            # Kafka's makeLeader: the new epoch starts at our LEO (stamped in the epoch cache
            # now, so that followers asking for the previous epoch's end get this boundary).
            self.epoch_start_offset = self.log.log_end_offset
            self.log.epoch_cache.assign(state.leader_epoch, self.epoch_start_offset)
            if not was_leader:
                self.leading_since_epoch = state.leader_epoch
                self.leading_since_ms = now_ms
            self._reset_followers(now_ms, keep_progress=unbroken)
            return "leader"
        self.followers = {}
        return "follower"

    def _reset_followers(self, now_ms: int, *, keep_progress: bool) -> None:
        """Kafka's Replica.resetReplicaState at makeLeader: the caught-up clock restarts
        (now for ISR members, never for the others); a leader re-elected without a break
        (the controller bumped the epoch) keeps what its followers hold, which its log
        still has, so the high watermark need not wait for each of them to fetch again."""
        old = self.followers if keep_progress else {}
        self.followers = {}
        for r in self.assignment:
            if r == self.broker_id:
                continue
            st = old.get(r) or FollowerState()
            st.last_caught_up_ms = now_ms if r in self.isr else 0
            self.followers[r] = st

    # --- leader: follower progress ----------------------------------------------------------
    def update_follower(self, replica_id: int, fetch_offset: int, now_ms: int) -> bool:
        """A follower fetched from ``fetch_offset``: it holds everything below. Returns
        False for a replica that is not assigned this partition."""
        st = self.followers.get(replica_id)
        if st is None:
            if replica_id not in self.assignment:
                return False
            st = self.followers[replica_id] = FollowerState()
        leo = self.log.log_end_offset
        if fetch_offset >= leo:
            st.last_caught_up_ms = now_ms
        elif fetch_offset >= st.prev_leader_leo >= 0:
            st.last_caught_up_ms = max(st.last_caught_up_ms, st.prev_fetch_ms)
        st.leo = fetch_offset
        st.prev_leader_leo = leo
        st.prev_fetch_ms = now_ms
        return True

    def maybe_increment_high_watermark(self) -> bool:
        """HW = min LEO over the maximal ISR (the leader's own included); only ever forward."""
        if not self.is_leader:
            return False
        hw = self.log.log_end_offset
        for r in self.maximal_isr:
            if r != self.broker_id:
                st = self.followers.get(r)
                hw = min(hw, st.leo if st is not None else -1)
        if hw <= self.log.high_watermark:
            return False
        return self.log.maybe_increment_high_watermark(hw)

    def isr_to_expand(self, replica_id: int) -> bool:
        """Kafka's isFollowerInSync: an assigned follower outside the ISR that has reached
        the HW and the start of the current epoch joins it."""
        if not self.is_leader or replica_id in self.isr or replica_id not in self.assignment \
                or replica_id in self.removing:
            return False
        st = self.followers.get(replica_id)
        return st is not None and st.leo >= self.log.high_watermark and st.leo >= self.epoch_start_offset

    def out_of_sync(self, now_ms: int, lag_ms: int) -> set[int]:
        """ISR followers that have not caught up with the leader for ``lag_ms``."""
        if not self.is_leader:
            return set()
        out = set()
        for r in self.isr:
            if r == self.broker_id:
                continue
            st = self.followers.get(r)
            if st is None or now_ms - st.last_caught_up_ms > lag_ms:
                out.add(r)
        return out

    def with_isr(self, isr: set[int] | frozenset[int]) -> PartitionState:
        """The state to write to ZooKeeper for an ISR change by this leader: same leader
        and epoch (Kafka's ZK-mode leader ISR update), fenced by the zk_version."""
        assert self.state is not None
        ordered = tuple(r for r in self.assignment if r in isr) + tuple(sorted(r for r in isr
                                                                               if r not in self.assignment))
        return PartitionState(self.leader_id, self.leader_epoch, ordered, self.state.controller_epoch,
                              self.state.zk_version)
