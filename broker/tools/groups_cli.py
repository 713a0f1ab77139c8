"""``krait groups``: list, describe and delete consumer groups and reset their offsets,
like Kafka's ``kafka-consumer-groups.sh`` (same options, same tables), through the admin
client, so it works against any Kafka-compatible broker."""

from __future__ import annotations

import argparse
import datetime
import re
from collections.abc import Iterable
from typing import TextIO

from protocol.errors import ErrorCode, KafkaError

from .admin_client import EARLIEST, LATEST, AdminClient, GroupDescription, GroupMember
from .command import Parser, UsageError, connect_admin, run
from .errors import describe

__all__ = ["format_group_offsets", "format_reset_offsets", "main", "parse_datetime"]

INACTIVE_STATES = ("Empty", "Dead")


def _dash(v: object) -> str:
    return "-" if v is None else str(v)


def format_group_offsets(rows: list[tuple[str, str, int | None, int | None, int | None, str | None,
                                          str | None, str | None]]) -> list[str]:
    """kafka-consumer-groups.sh --describe table: a blank line, header, rows.

    A row is (group, topic, partition, current offset, log-end offset, consumer id, host,
    client id); LAG is computed; None prints as ``-``."""
    header = ("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST",
              "CLIENT-ID")
    cells = []
    for group, topic, part, cur, leo, cid, host, client in rows:
        lag = leo - cur if cur is not None and leo is not None and cur >= 0 and leo >= 0 else None
        cells.append((group, topic, _dash(part), _dash(cur), _dash(leo), _dash(lag), _dash(cid), _dash(host),
                      _dash(client)))
    g = max([15] + [len(c[0]) for c in cells])
    t = max([15] + [len(c[1]) for c in cells])
    c_ = max([15] + [len(c[6]) for c in cells])
    h = max([15] + [len(c[7]) for c in cells])

    def fmt(r: tuple[str, ...]) -> str:
        return (f"{r[0]:<{g}} {r[1]:<{t}} {r[2]:<10} {r[3]:<15} {r[4]:<15} {r[5]:<15} {r[6]:<{c_}} {r[7]:<{h}} "
                f"{r[8]}").rstrip()

    return ["", fmt(header)] + [fmt(r) for r in cells]


def format_reset_offsets(group: str, offsets: dict[tuple[str, int], int]) -> list[str]:
    """kafka-consumer-groups.sh --reset-offsets table (Kafka's %-30s %-30s %-10s %-15s)."""
    lines = ["", f"{'GROUP':<30} {'TOPIC':<30} {'PARTITION':<10} {'NEW-OFFSET':<15}".rstrip()]
    for (t, p), off in sorted(offsets.items()):
        lines.append(f"{group:<30} {t:<30} {p!s:<10} {off!s:<15}".rstrip())
    return lines


def parse_datetime(text: str) -> int:
    """Kafka's --to-datetime formats (``YYYY-MM-DDTHH:mm:SS.sss`` with an optional zone
    such as ``Z`` or ``+01:00``; local time without one) -> epoch milliseconds."""
    s = text.strip()
    if s.endswith("Z"):
        s = s[:-1] + "+00:00"
    s = re.sub(r"([+-]\d\d)(\d\d)$", r"\1:\2", s)
    try:
        dt = datetime.datetime.fromisoformat(s)
    except ValueError:
        raise UsageError(f"Error parsing timestamp {text!r}: expected YYYY-MM-DDTHH:mm:SS.sss") from None
    if dt.tzinfo is None:
        dt = dt.astimezone()  # local time zone, as Kafka does
    return int(dt.timestamp() * 1000)


