"""``krait acls``: add, remove and list ACLs like Kafka's ``kafka-acls.sh`` (AclCommand):
the same options, the same expansion of ``--producer`` / ``--consumer`` into ACLs, the
same checks and messages, the same output (``Current ACLs for resource
`ResourcePattern(...)`:``), through CreateAcls / DescribeAcls / DeleteAcls, so it works
against any Kafka-compatible broker. ``--command-config`` takes Kafka client properties
(TLS, SASL) for a secured listener.

The expansion (options -> {resource pattern filter: ACL entries}) is a pure function,
:func:`resource_filter_to_acls`, tested on its own; the ACL model is the broker's
(:mod:`broker.security.acls`), so the names and enum codes are one set.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable
from typing import TextIO

from broker.security.acls import (
    CLUSTER_NAME,
    WILDCARD_HOST,
    AccessControlEntry,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePatternFilter,
    ResourceType,
    parse_principal,
)
from broker.security.operations import SUPPORTED_OPERATIONS

from .admin_client import AdminClient
from .command import Parser, UsageError, connect_admin, run
from .security_admin import AclEntry

__all__ = [
    "format_entry",
    "format_pattern",
    "main",
    "operation_name",
    "parse_operation",
    "resource_filter_to_acls",
    "resource_filters",
]

NEWLINE = "\n"
_CLUSTER_FILTER = ResourcePatternFilter(ResourceType.CLUSTER, CLUSTER_NAME, PatternType.LITERAL)


def _pascal(name: str) -> str:
    """SecurityUtils.toPascalCase: IDEMPOTENT_WRITE -> IdempotentWrite."""
    return "".join(part.capitalize() for part in name.split("_"))


def operation_name(op: AclOperation) -> str:
    """Kafka's printed operation name (SecurityUtils.operationName)."""
    return _pascal(op.name)


def parse_operation(name: str) -> AclOperation:
    """SecurityUtils.operation: ``Read``, ``READ``, ``IdempotentWrite``, ``IDEMPOTENTWRITE``
    (and, beyond Kafka, ``IDEMPOTENT_WRITE``); anything else is UNKNOWN, which the
    operation check then refuses with the list of valid names."""
    key = name.strip().replace("_", "").upper()
    for op in AclOperation:
        if op.name.replace("_", "") == key:
            return op
    return AclOperation.UNKNOWN


def format_pattern(resource_type: ResourceType, name: str | None, pattern_type: PatternType) -> str:
    """ResourcePattern / ResourcePatternFilter.toString."""
    return (f"ResourcePattern(resourceType={resource_type.name}, name={'<any>' if name is None else name}, "
            f"patternType={pattern_type.name})")


def format_entry(entry: AccessControlEntry) -> str:
    """AccessControlEntry.toString."""
    return (f"(principal={entry.principal}, host={entry.host}, operation={entry.operation.name}, "
            f"permissionType={entry.permission_type.name})")


def _entry_key(e: AccessControlEntry) -> tuple[str, str, int, int]:
    return (e.principal, e.host, int(e.operation), int(e.permission_type))


def _entries_block(entries: Iterable[AccessControlEntry]) -> str:
    """AclCommand's ``$Newline ${acls.map("\\t" + _).mkString(Newline)} $Newline``."""
    return f"{NEWLINE} {NEWLINE.join(chr(9) + format_entry(e) for e in sorted(entries, key=_entry_key))} {NEWLINE}"


# --- options -> ACLs ---------------------------------------------------------------------


def _principals(values: list[str] | None) -> list[str]:
    out = []
    for v in values or ():
        try:
            ptype, pname = parse_principal(v.strip())
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        out.append(f"{ptype}:{pname}")
    return list(dict.fromkeys(out))


def _hosts(hosts: list[str] | None, principals: list[str] | None) -> list[str]:
    if hosts:
        return list(dict.fromkeys(h.strip() for h in hosts))
    return [WILDCARD_HOST] if principals else []


def _acls(args: argparse.Namespace, operations: Iterable[AclOperation]) -> list[AccessControlEntry]:
    """AclCommand.getAcl: every (principal x operation x host), allowed then denied."""
    allowed, denied = _principals(args.allow_principal), _principals(args.deny_principal)
    allow_hosts, deny_hosts = _hosts(args.allow_host, args.allow_principal), _hosts(args.deny_host, args.deny_principal)
    ops = list(dict.fromkeys(operations))
    out: dict[AccessControlEntry, None] = {}
    for principals, hosts, permission in ((allowed, allow_hosts, AclPermissionType.ALLOW),
                                          (denied, deny_hosts, AclPermissionType.DENY)):
        if principals and hosts:
            for p in principals:
                for op in ops:
                    for h in hosts:
                        out[AccessControlEntry(p, h, op, permission)] = None
    return list(out)


