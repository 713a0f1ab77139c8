"""``krait topics``: create, list, describe, alter and delete topics, like Kafka's
``kafka-topics.sh`` (same options, same output), through the admin client, so it works
against any Kafka-compatible broker."""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterable
from typing import TextIO

from protocol.client_errors import describe
from protocol.errors import ErrorCode, KafkaError

from . import tables_cli
from .admin_client import RESOURCE_TOPIC, AdminClient, PartitionInfo, TopicInfo, format_uuid
from .command import CommandError, Parser, UsageError, connect_admin, run

__all__ = [
    "describe_topic_lines",
    "format_partition_line",
    "format_topic_description",
    "is_unavailable",
    "is_under_replicated",
    "main",
    "parse_configs",
]

#: the --describe filters (kafka-topics.sh's "replication report" options) and their option names
_REPORT_OPTIONS = {"under_replicated_partitions": "under-replicated-partitions",
                   "unavailable_partitions": "unavailable-partitions"}


def parse_configs(items: Iterable[str]) -> dict[str, str]:
    """``k=v`` items (each may also be ``k1=v1,k2=v2``) -> dict."""
    out: dict[str, str] = {}
    for item in items:
        for part in _split_configs(item):
            if "=" not in part:
                raise UsageError(f"Invalid config: {part!r} (expected key=value)")
            k, v = part.split("=", 1)
            if not k.strip():
                raise UsageError(f"Invalid config: {part!r} (empty key)")
            out[k.strip()] = v.strip()
    return out


def _split_configs(item: str) -> list[str]:
    # a comma starts a new entry only when what follows looks like "key="; values such as
    # "a,b" in list configs (cleanup.policy=compact,delete) stay whole
    parts: list[str] = []
    for piece in item.split(","):
        if parts and not re.match(r"^\s*[A-Za-z0-9_.\-]+\s*=", piece):
            parts[-1] += "," + piece
        else:
            parts.append(piece)
    return [p for p in parts if p.strip()]


def format_partition_line(topic: str, p: PartitionInfo) -> str:
    """kafka-topics.sh's line for one partition: leader, replicas and ISR as the Metadata
    response gives them (leader -1 is ``none``)."""
    leader = str(p.leader) if p.leader >= 0 else "none"
    return (f"\tTopic: {topic}\tPartition: {p.partition}\tLeader: {leader}"
            f"\tReplicas: {','.join(map(str, p.replicas))}\tIsr: {','.join(map(str, p.isr))}")


def format_topic_description(topic: TopicInfo, configs: dict[str, str | None]) -> list[str]:
    """kafka-topics.sh --describe lines for one topic."""
    rf = len(topic.partitions[0].replicas) if topic.partitions else 0
    cfg = ",".join(f"{k}={'' if v is None else v}" for k, v in configs.items())
    head = f"Topic: {topic.name}"
    if topic.topic_id is not None and topic.topic_id.int != 0:
        head += f"\tTopicId: {format_uuid(topic.topic_id)}"
    head += f"\tPartitionCount: {len(topic.partitions)}\tReplicationFactor: {rf}\tConfigs: {cfg}"
    return [head, *(format_partition_line(topic.name, p) for p in topic.partitions)]


def is_under_replicated(p: PartitionInfo) -> bool:
    """Fewer in-sync replicas than replicas (kafka-topics.sh --under-replicated-partitions)."""
    return len(p.isr) < len(p.replicas)


def is_unavailable(p: PartitionInfo, live_brokers: Iterable[int]) -> bool:
    """No leader, or a leader that is not a live broker (kafka-topics.sh --unavailable-partitions)."""
    return p.leader < 0 or p.leader not in set(live_brokers)


def describe_topic_lines(topic: TopicInfo, configs: dict[str, str | None] | None, *,
                         under_replicated: bool = False, unavailable: bool = False,
                         live_brokers: Iterable[int] = ()) -> list[str]:
    """What kafka-topics.sh --describe prints for one topic. With a filter (either or both:
    a partition is shown when it matches one), only the matching partitions' lines are
    printed, without the topic line, as kafka-topics.sh does; ``configs`` are then unused."""
    if not (under_replicated or unavailable):
        return format_topic_description(topic, configs or {})
    live = set(live_brokers)
    return [format_partition_line(topic.name, p) for p in topic.partitions
            if (under_replicated and is_under_replicated(p)) or (unavailable and is_unavailable(p, live))]


