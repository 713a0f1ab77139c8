"""``krait configs``: SCRAM credentials and client quotas of users and client ids, and
dynamic broker configs, like Kafka's ``kafka-configs.sh --entity-type users|clients|brokers``
(ConfigCommand) with ``--bootstrap-server``: the same options
(``--entity-type/--entity-name/--entity-default``, ``--user/--client/--user-defaults/
--client-defaults``, ``--add-config`` with Kafka's bracket syntax, ``--add-config-file``,
``--delete-config``, ``--all``), the same checks and messages and the same output, through
AlterUserScramCredentials / DescribeUserScramCredentials, AlterClientQuotas /
DescribeClientQuotas, and DescribeConfigs / IncrementalAlterConfigs on the BROKER resource
(named with a broker's id, or "" for the cluster-wide default). ``--command-config`` takes
Kafka client properties (TLS, SASL) for a secured listener.

SCRAM passwords are salted and hashed here, as Kafka's admin client does (a random salt,
``Hi(password, salt, iterations)``): the password itself never goes on the wire.
Topic configs stay with ``krait topics`` (IncrementalAlterConfigs).
"""

from __future__ import annotations

import argparse
import math
import re
from collections.abc import Sequence
from decimal import Decimal
from typing import Any, TextIO

from protocol.apis import ApiKey
from protocol.client_errors import check
from protocol.errors import ErrorCode, KafkaError

from ..security.client_security import read_client_properties
from .admin_client import RESOURCE_BROKER, AdminClient
from .command import Parser, UsageError, connect_admin, run
from .security_admin import SCRAM_MECHANISMS, ScramCredentialInfo

__all__ = [
    "DEFAULT_SCRAM_ITERATIONS",
    "QUOTA_KEYS",
    "entity_description",
    "java_double",
    "main",
    "parse_add_config",
    "parse_scram_credential",
]

USERS, CLIENTS, BROKERS = "users", "clients", "brokers"
#: DescribeConfigs' ConfigSource ids, as ConfigEntry.ConfigSource names them
_SOURCES = {0: "UNKNOWN", 1: "DYNAMIC_TOPIC_CONFIG", 2: "DYNAMIC_BROKER_CONFIG", 3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
            4: "STATIC_BROKER_CONFIG", 5: "DEFAULT_CONFIG", 6: "DYNAMIC_BROKER_LOGGER_CONFIG",
            7: "CLIENT_METRICS_CONFIG", 8: "GROUP_CONFIG"}
_DYNAMIC_BROKER_CONFIG, _DYNAMIC_DEFAULT_BROKER_CONFIG = 2, 3
#: ConfigType -> ClientQuotaEntity type
_QUOTA_ENTITY = {USERS: "user", CLIENTS: "client-id"}
#: QuotaConfig.isClientOrUserQuotaConfig
QUOTA_KEYS = ("producer_byte_rate", "consumer_byte_rate", "request_percentage", "controller_mutation_rate")
SCRAM_NAMES = tuple(name for name, _, _ in SCRAM_MECHANISMS.values())
#: ConfigCommand.DefaultScramIterations
DEFAULT_SCRAM_ITERATIONS = 4096
_MIN_ITERATIONS = {name: minimum for name, _, minimum in SCRAM_MECHANISMS.values()}

# a comma or '=' outside square brackets (ConfigCommand.parseConfigsToBeAdded)
_OUTSIDE_BRACKETS = r"(?=[^\]]*(?:\[|$))"


def parse_add_config(text: str) -> dict[str, str]:
    """``--add-config``: ``k1=v1,k2=[a,b],k3=v3``; brackets group values holding commas
    and are dropped from the value."""
    out: dict[str, str] = {}
    for item in re.split("," + _OUTSIDE_BRACKETS, text):
        pair = re.split(r"\s*=\s*" + _OUTSIDE_BRACKETS, item)
        if len(pair) != 2:
            raise UsageError('Invalid entity config: all configs to be added must be in the format "key=val".')
        out[pair[0].strip()] = re.sub(r"\[?\]?", "", pair[1]).strip()
    _validate_keys(out)
    return out


def _validate_keys(props: dict[str, str]) -> None:
    for key in props:
        if not re.fullmatch(r"[a-zA-Z0-9._-]*", key):
            raise UsageError(f"Invalid character found for config key: {key}")


