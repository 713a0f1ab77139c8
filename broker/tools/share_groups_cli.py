"""``krait share-groups``: list, describe and delete share groups (KIP-932), reset and delete
their offsets, like Kafka's ``kafka-share-groups.sh`` (ShareGroupCommand): the same options,
checks, messages and printf tables, through Kafka's own APIs (ListGroups, ShareGroupDescribe,
DescribeShareGroupOffsets, AlterShareGroupOffsets, DeleteShareGroupOffsets, DeleteGroups), so
it works against any Kafka 4.2 broker.

Kafka prints its tables with ``printf("\\n%-Ns ...")`` then a final newline; a column is padded
to its width, never cut, and the last one is not padded. Errors go as ShareGroupCommand sends
them: ``printError`` on stdout (``\\nError: ...``), argument errors on stderr.
"""

from __future__ import annotations

import argparse
import re
import time
from dataclasses import dataclass, field
from typing import TextIO

from protocol.apis import ApiKey
from protocol.client_errors import kafka_error
from protocol.errors import ErrorCode, KafkaError

from .admin_client import EARLIEST, LATEST, AdminClient
from .command import Parser, UsageError, client_security, run
from .group_views import list_groups
from .groups_cli import parse_datetime

__all__ = ["main"]

MISSING = "-"
SHARE_STATES = ("Empty", "Stable", "Dead")
#: Kafka's exception class names, as ExecutionException.getMessage() shows its cause
_EXCEPTION = {
    ErrorCode.group_id_not_found: "org.apache.kafka.common.errors.GroupIdNotFoundException",
    ErrorCode.non_empty_group: "org.apache.kafka.common.errors.GroupNotEmptyException",
    ErrorCode.group_authorization_failed: "org.apache.kafka.common.errors.GroupAuthorizationException",
    ErrorCode.unknown_topic_or_partition: "org.apache.kafka.common.errors.UnknownTopicOrPartitionException",
    ErrorCode.coordinator_not_available: "org.apache.kafka.common.errors.CoordinatorNotAvailableException",
    ErrorCode.not_coordinator: "org.apache.kafka.common.errors.NotCoordinatorException",
}


class _Failed(Exception):
    """Kafka's ``printError("Executing share group command failed due to " + msg)``."""


def _cause(exc: KafkaError) -> str:
    """ExecutionException.getMessage(): the cause's toString()."""
    name = _EXCEPTION.get(exc.error_code, "org.apache.kafka.common.errors.ApiException")
    return f"{name}: {exc.message}" if exc.message else name


@dataclass
class _Member:
    member_id: str
    client_id: str
    client_host: str
    member_epoch: int
    assignment: dict[str, list[int]] = field(default_factory=dict)


@dataclass
class _Group:
    group_id: str
    state: str
    group_epoch: int
    assignment_epoch: int
    coordinator: tuple[int, str, int]
    members: list[_Member]


