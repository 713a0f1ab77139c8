"""``krait transactions``: list and describe transactions, describe a partition's
producers, find and abort hanging transactions, like Kafka's ``kafka-transactions.sh``
(TransactionsCommand: same sub-commands, options, tables and logic), over the wire, so it
works against any Kafka-compatible broker::

    krait transactions --bootstrap-server HOST:PORT list [--duration-filter MS]
    krait transactions --bootstrap-server HOST:PORT describe --transactional-id ID
    krait transactions --bootstrap-server HOST:PORT describe-producers --topic T --partition P [--broker-id N]
    krait transactions --bootstrap-server HOST:PORT find-hanging (--broker-id N | --topic T [--partition P])
                                                               [--max-transaction-timeout MIN]
    krait transactions --bootstrap-server HOST:PORT abort --topic T --partition P
        (--start-offset O | --producer-id ID --producer-epoch E --coordinator-epoch C)

``list`` asks every broker (ListTransactions); ``describe`` asks the transactional id's
coordinator (FindCoordinator with key type 1, then DescribeTransactions). ``find-hanging``
is Kafka's FindHangingTransactions: the open transactions the partitions' producer states
report (DescribeProducers) that have lasted longer than the maximum transaction timeout,
and whose coordinator either does not know the producer id (ListTransactions filtered on
it), does not know the transactional id, or does not list the partition in the
transaction. ``abort`` is the admin client's abortTransaction: a WriteTxnMarkers ABORT
for one partition, sent to its leader, with the producer id and epoch and the coordinator
epoch of the transaction (found with DescribeProducers from ``--start-offset``).

Options may come before or after the sub-command (Kafka's take them before). Errors are
one line on stderr and exit code 1, as the other commands.
"""

from __future__ import annotations

import argparse
import datetime
import time
from collections.abc import Callable, Iterable
from typing import Any, TextIO, TypeVar

from protocol.apis import ApiKey
from protocol.client_errors import check, describe, kafka_error
from protocol.errors import ErrorCode, KafkaError

from .admin_client import AdminClient
from .command import CommandError, Parser, UsageError, run
from .wire import WireClient

__all__ = ["format_table", "main"]

#: FindCoordinator key type of transactional ids
TRANSACTION_KEY_TYPE = 1
#: The versions this command speaks (outside the wire client's negotiated set)
DESCRIBE_PRODUCERS_VERSION = 0
DESCRIBE_TRANSACTIONS_VERSION = 0
WRITE_TXN_MARKERS_VERSIONS = (0, 1)
#: partitions per DescribeProducers request (Kafka's FindHangingTransactionsCommand.MAX_BATCH_SIZE)
MAX_BATCH_SIZE = 500
#: errors the admin client retries (after looking the coordinator or leader up again)
_RETRIABLE = {ErrorCode.coordinator_load_in_progress, ErrorCode.coordinator_not_available,
              ErrorCode.not_coordinator, ErrorCode.not_leader_or_follower, ErrorCode.leader_not_available}

LIST_HEADERS = ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"]
DESCRIBE_HEADERS = ["CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch", "TransactionState",
                    "TransactionTimeoutMs", "CurrentTransactionStartTimeMs", "TransactionDurationMs",
                    "TopicPartitions"]
PRODUCERS_HEADERS = ["ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence", "LastTimestamp",
                     "CurrentTransactionStartOffset"]
HANGING_HEADERS = ["Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch", "StartOffset",
                   "LastTimestamp", "Duration(min)"]

T = TypeVar("T")
TP = tuple[str, int]


def format_table(headers: list[str], rows: Iterable[list[str]]) -> list[str]:
    """Kafka's ToolsUtils.prettyPrintTable: every cell padded to its column's width and
    followed by a tab."""
    rows = [list(map(str, r)) for r in rows]
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]
    return ["".join(f"{cell:<{w}}\t" for cell, w in zip(r, widths, strict=True)) for r in [headers, *rows]]