def resource_filters(args: argparse.Namespace, die_if_none: bool = True) -> list[ResourcePatternFilter]:
    """AclCommand.getResourceFilter: one filter per --topic / --group / --transactional-id /
    --delegation-token / --user-principal, and the cluster (literal pattern type only)."""
    pt = args.resource_pattern_type
    out: dict[ResourcePatternFilter, None] = {}
    for topic in args.topic or ():
        out[ResourcePatternFilter(ResourceType.TOPIC, topic.strip(), pt)] = None
    if pt == PatternType.LITERAL and (args.cluster or args.idempotent):
        out[_CLUSTER_FILTER] = None
    for group in args.group or ():
        out[ResourcePatternFilter(ResourceType.GROUP, group.strip(), pt)] = None
    for tid in args.transactional_id or ():
        out[ResourcePatternFilter(ResourceType.TRANSACTIONAL_ID, tid, pt)] = None
    for token in args.delegation_token or ():
        out[ResourcePatternFilter(ResourceType.DELEGATION_TOKEN, token.strip(), pt)] = None
    for user in args.user_principal or ():
        out[ResourcePatternFilter(ResourceType.USER, user.strip(), pt)] = None
    if not out and die_if_none:
        raise UsageError("You must provide at least one resource: --topic <topic> or --cluster or --group <group> "
                         "or --delegation-token <Delegation Token ID>")
    return list(out)


def resource_filter_to_acls(args: argparse.Namespace) -> dict[ResourcePatternFilter, list[AccessControlEntry]]:
    """AclCommand.getResourceFilterToAcls: the ACLs the options mean, per resource filter;
    ``--producer`` and ``--consumer`` expand as kafka-acls.sh expands them."""
    out: dict[ResourcePatternFilter, list[AccessControlEntry]] = {}
    if not args.producer and not args.consumer:
        acls = _acls(args, (parse_operation(o) for o in (args.operation or ["All"])))
        for f in resource_filters(args):
            out[f] = acls
    if args.producer:
        filters = resource_filters(args)
        for f in filters:
            if f.resource_type == ResourceType.TOPIC:
                out[f] = _acls(args, (AclOperation.WRITE, AclOperation.DESCRIBE, AclOperation.CREATE))
            elif f.resource_type == ResourceType.TRANSACTIONAL_ID:
                out[f] = _acls(args, (AclOperation.WRITE, AclOperation.DESCRIBE))
        if args.idempotent:
            out[_CLUSTER_FILTER] = _acls(args, (AclOperation.IDEMPOTENT_WRITE,))
    if args.consumer:
        for f in resource_filters(args):
            if f.resource_type == ResourceType.TOPIC:
                acls = _acls(args, (AclOperation.READ, AclOperation.DESCRIBE))
            elif f.resource_type == ResourceType.GROUP:
                acls = _acls(args, (AclOperation.READ,))
            else:
                continue
            out[f] = list(dict.fromkeys([*acls, *out.get(f, [])]))
    _validate_operations(out)
    return out


def _validate_operations(resource_to_acls: dict[ResourcePatternFilter, list[AccessControlEntry]]) -> None:
    for f, acls in resource_to_acls.items():
        valid = set(SUPPORTED_OPERATIONS.get(f.resource_type, frozenset())) | {AclOperation.ALL}
        if any(a.operation not in valid for a in acls):
            names = ", ".join(operation_name(op) for op in sorted(valid))
            raise UsageError(f"ResourceType {f.resource_type.name} only supports operations {names}")


# --- the command -------------------------------------------------------------------------


def _pattern_type(value: str) -> PatternType:
    try:
        pt = PatternType[value.strip().upper()]
    except KeyError:
        pt = PatternType.UNKNOWN
    if pt == PatternType.UNKNOWN:
        raise argparse.ArgumentTypeError(f"Unknown resource-pattern-type: {value}")
    return pt