def _parser() -> argparse.ArgumentParser:
    p = Parser(prog="krait share-groups",
               description="This tool helps to list, describe, reset and delete share groups (like "
                           "kafka-share-groups.sh).")
    p.add_argument("--bootstrap-server", metavar="server to connect to", help="REQUIRED: the server(s) to connect to.")
    p.add_argument("--group", action="append", default=[], metavar="share group", help="The share group we wish to act on.")
    p.add_argument("--topic", action="append", default=[], metavar="topic",
                   help="The topic whose share group information should be deleted or included in the reset offset "
                        "process. When resetting offsets, partitions can be specified using this format: "
                        "'topic1:0,1,2', where 0,1,2 are the partitions to be included.")
    p.add_argument("--all-topics", action="store_true",
                   help="Consider all topics assigned to a share group in the 'reset-offsets' process.")
    p.add_argument("--list", action="store_true", help="List all share groups.")
    p.add_argument("--describe", action="store_true", help="Describe share group, members and offset information.")
    p.add_argument("--all-groups", action="store_true", help="Apply to all share groups.")
    p.add_argument("--delete", action="store_true", help="Delete share group.")
    p.add_argument("--timeout", type=int, default=30000, metavar="timeout (ms)",
                   help="The timeout that can be set for some use cases (default 30000).")
    p.add_argument("--command-config", metavar="command config property file",
                   help="Property file containing configs to be passed to Admin Client.")
    p.add_argument("--reset-offsets", action="store_true",
                   help="Reset offsets of share group. Supports one share group at the time, and instances must be "
                        "inactive. Has 2 execution options: --dry-run to plan which offsets to reset, and --execute "
                        "to reset the offsets.")
    p.add_argument("--delete-offsets", action="store_true",
                   help="Delete offsets of share group. Supports one share group at the time, and multiple topics.")
    p.add_argument("--dry-run", action="store_true", help="Only show results without executing changes on share groups.")
    p.add_argument("--execute", action="store_true", help="Execute operation. Supported operations: reset-offsets.")
    p.add_argument("--to-datetime", metavar="datetime", help="Reset offsets to offset from datetime. Format: "
                   "'YYYY-MM-DDThh:mm:ss.sss'")
    p.add_argument("--to-earliest", action="store_true", help="Reset offsets to earliest offset.")
    p.add_argument("--to-latest", action="store_true", help="Reset offsets to latest offset.")
    p.add_argument("--to-offset", type=int, metavar="offset", help="Reset offsets to a specific offset.")
    p.add_argument("--by-duration", metavar="duration", help="Reset offsets to offset by duration from current "
                   "timestamp. Format: 'PnDTnHnMnS'")
    p.add_argument("--members", action="store_true", help="Describe members of the group.")
    p.add_argument("--offsets", action="store_true", help="Describe the group and list all topic partitions in the "
                   "group along with their offset information (the default).")
    p.add_argument("--state", nargs="?", const="", default=None, metavar="STATES",
                   help="With --describe, the state of the group; with --list, the state of all groups, or only "
                        "those in the given states (Empty, Stable, Dead).")
    p.add_argument("--verbose", action="store_true", help="Provide additional information when describing the group.")
    return p


def _check(args: argparse.Namespace) -> None:
    """ShareGroupCommandOptions.checkArgs, in its order, with its messages."""
    actions = sum(bool(x) for x in (args.list, args.describe, args.delete, args.reset_offsets, args.delete_offsets))
    if args.bootstrap_server is None:
        raise UsageError("Missing required argument \"[bootstrap-server]\"")
    if args.describe:
        if not args.group and not args.all_groups:
            raise UsageError("Option [describe] takes one of these options: [group], [all-groups]")
        if sum(bool(x) for x in (args.members, args.offsets, args.state is not None)) > 1:
            raise UsageError("Option [describe] takes at most one of these options: [members], [offsets], [state]")
        if args.state:
            raise UsageError("Option [describe] does not take a value for [state]")
    if args.delete:
        if not args.group and not args.all_groups:
            raise UsageError("Option [delete] takes the options [group] or [all-groups]")
        if args.group and args.all_groups:
            raise UsageError("Option [delete] takes either [group] or [all-groups], not both.")
        if args.topic:
            raise UsageError("Option [delete] does not take the option: [topic]")
    if args.delete_offsets and (not args.group or not args.topic):
        raise UsageError("Option [delete-offsets] takes the following options: [group], [topic]")
    if args.reset_offsets:
        if args.dry_run and args.execute:
            raise UsageError("Option [reset-offsets] only accepts one of [execute] and [dry-run]")
        if not args.dry_run and not args.execute:
            raise UsageError("Option [reset-offsets] takes the option: [execute] or [dry-run]")
        if not args.group:
            raise UsageError("Option [reset-offsets] takes the option: [group]")
        scenarios = [n for n, v in (("to-datetime", args.to_datetime), ("to-earliest", args.to_earliest),
                                    ("to-latest", args.to_latest), ("to-offset", args.to_offset),
                                    ("by-duration", args.by_duration)) if v not in (None, False)]
        if len(scenarios) > 1:
            raise UsageError(f"Option \"[{scenarios[0]}]\" can't be used with option \"[{scenarios[1]}]\"")
    if actions != 1:
        raise UsageError("Command must include exactly one action: --list, --describe, --delete, --reset-offsets, "
                         "--delete-offsets.")