def _tp(tp: TP) -> str:
    return f"{tp[0]}-{tp[1]}"  # Kafka's TopicPartition.toString


def _now_ms() -> int:
    return int(time.time() * 1000)


_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
_MS = datetime.timedelta(milliseconds=1)


def _ms(value: Any) -> int:
    """Milliseconds of a decoded int64/int32 time field (kio decodes some as datetime or
    timedelta; None is Kafka's -1)."""
    if value is None:
        return -1
    if isinstance(value, datetime.datetime):
        return (value - _EPOCH) // _MS
    if isinstance(value, datetime.timedelta):
        return value // _MS
    return int(value)


# --- the requests ---------------------------------------------------------------------------------


class TxnAdmin:
    """The transaction admin calls over an :class:`AdminClient`'s connections, retrying
    what Kafka's admin client retries until ``timeout``."""

    def __init__(self, admin: AdminClient, timeout: float) -> None:
        self.admin, self.timeout = admin, timeout
        self._api_versions: dict[int, dict[int, tuple[int, int]]] = {}

    def _retrying(self, call: Callable[[], T]) -> T:
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                return call()
            except KafkaError as exc:
                if exc.error_code not in _RETRIABLE or time.monotonic() >= deadline:
                    raise
            time.sleep(0.1)

    def _version(self, node: int, conn: WireClient, api_key: int, ours: tuple[int, int]) -> int:
        """The highest version of an API outside the wire client's negotiated set both sides speak."""
        if node not in self._api_versions:
            resp = conn.request(ApiKey.API_VERSIONS, conn.version(ApiKey.API_VERSIONS),
                                client_software_name="krait", client_software_version="0.1.0")
            check(resp.error_code, context="ApiVersions")
            self._api_versions[node] = {int(k.api_key): (int(k.min_version), int(k.max_version))
                                        for k in resp.api_keys}
        lo, hi = self._api_versions[node].get(api_key, (-1, -1))
        if max(lo, ours[0]) > min(hi, ours[1]):
            raise KafkaError(ErrorCode.unsupported_version, f"broker {node} does not support API key {api_key} "
                             f"v{ours[0]}-{ours[1]}")
        return min(hi, ours[1])

    # metadata

    def partitions(self, topics: list[str] | None) -> dict[TP, tuple[int, list[int]]]:
        """(topic, partition) -> (leader, replicas) of ``topics`` (None: every topic, internal ones too)."""
        out = {}
        for t in self.admin.metadata(topics):
            check(t.error_code, context=f"topic {t.name}")
            for p in t.partitions:
                out[(t.name, p.partition)] = (p.leader, p.replicas)
        return out

    def leader(self, tp: TP) -> int:
        def lookup() -> int:
            leader, _ = self.partitions([tp[0]]).get(tp, (None, None))
            if leader is None:
                raise kafka_error(ErrorCode.unknown_topic_or_partition, context=_tp(tp))
            if leader < 0:
                raise kafka_error(ErrorCode.leader_not_available, context=_tp(tp))
            return leader
        return self._retrying(lookup)

    # transactions

    def list_transactions(self, producer_ids: Iterable[int] = (), duration_filter: int | None = None
                          ) -> dict[int, list[Any]]:
        """Broker id -> its ListTransactions entries (every broker, as Kafka's allByBrokerId)."""
        fields: dict[str, Any] = dict(state_filters=[], producer_id_filters=list(producer_ids))
        version = 0
        if duration_filter is not None:
            version = 1
            fields["duration_filter"] = duration_filter

        def call(node: int) -> list[Any]:
            resp = self.admin.node(node).request(ApiKey.LIST_TRANSACTIONS, version, **fields)
            check(resp.error_code, context=f"ListTransactions on broker {node}")
            return list(resp.transaction_states)
        return {node: self._retrying(lambda n=node: call(n)) for node in self.admin.node_ids()}

    def find_coordinator(self, transactional_id: str) -> int:
        conn = self.admin.bootstrap
        v = conn.version(ApiKey.FIND_COORDINATOR)
        if v < 1:
            raise KafkaError(ErrorCode.unsupported_version, "the broker cannot find transaction coordinators "
                             "(FindCoordinator v1+)")
        if v >= 4:
            resp = conn.request(ApiKey.FIND_COORDINATOR, key_type=TRANSACTION_KEY_TYPE,
                                coordinator_keys=[transactional_id])
            (c,) = resp.coordinators
        else:
            c = conn.request(ApiKey.FIND_COORDINATOR, key=transactional_id, key_type=TRANSACTION_KEY_TYPE)
        check(c.error_code, getattr(c, "error_message", None))
        return int(c.node_id)

    def describe_transaction(self, transactional_id: str) -> tuple[int, Any]:
        """(coordinator id, DescribeTransactions entry) of a transactional id."""
        def call() -> tuple[int, Any]:
            node = self.find_coordinator(transactional_id)
            resp = self.admin.node(node).request(ApiKey.DESCRIBE_TRANSACTIONS, DESCRIBE_TRANSACTIONS_VERSION,
                                                 transactional_ids=[transactional_id])
            (st,) = resp.transaction_states
            check(st.error_code)
            return node, st
        return self._retrying(call)

    def describe_producers(self, tps: list[TP], broker_id: int | None = None) -> dict[TP, list[Any]]:
        """(topic, partition) -> its active producers, asked of ``broker_id`` or of each
        partition's leader. A partition error raises."""
        by_node: dict[int, list[TP]] = {}
        if broker_id is not None:
            by_node[broker_id] = list(tps)
        else:
            meta = self.partitions(sorted({t for t, _ in tps}))
            for tp in tps:
                if tp not in meta:
                    raise kafka_error(ErrorCode.unknown_topic_or_partition, context=_tp(tp))
                if meta[tp][0] < 0:
                    raise kafka_error(ErrorCode.leader_not_available, context=_tp(tp))
                by_node.setdefault(meta[tp][0], []).append(tp)
        out: dict[TP, list[Any]] = {}
        for node, node_tps in by_node.items():
            for start in range(0, len(node_tps), MAX_BATCH_SIZE):
                topics: dict[str, list[int]] = {}
                for t, p in node_tps[start:start + MAX_BATCH_SIZE]:
                    topics.setdefault(t, []).append(p)
                resp = self.admin.node(node).request(
                    ApiKey.DESCRIBE_PRODUCERS, DESCRIBE_PRODUCERS_VERSION,
                    topics=[dict(name=t, partition_indexes=ps) for t, ps in topics.items()])
                for t in resp.topics:
                    for p in t.partitions:
                        check(p.error_code, p.error_message, context=f"{t.name}-{p.partition_index}")
                        out[(str(t.name), int(p.partition_index))] = list(p.active_producers)
        return out

    def abort_transaction(self, tp: TP, producer_id: int, producer_epoch: int, coordinator_epoch: int) -> None:
        """Kafka's Admin.abortTransaction: WriteTxnMarkers(ABORT) for one partition at its leader."""
        spec = (f"AbortTransactionSpec(topicPartition={_tp(tp)}, producerId={producer_id}, "
                f"producerEpoch={producer_epoch}, coordinatorEpoch={coordinator_epoch})")

        def call() -> None:
            node = self.leader(tp)
            conn = self.admin.node(node)
            resp = conn.request(ApiKey.WRITE_TXN_MARKERS, self._version(node, conn, ApiKey.WRITE_TXN_MARKERS,
                                                                         WRITE_TXN_MARKERS_VERSIONS),
                                markers=[dict(producer_id=producer_id, producer_epoch=producer_epoch,
                                              transaction_result=False, coordinator_epoch=coordinator_epoch,
                                              topics=[dict(name=tp[0], partition_indexes=[tp[1]])])])
            results = [(t.name, pr.partition_index, pr.error_code) for m in resp.markers
                       if m.producer_id == producer_id for t in m.topics for pr in t.partitions]
            if [(t, p) for t, p, _ in results] != [tp]:
                raise CommandError(f"WriteTxnMarkers response included unexpected entries: {results} (expected "
                                   f"exactly one entry for {_tp(tp)} and producerId {producer_id})")
            code = results[0][2]
            if code in (ErrorCode.unknown_topic_or_partition, ErrorCode.replica_not_available,
                        ErrorCode.broker_not_available):
                code = ErrorCode.not_leader_or_follower  # retried after looking the leader up again
            check(code, context=f"WriteTxnMarkers request with {spec} failed")
        self._retrying(call)