def _groups_parser() -> argparse.ArgumentParser:
    p = Parser(prog="krait groups", description="List, describe and delete consumer groups and reset their "
               "offsets (like kafka-consumer-groups.sh).")
    p.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT", help="broker(s) to connect to")
    act = p.add_mutually_exclusive_group(required=True)
    act.add_argument("--list", action="store_true", help="list groups")
    act.add_argument("--describe", action="store_true", help="describe a group's offsets, members or state")
    act.add_argument("--delete", action="store_true", help="delete groups (refused while they have members)")
    act.add_argument("--reset-offsets", action="store_true", help="reset a group's committed offsets")
    p.add_argument("--group", action="append", default=[], help="group id (repeatable)")
    p.add_argument("--all-groups", action="store_true", help="every group (describe/delete/reset)")
    p.add_argument("--members", action="store_true", help="describe: one line per member")
    p.add_argument("--state", nargs="?", const="", default=None, metavar="STATES",
                   help="describe: the group's state; list: show states, filtered by STATES (comma separated)")
    p.add_argument("--topic", action="append", default=[], metavar="TOPIC[:P,P...]",
                   help="reset: topic (optionally with partitions) to reset (repeatable)")
    p.add_argument("--all-topics", action="store_true", help="reset: every topic the group has offsets for")
    to = p.add_mutually_exclusive_group()
    to.add_argument("--to-earliest", action="store_true", help="reset to the log start offset")
    to.add_argument("--to-latest", action="store_true", help="reset to the log end offset")
    to.add_argument("--to-current", action="store_true", help="reset to the current committed offset")
    to.add_argument("--to-offset", type=int, metavar="N", help="reset to offset N (clamped to the log range)")
    to.add_argument("--shift-by", type=int, metavar="N", help="move the committed offset by N (may be negative)")
    to.add_argument("--to-datetime", metavar="YYYY-MM-DDTHH:mm:SS.sss",
                    help="reset to the first offset with a timestamp at or after this time")
    run = p.add_mutually_exclusive_group()
    run.add_argument("--execute", action="store_true", help="reset: commit the new offsets")
    run.add_argument("--dry-run", action="store_true", help="reset: only print the new offsets (default)")
    p.add_argument("--timeout", type=float, default=30.0, help="request timeout in seconds (default 30)")
    return p


def _groups_of(args: argparse.Namespace, admin: AdminClient) -> list[str]:
    if args.all_groups:
        return sorted(g for g, _, _ in admin.list_groups())
    if not args.group:
        raise UsageError("Option [group] or [all-groups] is required")
    return list(dict.fromkeys(args.group))


def _log_end_offsets(admin: AdminClient, tps: Iterable[tuple[str, int]]) -> dict[tuple[str, int], int | None]:
    wanted = sorted(set(tps))
    out: dict[tuple[str, int], int | None] = dict.fromkeys(wanted)
    if not wanted:
        return out
    known = {(t.name, p.partition) for t in admin.metadata(sorted({t for t, _ in wanted}))
             if t.error_code == 0 for p in t.partitions}
    present = [tp for tp in wanted if tp in known]
    if present:
        try:
            out.update(admin.list_offsets(dict.fromkeys(present, LATEST)))
        except KafkaError:  # one bad partition: ask one by one so the others still show
            for tp in present:
                try:
                    out.update(admin.list_offsets({tp: LATEST}))
                except KafkaError:
                    pass
    return out


def _describe_offsets(admin: AdminClient, desc: GroupDescription, out: TextIO) -> None:
    committed = admin.offset_fetch(desc.group_id)
    rows_assigned: list[tuple[str, int, GroupMember]] = []
    assigned: set[tuple[str, int]] = set()
    for m in desc.members:
        for topic, parts in sorted(m.assignment.items()):
            for p in sorted(parts):
                rows_assigned.append((topic, p, m))
                assigned.add((topic, p))
    unassigned = sorted(tp for tp in committed if tp not in assigned)
    leo = _log_end_offsets(admin, list(assigned) + unassigned)
    rows = []
    for topic, p, m in rows_assigned:
        cur = committed.get((topic, p), (None, None))[0]
        rows.append((desc.group_id, topic, p, cur, leo.get((topic, p)), m.member_id, m.client_host, m.client_id))
    for tp in unassigned:
        rows.append((desc.group_id, tp[0], tp[1], committed[tp][0], leo.get(tp), None, None, None))
    for line in format_group_offsets(rows):
        print(line, file=out)


def _describe_members(desc: GroupDescription, out: TextIO) -> None:
    cells = [(desc.group_id, m.member_id, m.client_host, m.client_id,
              str(sum(len(p) for p in m.assignment.values()))) for m in desc.members]
    widths = [max([15] + [len(c[i]) for c in cells]) for i in range(4)]
    header = ("GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS")
    print("", file=out)
    for r in [header, *cells]:
        print(" ".join(f"{r[i]:<{widths[i]}}" for i in range(4)) + f" {r[4]}", file=out)