# --- the admin requests --------------------------------------------------------------------------
def _describe_groups(admin: AdminClient, groups: list[str]) -> dict[str, _Group]:
    """ShareGroupDescribe of each group; KafkaError for a group that fails (the admin client's
    DescribeShareGroupsHandler: GROUP_ID_NOT_FOUND fails the group)."""
    out = {}
    for gid in groups:
        coord = admin.find_coordinator(gid)
        resp = admin.node(coord[0]).request(ApiKey.SHARE_GROUP_DESCRIBE, 1, group_ids=[gid],
                                            include_authorized_operations=False)
        g = resp.groups[0]
        if g.error_code:
            raise kafka_error(int(g.error_code), g.error_message)
        members = []
        for m in g.members:
            assigned: dict[str, list[int]] = {}
            for tp in m.assignment.topic_partitions:
                assigned.setdefault(str(tp.topic_name), []).extend(int(p) for p in tp.partitions)
            members.append(_Member(str(m.member_id), str(m.client_id), str(m.client_host), int(m.member_epoch),
                                   assigned))
        out[gid] = _Group(gid, str(g.group_state), int(g.group_epoch), int(g.assignment_epoch), coord, members)
    return out


def _share_group_offsets(admin: AdminClient, group: str) -> dict[tuple[str, int], tuple[int, int, int] | None]:
    """DescribeShareGroupOffsets with topics null (ListShareGroupOffsetsSpec()): per partition
    (start offset, leader epoch, lag), None without a start offset (the admin client's
    ListShareGroupOffsetsHandler)."""
    coord = admin.find_coordinator(group)
    resp = admin.node(coord[0]).request(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 1, groups=[dict(group_id=group, topics=None)])
    g = resp.groups[0]
    if g.error_code:
        raise kafka_error(int(g.error_code), g.error_message)
    out: dict[tuple[str, int], tuple[int, int, int] | None] = {}
    for t in g.topics:
        for p in t.partitions:
            if p.error_code:
                continue
            tp = (str(t.topic_name), int(p.partition_index))
            out[tp] = None if p.start_offset < 0 else (int(p.start_offset), int(p.leader_epoch),
                                                        int(getattr(p, "lag", -1)))
    return out


# --- list ----------------------------------------------------------------------------------------
def _list(args: argparse.Namespace, admin: AdminClient, out: TextIO) -> int:
    if args.state is None:
        for g in sorted(list_groups(admin, types=["share"]), key=lambda g: g.group_id):
            print(g.group_id, file=out)
        return 0
    states = [s.strip() for s in args.state.split(",")] if args.state else []
    canonical = {s.lower(): s for s in SHARE_STATES}
    if any(s.lower() not in canonical for s in states):
        raise UsageError(f"Invalid state list '{args.state}'. Valid states are: {', '.join(SHARE_STATES)}")
    groups = sorted(list_groups(admin, [canonical[s.lower()] for s in states], ["share"]), key=lambda g: g.group_id)
    width = max([15] + [len(g.group_id) for g in groups])
    print(f"{'GROUP':<{width}} STATE", file=out)
    for g in groups:
        print(f"{g.group_id:<{width}} {g.state or 'Unknown'}", file=out)
    return 0


# --- describe ------------------------------------------------------------------------------------
def _maybe_print_empty(group: str, state: str, rows: int, out: TextIO, err: TextIO) -> bool:
    """ShareGroupService.maybePrintEmptyGroupState."""
    if state == "Dead":
        print(f"\nError: Share group '{group}' does not exist.", file=out)
    elif state == "Empty":
        print(f"\nShare group '{group}' has no active members.", file=err)
    return state != "Dead" and rows > 0


def _printf(out: TextIO, widths: list[int], *cells: object) -> None:
    """Java's printf("%n%-w1s %-w2s ... %s"): the last column unpadded."""
    parts = [f"{c!s:<{w}}" for c, w in zip(cells[:-1], widths, strict=True)] + [str(cells[-1])]
    out.write("\n" + " ".join(parts))


def _print_offsets(admin: AdminClient, group: str, verbose: bool, out: TextIO) -> None:
    offsets = _share_group_offsets(admin, group)
    if not offsets:
        print(f"\nShare group '{group}' has no offset information.", file=out)
        return
    rows = sorted(offsets.items())
    widths = [max(15, len(group)), max([15] + [len(t) for (t, _), _ in rows]), 10, 13]
    if verbose:
        widths.append(13)
        _printf(out, widths, "GROUP", "TOPIC", "PARTITION", "LEADER-EPOCH", "START-OFFSET", "LAG")
    else:
        _printf(out, widths, "GROUP", "TOPIC", "PARTITION", "START-OFFSET", "LAG")
    for (topic, p), info in rows:
        start = MISSING if info is None else str(info[0])
        epoch = MISSING if info is None or info[1] < 0 else str(info[1])
        lag = MISSING if info is None or info[2] < 0 else str(info[2])
        if verbose:
            _printf(out, widths, group, topic, p, epoch, start, lag)
        else:
            _printf(out, widths, group, topic, p, start, lag)
    out.write("\n")