def _topics_parser() -> argparse.ArgumentParser:
    p = Parser(prog="krait topics", description="Create, list, describe, alter and delete topics "
               "(like kafka-topics.sh).")
    p.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT", help="broker(s) to connect to")
    act = p.add_mutually_exclusive_group(required=True)
    act.add_argument("--create", action="store_true", help="create a topic")
    act.add_argument("--list", action="store_true", help="list topic names")
    act.add_argument("--describe", action="store_true", help="describe topics (all without --topic)")
    act.add_argument("--delete", action="store_true", help="delete topics")
    act.add_argument("--alter", action="store_true", help="add partitions (--partitions) or set configs (--config)")
    p.add_argument("--topic", help="topic name (a regular expression for --list/--describe/--delete/--alter)")
    p.add_argument("--partitions", type=int, help="partition count (create; new total for --alter)")
    p.add_argument("--replication-factor", type=int, help="replication factor (create)")
    p.add_argument("--config", action="append", default=[], metavar="KEY=VALUE", help="topic config (repeatable)")
    p.add_argument("--delete-config", action="append", default=[], metavar="KEY", help="remove a config (--alter)")
    p.add_argument("--if-not-exists", action="store_true", help="create: no error if the topic exists")
    p.add_argument("--if-exists", action="store_true", help="alter/delete/describe: no error if the topic is missing")
    p.add_argument("--exclude-internal", action="store_true", help="leave out internal topics")
    p.add_argument("--under-replicated-partitions", action="store_true",
                   help="describe: only show under-replicated partitions (fewer in-sync replicas than replicas)")
    p.add_argument("--unavailable-partitions", action="store_true",
                   help="describe: only show partitions whose leader is not available")
    p.add_argument("--command-config", metavar="FILE",
                   help="client properties (security.protocol, ssl.*, sasl.*) for a secured listener")
    p.add_argument("--timeout", type=float, default=30.0, help="request timeout in seconds (default 30)")
    return p


def _matching_topics(admin: AdminClient, pattern: str | None, exclude_internal: bool) -> list[TopicInfo]:
    topics = admin.list_topics()
    if exclude_internal:
        topics = [t for t in topics if not t.is_internal]
    if pattern is not None:
        exact = [t for t in topics if t.name == pattern]
        if exact:
            topics = exact
        else:
            try:
                rx = re.compile(pattern)
            except re.error:
                topics = []
            else:
                topics = [t for t in topics if rx.fullmatch(t.name)]
    return sorted(topics, key=lambda t: t.name)


def _ensure_found(topics: list[TopicInfo], pattern: str | None, if_exists: bool) -> None:
    if not topics and pattern is not None and not if_exists:
        raise CommandError(f"Topic '{pattern}' does not exist as expected")


class _TableLag:
    """The Iceberg table lines under a table topic (``krait.iceberg.mode`` set): its lag,
    from the brokers' catalog (:mod:`broker.tools.tables_cli`), opened once; when that
    catalog cannot be read from here, one line saying why."""

    def __init__(self, admin: AdminClient) -> None:
        self.admin = admin
        self._catalog = None
        self._place: tables_cli.CatalogPlace | None = None
        self._error: str | None = None

    def lines(self, topic: str, mode: str) -> list[str]:
        if self._catalog is None and self._error is None:
            try:
                self._place = tables_cli.catalog_place(self.admin, argparse.Namespace(
                    catalog_uri=None, warehouse=None, namespace=None, log_dirs=None))
                self._catalog = self._place.open()
            except (CommandError, KafkaError) as exc:
                self._error = str(exc)
        if self._error is not None or self._place is None:
            return [f"\tIcebergTable: {topic}\tMode: {mode}\tLag: unknown ({self._error})"]
        return ["\t" + line for line in tables_cli.table_lines(self.admin, topic, mode, self._catalog,
                                                               self._place.namespace)]