def parse_scram_credential(mechanism: str, value: str) -> tuple[int, str]:
    """``[iterations=N,]password=P`` -> (iterations, password); Kafka's default and minimum
    iterations (4096)."""
    m = re.fullmatch(r"(?:iterations=(-?[0-9]*),)?password=(.*)", value, re.S)
    if m is None:
        # never echo the value: it holds the password
        raise UsageError(f"Invalid credential property {mechanism}=<hidden> (expected [iterations=N,]password=P)")
    raw, password = m.group(1), m.group(2)
    try:
        iterations = int(raw) if raw not in (None, "", "-1") else DEFAULT_SCRAM_ITERATIONS
    except ValueError:
        raise UsageError(f"Invalid iterations for {mechanism}: {raw}") from None
    if iterations < _MIN_ITERATIONS[mechanism]:
        raise UsageError(f"Iterations {iterations} is less than the minimum {_MIN_ITERATIONS[mechanism]} required "
                         f"for {mechanism}")
    return iterations, password


def java_double(value: float) -> str:
    """Java's Double.toString, as kafka-configs.sh prints quota values: shortest digits,
    plain between 10^-3 and 10^7 (``1024.0``), else ``1.0E7``."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0.0" if math.copysign(1, value) < 0 else "0.0"
    sign, digits, exp = Decimal(repr(float(value))).as_tuple()
    ds = "".join(map(str, digits)).rstrip("0") or "0"
    point = len(digits) + int(exp)  # the decimal point sits after this many digits
    minus = "-" if sign else ""
    if 1e-3 <= abs(value) < 1e7:
        if point <= 0:
            return f"{minus}0.{'0' * -point}{ds}"
        whole, frac = ds[:point].ljust(point, "0"), ds[point:]
        return f"{minus}{whole}.{frac or '0'}"
    return f"{minus}{ds[0]}.{ds[1:] or '0'}E{point - 1}"


def entity_description(entity: dict[str, str | None]) -> str:
    """``user-principal 'alice', client-id 'app'`` / ``the default user-principal``."""
    parts = []
    for etype, label in (("user", "user-principal"), ("client-id", "client-id"), ("ip", "ip")):
        if etype in entity:
            name = entity[etype]
            parts.append(f"{label} '{name}'" if name is not None else f"the default {label}")
    return ", ".join(parts)


# --- options -----------------------------------------------------------------------------


class _OrderedEntity(argparse.Action):
    """--entity-name / --entity-default keep their order (an entity name pairs with the
    entity type in the same position); the default is the empty name, as in Kafka."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        names = list(getattr(namespace, "entity_names", None) or [])
        names.append("" if option_string == "--entity-default" else str(values))
        namespace.entity_names = names


def _parser() -> argparse.ArgumentParser:
    p = Parser(prog="krait configs", description="Describe and alter SCRAM credentials and quotas of users and "
               "clients, and dynamic broker configs (like kafka-configs.sh --entity-type users|clients|brokers).")
    p.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT", help="broker(s) to connect to")
    p.add_argument("--command-config", metavar="FILE",
                   help="client properties (security.protocol, ssl.*, sasl.*) for the admin connection")
    p.add_argument("--alter", action="store_true", help="alter the configuration of the entity")
    p.add_argument("--describe", action="store_true", help="list configs of the given entity")
    p.add_argument("--entity-type", action="append", default=[],
                   help="users or clients (both: a user's client), or brokers")
    p.add_argument("--entity-name", action=_OrderedEntity, dest="entity_names",
                   help="user principal name, client id or broker id")
    p.add_argument("--entity-default", action=_OrderedEntity, dest="entity_names", nargs=0,
                   help="the default entity of the type (all users / all clients / the cluster-wide broker default)")
    p.add_argument("--all", action="store_true",
                   help="with --describe of a broker: every config in force, not only the dynamic ones")
    p.add_argument("--user", help="the user's principal name")
    p.add_argument("--client", help="the client's id")
    p.add_argument("--user-defaults", action="store_true", help="the config defaults for all users")
    p.add_argument("--client-defaults", action="store_true", help="the config defaults for all clients")
    p.add_argument("--add-config", help="k1=v1,k2=[v1,v2],... e.g. 'SCRAM-SHA-256=[iterations=8192,password=secret]' "
                   "or 'producer_byte_rate=1024,consumer_byte_rate=2048'")
    p.add_argument("--add-config-file", help="properties file with the configs to add")
    p.add_argument("--delete-config", action="append", default=[], help="config keys to remove 'k1,k2'")
    p.add_argument("--force", action="store_true", help="suppress console prompts")
    p.add_argument("--timeout", type=float, default=30.0, help="request timeout in seconds (default 30)")
    p.set_defaults(entity_names=[])
    return p


