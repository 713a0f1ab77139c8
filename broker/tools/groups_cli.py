"""``krait groups``: list, describe and delete consumer groups and reset their offsets,
like Kafka's ``kafka-consumer-groups.sh`` (same options, same tables), through the admin
client, so it works against any Kafka-compatible broker.

Classic groups are described with DescribeGroups, consumer (KIP-848) groups with
ConsumerGroupDescribe, the type coming from ListGroups (broker/tools/group_views.py).
Krait adds a TYPE column (and ASSIGNOR to ``--members``) after Kafka's columns, and
``--explain``: why a group is rebalancing, as far as Kafka's answers tell."""

from __future__ import annotations

import argparse
import datetime
import re
from collections.abc import Iterable
from typing import TextIO

from protocol.client_errors import describe
from protocol.errors import ErrorCode, KafkaError

from .admin_client import EARLIEST, LATEST, AdminClient, GroupDescription, GroupMember
from .command import Parser, UsageError, connect_admin, run
from .group_views import GroupView, ViewMember, assignment_string, describe_group, display_type, explain, list_groups

__all__ = ["format_group_offsets", "format_reset_offsets", "main", "parse_datetime"]

INACTIVE_STATES = ("Empty", "Dead")
REBALANCING_STATES = ("PreparingRebalance", "CompletingRebalance", "Assigning", "Reconciling")
GROUP_TYPES = ("classic", "consumer", "share")


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
    p.add_argument("--type", nargs="?", const="", default=None, metavar="TYPES",
                   help="list: show group types (Classic, Consumer, Share), filtered by TYPES (comma separated)")
    p.add_argument("--verbose", action="store_true",
                   help="describe: with --members, each member's CURRENT-EPOCH, CURRENT-ASSIGNMENT, TARGET-EPOCH "
                        "and TARGET-ASSIGNMENT; with --state, GROUP-EPOCH and TARGET-ASSIGNMENT-EPOCH (consumer "
                        "groups; '-' for classic ones)")
    p.add_argument("--explain", action="store_true",
                   help="describe (Krait): why the group is rebalancing. Consumer groups: each member's epoch "
                        "against the target epoch, its current and target assignment, the partitions it has to "
                        "revoke or receive and its member state, as far as ConsumerGroupDescribe tells. Classic "
                        "groups: what the coordinator waits for. Kafka's answers do not say which classic "
                        "members have not rejoined yet, nor a member's partitions pending revocation: the broker "
                        "logs those, naming the members, once a rebalance has waited 5 s")
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
    p.add_argument("--command-config", metavar="FILE",
                   help="client properties (security.protocol, ssl.*, sasl.*) for a secured listener")
    p.add_argument("--timeout", type=float, default=30.0, help="request timeout in seconds (default 30)")
    return p


def _groups_of(args: argparse.Namespace, admin: AdminClient) -> list[str]:
    if args.all_groups:
        return sorted(g for g, _, _ in admin.list_groups())
    if not args.group:
        raise UsageError("Option [group] or [all-groups] is required")
    return list(dict.fromkeys(args.group))


def _typed_groups_of(args: argparse.Namespace, admin: AdminClient) -> list[tuple[str, str | None]]:
    """The groups to act on with their type from ListGroups (None: not listed)."""
    if not args.all_groups and not args.group:
        raise UsageError("Option [group] or [all-groups] is required")
    types = {g.group_id: g.group_type for g in list_groups(admin)}
    groups = sorted(types) if args.all_groups else list(dict.fromkeys(args.group))
    return [(g, types.get(g)) for g in groups]


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


def _table(columns: list[tuple[str, list[str], int]], out: TextIO) -> None:
    """Kafka's printf tables: every column left-aligned to its width, one space apart."""
    print("", file=out)
    rows = [[h for h, _, _ in columns]] + [list(r) for r in zip(*(vals for _, vals, _ in columns), strict=True)]
    for r in rows:
        print(" ".join(f"{cell:<{w}}" for cell, (_, _, w) in zip(r, columns, strict=True)).rstrip(), file=out)


def _width(minimum: int, values: Iterable[str]) -> int:
    return max([minimum, *(len(v) for v in values)])


