"""The `krait` command: serve | topics | groups | share-groups | schemas | transactions | log-dirs | reassign-partitions | acls | configs |
dump-log | perf."""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import signal
import sys

from storage import dump_log

from .config import BrokerConfig, ConfigError, read_properties
from .log_format import TEXT_FORMAT, configure_logging
from .tools import (
    acls_cli,
    configs_cli,
    groups_cli,
    log_dirs_cli,
    perf,
    reassign_cli,
    schemas_cli,
    share_groups_cli,
    spark_cli,
    tables_cli,
    topics_cli,
    transactions_cli,
)

log = logging.getLogger("krait")


def _parse_overrides(items: list[str]) -> dict[str, str]:
    out = {}
    for item in items:
        if "=" not in item:
            raise ConfigError(f"--override expects key=value, got {item!r}")
        k, v = item.split("=", 1)
        out[k.strip()] = v.strip()
    return out


def load_config(properties: str | None, overrides: list[str]) -> BrokerConfig:
    props = read_properties(properties) if properties else {}
    props.update(_parse_overrides(overrides))
    return BrokerConfig.from_props(props)


async def _serve(config: BrokerConfig) -> int:
    # imported here so that the client commands do not load the whole daemon
    from .broker import Broker

    broker = Broker(config)
    stop = asyncio.Event()
    broker.on_fatal = stop.set
    await broker.start()
    # What start-up built (modules, kio's schema classes, loaded partitions) lives as long as
    # the process: keep it out of the collector's full passes, which otherwise walk it all.
    gc.freeze()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    log.info("shutting down")
    await broker.stop()
    return broker.exit_code


def _raise_open_files_limit() -> None:
    """Every partition keeps its active segment and two index maps open; like Kafka's
    packaging advice, take the hard limit on open files rather than the shell's default."""
    try:
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft != hard:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ImportError, ValueError, OSError):
        pass


def serve(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="krait serve", description="Run the Krait broker.")
    p.add_argument("properties", nargs="?", help="server.properties file (Kafka's keys)")
    p.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                   help="set a config key, overriding the file (repeatable)")
    p.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    args = p.parse_args(argv)
    logging.basicConfig(level=args.log_level, format=TEXT_FORMAT)
    try:
        props = read_properties(args.properties) if args.properties else {}
        props.update(_parse_overrides(args.override))
        # before the config is checked, so that its warnings come out in the chosen format
        configure_logging(props.get("krait.log.format", "text").strip(), args.log_level)
        config = BrokerConfig.from_props(props)
    except (ConfigError, ValueError, OSError) as exc:
        print(f"krait: invalid configuration: {exc}", file=sys.stderr)
        return 2
    _raise_open_files_limit()
    try:
        import uvloop

        runner = uvloop.run
    except ImportError:  # uvloop is optional on platforms without it
        runner = asyncio.run
    from storage.manager import LogDirLockedError

    try:
        return runner(_serve(config))
    except (OSError, LogDirLockedError) as exc:
        print(f"krait: cannot start: {exc}", file=sys.stderr)
        return 1
    except ValueError as exc:
        print(f"krait: invalid configuration: {exc}", file=sys.stderr)
        return 2


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    commands = {
        "serve": serve,
        "topics": topics_cli.main,
        "groups": groups_cli.main,
        "share-groups": share_groups_cli.main,
        "schemas": schemas_cli.main,
        "tables": tables_cli.main,
        "transactions": transactions_cli.main,
        "log-dirs": log_dirs_cli.main,
        "reassign-partitions": reassign_cli.main,
        "acls": acls_cli.main,
        "configs": configs_cli.main,
        "dump-log": dump_log.main,
        "perf": perf.main,
        "spark": spark_cli.main,
    }
    if not argv or argv[0] in ("-h", "--help") or argv[0] not in commands:
        print("usage: krait {serve,topics,groups,share-groups,schemas,tables,transactions,log-dirs,reassign-partitions,acls,configs,dump-log,perf,spark} "
              "[options]\n"
              "  serve      run the broker (krait serve [server.properties] [--override k=v ...])\n"
              "  topics     create/list/describe/delete/alter topics (like kafka-topics.sh)\n"
              "  groups     list/describe/delete consumer groups, reset offsets (like kafka-consumer-groups.sh)\n"
              "  share-groups  list/describe/delete share groups, reset/delete their offsets (like kafka-share-groups.sh)\n"
              "  schemas    Schema Registry subjects: list, show, register, check compatibility, delete, config\n"
              "  tables     the Iceberg tables of table topics: snapshots, size, lag behind the log\n"
              "  transactions  list/describe transactions, find and abort hanging ones (like kafka-transactions.sh)\n"
              "  log-dirs   describe log dirs: replica sizes, lag, future replicas (like kafka-log-dirs.sh)\n"
              "  reassign-partitions  generate/execute/verify/cancel/list partition reassignments "
              "(like kafka-reassign-partitions.sh)\n"
              "  acls       add/remove/list ACLs (like kafka-acls.sh)\n"
              "  configs    SCRAM credentials and quotas of users and clients (like kafka-configs.sh)\n"
              "  dump-log   print segment, index and time-index files (like kafka-dump-log.sh)\n"
              "  perf       producer/consumer performance test (like kafka-*-perf-test.sh)\n"
              "  spark      run a Spark job over the log segments with the right Python and Spark (krait spark list)",
              file=sys.stderr)
        return 0 if argv and argv[0] in ("-h", "--help") else 2
    return int(commands[argv[0]](argv[1:]) or 0)


if __name__ == "__main__":
    sys.exit(main())