def _parser() -> argparse.ArgumentParser:
    p = Parser(prog="krait acls", description="Add, remove and list ACLs (like kafka-acls.sh).")
    p.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT", help="broker(s) to connect to")
    p.add_argument("--command-config", metavar="FILE",
                   help="client properties (security.protocol, ssl.*, sasl.*) for the admin connection")
    p.add_argument("--add", action="store_true", help="add ACLs")
    p.add_argument("--remove", action="store_true", help="remove ACLs")
    p.add_argument("--list", action="store_true", help="list ACLs (of the given resources, or all)")
    p.add_argument("--topic", action="append", help="topic ('*' for all topics; repeatable)")
    p.add_argument("--group", action="append", help="consumer group ('*' for all groups; repeatable)")
    p.add_argument("--cluster", action="store_true", help="the cluster resource")
    p.add_argument("--transactional-id", action="append", help="transactional id ('*' for all; repeatable)")
    p.add_argument("--delegation-token", action="append", help="delegation token id (repeatable)")
    p.add_argument("--user-principal", action="append", help="a user principal as the resource (repeatable)")
    p.add_argument("--resource-pattern-type", type=_pattern_type, default=PatternType.LITERAL,
                   metavar="{literal,prefixed,any,match}",
                   help="pattern type (add: literal or prefixed; list/remove: also any or match). Default literal")
    p.add_argument("--operation", action="append",
                   help="operation allowed or denied (repeatable; default All): Read, Write, Create, Delete, Alter, "
                        "Describe, ClusterAction, DescribeConfigs, AlterConfigs, IdempotentWrite, CreateTokens, "
                        "DescribeTokens, All")
    p.add_argument("--allow-principal", action="append", help="principal type:name, e.g. User:alice (repeatable)")
    p.add_argument("--deny-principal", action="append", help="principal denied (repeatable)")
    p.add_argument("--allow-host", action="append", help="host the allowed principals may connect from (default *)")
    p.add_argument("--deny-host", action="append", help="host the denied principals are denied from (default *)")
    p.add_argument("--principal", action="append", help="--list: only the ACLs of this principal (repeatable)")
    p.add_argument("--producer", action="store_true",
                   help="ACLs of a producer: Write, Describe, Create on topics; Write, Describe on transactional ids")
    p.add_argument("--consumer", action="store_true",
                   help="ACLs of a consumer: Read, Describe on topics; Read on groups")
    p.add_argument("--idempotent", action="store_true", help="with --producer: IdempotentWrite on the cluster")
    p.add_argument("--force", action="store_true", help="assume yes to every question")
    p.add_argument("--timeout", type=float, default=30.0, help="request timeout in seconds (default 30)")
    return p


_OPTION_NAMES = {"producer": "producer", "consumer": "consumer", "allow_host": "allow-host",
                 "allow_principal": "allow-principal", "deny_host": "deny-host", "deny_principal": "deny-principal",
                 "operation": "operation"}


def _check_invalid(args: argparse.Namespace, used: str, attrs: Iterable[str]) -> None:
    """CommandLineUtils.checkInvalidArgs."""
    for attr in attrs:
        if getattr(args, attr):
            raise UsageError(f'Option "[{used}]" can\'t be used with option "[{_OPTION_NAMES[attr]}]"')


def check_args(args: argparse.Namespace) -> None:
    """AclCommandOptions.checkArgs, with Kafka's messages."""
    if sum((args.add, args.remove, args.list)) != 1:
        raise UsageError("Command must include exactly one action: --list, --add, --remove. ")
    if args.list:
        _check_invalid(args, "list", ("producer", "consumer", "allow_host", "allow_principal", "deny_host",
                                      "deny_principal"))
    if args.producer:
        _check_invalid(args, "producer", ("operation", "deny_principal", "deny_host"))
    if args.consumer:
        _check_invalid(args, "consumer", ("operation", "deny_principal", "deny_host"))
    if args.principal and not args.list:
        raise UsageError("The --principal option is only available if --list is set")
    if args.producer and not args.topic:
        raise UsageError("With --producer you must specify a --topic")
    if args.idempotent and not args.producer:
        raise UsageError("The --idempotent option is only available if --producer is set")
    if args.consumer and (not args.topic or not args.group or
                          (not args.producer and (args.cluster or args.transactional_id))):
        raise UsageError("With --consumer you must specify a --topic and a --group and no --cluster or "
                         "--transactional-id option should be specified.")


def _confirm(message: str, force: bool, out: TextIO) -> bool:
    if force:
        return True
    print(message, file=out)
    out.flush()
    return sys.stdin.readline().strip().lower() == "y"