def _describe_state(desc: GroupDescription, out: TextIO) -> None:
    node, host, port = desc.coordinator or (-1, "-", -1)
    coord = f"{host}:{port}  ({node})"
    gw = max(15, len(desc.group_id))
    cw = max(25, len(coord))
    print("", file=out)
    print(f"{'GROUP':<{gw}} {'COORDINATOR (ID)':<{cw}} {'ASSIGNMENT-STRATEGY':<20} {'STATE':<15} #MEMBERS", file=out)
    print(f"{desc.group_id:<{gw}} {coord:<{cw}} {desc.protocol or '':<20} {desc.state:<15} {len(desc.members)}",
          file=out)


def _groups_describe(args: argparse.Namespace, admin: AdminClient, out: TextIO, err: TextIO) -> int:
    rc = 0
    for group in _groups_of(args, admin):
        desc = admin.describe_group(group)
        if desc.state == "Dead":
            print(f"Error: Consumer group '{group}' does not exist.", file=err)
            rc = 1
            continue
        if args.state is not None:
            _describe_state(desc, out)
            continue
        if desc.state == "Empty":
            print(f"\nConsumer group '{group}' has no active members.", file=err)
        elif desc.state in ("PreparingRebalance", "CompletingRebalance", "Assigning", "Reconciling"):
            print(f"\nWarning: Consumer group '{group}' is rebalancing.", file=err)
        if args.members:
            _describe_members(desc, out)
        else:
            _describe_offsets(admin, desc, out)
    print("", file=out)
    return rc


def _groups_delete(args: argparse.Namespace, admin: AdminClient, out: TextIO, err: TextIO) -> int:
    groups = _groups_of(args, admin)
    results = admin.delete_groups(groups)
    ok = [g for g in groups if results.get(g) is None]
    failed = {g: e for g, e in results.items() if e is not None}
    if not failed:
        names = ", ".join(f"'{g}'" for g in ok)
        print(f"Deletion of requested consumer groups ({names}) was successful.", file=out)
        return 0
    print("Error: Deletion of some consumer groups failed:", file=err)
    for g, e in failed.items():
        print(f"* Group '{g}' could not be deleted due to: {describe(e)}", file=err)
    if ok:
        print("These consumer groups were deleted successfully: " + ", ".join(f"'{g}'" for g in ok), file=out)
    return 1


def _parse_topic_args(items: list[str]) -> list[tuple[str, list[int] | None]]:
    out = []
    for item in items:
        topic, sep, parts = item.partition(":")
        if not topic:
            raise UsageError(f"Invalid topic {item!r}")
        if sep:
            try:
                out.append((topic, sorted({int(p) for p in parts.split(",") if p.strip()})))
            except ValueError:
                raise UsageError(f"Invalid partitions in {item!r}") from None
        else:
            out.append((topic, None))
    return out


