"""Share sessions: Kafka's epoch rules, the session limit, incremental answers and
connection close."""

import uuid

import pytest

from broker.share.sessions import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    ShareSessionCache,
    ShareSessionError,
    next_epoch,
)
from protocol.errors import ErrorCode

T = uuid.uuid4()
P0, P1, P2 = (T, 0), (T, 1), (T, 2)


def _error(fn, *args):
    with pytest.raises(ShareSessionError) as exc:
        fn(*args)
    return exc.value.code


def test_next_epoch_wraps_to_one_and_keeps_final():
    assert next_epoch(0) == 1
    assert next_epoch(41) == 42
    assert next_epoch(2**31 - 1) == 1
    assert next_epoch(FINAL_EPOCH) == FINAL_EPOCH


def test_open_then_incremental_then_close():
    cache = ShareSessionCache(10)
    ctx = cache.new_context("g", "m", INITIAL_EPOCH, [P0, P1], [], False, "conn")
    assert ctx.full and ctx.partitions == [P0, P1] and ctx.session.epoch == 1
    ctx = cache.new_context("g", "m", 1, [P2], [P0], True, "conn")
    assert not ctx.full and ctx.partitions == [P1, P2] and ctx.session.epoch == 2
    ctx = cache.new_context("g", "m", FINAL_EPOCH, [], [], True, "conn")
    assert ctx.final
    # a final fetch still finds the session: the shell removes it once the acks are in
    assert cache.get("g", "m") is not None


def test_wrong_epoch_and_missing_session():
    cache = ShareSessionCache(10)
    assert _error(cache.new_context, "g", "m", 3, [P0], [], False, "c") is ErrorCode.share_session_not_found
    assert _error(cache.new_context, "g", "m", FINAL_EPOCH, [], [], False, "c") is ErrorCode.share_session_not_found
    cache.new_context("g", "m", INITIAL_EPOCH, [P0], [], False, "c")
    assert _error(cache.new_context, "g", "m", 5, [P0], [], False, "c") is ErrorCode.invalid_share_session_epoch
    # the failed request did not move the epoch
    assert cache.get("g", "m").epoch == 1


def test_acknowledgements_cannot_open_a_session():
    cache = ShareSessionCache(10)
    assert _error(cache.new_context, "g", "m", INITIAL_EPOCH, [P0], [], True, "c") is ErrorCode.invalid_request
    assert cache.get("g", "m") is None


def test_reopening_replaces_the_session():
    cache = ShareSessionCache(10)
    cache.new_context("g", "m", INITIAL_EPOCH, [P0], [], False, "c1")
    cache.new_context("g", "m", 1, [], [], False, "c1")
    ctx = cache.new_context("g", "m", INITIAL_EPOCH, [P1], [], False, "c2")
    assert ctx.session.epoch == 1 and ctx.partitions == [P1]
    assert len(cache) == 1
    assert cache.connection_closed("c1") == []
    assert [s.member_id for s in cache.connection_closed("c2")] == ["m"]


def test_session_limit():
    cache = ShareSessionCache(2)
    cache.new_context("g", "a", INITIAL_EPOCH, [P0], [], False, "c")
    cache.new_context("g", "b", INITIAL_EPOCH, [P0], [], False, "c")
    assert _error(cache.new_context, "g", "c", INITIAL_EPOCH, [P0], [], False, "c") is \
        ErrorCode.share_session_limit_reached
    # a member reopening its own session is not refused by the limit
    cache.new_context("g", "a", INITIAL_EPOCH, [P1], [], False, "c")


def test_acknowledge_context_rules():
    cache = ShareSessionCache(10)
    assert _error(cache.acknowledge_context, "g", "m", 1) is ErrorCode.share_session_not_found
    cache.new_context("g", "m", INITIAL_EPOCH, [P0], [], False, "c")
    assert _error(cache.acknowledge_context, "g", "m", INITIAL_EPOCH) is ErrorCode.invalid_share_session_epoch
    assert _error(cache.acknowledge_context, "g", "m", 7) is ErrorCode.invalid_share_session_epoch
    assert cache.acknowledge_context("g", "m", 1).epoch == 2
    # the final acknowledge does not move the epoch
    assert cache.acknowledge_context("g", "m", FINAL_EPOCH).epoch == 2


def test_incremental_answers_only_what_changed():
    cache = ShareSessionCache(10)
    ctx = cache.new_context("g", "m", INITIAL_EPOCH, [P0], [], False, "c")
    s = ctx.session
    # nothing new for P0: left out
    assert not s.must_respond(P0, has_records=False, error=False)
    assert s.must_respond(P0, has_records=True, error=False)
    # an added partition is answered once even without records
    cache.new_context("g", "m", 1, [P1], [], False, "c")
    assert s.must_respond(P1, has_records=False, error=False)
    assert not s.must_respond(P1, has_records=False, error=False)
    # an error is answered, and the partition is answered again once it clears
    assert s.must_respond(P1, has_records=False, error=True)
    assert s.must_respond(P1, has_records=False, error=False)
    assert not s.must_respond(P1, has_records=False, error=False)


def test_connection_close_ends_its_sessions_only():
    cache = ShareSessionCache(10)
    cache.new_context("g", "a", INITIAL_EPOCH, [P0], [], False, "c1")
    cache.new_context("g", "b", INITIAL_EPOCH, [P0], [], False, "c1")
    cache.new_context("h", "a", INITIAL_EPOCH, [P0], [], False, "c2")
    gone = cache.connection_closed("c1")
    assert sorted((s.group_id, s.member_id) for s in gone) == [("g", "a"), ("g", "b")]
    assert len(cache) == 1 and cache.get("h", "a") is not None
    assert [s.member_id for s in cache.sessions_of_group("h")] == ["a"]