def _assignment_string(assignment: dict[str, list[int]]) -> str:
    """ShareGroupService.getAssignmentString: ``t:0,1;u:2``, topics sorted."""
    return ";".join(sorted(f"{t}:{','.join(str(p) for p in sorted(ps))}" for t, ps in assignment.items()))


def _print_state(g: _Group, verbose: bool, out: TextIO, err: TextIO) -> None:
    _maybe_print_empty(g.group_id, g.state, 1, out, err)
    node, host, port = g.coordinator
    coordinator = f"{host}:{port}  ({node})"
    gw, cw = max(15, len(g.group_id)), max(25, len(coordinator))
    if verbose:
        widths = [gw, cw, 15, 12, 17]
        _printf(out, widths, "GROUP", "COORDINATOR (ID)", "STATE", "GROUP-EPOCH", "ASSIGNMENT-EPOCH", "#MEMBERS")
        _printf(out, widths, g.group_id, coordinator, g.state, g.group_epoch, g.assignment_epoch, len(g.members))
    else:
        widths = [gw, cw, 15]
        _printf(out, widths, "GROUP", "COORDINATOR (ID)", "STATE", "#MEMBERS")
        _printf(out, widths, g.group_id, coordinator, g.state, len(g.members))
    out.write("\n")


def _print_members(g: _Group, verbose: bool, out: TextIO, err: TextIO) -> None:
    if not _maybe_print_empty(g.group_id, g.state, len(g.members), out, err):
        return
    members = sorted(g.members, key=lambda m: m.member_id)
    widths = [max(15, len(g.group_id)), max([15] + [len(m.member_id) for m in members]),
              max([15] + [len(m.client_host) for m in members]), max([15] + [len(m.client_id) for m in members]), 12]
    if verbose:
        widths.append(13)
        _printf(out, widths, "GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "MEMBER-EPOCH", "ASSIGNMENT")
        for m in members:
            _printf(out, widths, g.group_id, m.member_id, m.client_host, m.client_id,
                    sum(len(ps) for ps in m.assignment.values()), m.member_epoch, _assignment_string(m.assignment))
    else:
        _printf(out, widths, "GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT")
        for m in members:
            _printf(out, widths, g.group_id, m.member_id, m.client_host, m.client_id,
                    sum(len(ps) for ps in m.assignment.values()), _assignment_string(m.assignment))
    out.write("\n")


def _describe(args: argparse.Namespace, admin: AdminClient, out: TextIO, err: TextIO) -> int:
    groups = (sorted(g.group_id for g in list_groups(admin, types=["share"])) if args.all_groups
              else sorted(dict.fromkeys(args.group)))
    try:
        described = _describe_groups(admin, groups)
    except KafkaError as exc:
        raise _Failed(_cause(exc)) from exc
    for gid in sorted(described):
        g = described[gid]
        if args.members:
            _print_members(g, args.verbose, out, err)
        elif args.state is not None:
            _print_state(g, args.verbose, out, err)
        else:
            try:
                _print_offsets(admin, gid, args.verbose, out)
            except KafkaError as exc:
                raise _Failed(str(exc.message or exc.error_code.name)) from exc
    return 0


# --- delete --------------------------------------------------------------------------------------
def _delete(args: argparse.Namespace, admin: AdminClient, out: TextIO) -> int:
    listed = {g.group_id: g for g in list_groups(admin, types=["share"])}
    wanted = sorted(listed) if args.all_groups else list(dict.fromkeys(args.group))
    failed: dict[str, str] = {}
    for gid in wanted:
        g = listed.get(gid)
        if g is None:
            failed[gid] = f"org.apache.kafka.common.errors.GroupIdNotFoundException: Group '{gid}' is not a share group."
        elif g.state == "Dead":
            failed[gid] = f"java.lang.IllegalStateException: Share group '{gid}' group state is DEAD."
        elif g.state and g.state != "Empty":
            failed[gid] = f"org.apache.kafka.common.errors.GroupNotEmptyException: Share group '{gid}' is not EMPTY."
    todo = [g for g in wanted if g not in failed]
    ok = []
    if todo:
        for gid, exc in admin.delete_groups(todo).items():
            if exc is None:
                ok.append(gid)
            else:
                failed[gid] = _cause(exc) if isinstance(exc, KafkaError) else str(exc)
    if not failed:
        print("Deletion of requested share groups (" + ", ".join(f"'{g}'" for g in ok) + ") was successful.", file=out)
        return 0
    print("\nError: Deletion of some share groups failed:", file=out)
    for gid, why in failed.items():
        print(f"* Group '{gid}' could not be deleted due to: {why}", file=out)
    if ok:
        print("\nThese share groups were deleted successfully: " + ", ".join(f"'{g}'" for g in ok), file=out)
    return 1


# --- delete-offsets ------------------------------------------------------------------------------
def _delete_offsets(args: argparse.Namespace, admin: AdminClient, out: TextIO) -> int:
    group = args.group[0]
    topics = list(dict.fromkeys(args.topic))
    coord = admin.find_coordinator(group)
    resp = admin.node(coord[0]).request(ApiKey.DELETE_SHARE_GROUP_OFFSETS, 0, group_id=group,
                                        topics=[dict(topic_name=t) for t in topics])
    results: dict[str, str | None] = {}
    rc = 0
    if resp.error_code:
        exc = kafka_error(int(resp.error_code), resp.error_message)
        message = exc.message or ""
        if exc.error_code in (ErrorCode.invalid_group_id, ErrorCode.group_id_not_found,
                              ErrorCode.group_authorization_failed, ErrorCode.non_empty_group):
            print(f"\nError: {message}", file=out)
        elif exc.error_code not in (ErrorCode.topic_authorization_failed, ErrorCode.unknown_topic_or_partition):
            print(f"\nError: Encounter some unknown error: {_cause(exc)}", file=out)
        results = dict.fromkeys(topics, message)
        rc = 1
    else:
        by_name = {str(t.topic_name): t for t in resp.responses}
        for t in topics:
            r = by_name.get(t)
            if r is None or not r.error_code:
                results[t] = None
            else:
                results[t] = kafka_error(int(r.error_code), r.error_message).message or ""
                rc = 1
    width = max([15] + [len(t) for t in results])
    _printf(out, [width], "TOPIC", "STATUS")
    for t in sorted(results):
        _printf(out, [width], t, "Successful" if results[t] is None else f"Error: {results[t]}")
    out.write("\n")
    return rc


# --- reset-offsets -------------------------------------------------------------------------------
_DURATION = re.compile(r"^P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?$", re.IGNORECASE)


def _parse_duration_ms(text: str) -> int:
    """java.time.Duration.parse for the 'PnDTnHnMnS' forms Kafka documents."""
    m = _DURATION.match(text.strip())
    if not m or text.strip().upper() in ("P", "PT"):
        raise UsageError(f"Error parsing duration {text!r}: expected PnDTnHnMnS")
    d, h, mi, s = (float(x) if x else 0.0 for x in m.groups())
    return int((((d * 24 + h) * 60 + mi) * 60 + s) * 1000)


def _partitions_to_reset(args: argparse.Namespace, admin: AdminClient, group: str) -> list[tuple[str, int]]:
    if not args.topic:
        return sorted(_share_group_offsets(admin, group))
    tps: list[tuple[str, int]] = []
    wanted = []
    for item in args.topic:
        topic, sep, parts = item.partition(":")
        wanted.append((topic, [int(p) for p in parts.split(",") if p.strip()] if sep else None))
    meta = {t.name: t for t in admin.metadata(sorted({t for t, _ in wanted}))}
    for topic, parts in wanted:
        info = meta.get(topic)
        have = [p.partition for p in info.partitions] if info is not None and info.error_code == 0 else []
        for p in (parts if parts is not None else have):
            tps.append((topic, p))
    # GroupOffsetsResetter.checkAllTopicPartitionsValid
    unknown = [f"{t}-{p}" for t, p in tps if not (meta.get(t) and meta[t].error_code == 0
                                                 and p in [q.partition for q in meta[t].partitions])]
    if unknown or (not tps and wanted):
        missing = unknown or [t for t, _ in wanted]
        raise _Failed(f"org.apache.kafka.common.errors.UnknownTopicOrPartitionException: The partitions \"{','.join(missing)}\" "
                      "do not exist")
    return sorted(set(tps))


def _plan(args: argparse.Namespace, admin: AdminClient, tps: list[tuple[str, int]], err: TextIO) -> dict[tuple[str, int], int]:
    if not tps:
        return {}
    if args.to_earliest:
        return admin.list_offsets(dict.fromkeys(tps, EARLIEST))
    if args.to_latest:
        return admin.list_offsets(dict.fromkeys(tps, LATEST))
    if args.to_offset is not None:
        earliest = admin.list_offsets(dict.fromkeys(tps, EARLIEST))
        latest = admin.list_offsets(dict.fromkeys(tps, LATEST))
        out = {}
        for tp in tps:
            off = args.to_offset
            if off < earliest[tp]:
                print(f"New offset ({off}) is lower than earliest offset for topic partition {tp[0]}-{tp[1]}. "
                      f"Value will be set to {earliest[tp]}", file=err)
                off = earliest[tp]
            elif off > latest[tp]:
                print(f"New offset ({off}) is higher than latest offset for topic partition {tp[0]}-{tp[1]}. "
                      f"Value will be set to {latest[tp]}", file=err)
                off = latest[tp]
            out[tp] = off
        return out
    if args.to_datetime is not None or args.by_duration is not None:
        ts = (parse_datetime(args.to_datetime) if args.to_datetime is not None
              else int(time.time() * 1000) - _parse_duration_ms(args.by_duration))
        found = admin.list_offsets(dict.fromkeys(tps, ts))
        missing = [tp for tp, off in found.items() if off < 0]
        latest = admin.list_offsets(dict.fromkeys(missing, LATEST)) if missing else {}
        return {tp: found[tp] if found[tp] >= 0 else latest[tp] for tp in tps}
    raise UsageError("Option [reset-offsets] requires one of the following scenarios: [to-datetime], "
                     "[to-earliest], [to-latest], [to-offset], [by-duration]")


def _reset(args: argparse.Namespace, admin: AdminClient, out: TextIO, err: TextIO) -> int:
    group = args.group[0]
    try:
        g = _describe_groups(admin, [group])[group]
        if g.state not in ("Empty", "Dead"):
            print(f"Share group '{group}' is not empty.", file=err)
            return 1
    except KafkaError as exc:
        if exc.error_code != ErrorCode.group_id_not_found:
            raise _Failed(_cause(exc)) from exc
    plan = _plan(args, admin, _partitions_to_reset(args, admin, group), err)
    if args.execute and plan:
        coord = admin.find_coordinator(group)
        by_topic: dict[str, list[dict[str, int]]] = {}
        for (t, p), off in sorted(plan.items()):
            by_topic.setdefault(t, []).append(dict(partition_index=p, start_offset=off))
        resp = admin.node(coord[0]).request(ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, group_id=group, topics=[
            dict(topic_name=t, partitions=ps) for t, ps in by_topic.items()])
        if resp.error_code:
            raise _Failed(_cause(kafka_error(int(resp.error_code), resp.error_message)))
        for t in resp.responses:
            for p in t.partitions:
                if p.error_code:
                    raise _Failed(_cause(kafka_error(int(p.error_code), p.error_message)))
    # GroupOffsetsResetter.printOffsetsToReset: "%n%-30s %-30s %-10s %-15s", no header when empty
    widths = [30, 30, 10]
    if plan:
        _printf(out, widths, "GROUP", "TOPIC", "PARTITION", f"{'NEW-OFFSET':<15}")
        for (t, p), off in sorted(plan.items()):
            _printf(out, widths, group, t, p, f"{off!s:<15}")
    out.write("\n")
    return 0


def _body(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    _check(args)
    admin = AdminClient(args.bootstrap_server, timeout=args.timeout / 1000, security=client_security(args))
    with admin:
        try:
            if args.list:
                return _list(args, admin, out)
            if args.describe:
                return _describe(args, admin, out, err)
            if args.delete:
                return _delete(args, admin, out)
            if args.reset_offsets:
                return _reset(args, admin, out, err)
            return _delete_offsets(args, admin, out)
        except _Failed as exc:
            print(f"\nError: Executing share group command failed due to {exc}", file=out)
            return 1


def main(argv: list[str]) -> int:
    """``krait share-groups ...``; returns the exit code."""
    return run("krait share-groups", "", _parser, _body, argv)
