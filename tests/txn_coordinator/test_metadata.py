"""The state machine on its own: every (from, to) pair is allowed exactly when Kafka's
validPreviousStates allows it, transitions apply only once written, and the coordinator
answers impossible states without crashing."""

from __future__ import annotations

import pytest

from txn_coordinator import TransactionConfig, TransactionState
from txn_coordinator.metadata import (
    MAX_EPOCH,
    IllegalTransition,
    TransactionMetadata,
    TxnTransit,
)

from .harness import TP, E, TxnHarness

S = TransactionState

# Kafka's TransactionState.validPreviousStates (TransactionMetadata.scala), written out again
# here so that the table in metadata.py is checked against it, not against itself.
KAFKA_VALID_PREVIOUS = {
    S.EMPTY: {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
    S.ONGOING: {S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
    S.PREPARE_COMMIT: {S.ONGOING},
    S.PREPARE_ABORT: {S.ONGOING, S.PREPARE_EPOCH_FENCE},
    S.COMPLETE_COMMIT: {S.PREPARE_COMMIT},
    S.COMPLETE_ABORT: {S.PREPARE_ABORT},
    S.DEAD: {S.EMPTY, S.COMPLETE_ABORT, S.COMPLETE_COMMIT},
    S.PREPARE_EPOCH_FENCE: {S.ONGOING},
}


def meta(state: S) -> TransactionMetadata:
    # Only a live transaction has partitions (Kafka clears them on completion).
    parts = set() if state in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT) else {TP("t", 0)}
    return TransactionMetadata("x", producer_id=7, producer_epoch=3, last_producer_epoch=2, txn_timeout_ms=100,
                               state=state, partitions=parts, txn_start_timestamp=10, txn_last_update_timestamp=20)


# How to ask for each target state.
PREPARE = {
    S.EMPTY: lambda m: m.prepare_increment_producer_epoch(200, None, 50),
    S.ONGOING: lambda m: m.prepare_add_partitions({TP("t", 1)}, 50),
    S.PREPARE_COMMIT: lambda m: m.prepare_abort_or_commit(S.PREPARE_COMMIT, 50),
    S.PREPARE_ABORT: lambda m: m.prepare_abort_or_commit(S.PREPARE_ABORT, 50),
    S.COMPLETE_COMMIT: lambda m: m.prepare_complete(50),
    S.COMPLETE_ABORT: lambda m: m.prepare_complete(50),
    S.DEAD: lambda m: m.prepare_dead(),
    S.PREPARE_EPOCH_FENCE: lambda m: m.prepare_fence_producer_epoch(),
}


# prepare_complete picks the completion of the current state (CompleteCommit from
# PrepareCommit, CompleteAbort from anything else), so the other pairs cannot be asked for.
PAIRS = [(src, dst) for src in S for dst in S
         if dst not in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT) or (dst is S.COMPLETE_COMMIT) == (src is S.PREPARE_COMMIT)]


@pytest.mark.parametrize(("source", "target"), PAIRS, ids=[f"{a.kafka_name}->{b.kafka_name}" for a, b in PAIRS])
def test_every_transition_is_allowed_exactly_as_kafka(source: S, target: S) -> None:
    m = meta(source)
    allowed = source in KAFKA_VALID_PREVIOUS[target]
    if not allowed:
        with pytest.raises(IllegalTransition):
            PREPARE[target](m)
        assert m.pending_state is None and m.state is source
        return
    t = PREPARE[target](m)
    assert t.state is target and m.pending_state is target and m.state is source  # nothing applied yet
    with pytest.raises(IllegalTransition):
        PREPARE[target](m)  # one pending transition at a time
    if target in (S.DEAD, S.PREPARE_EPOCH_FENCE):
        with pytest.raises(IllegalTransition):
            m.complete_transition(t)  # only ever pending (removed, or replaced by PrepareAbort)
        return
    m.complete_transition(t)
    assert (m.state, m.pending_state, m.txn_last_update_timestamp) == (target, None, 50)
    if target is S.ONGOING:
        assert m.partitions == {TP("t", 1)} | meta(source).partitions
    elif target in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
        assert m.partitions == {TP("t", 0)}
    else:
        assert m.partitions == set()