def entity_types(args: argparse.Namespace) -> list[str]:
    """ConfigCommandOptions.entityTypes: --entity-type values, then the specific flags."""
    return [*args.entity_type, *([CLIENTS] if args.client is not None else []),
            *([USERS] if args.user is not None else []),
            *([CLIENTS] if args.client_defaults else []), *([USERS] if args.user_defaults else [])]


def entity_names(args: argparse.Namespace) -> list[str]:
    """ConfigCommandOptions.entityNames ("" is the default entity), in entityTypes' order."""
    return [*args.entity_names, *([args.client] if args.client is not None else []),
            *([args.user] if args.user is not None else []),
            *([""] if args.client_defaults else []), *([""] if args.user_defaults else [])]


def check_args(args: argparse.Namespace) -> None:
    """ConfigCommandOptions.checkArgs (the --bootstrap-server part), Kafka's messages."""
    if int(args.alter) + int(args.describe) != 1:
        raise UsageError("Command must include exactly one action: --describe, --alter")
    if args.describe and (args.add_config is not None or args.add_config_file or args.delete_config):
        option = "add-config" if args.add_config is not None else (
            "add-config-file" if args.add_config_file else "delete-config")
        raise UsageError(f'Option "[describe]" can\'t be used with option "[{option}]"')
    types = entity_types(args)
    dupes = sorted({t for t in types if types.count(t) > 1})
    if dupes:
        raise UsageError(f"Duplicate entity type(s) specified: {','.join(dupes)}")
    for t in types:
        if t not in (USERS, CLIENTS, BROKERS):
            raise UsageError(f"Invalid entity type {t}, the entity type must be one of users, clients, brokers with a "
                             "--bootstrap-server argument (topic configs: krait topics --alter --config)")
    if not types:
        raise UsageError("At least one entity type must be specified")
    if len(types) > 1 and set(types) != {USERS, CLIENTS}:
        raise UsageError("Only 'users' and 'clients' entity types may be specified together")
    if args.all and args.alter:
        raise UsageError('Option "[all]" can\'t be used with option "[alter]"')
    specific = (args.user is not None or args.client is not None or args.user_defaults or args.client_defaults)
    if (args.entity_names or args.entity_type) and specific:
        raise UsageError("--entity-{type,name,default} should not be used in conjunction with specific entity flags")
    names = entity_names(args)
    if args.alter:
        if not any(n for n in names) and "" not in names:
            raise UsageError("An entity-name or default entity must be specified with --alter of users, clients, "
                             "brokers or ips")
        if args.add_config is not None and args.add_config_file:
            raise UsageError("Only one of --add-config or --add-config-file must be specified")
        if args.add_config is None and not args.add_config_file and not args.delete_config:
            raise UsageError("At least one of --add-config, --add-config-file, or --delete-config must be specified "
                             "with --alter")
        if len(types) != len(names):
            raise UsageError("An entity name must be specified for every entity type")


def _configs_to_add(args: argparse.Namespace) -> dict[str, str]:
    out: dict[str, str] = {}
    if args.add_config_file:
        out.update(read_client_properties(args.add_config_file))
        _validate_keys(out)
    if args.add_config is not None:
        out.update(parse_add_config(args.add_config))
    return out


def _configs_to_delete(args: argparse.Namespace) -> list[str]:
    return [k.strip() for item in args.delete_config for k in item.split(",") if k.strip()]


# --- the command -------------------------------------------------------------------------


def _quota_components(types: Sequence[str], names: Sequence[str]) -> list[tuple[str, int, str | None]]:
    """ClientQuotaFilterComponent per type: exact name (0), the default (1), any name (2)."""
    if len(names) > len(types):
        raise UsageError("More entity names specified than entity types")
    out = []
    for i, t in enumerate(types):
        name = names[i] if i < len(names) else None
        if name is None:
            out.append((_QUOTA_ENTITY[t], 2, None))
        elif name == "":
            out.append((_QUOTA_ENTITY[t], 1, None))
        else:
            out.append((_QUOTA_ENTITY[t], 0, name))
    return out


