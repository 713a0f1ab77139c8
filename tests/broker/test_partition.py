"""Partition's bookkeeping on a real replicated PartitionLog: the high watermark over the
maximal ISR while an ISR change is pending (KIP-497), and which states from ZooKeeper
settle a pending change."""

from __future__ import annotations

from broker.cluster.election import PartitionState
from broker.replica.partition import Partition
from protocol.records import build_batch, iter_headers
from storage.config import LogConfig
from storage.log import PartitionLog


def _leader(tmp_path, isr=(1, 2), version=5) -> Partition:
    log = PartitionLog(str(tmp_path / "t-0"), "t", 0, LogConfig(), replicated=True)
    part = Partition("t", 0, log, broker_id=1)
    assert part.apply(PartitionState(1, 3, isr, 1, version), (1, 2, 3), 0) == "leader"
    return part


def _append(part: Partition, n: int) -> None:
    for i in range(n):
        buf = bytearray(build_batch([(b"k", b"v%d" % i)]))
        part.log.append(buf, [h for _, h in iter_headers(buf)], leader_epoch=part.leader_epoch)


def test_pending_expansion_counts_the_new_member_at_once(tmp_path):
    part = _leader(tmp_path)
    _append(part, 5)
    part.update_follower(2, 5, 10)
    part.update_follower(3, 3, 10)
    part.maybe_increment_high_watermark()
    assert part.log.high_watermark == 5
    new = part.propose_isr({1, 2, 3})
    assert new.isr == (1, 2, 3) and new.zk_version == 5 and part.isr_update_pending
    _append(part, 5)
    part.update_follower(2, 10, 20)
    # ZooKeeper may hold {1, 2, 3} already: 3 must have a record before it counts as committed
    assert not part.maybe_increment_high_watermark() and part.log.high_watermark == 5
    part.update_follower(3, 8, 20)
    assert part.maybe_increment_high_watermark() and part.log.high_watermark == 8
    # min.insync.replicas looks at the committed ISR only
    assert part.isr == frozenset({1, 2})


def test_pending_shrink_keeps_the_leaving_member_until_confirmed(tmp_path):
    part = _leader(tmp_path, isr=(1, 2, 3))
    _append(part, 4)
    part.update_follower(2, 4, 10)
    part.propose_isr({1, 2})
    assert not part.maybe_increment_high_watermark() and part.log.high_watermark == 0
    stored = PartitionState(1, 3, (1, 2), 1, 6)
    assert part.apply(stored, (1, 2, 3), 20) is None
    assert not part.isr_update_pending and part.isr == frozenset({1, 2})
    assert part.maybe_increment_high_watermark() and part.log.high_watermark == 4


def test_a_state_no_newer_than_ours_leaves_the_pending_change(tmp_path):
    part = _leader(tmp_path)
    part.propose_isr({1, 2, 3})
    # a sync with the view as it was (our write not yet read back): nothing new
    assert part.apply(PartitionState(1, 3, (1, 2), 1, 5), (1, 2, 3), 0) is None
    assert part.pending_isr == frozenset({1, 2, 3}) and part.maximal_isr == frozenset({1, 2, 3})
    # an older one neither (a view behind our own write's read-back)
    assert part.apply(PartitionState(1, 2, (1, 2, 3), 1, 4), (1, 2, 3), 0) is None
    assert part.leader_epoch == 3 and part.isr_update_pending


def test_a_newer_state_settles_the_pending_change_whatever_it_says(tmp_path):
    part = _leader(tmp_path)
    part.propose_isr({1, 2, 3})
    # the controller moved leadership meanwhile: our change lost, we follow
    assert part.apply(PartitionState(2, 4, (2, 3), 2, 7), (1, 2, 3), 0) == "follower"
    assert not part.isr_update_pending and part.isr == frozenset({2, 3}) and not part.is_leader


def test_states_without_a_version_always_apply(tmp_path):
    log = PartitionLog(str(tmp_path / "t-0"), "t", 0, LogConfig(), replicated=True)
    part = Partition("t", 0, log, broker_id=1)
    assert part.apply(PartitionState(1, 0, (1, 2), 0), (1, 2), 0) == "leader"
    assert part.apply(PartitionState(1, 0, (1,), 0), (1, 2), 0) is None
    assert part.isr == frozenset({1})


def test_reelected_leader_keeps_its_followers_progress(tmp_path):
    """The controller bumps the epoch, the leader stays (Kafka's resetReplicaState with
    isNewLeader false): what followers hold still counts, and the leadership is unbroken."""
    part = _leader(tmp_path, isr=(1, 2, 3))
    _append(part, 3)
    part.update_follower(2, 3, 10)
    assert part.apply(PartitionState(1, 4, (1, 2), 2, 6), (1, 2, 3), 20) == "leader"
    assert part.leading_since_epoch == 3 and part.followers[2].leo == 3
    assert part.followers[3].last_caught_up_ms == 0  # out of the ISR now
    assert part.maybe_increment_high_watermark() and part.log.high_watermark == 3


def test_leadership_lost_and_regained_starts_over(tmp_path):
    part = _leader(tmp_path, isr=(1, 2, 3))
    part.update_follower(2, 0, 10)
    assert part.apply(PartitionState(2, 4, (2, 3), 2, 6), (1, 2, 3), 20) == "follower"
    assert part.apply(PartitionState(1, 5, (1, 2, 3), 2, 7), (1, 2, 3), 30) == "leader"
    assert part.leading_since_epoch == 5 and part.followers[2].leo == -1


def test_a_skipped_epoch_forgets_the_followers_progress(tmp_path):
    """From epoch 3 to 5 without seeing 4: another broker may have led at 4 and made the
    followers truncate, so what they held at 3 no longer counts."""
    part = _leader(tmp_path, isr=(1, 2, 3))
    part.update_follower(2, 0, 10)
    assert part.apply(PartitionState(1, 5, (1, 2, 3), 2, 8), (1, 2, 3), 20) == "leader"
    assert part.followers[2].leo == -1