# --- the sub-commands ---------------------------------------------------------------------------------


def _list(txn: TxnAdmin, args: argparse.Namespace, out: TextIO) -> None:
    try:
        by_broker = txn.list_transactions(duration_filter=args.duration_filter)
    except KafkaError as exc:
        raise CommandError(f"Failed to list transactions: {describe(exc)}") from None
    rows = [[str(st.transactional_id), str(node), str(st.producer_id), str(st.transaction_state)]
            for node, states in sorted(by_broker.items())
            for st in sorted(states, key=lambda s: s.transactional_id)]
    _print(out, format_table(LIST_HEADERS, rows))


def _describe(txn: TxnAdmin, args: argparse.Namespace, out: TextIO) -> None:
    tid = args.transactional_id
    try:
        node, st = txn.describe_transaction(tid)
    except KafkaError as exc:
        raise CommandError(f"Failed to describe transaction state of transactional-id `{tid}`: "
                           f"{describe(exc)}") from None
    start_ms = _ms(st.transaction_start_time)
    if start_ms >= 0:
        start, duration = str(start_ms), str(_now_ms() - start_ms)
    else:
        start = duration = "None"
    tps = sorted((str(t.topic), int(p)) for t in st.topics for p in t.partitions)
    row = [str(node), tid, str(st.producer_id), str(st.producer_epoch), str(st.transaction_state),
           str(_ms(st.transaction_timeout)), start, duration, ",".join(map(_tp, tps))]
    _print(out, format_table(DESCRIBE_HEADERS, [row]))


