"""Transaction administration: DescribeTransactions v0 and ListTransactions v0-2, what
``kafka-transactions.sh`` (and ``krait transactions``) show (Kafka's
TransactionCoordinator.handleDescribeTransactions and
TransactionStateManager.listTransactionStates).
"""

from __future__ import annotations

import datetime
import logging
import re
from typing import Any

from kio.schema.errors import ErrorCode

from coordinator.responses import response_for
from txn_coordinator.metadata import TransactionMetadata, TransactionState
from txn_coordinator.state import CoordinatorState, Refused, Respond, reply

__all__ = ["TransactionAdmin"]

log = logging.getLogger(__name__)

E = ErrorCode
_S = TransactionState
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


def _timestamp(ms: int) -> datetime.datetime:
    # kio's non-nullable datetime_i64 needs a datetime even for -1 (no transaction started).
    return _EPOCH + datetime.timedelta(milliseconds=ms)


class TransactionAdmin:
    def __init__(self, state: CoordinatorState) -> None:
        self._state = state

    # ------------------------------------------------------------------ DescribeTransactions
    def describe_transactions(self, req: Any, respond: Respond) -> None:
        states = [self.describe(tid) for tid in req.transactional_ids]
        reply(respond, response_for(req, transaction_states=states))

    def describe(self, transactional_id: str) -> dict[str, Any]:
        """One entry of a DescribeTransactions response (plain values)."""
        # Java's defaults for the fields of an entry that reports an error.
        out: dict[str, Any] = {
            "transactional_id": transactional_id, "error_code": E.none, "transaction_state": "",
            "transaction_timeout": 0, "transaction_start_time": _timestamp(0), "producer_id": 0,
            "producer_epoch": 0, "topics": [],
        }
        if transactional_id == "":
            out["error_code"] = E.invalid_request
            return out
        try:
            _, meta = self._state.lookup(transactional_id)
        except Refused as r:
            out["error_code"] = r.code
            return out
        if meta is None or meta.state is _S.DEAD:
            # A Dead id is being expired: it is as good as gone.
            out["error_code"] = E.transactional_id_not_found
            return out
        by_topic: dict[str, list[int]] = {}
        for tp in sorted(meta.partitions):
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        out.update(
            transaction_state=meta.state.kafka_name,
            transaction_timeout=meta.txn_timeout_ms,
            transaction_start_time=_timestamp(meta.txn_start_timestamp),
            producer_id=meta.producer_id,
            producer_epoch=meta.producer_epoch,
            topics=[{"topic": t, "partitions": ps} for t, ps in by_topic.items()],
        )
        return out

    # ------------------------------------------------------------------ ListTransactions
    def list_transactions(self, req: Any, respond: Respond) -> None:
        """ListTransactions v0-2: filters by state (unknown names are reported back), producer
        id, duration (v1: transactions running for longer than this) and transactional id
        pattern (v2: a regular expression the whole id must match)."""
        state_names = list(dict.fromkeys(req.state_filters))
        producer_ids = {int(p) for p in req.producer_id_filters}
        duration = int(getattr(req, "duration_filter", -1))
        pattern_text = getattr(req, "transactional_id_pattern", None)
        if self._state.loading:
            reply(respond, response_for(req, error_code=E.coordinator_load_in_progress))
            return
        pattern = None
        if pattern_text:
            try:
                pattern = re.compile(pattern_text)
            except re.error as e:
                log.info("ListTransactions: bad transactional id pattern %r: %s", pattern_text, e)
                reply(respond, response_for(req, error_code=E.invalid_regular_expression))
                return
        wanted = {s for n in state_names if (s := _S.from_name(n)) is not None}
        unknown = [n for n in state_names if _S.from_name(n) is None]
        now = self._state.clock()

        def include(m: TransactionMetadata) -> bool:
            if m.state is _S.DEAD:
                return False  # transient: the id is being expired
            if producer_ids and m.producer_id not in producer_ids:
                return False
            if state_names and m.state not in wanted:
                return False
            # As Kafka: measured from the start timestamp, which is -1 without a transaction.
            if duration >= 0 and now - m.txn_start_timestamp <= duration:
                return False
            return pattern is None or pattern.fullmatch(m.transactional_id) is not None

        states = [
            {"transactional_id": m.transactional_id, "producer_id": m.producer_id, "transaction_state": m.state.kafka_name}
            for _, entry in sorted(self._state.cache.items())
            for m in entry.txns.values()
            if include(m)
        ]
        reply(respond, response_for(req, error_code=E.none, unknown_state_filters=unknown, transaction_states=states))
