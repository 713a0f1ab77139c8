"""``krait log-dirs``: the log dirs of brokers with the size, lag and future flag of every
replica, printed as Kafka's ``kafka-log-dirs.sh`` prints them (two progress lines, then
one JSON line), through the admin client."""

from __future__ import annotations

import argparse
import json
from typing import TextIO

from protocol.client_errors import error_name

from .admin_client import LogDirDescription
from .command import CommandError, Parser, UsageError, connect_admin, run

__all__ = ["format_log_dirs", "java_exception_name", "main"]

#: error names whose Java exception class is not the mechanical CamelCase + "Exception"
_JAVA_EXCEPTIONS = {
    "CLUSTER_AUTHORIZATION_FAILED": "ClusterAuthorizationException",
    "TOPIC_AUTHORIZATION_FAILED": "TopicAuthorizationException",
    "UNKNOWN_SERVER_ERROR": "UnknownServerException",
}


def java_exception_name(code: int) -> str | None:
    """The Java exception class kafka-log-dirs.sh prints for an error code (None for NONE),
    e.g. 56 -> ``org.apache.kafka.common.errors.KafkaStorageException``."""
    if not code:
        return None
    name = error_name(code)
    simple = _JAVA_EXCEPTIONS.get(name)
    if simple is None:
        stem = name.removesuffix("_EXCEPTION").removesuffix("_ERROR")
        simple = "".join(w.capitalize() for w in stem.split("_")) + "Exception"
    return f"org.apache.kafka.common.errors.{simple}"


def format_log_dirs(by_broker: dict[int, list[LogDirDescription]], topics: set[str] | None = None) -> str:
    """kafka-log-dirs.sh's JSON line (only the replicas of ``topics`` when given)."""
    brokers = []
    for broker_id, dirs in sorted(by_broker.items()):
        log_dirs = []
        for d in dirs:
            parts = [{"partition": f"{t}-{p}", "size": r.size, "offsetLag": r.offset_lag, "isFuture": r.is_future}
                     for (t, p), r in sorted(d.replicas.items()) if not topics or t in topics]
            log_dirs.append({"partitions": parts, "error": java_exception_name(d.error_code), "logDir": d.path})
        brokers.append({"broker": broker_id, "logDirs": log_dirs})
    return json.dumps({"brokers": brokers, "version": 1}, separators=(",", ":"))


def _log_dirs_parser() -> argparse.ArgumentParser:
    p = Parser(prog="krait log-dirs", description="Query log directory usage on the specified brokers "
               "(like kafka-log-dirs.sh).")
    p.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT", help="broker(s) to connect to")
    p.add_argument("--describe", action="store_true",
                   help="describe the specified log directories on the specified brokers")
    p.add_argument("--topic-list", default="", metavar="T1,T2",
                   help="topics to be queried (default: all topics)")
    p.add_argument("--broker-list", default="", metavar="0,1,2",
                   help="brokers to be queried (default: all brokers in the cluster)")
    p.add_argument("--command-config", metavar="FILE",
                   help="client properties (security.protocol, ssl.*, sasl.*) for a secured listener")
    p.add_argument("--timeout", type=float, default=30.0, help="request timeout in seconds (default 30)")
    return p


def _log_dirs_body(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    if not args.describe:
        raise UsageError('Missing required argument "[describe]"')
    topics = {t for t in args.topic_list.split(",") if t}
    try:
        wanted = {int(b) for b in args.broker_list.split(",") if b}
    except ValueError:
        raise UsageError(f"--broker-list expects broker ids such as 0,1,2, got {args.broker_list!r}") from None
    with connect_admin(args) as admin:
        cluster = set(admin.node_ids())
        missing = wanted - cluster
        if missing:
            raise CommandError("ERROR: The given brokers do not exist from --broker-list: "
                               f"{','.join(map(str, sorted(missing)))}. Current existent brokers: "
                               f"{','.join(map(str, sorted(cluster)))}")
        brokers = sorted(wanted or cluster)
        print("Querying brokers for log directories information", file=out)
        # like Kafka's tool: ask for every partition, keep the asked topics here
        by_broker = {b: admin.describe_log_dirs(b) for b in brokers}
        print(f"Received log directory information from brokers {','.join(map(str, brokers))}", file=out)
        print(format_log_dirs(by_broker, topics), file=out)
    return 0


def main(argv: list[str]) -> int:
    """``krait log-dirs ...``; returns the exit code."""
    return run("krait log-dirs", "", _log_dirs_parser, _log_dirs_body, argv)
