"""The small value types of a partition's transactional state (Kafka's CompletedTxn,
VerificationGuard and VerificationStateEntry), shared by storage.producer_state (which
tracks them), storage.log (which writes the ``.txnindex`` entries they call for) and the
broker's transaction wiring.

A transaction on a partition starts with its producer's first transactional data batch
and ends with the COMMIT or ABORT control batch the coordinator writes; in between, the
partition's last stable offset (LSO) cannot pass the transaction's first offset.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import NamedTuple

__all__ = ["CompletedTxn", "TxnAppend", "VerificationGuard", "SENTINEL_GUARD", "VerificationStateEntry"]


class CompletedTxn(NamedTuple):
    """A transaction ended by a marker: ``last_offset`` is the marker's offset."""

    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool


@dataclass(slots=True)
class TxnAppend:
    """What the transactional batches of one append did (None on the default path, so a
    non-transactional append allocates nothing): transactions started, as (producer id,
    first offset), and transactions a marker completed."""

    started: list[tuple[int, int]] = field(default_factory=list)
    completed: list[CompletedTxn] = field(default_factory=list)


_guard_ids = itertools.count(1)


class VerificationGuard:
    """Ties a transactional produce to the verification the broker ran for it with the
    transaction coordinator (KIP-890, Kafka's VerificationGuard): the append is accepted
    only with the very guard stored when the verification started, so that an abort
    written in between invalidates it. Compared by identity."""

    __slots__ = ("value",)

    def __init__(self, value: int | None = None) -> None:
        self.value = next(_guard_ids) if value is None else value

    def verify(self, other: VerificationGuard | None) -> bool:
        return other is not None and other is not SENTINEL_GUARD and other is self

    def __repr__(self) -> str:
        return f"VerificationGuard(value={self.value})"


#: the guard of a produce that needed no verification; it verifies nothing
SENTINEL_GUARD = VerificationGuard(0)


@dataclass(slots=True)
class VerificationStateEntry:
    """A producer whose next transaction on this partition is being verified (Kafka's
    VerificationStateEntry): the guard, and the lowest sequence seen meanwhile (a higher
    one is refused, so a retried lower one cannot loop on OUT_OF_ORDER_SEQUENCE)."""

    timestamp: int
    lowest_sequence: int
    epoch: int
    guard: VerificationGuard = field(default_factory=VerificationGuard)

    def maybe_update_lowest_sequence_and_epoch(self, sequence: int, epoch: int) -> None:
        if epoch == self.epoch and sequence < self.lowest_sequence:
            self.lowest_sequence = sequence
        if epoch > self.epoch:
            self.epoch = epoch
            self.lowest_sequence = sequence