def _broker_name(name: str) -> str:
    """ConfigCommand.validateBrokerId ("" is the cluster-wide default)."""
    if name:
        try:
            int(name)
        except ValueError:
            raise UsageError(f"The entity name for brokers must be a valid integer broker id, found: {name}") from None
    return name


def _broker_configs(admin: AdminClient, name: str, describe_all: bool) -> list[Any]:
    """ConfigCommand.getResourceConfig: a broker resource's entries with their synonyms, only
    the dynamic ones of that level unless ``describe_all``, by name."""
    conn = admin.node(int(name)) if name else admin.bootstrap
    resp = conn.request(ApiKey.DESCRIBE_CONFIGS, resources=[dict(
        resource_type=RESOURCE_BROKER, resource_name=name, configuration_keys=None)],
        include_synonyms=True, include_documentation=False)
    result = resp.results[0]
    check(result.error_code, result.error_message)
    wanted = _DYNAMIC_BROKER_CONFIG if name else _DYNAMIC_DEFAULT_BROKER_CONFIG
    return sorted((c for c in result.configs if describe_all or c.config_source == wanted), key=lambda c: c.name)


def _java(value: object) -> str:
    return "null" if value is None else "true" if value is True else "false" if value is False else str(value)


def _describe_brokers(admin: AdminClient, args: argparse.Namespace, out: TextIO) -> None:
    names = entity_names(args)
    if len(names) > 1:
        raise UsageError("More entity names specified than entity types")
    # without a name: every broker of the cluster, then the cluster-wide default
    for name in names or [*(str(n) for n in admin.node_ids()), ""]:
        entries = _broker_configs(admin, _broker_name(name), args.all)
        if name:
            print(f"{'All' if args.all else 'Dynamic'} configs for broker {name} are:", file=out)
        else:
            print("Default configs for brokers in the cluster are:", file=out)
        for c in entries:
            synonyms = ", ".join(f"{_SOURCES.get(s.source, 'UNKNOWN')}:{s.name}={_java(s.value)}" for s in c.synonyms)
            print(f"  {c.name}={_java(c.value)} sensitive={_java(c.is_sensitive)} synonyms={{{synonyms}}}", file=out)


def _alter_brokers(admin: AdminClient, args: argparse.Namespace, out: TextIO) -> None:
    names = entity_names(args)
    if len(names) > 1:
        raise UsageError("More entity names specified than entity types")
    name = _broker_name(names[0])
    to_add, to_delete = _configs_to_add(args), _configs_to_delete(args)
    current = {c.name for c in _broker_configs(admin, name, describe_all=False)}
    invalid = [k for k in to_delete if k not in current]
    if invalid:
        raise KafkaError(ErrorCode.invalid_config, f"Invalid config(s): {','.join(invalid)}")
    admin.incremental_alter_configs(RESOURCE_BROKER, name, to_add, to_delete)
    if name:
        print(f"Completed updating config for broker {name}.", file=out)
    else:
        print("Completed updating default config for brokers in the cluster.", file=out)