def _describe_producers(txn: TxnAdmin, args: argparse.Namespace, out: TextIO) -> None:
    tp = (args.topic, args.partition)
    try:
        producers = txn.describe_producers([tp], args.broker_id)[tp]
    except KafkaError as exc:
        where = f"broker {args.broker_id}" if args.broker_id is not None else "leader"
        raise CommandError(f"Failed to describe producers for partition {_tp(tp)} on {where}: "
                           f"{describe(exc)}") from None
    rows = [[str(a.producer_id), str(a.producer_epoch), str(a.coordinator_epoch if a.coordinator_epoch >= 0 else -1),
             str(a.last_sequence), str(_ms(a.last_timestamp)),
             str(a.current_txn_start_offset) if a.current_txn_start_offset >= 0 else "None"] for a in producers]
    _print(out, format_table(PRODUCERS_HEADERS, rows))


def _find_hanging(txn: TxnAdmin, args: argparse.Namespace, out: TextIO) -> None:
    if args.topic is None and args.broker_id is None:
        raise CommandError("The `find-hanging` command requires either --topic or --broker-id to limit the "
                           "scope of the search")
    if args.partition is not None and args.topic is None:
        raise CommandError("The --partition argument requires --topic to be provided")
    max_timeout_ms = args.max_transaction_timeout * 60_000
    # the partitions to search: the one given, or those of the topic(s) with a replica on the broker
    if args.topic is not None and args.partition is not None:
        tps = [(args.topic, args.partition)]
    else:
        try:
            meta = txn.partitions([args.topic] if args.topic is not None else None)
        except KafkaError as exc:
            raise CommandError(f"Failed to describe topics: {describe(exc)}") from None
        tps = sorted(tp for tp, (_, replicas) in meta.items() if args.broker_id is None or args.broker_id in replicas)
    # open transactions older than the maximum timeout
    try:
        producers = txn.describe_producers(tps, args.broker_id) if tps else {}
    except KafkaError as exc:
        raise CommandError(f"Failed to describe producers for {len(tps)} partitions on broker "
                           f"{args.broker_id}: {describe(exc)}") from None
    now = _now_ms()
    candidates = [(tp, a) for tp in tps for a in producers.get(tp, [])
                  if a.current_txn_start_offset >= 0 and now - _ms(a.last_timestamp) > max_timeout_ms]
    hanging = []
    if candidates:
        pids = sorted({a.producer_id for _, a in candidates})
        try:
            listings = txn.list_transactions(producer_ids=pids)
        except KafkaError as exc:
            raise CommandError(f"Failed to list transactions for {len(pids)} producers: {describe(exc)}") from None
        transactional_ids = {int(st.producer_id): str(st.transactional_id)
                             for states in listings.values() for st in states if st.producer_id in pids}
        descriptions: dict[str, set[TP] | None] = {}
        for tid in sorted(set(transactional_ids.values())):
            try:
                _, st = txn.describe_transaction(tid)
            except KafkaError as exc:
                if exc.error_code != ErrorCode.transactional_id_not_found:
                    raise CommandError(f"Failed to describe {len(set(transactional_ids.values()))} transactions: "
                                       f"{describe(exc)}") from None
                descriptions[tid] = None
            else:
                descriptions[tid] = {(str(t.topic), int(p)) for t in st.topics for p in t.partitions}
        for tp, a in candidates:
            tid = transactional_ids.get(a.producer_id)
            # no transactional id, an id the coordinator does not know, or a transaction that
            # does not include the partition (the coordinator will never write its marker)
            known = descriptions.get(tid) if tid is not None else None
            if known is None or tp not in known:
                hanging.append((tp, a))
    rows = [[tp[0], str(tp[1]), str(a.producer_id), str(a.producer_epoch),
             str(a.coordinator_epoch if a.coordinator_epoch >= 0 else -1), str(a.current_txn_start_offset),
             str(_ms(a.last_timestamp)), str((now - _ms(a.last_timestamp)) // 60_000)] for tp, a in hanging]
    _print(out, format_table(HANGING_HEADERS, rows))


def _abort(txn: TxnAdmin, args: argparse.Namespace, out: TextIO) -> None:
    tp = (args.topic, args.partition)
    if args.start_offset is None and args.producer_id is None:
        raise CommandError("The transaction to abort must be identified either with --start-offset (for brokers "
                           "on 3.0 or above) or with --producer-id, --producer-epoch, and --coordinator-epoch "
                           "(for older brokers)")
    if args.start_offset is None:
        if args.producer_epoch is None:
            raise CommandError("Missing required argument --producer-epoch")
        if args.coordinator_epoch is None:
            raise CommandError("Missing required argument --coordinator-epoch")
        # a transaction hanging before its producer id's first marker has coordinator epoch
        # -1 in DescribeProducers: 0 is <= any coordinator epoch (Kafka's reasoning)
        pid, epoch, coordinator_epoch = args.producer_id, args.producer_epoch, max(0, args.coordinator_epoch)
    else:
        try:
            producers = txn.describe_producers([tp])[tp]
        except KafkaError as exc:
            raise CommandError(f"Failed to validate producer state for partition {_tp(tp)}: "
                               f"{describe(exc)}") from None
        found = [a for a in producers if a.current_txn_start_offset >= 0
                 and a.current_txn_start_offset == args.start_offset]
        if not found:
            raise CommandError(f"Could not find any open transactions starting at offset {args.start_offset} "
                               f"on partition {_tp(tp)}")
        a = found[0]
        pid, epoch, coordinator_epoch = a.producer_id, a.producer_epoch, max(0, a.coordinator_epoch)
    try:
        txn.abort_transaction(tp, pid, epoch, coordinator_epoch)
    except KafkaError as exc:
        raise CommandError(f"Failed to abort transaction of producerId {pid} (epoch {epoch}, coordinator epoch "
                           f"{coordinator_epoch}) on partition {_tp(tp)}: {describe(exc)}") from None


def _print(out: TextIO, lines: list[str]) -> None:
    for line in lines:
        print(line, file=out)


# --- the command --------------------------------------------------------------------------------------

_COMMANDS = {"list": _list, "describe": _describe, "describe-producers": _describe_producers,
             "find-hanging": _find_hanging, "abort": _abort}


def _add_connection_options(p: argparse.ArgumentParser, default: Any) -> None:
    p.add_argument("--bootstrap-server", metavar="HOST:PORT", default=default,
                   help="broker(s) to connect to (host:port, comma-separated)")
    p.add_argument("--timeout", type=float, default=default, help="request timeout in seconds (default 30)")


def _parser() -> argparse.ArgumentParser:
    p = Parser(prog="krait transactions", description="Analyze the transactional state of producers in the "
               "cluster; detect and recover from hanging transactions (like kafka-transactions.sh).")
    _add_connection_options(p, None)
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    here = argparse.SUPPRESS  # the options may also follow the sub-command

    s = sub.add_parser("list", help="list transactions")
    _add_connection_options(s, here)
    s.add_argument("--duration-filter", type=int, help="only transactions running longer than this many ms "
                   "(all when < 0)")

    s = sub.add_parser("describe", help="describe the state of an active transactional-id")
    _add_connection_options(s, here)
    s.add_argument("--transactional-id", required=True, help="transactional id")

    s = sub.add_parser("describe-producers", help="describe the states of active producers for a topic partition")
    _add_connection_options(s, here)
    s.add_argument("--broker-id", type=int, help="describe the producer state on this replica (default: the leader)")
    s.add_argument("--topic", required=True, help="topic name")
    s.add_argument("--partition", type=int, required=True, help="partition number")

    s = sub.add_parser("find-hanging", help="find hanging transactions")
    _add_connection_options(s, here)
    s.add_argument("--broker-id", type=int, help="broker id to search for hanging transactions")
    s.add_argument("--max-transaction-timeout", type=int, default=15, metavar="MINUTES",
                   help="maximum transaction timeout in minutes to limit the scope of the search (default 15)")
    s.add_argument("--topic", help="topic name to limit the search to (required with --partition)")
    s.add_argument("--partition", type=int, help="partition number")

    s = sub.add_parser("abort", help="abort a hanging transaction (requires administrative privileges)")
    _add_connection_options(s, here)
    s.add_argument("--topic", required=True, help="topic name")
    s.add_argument("--partition", type=int, required=True, help="partition number")
    s.add_argument("--start-offset", type=int, help="start offset of the transaction to abort")
    s.add_argument("--producer-id", type=int, help="producer id (brokers older than 3.0)")
    s.add_argument("--producer-epoch", type=int, help="producer epoch (brokers older than 3.0)")
    s.add_argument("--coordinator-epoch", type=int, help="coordinator epoch (brokers older than 3.0)")
    return p


def _body(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    if args.command is None:
        raise UsageError(f"a command is required: one of {', '.join(_COMMANDS)}")
    if not args.bootstrap_server:
        raise UsageError("Missing required argument \"--bootstrap-server\"")
    timeout = 30.0 if args.timeout is None else args.timeout
    with AdminClient(args.bootstrap_server, timeout=timeout) as admin:
        _COMMANDS[args.command](TxnAdmin(admin, timeout), args, out)
    return 0


def main(argv: list[str], out: TextIO | None = None, err: TextIO | None = None) -> int:
    """``krait transactions ...``; returns the exit code."""
    return run("krait transactions", "", _parser, _body, argv, out, err)