def _reset_plan(args: argparse.Namespace, admin: AdminClient, group: str, err: TextIO) -> dict[tuple[str, int], int]:
    committed = admin.offset_fetch(group)
    if args.all_topics:
        tps = sorted(committed)
    else:
        tps = []
        wanted = _parse_topic_args(args.topic)
        meta = {t.name: t for t in admin.metadata(sorted({t for t, _ in wanted}))}
        for topic, parts in wanted:
            info = meta.get(topic)
            if info is None or info.error_code != 0:
                raise KafkaError(ErrorCode.unknown_topic_or_partition, f"Topic '{topic}' does not exist.")
            have = [p.partition for p in info.partitions]
            for p in parts if parts is not None else have:
                if p not in have:
                    raise KafkaError(ErrorCode.unknown_topic_or_partition, f"Partition {topic}-{p} does not exist.")
                tps.append((topic, p))
    if not tps:
        return {}
    earliest = admin.list_offsets(dict.fromkeys(tps, EARLIEST))
    latest = admin.list_offsets(dict.fromkeys(tps, LATEST))

    def clamp(tp: tuple[str, int], off: int) -> int:
        lo, hi = earliest[tp], latest[tp]
        if off < lo:
            print(f"New offset ({off}) is lower than earliest offset for topic partition {tp[0]}-{tp[1]}. "
                  f"Value will be set to {lo}", file=err)
            return lo
        if off > hi:
            print(f"New offset ({off}) is higher than latest offset for topic partition {tp[0]}-{tp[1]}. "
                  f"Value will be set to {hi}", file=err)
            return hi
        return off

    if args.to_earliest:
        return {tp: earliest[tp] for tp in tps}
    if args.to_latest:
        return {tp: latest[tp] for tp in tps}
    if args.to_offset is not None:
        return {tp: clamp(tp, args.to_offset) for tp in tps}
    if args.to_datetime is not None:
        ts = parse_datetime(args.to_datetime)
        found = admin.list_offsets(dict.fromkeys(tps, ts))
        return {tp: found[tp] if found[tp] >= 0 else latest[tp] for tp in tps}
    if args.shift_by is not None:
        return {tp: clamp(tp, (committed[tp][0] if tp in committed else latest[tp]) + args.shift_by) for tp in tps}
    if args.to_current:
        return {tp: committed[tp][0] if tp in committed else latest[tp] for tp in tps}
    raise UsageError("One of the reset scenarios must be given: --to-earliest, --to-latest, --to-offset, "
                     "--to-datetime, --shift-by, --to-current")


def _groups_reset(args: argparse.Namespace, admin: AdminClient, out: TextIO, err: TextIO) -> int:
    if not args.topic and not args.all_topics:
        raise UsageError("Option --reset-offsets needs --topic or --all-topics")
    if not any((args.to_earliest, args.to_latest, args.to_current, args.to_offset is not None,
                args.shift_by is not None, args.to_datetime is not None)):
        raise UsageError("One of the reset scenarios must be given: --to-earliest, --to-latest, --to-offset, "
                         "--to-datetime, --shift-by, --to-current")
    if not args.execute and not args.dry_run:
        print("WARN: No action will be performed as the --execute option is missing. In a future major release, "
              "the default behavior of this command will be to prompt the user before executing the reset rather "
              "than doing a dry run. You should add the --dry-run option explicitly if you are scripting this "
              "command and want to keep the current default behavior without prompting.", file=err)
    rc = 0
    for group in _groups_of(args, admin):
        desc = admin.describe_group(group)
        if desc.state not in INACTIVE_STATES:
            print(f"Error: Assignments can only be reset if the group '{group}' is inactive, but the current state "
                  f"is {desc.state}.", file=err)
            rc = 1
            continue
        plan = _reset_plan(args, admin, group, err)
        if args.execute and plan:
            failed = {tp: e for tp, e in admin.offset_commit(group, plan).items() if e is not None}
            if failed:
                for (t, p), e in sorted(failed.items()):
                    print(f"Error: Failed to reset offset of {t}-{p} for group '{group}': {describe(e)}", file=err)
                rc = 1
                plan = {tp: off for tp, off in plan.items() if tp not in failed}
        for line in format_reset_offsets(group, plan):
            print(line, file=out)
    print("", file=out)
    return rc


def _groups_list(args: argparse.Namespace, admin: AdminClient, out: TextIO) -> int:
    states = [s.strip() for s in args.state.split(",") if s.strip()] if args.state else None
    groups = sorted(admin.list_groups(states))
    if args.state is None:
        for g, _, _ in groups:
            print(g, file=out)
        return 0
    gw = max([15] + [len(g) for g, _, _ in groups])
    print(f"{'GROUP':<{gw}} STATE", file=out)
    for g, _, state in groups:
        print(f"{g:<{gw}} {state}", file=out)
    return 0


def _groups_body(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    with connect_admin(args) as admin:
        if args.list:
            return _groups_list(args, admin, out)
        if args.describe:
            return _groups_describe(args, admin, out, err)
        if args.delete:
            return _groups_delete(args, admin, out, err)
        return _groups_reset(args, admin, out, err)


def main(argv: list[str]) -> int:
    """``krait groups ...``; returns the exit code."""
    return run("krait groups", "Error: ", _groups_parser, _groups_body, argv)
