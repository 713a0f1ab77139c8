"""Share sessions (KIP-932): which share-partitions each member of a share group fetches
from, and the epoch its next ShareFetch or ShareAcknowledge must carry.

A share session is keyed by (group id, member id); a connection owns the sessions it
opened, so closing the connection ends them (the member's records go back to the others
then). The rules are Kafka's ``SharePartitionManager.newContext`` /
``acknowledgeSessionUpdate`` and ``ShareSessionCache``:

- epoch 0 opens a session (replacing any the member had) with the request's partitions;
  acknowledgements may not ride on it (INVALID_REQUEST);
- epoch -1 closes it (SHARE_SESSION_NOT_FOUND if there is none);
- any other epoch must equal the session's (else INVALID_SHARE_SESSION_EPOCH), adds the
  request's partitions, drops the forgotten ones and moves the epoch on;
- at most ``group.share.max.share.sessions`` sessions per broker
  (SHARE_SESSION_LIMIT_REACHED).

Only partitions with records, an error, or news since the last answer are answered on an
incremental session, as CachedSharePartition.maybeUpdateResponseData decides.

Pure bookkeeping: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from protocol.errors import ErrorCode

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
_MAX_EPOCH = 2**31 - 1

#: (topic id, partition)
Key = tuple[object, int]


def next_epoch(epoch: int) -> int:
    """ShareRequestMetadata.nextEpoch: a closed session stays closed; wraps to 1, never 0."""
    if epoch < 0:
        return FINAL_EPOCH
    if epoch == _MAX_EPOCH:
        return 1
    return epoch + 1


class ShareSessionError(Exception):
    """A request the session rules refuse as a whole (Kafka answers the top-level error)."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass
class ShareSession:
    group_id: str
    member_id: str
    connection: object
    epoch: int
    #: partition -> whether the next answer must include it even without records
    partitions: dict[Key, bool] = field(default_factory=dict)

    def must_respond(self, key: Key, has_records: bool, error: bool) -> bool:
        """Whether an incremental answer includes ``key``; remembers what it sent."""
        pending = self.partitions.get(key)
        if pending is None:
            return has_records or error
        if error:
            # resent once the error clears
            self.partitions[key] = True
            return True
        if pending:
            self.partitions[key] = False
            return True
        return has_records


@dataclass
class ShareFetchContext:
    """What one ShareFetch works on: the session (None for a final or a refused one),
    whether it is a new session (every partition answered) and the partitions to fetch."""

    session: ShareSession | None
    full: bool
    partitions: list[Key]
    final: bool = False


class ShareSessionCache:
    """Every share session of this broker."""

    def __init__(self, max_sessions: int) -> None:
        self.max_sessions = max_sessions
        self._sessions: dict[tuple[str, str], ShareSession] = {}
        self._by_connection: dict[object, set[tuple[str, str]]] = {}

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, group_id: str, member_id: str) -> ShareSession | None:
        return self._sessions.get((group_id, member_id))

    def partitions_total(self) -> int:
        return sum(len(s.partitions) for s in self._sessions.values())

    def new_context(self, group_id: str, member_id: str, epoch: int, fetch: Iterable[Key],
                    forget: Iterable[Key], has_acknowledgements: bool, connection: object) -> ShareFetchContext:
        """The context of a ShareFetch, or :class:`ShareSessionError`."""
        fetch = list(fetch)
        key = (group_id, member_id)
        if epoch == FINAL_EPOCH:
            session = self._sessions.get(key)
            if session is None:
                raise ShareSessionError(ErrorCode.share_session_not_found,
                                        f"No share session for member {member_id} of group {group_id}.")
            return ShareFetchContext(session, full=False, partitions=[], final=True)
        if epoch == INITIAL_EPOCH:
            if has_acknowledgements:
                raise ShareSessionError(ErrorCode.invalid_request,
                                        "Acknowledgements are not allowed on the request that opens a share session.")
            self.remove(group_id, member_id)
            if len(self._sessions) >= self.max_sessions:
                raise ShareSessionError(ErrorCode.share_session_limit_reached,
                                        f"The broker holds group.share.max.share.sessions={self.max_sessions} share "
                                        "sessions already.")
            session = ShareSession(group_id, member_id, connection, next_epoch(INITIAL_EPOCH),
                                   {k: False for k in fetch})
            self._sessions[key] = session
            self._by_connection.setdefault(connection, set()).add(key)
            return ShareFetchContext(session, full=True, partitions=list(session.partitions))
        session = self._sessions.get(key)
        if session is None:
            raise ShareSessionError(ErrorCode.share_session_not_found,
                                    f"No share session for member {member_id} of group {group_id}.")
        if session.epoch != epoch:
            raise ShareSessionError(ErrorCode.invalid_share_session_epoch,
                                    f"The share session's epoch is {session.epoch}, not {epoch}.")
        for k in fetch:
            session.partitions.setdefault(k, True)
        for k in forget:
            session.partitions.pop(k, None)
        session.epoch = next_epoch(session.epoch)
        return ShareFetchContext(session, full=False, partitions=list(session.partitions))

    def acknowledge_context(self, group_id: str, member_id: str, epoch: int) -> ShareSession:
        """The session a ShareAcknowledge acts in (its epoch moves on unless it closes it)."""
        if epoch == INITIAL_EPOCH:
            raise ShareSessionError(ErrorCode.invalid_share_session_epoch,
                                    "A ShareAcknowledge cannot open a share session (epoch 0).")
        session = self._sessions.get((group_id, member_id))
        if session is None:
            raise ShareSessionError(ErrorCode.share_session_not_found,
                                    f"No share session for member {member_id} of group {group_id}.")
        if epoch == FINAL_EPOCH:
            return session
        if session.epoch != epoch:
            raise ShareSessionError(ErrorCode.invalid_share_session_epoch,
                                    f"The share session's epoch is {session.epoch}, not {epoch}.")
        session.epoch = next_epoch(session.epoch)
        return session

    def remove(self, group_id: str, member_id: str) -> ShareSession | None:
        session = self._sessions.pop((group_id, member_id), None)
        if session is not None:
            keys = self._by_connection.get(session.connection)
            if keys is not None:
                keys.discard((group_id, member_id))
                if not keys:
                    del self._by_connection[session.connection]
        return session

    def connection_closed(self, connection: object) -> list[ShareSession]:
        """The sessions a closed connection held, now removed (their members' records go
        back to the group, as Kafka's ConnectionDisconnectListener does)."""
        gone = []
        for group_id, member_id in sorted(self._by_connection.pop(connection, set())):
            session = self._sessions.pop((group_id, member_id), None)
            if session is not None:
                gone.append(session)
        return gone

    def sessions_of_group(self, group_id: str) -> list[ShareSession]:
        return [s for (g, _m), s in self._sessions.items() if g == group_id]