def _describe_members(view: GroupView, out: TextIO, verbose: bool = False) -> None:
    """kafka-consumer-groups.sh --describe --members [--verbose] (Kafka 4), then TYPE and ASSIGNOR."""
    ms = view.members
    consumer = view.group_type == "consumer"
    col = {
        "GROUP": [view.group_id] * len(ms),
        "CONSUMER-ID": [m.member_id for m in ms],
        "GROUP-INSTANCE-ID": [m.group_instance_id or "" for m in ms],
        "HOST": [m.client_host for m in ms],
        "CLIENT-ID": [m.client_id for m in ms],
        "#PARTITIONS": [str(sum(len(p) for p in m.assignment.values())) for m in ms],
    }
    columns = [("GROUP", col["GROUP"], _width(15, col["GROUP"])),
               ("CONSUMER-ID", col["CONSUMER-ID"], _width(15, col["CONSUMER-ID"]))]
    if any(col["GROUP-INSTANCE-ID"]):
        columns.append(("GROUP-INSTANCE-ID", col["GROUP-INSTANCE-ID"], _width(17, col["GROUP-INSTANCE-ID"])))
    columns += [("HOST", col["HOST"], _width(15, col["HOST"])),
                ("CLIENT-ID", col["CLIENT-ID"], _width(15, col["CLIENT-ID"])),
                ("#PARTITIONS", col["#PARTITIONS"], 15)]
    if verbose:
        epochs = [_dash(m.member_epoch if isinstance(m, ViewMember) else None) for m in ms]
        current = [assignment_string(m.assignment) for m in ms]
        target = [assignment_string(m.target if isinstance(m, ViewMember) else None) for m in ms]
        target_epoch = [_dash(view.assignment_epoch if consumer else None)] * len(ms)
        columns += [("CURRENT-EPOCH", epochs, 15), ("CURRENT-ASSIGNMENT", current, _width(20, current)),
                    ("TARGET-EPOCH", target_epoch, 15), ("TARGET-ASSIGNMENT", target, _width(20, target))]
        types = {getattr(m, "member_type", -1) for m in ms}
        if {0, 1} <= types:  # a group being migrated between protocols: Kafka adds UPGRADED
            upgraded = ["true" if getattr(m, "member_type", -1) == 1 else "false" for m in ms]
            columns.append(("UPGRADED", upgraded, 10))
    columns += [("TYPE", [display_type(view.group_type)] * len(ms), 10),
                ("ASSIGNOR", [view.assignor or "-"] * len(ms), 0)]
    _table(columns, out)


def _describe_state(view: GroupView, out: TextIO, verbose: bool = False) -> None:
    """kafka-consumer-groups.sh --describe --state [--verbose] (Kafka 4), then TYPE."""
    node, host, port = view.coordinator or (-1, "-", -1)
    coord = f"{host}:{port}  ({node})"
    columns = [("GROUP", [view.group_id], _width(15, [view.group_id])),
               ("COORDINATOR (ID)", [coord], _width(25, [coord])),
               ("ASSIGNMENT-STRATEGY", [view.assignor or "-"], 20),
               ("STATE", [view.state], 20)]
    if verbose:
        columns += [("GROUP-EPOCH", [_dash(view.group_epoch)], 15),
                    ("TARGET-ASSIGNMENT-EPOCH", [_dash(view.assignment_epoch)], 25)]
    columns += [("#MEMBERS", [str(len(view.members))], 10), ("TYPE", [display_type(view.group_type)], 0)]
    _table(columns, out)


def _groups_describe(args: argparse.Namespace, admin: AdminClient, out: TextIO, err: TextIO) -> int:
    rc = 0
    for group, group_type in _typed_groups_of(args, admin):
        view = describe_group(admin, group, group_type)
        if view.state == "Dead":
            print(f"Error: Consumer group '{group}' does not exist.", file=err)
            rc = 1
            continue
        if args.explain:
            for line in explain(view):
                print(line, file=out)
            continue
        if view.state == "Empty":
            print(f"\nConsumer group '{group}' has no active members.", file=err)
        elif view.state in REBALANCING_STATES:
            print(f"\nWarning: Consumer group '{group}' is rebalancing.", file=err)
        if args.state is not None:
            _describe_state(view, out, args.verbose)
        elif args.members:
            _describe_members(view, out, args.verbose)
        else:
            _describe_offsets(admin, view, out)
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
    for group, group_type in _typed_groups_of(args, admin):
        desc = describe_group(admin, group, group_type)
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


def _split(text: str | None) -> list[str]:
    return [s.strip() for s in text.split(",") if s.strip()] if text else []


def _groups_list(args: argparse.Namespace, admin: AdminClient, out: TextIO) -> int:
    states, types = _split(args.state), [t.lower() for t in _split(args.type)]
    bad = [t for t in types if t not in GROUP_TYPES]
    if bad:
        raise UsageError(f"Invalid types list '{args.type}'. Valid types are: {', '.join(GROUP_TYPES)}")
    groups = sorted(list_groups(admin, states, types), key=lambda g: g.group_id)
    if args.state is None and args.type is None:
        for g in groups:
            print(g.group_id, file=out)
        return 0
    # Kafka's printGroupInfo: the group column 10 wider than the longest id, then 20 each
    gw = max([15] + [len(g.group_id) for g in groups]) + 10
    header, rows = ["GROUP"], [[g.group_id] for g in groups]
    if args.type is not None:
        header.append("TYPE")
        for r, g in zip(rows, groups, strict=True):
            r.append(display_type(g.group_type))
    if args.state is not None:
        header.append("STATE")
        for r, g in zip(rows, groups, strict=True):
            r.append(g.state or "Unknown")
    for r in [header, *rows]:
        print((f"{r[0]:<{gw}}" + "".join(f" {c:<20}" for c in r[1:])).rstrip(), file=out)
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