def _alter(admin: AdminClient, args: argparse.Namespace, out: TextIO) -> None:
    types, names = entity_types(args), entity_names(args)
    to_add, to_delete = _configs_to_add(args), _configs_to_delete(args)
    quota_add = [k for k in to_add if k in QUOTA_KEYS]
    scram_add = {k: v for k, v in to_add.items() if k in SCRAM_NAMES}
    unknown_add = [k for k in to_add if k not in QUOTA_KEYS and k not in SCRAM_NAMES]
    quota_del = [k for k in to_delete if k in QUOTA_KEYS]
    scram_del = [k for k in to_delete if k in SCRAM_NAMES]
    unknown_del = [k for k in to_delete if k not in QUOTA_KEYS and k not in SCRAM_NAMES]
    if types[0] == CLIENTS or len(types) == 2:
        if unknown_add or scram_add:
            raise UsageError(f"Only quota configs can be added for 'clients' using --bootstrap-server. Unexpected "
                             f"config names: {', '.join([*unknown_add, *scram_add])}")
        if unknown_del or scram_del:
            raise UsageError(f"Only quota configs can be deleted for 'clients' using --bootstrap-server. Unexpected "
                             f"config names: {', '.join([*unknown_del, *scram_del])}")
    else:
        if unknown_add:
            raise UsageError("Only quota and SCRAM credential configs can be added for 'users' using "
                             f"--bootstrap-server. Unexpected config names: {', '.join(unknown_add)}")
        if unknown_del:
            raise UsageError("Only quota and SCRAM credential configs can be deleted for 'users' using "
                             f"--bootstrap-server. Unexpected config names: {', '.join(unknown_del)}")
        if scram_add or scram_del:
            if "" in names:
                raise UsageError("The use of --entity-default or --user-defaults is not allowed with User SCRAM "
                                 "Credentials using --bootstrap-server.")
            if quota_add or quota_del:
                raise UsageError("Cannot alter both quota and SCRAM credential configs simultaneously for 'users' "
                                 "using --bootstrap-server.")
    if quota_add or quota_del:
        current = admin.security_admin.describe_client_quotas(_quota_components(types, names), strict=True)
        existing = current[0][1] if current else {}
        invalid = [k for k in to_delete if k not in existing]
        if invalid:
            raise KafkaError(ErrorCode.invalid_config, f"Invalid config(s): {','.join(invalid)}")
        ops: dict[str, float | None] = {}
        for key, value in to_add.items():
            try:
                ops[key] = float(value)
            except ValueError:
                raise UsageError(f"Cannot parse quota configuration value for {key}: {value}") from None
        for key in to_delete:
            ops[key] = None
        entity = {_QUOTA_ENTITY[t]: (n or None) for t, n in zip(types, names, strict=True)}
        admin.security_admin.alter_client_quotas(entity, ops)
    else:
        user = names[0]
        upserts = [(user, mech, *parse_scram_credential(mech, value)) for mech, value in scram_add.items()]
        results = admin.security_admin.alter_user_scram_credentials(upserts, [(user, mech) for mech in scram_del])
        failed = next((e for e in results.values() if e is not None), None)
        if failed is not None:
            raise failed
    if names[0]:
        print(f"Completed updating config for {types[0][:-1]} {names[0]}.", file=out)
    else:
        print(f"Completed updating default config for {types[0]} in the cluster.", file=out)


def _describe(admin: AdminClient, args: argparse.Namespace, out: TextIO) -> None:
    types, names = entity_types(args), entity_names(args)
    for entity, values in admin.security_admin.describe_client_quotas(_quota_components(types, names), strict=True):
        shown = ", ".join(f"{k}={java_double(v)}" for k, v in values.items())
        print(f"Quota configs for {entity_description(entity)} are {shown}", file=out)
    # SCRAM credentials: only when describing users alone and not the default user
    if CLIENTS in types or "" in names:
        return
    described = admin.security_admin.describe_user_scram_credentials(list(names) or None)
    for user, result in described.items():
        if isinstance(result, KafkaError):
            if result.error_code == ErrorCode.resource_not_found:
                continue  # a user without credentials (DescribeUserScramCredentialsResult.users)
            print(f"Error retrieving SCRAM credential configs for user-principal '{user}': "
                  f"{_exception_name(result)}: {result.message}", file=out)
            continue
        text = ", ".join(f"{c.mechanism}=iterations={c.iterations}" for c in _sorted(result))
        print(f"SCRAM credential configs for user-principal '{user}' are {text}", file=out)


def _sorted(infos: list[ScramCredentialInfo]) -> list[ScramCredentialInfo]:
    return sorted(infos, key=lambda c: c.mechanism)


def _exception_name(exc: KafkaError) -> str:
    """The Java exception class name Kafka prints (RESOURCE_NOT_FOUND -> ResourceNotFoundException)."""
    try:
        name = ErrorCode(exc.error_code).name
    except ValueError:
        return "UnknownServerException"
    return "".join(p.capitalize() for p in name.split("_")) + "Exception"


def _body(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    check_args(args)
    brokers = entity_types(args) == [BROKERS]
    with connect_admin(args) as admin:
        if args.alter:
            (_alter_brokers if brokers else _alter)(admin, args, out)
        else:
            (_describe_brokers if brokers else _describe)(admin, args, out)
    return 0


def main(argv: list[str]) -> int:
    """``krait configs ...``; returns the exit code."""
    return run("krait configs", "", _parser, _body, argv)