def test_transition_details() -> None:
    m = meta(S.COMPLETE_COMMIT)
    t = m.prepare_add_partitions({TP("u", 1)}, 99)
    assert t.txn_start_timestamp == 99  # a new transaction starts now
    m.complete_transition(t)
    t = m.prepare_add_partitions({TP("u", 2)}, 120)
    assert t.txn_start_timestamp == 99  # ... and keeps its start
    m.complete_transition(t)
    t = m.prepare_abort_or_commit(S.PREPARE_COMMIT, 130)
    m.complete_transition(t)
    t = m.prepare_complete(140)
    assert (t.last_producer_epoch, t.partitions, t.txn_start_timestamp) == (3, frozenset(), 99)
    m.complete_transition(t)
    assert (m.state, m.partitions) == (S.COMPLETE_COMMIT, set())
    # The fence bumps the epoch and forgets the last one.
    f = meta(S.ONGOING).prepare_fence_producer_epoch()
    assert (f.producer_epoch, f.last_producer_epoch, f.partitions) == (4, -1, frozenset({TP("t", 0)}))
    top = meta(S.ONGOING)
    top.producer_epoch = MAX_EPOCH
    with pytest.raises(IllegalTransition):
        top.prepare_fence_producer_epoch()
    done = meta(S.EMPTY)
    done.producer_epoch = MAX_EPOCH - 1
    with pytest.raises(IllegalTransition):
        done.prepare_increment_producer_epoch(100, None, 1)
    with pytest.raises(IllegalTransition):
        meta(S.ONGOING).prepare_producer_id_rotation(9, 100, 1, False)


def test_completing_a_transit_that_was_not_prepared_is_a_bug() -> None:
    m = meta(S.EMPTY)
    forged = TxnTransit(7, 7, -1, 9, -1, 100, S.EMPTY, frozenset(), -1, 50)
    with pytest.raises(IllegalTransition):
        m.complete_transition(forged)  # nothing pending
    m.pending_state = S.EMPTY
    with pytest.raises(IllegalTransition):
        m.complete_transition(forged)  # epoch 3 -> 9 is no bump
    with pytest.raises(IllegalTransition):
        TxnTransit(7, 7, -1, 3, -1, 100, S.EMPTY, frozenset({TP("t", 0)}), -1, 50).to_record()
    with pytest.raises(IllegalTransition):
        meta(S.ONGOING).remove_partition(TP("t", 0))  # only while markers are written


@pytest.mark.parametrize("state", [S.DEAD, S.PREPARE_EPOCH_FENCE])
def test_impossible_states_are_answered_not_fatal(state: S) -> None:
    # Kafka kills the request with a fatal log; here the client gets UNKNOWN_SERVER_ERROR.
    h = TxnHarness()
    r = h.init("txn")
    h.meta("txn").state = state
    assert h.init("txn").error_code == E.unknown_server_error
    assert h.end("txn", r.producer_id, 0).error_code == E.unknown_server_error
    assert h.add("txn", r.producer_id, 0, [TP("t", 0)]) == {TP("t", 0): E.unknown_server_error}
    assert h.meta("txn").pending_state is None


def test_config_from_properties() -> None:
    cfg = TransactionConfig.from_properties({
        "transaction.state.log.num.partitions": "7", "transaction.max.timeout.ms": 1000,
        "transactional.id.expiration.ms": "5", "transaction.abort.timed.out.transaction.cleanup.interval.ms": "3",
        "transaction.remove.expired.transaction.cleanup.interval.ms": "4", "transaction.state.log.min.isr": "1",
        "transaction.state.log.replication.factor": "1", "transaction.state.log.segment.bytes": "1024",
        "group.max.size": "9",
    })
    assert cfg == TransactionConfig(7, 1, 1, 1024, 1000, 5, 3, 4)
    assert TransactionConfig().topic_configs() == {
        "unclean.leader.election.enable": "false", "compression.type": "uncompressed", "cleanup.policy": "compact",
        "min.insync.replicas": "2", "segment.bytes": "104857600",
    }