def _check_report_options(args: argparse.Namespace) -> None:
    """The --describe filters go with --describe only (kafka-topics.sh's check and message)."""
    if args.describe:
        return
    action = next(a for a in ("create", "list", "delete", "alter") if getattr(args, a))
    for attr, option in _REPORT_OPTIONS.items():
        if getattr(args, attr):
            raise UsageError(f'Option "[{option}]" can\'t be used with option "[{action}]"')


def _topics_body(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    _check_report_options(args)
    configs = parse_configs(args.config)
    if args.create:
        if not args.topic:
            raise UsageError("Missing required argument \"[topic]\"")
        if args.partitions is not None and args.partitions < 1:
            raise UsageError("The partitions must be greater than 0")
        if args.replication_factor is not None and args.replication_factor < 1:
            raise UsageError("The replication-factor must be greater than 0")
        with connect_admin(args) as admin:
            try:
                admin.create_topic(args.topic, -1 if args.partitions is None else args.partitions,
                                   -1 if args.replication_factor is None else args.replication_factor, configs)
            except KafkaError as exc:
                if exc.error_code == ErrorCode.topic_already_exists:
                    if args.if_not_exists:
                        return 0
                    raise KafkaError(exc.error_code, f"Topic '{args.topic}' already exists.") from None
                raise
        print(f"Created topic {args.topic}.", file=out)
        return 0
    with connect_admin(args) as admin:
        if args.list:
            for t in _matching_topics(admin, args.topic, args.exclude_internal):
                print(t.name, file=out)
            return 0
        if args.describe:
            topics = _matching_topics(admin, args.topic, args.exclude_internal)
            _ensure_found(topics, args.topic, args.if_exists)
            filtered = args.under_replicated_partitions or args.unavailable_partitions
            live = admin.node_ids()  # the brokers of the Metadata response _matching_topics read
            tables = _TableLag(admin)
            for t in topics:
                configs = None if filtered else admin.topic_configs(t.name)
                lines = describe_topic_lines(t, configs, under_replicated=args.under_replicated_partitions,
                                             unavailable=args.unavailable_partitions, live_brokers=live)
                mode = (configs or {}).get(tables_cli.MODE_KEY)
                if mode and mode != "disabled":
                    lines = [*lines, *tables.lines(t.name, mode)]
                for line in lines:
                    print(line, file=out)
            return 0
        if not args.topic:
            raise UsageError("Missing required argument \"[topic]\"")
        topics = _matching_topics(admin, args.topic, exclude_internal=False)
        _ensure_found(topics, args.topic, args.if_exists)
        if args.delete:
            internal = [t.name for t in topics if t.is_internal]
            if internal:
                raise CommandError(f"Topic {internal[0]} is a kafka internal topic and is not allowed to be marked "
                                   "for deletion.")
            failed = {n: e for n, e in admin.delete_topics([t.name for t in topics]).items() if e is not None}
            for name, exc in failed.items():
                print(f"Error while executing topic command : {name}: {describe(exc)}", file=err)
            return 1 if failed else 0
        # --alter
        if args.partitions is None and not configs and not args.delete_config:
            raise UsageError("--alter needs --partitions and/or --config / --delete-config")
        for t in topics:
            if args.partitions is not None:
                if t.is_internal:
                    raise CommandError(f"The number of partitions for the internal topic {t.name} cannot be changed.")
                if args.partitions == len(t.partitions):
                    raise KafkaError(ErrorCode.invalid_partitions, f"Topic already has {args.partitions} partitions.")
                admin.create_partitions(t.name, args.partitions)
            if configs or args.delete_config:
                admin.incremental_alter_configs(RESOURCE_TOPIC, t.name, configs, args.delete_config)
                print(f"Completed updating config for topic {t.name}.", file=out)
        return 0


def main(argv: list[str]) -> int:
    """``krait topics ...``; returns the exit code."""
    return run("krait topics", "Error while executing topic command : ", _topics_parser, _topics_body, argv)