def _wire_filter(f: ResourcePatternFilter, entry: AccessControlEntry | None) -> dict[str, object]:
    return dict(resource_type_filter=int(f.resource_type), resource_name_filter=f.name,
                pattern_type_filter=int(f.pattern_type),
                principal_filter=None if entry is None else entry.principal,
                host_filter=None if entry is None else entry.host,
                operation=int(AclOperation.ANY if entry is None else entry.operation),
                permission_type=int(AclPermissionType.ANY if entry is None else entry.permission_type))


def _to_entry(a: AclEntry) -> AccessControlEntry:
    try:
        op = AclOperation(a.operation)
    except ValueError:
        op = AclOperation.UNKNOWN
    try:
        perm = AclPermissionType(a.permission_type)
    except ValueError:
        perm = AclPermissionType.UNKNOWN
    return AccessControlEntry(a.principal, a.host, op, perm)


def _pattern_key(a: AclEntry) -> tuple[ResourceType, str, PatternType]:
    def enum(cls: type, code: int) -> object:
        try:
            return cls(code)
        except ValueError:
            return cls.UNKNOWN
    return enum(ResourceType, a.resource_type), a.resource_name, enum(PatternType, a.pattern_type)  # type: ignore[return-value]


def _list(admin: AdminClient, args: argparse.Namespace, out: TextIO) -> None:
    filters = resource_filters(args, die_if_none=False)
    bindings: list[AclEntry] = []
    if not filters:
        bindings = admin.security_admin.describe_acls()
    for f in filters:
        bindings += admin.security_admin.describe_acls(int(f.resource_type), f.name, int(f.pattern_type))
    by_resource: dict[tuple[ResourceType, str, PatternType], dict[AccessControlEntry, None]] = {}
    for b in bindings:
        by_resource.setdefault(_pattern_key(b), {})[_to_entry(b)] = None
    principals = _principals(args.principal)

    def show(resources: dict[tuple[ResourceType, str, PatternType], dict[AccessControlEntry, None]]) -> None:
        for (rtype, name, ptype), entries in resources.items():
            print(f"Current ACLs for resource `{format_pattern(rtype, name, ptype)}`: {_entries_block(entries)}",
                  file=out)

    if not principals:
        show(by_resource)
        return
    for principal in principals:
        print(f"ACLs for principal `{principal}`", file=out)
        show({k: {e: None for e in v if e.principal == principal} for k, v in by_resource.items()
              if any(e.principal == principal for e in v)})


def _body(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    check_args(args)
    if args.add:
        if not args.resource_pattern_type.is_specific():
            raise UsageError(f"A '--resource-pattern-type' value of '{args.resource_pattern_type.name}' is not valid "
                             "when adding acls.")
        resource_to_acls = resource_filter_to_acls(args)
        if any(not acls for acls in resource_to_acls.values()):
            raise UsageError("You must specify one of: --allow-principal, --deny-principal when trying to add ACLs.")
        with connect_admin(args) as admin:
            for f, acls in resource_to_acls.items():
                print(f"Adding ACLs for resource `{format_pattern(f.resource_type, f.name, f.pattern_type)}`: "
                      f"{_entries_block(acls)}", file=out)
                results = admin.security_admin.create_acls([
                    AclEntry(int(f.resource_type), str(f.name), int(f.pattern_type), a.principal, a.host,
                             int(a.operation), int(a.permission_type))
                    for a in sorted(acls, key=_entry_key)])
                failed = next((e for e in results if e is not None), None)
                if failed is not None:
                    raise failed
        return 0
    if args.remove:
        resource_to_acls = resource_filter_to_acls(args)
        with connect_admin(args) as admin:
            for f, acls in resource_to_acls.items():
                shown = format_pattern(f.resource_type, f.name, f.pattern_type)
                if not acls:
                    question = f"Are you sure you want to delete all ACLs for resource filter `{shown}`? (y/n)"
                    filters = [_wire_filter(f, None)]
                else:
                    question = (f"Are you sure you want to remove ACLs: {_entries_block(acls)} from resource filter "
                                f"`{shown}`? (y/n)")
                    filters = [_wire_filter(f, a) for a in sorted(acls, key=_entry_key)]
                if not _confirm(question, args.force, out):
                    continue
                for error, _deleted in admin.security_admin.delete_acls(filters):  # type: ignore[arg-type]
                    if error is not None:
                        raise error
        return 0
    with connect_admin(args) as admin:
        _list(admin, args, out)
    return 0


def main(argv: list[str]) -> int:
    """``krait acls ...``; returns the exit code."""
    return run("krait acls", "Error while executing ACL command: ", _parser, _body, argv)
