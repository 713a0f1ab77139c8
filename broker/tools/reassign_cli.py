"""``krait reassign-partitions``: move partitions between brokers, like Kafka's
``kafka-reassign-partitions.sh`` (ReassignPartitionsCommand): the same actions, options,
JSON files and printed messages, through AlterPartitionReassignments and
ListPartitionReassignments sent to the controller (found through Metadata) and Metadata.

``--generate`` proposes an assignment (Kafka's round-robin AdminUtils assignment over
``--broker-list``), ``--execute`` starts one (printing the current assignment to keep for a
rollback), ``--verify`` reports each partition's progress, ``--list`` the ongoing ones and
``--cancel`` cancels them (null replicas). ``log_dirs`` other than ``"any"`` are moved with
AlterReplicaLogDirs once the replica exists, as Kafka does. Krait does not throttle
replication, so ``--throttle`` and ``--replica-alter-log-dirs-throttle`` are refused; like
Kafka, ``--verify`` and ``--cancel`` still clear the throttle configs (unless
``--preserve-throttles``), which other tools may have set.

Errors go to stderr as one line, exit code 1; as in Kafka, ``--verify`` exits 0 whether
or not the reassignments are complete (read its output).
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Iterable
from typing import Any, TextIO

from protocol import apis
from protocol.apis import ApiKey
from protocol.client_errors import ClientError, check, describe, kafka_error
from protocol.errors import ErrorCode, KafkaError

from ..cluster.election import assign_replicas
from .admin_client import RESOURCE_BROKER, RESOURCE_TOPIC, AdminClient
from .command import CommandError, Parser, UsageError, run
from .wire import WireClient

__all__ = ["ReassignmentClient", "format_assignment_json", "format_ongoing", "format_reassignment_states", "main",
           "parse_reassignment_json", "parse_topics_json"]

TP = tuple[str, int]
#: a replica of a partition on one broker: (topic, partition, broker id)
TPR = tuple[str, int, int]

ANY_LOG_DIR = "any"
BROKER_LEVEL_THROTTLES = ("leader.replication.throttled.rate", "follower.replication.throttled.rate",
                          "replica.alter.log.dirs.io.max.bytes.per.second")
TOPIC_LEVEL_THROTTLES = ("leader.replication.throttled.replicas", "follower.replication.throttled.replicas")
CANNOT_EXECUTE_BECAUSE_OF_EXISTING = (
    "Cannot execute because there is an existing partition assignment.  Use --additional to override this and "
    "create a new partition assignment in addition to the existing one. The --additional flag can also be used "
    "to change the throttle by resubmitting the current reassignment.")
_ACTIONS = ("generate", "execute", "verify", "cancel", "list")
#: the options each action takes besides --bootstrap-server (Kafka's permitted + required args)
_PERMITTED = {"generate": {"topics_to_move_json_file", "broker_list", "disable_rack_aware"},
              "execute": {"reassignment_json_file", "additional", "timeout"},
              "verify": {"reassignment_json_file", "preserve_throttles"},
              "cancel": {"reassignment_json_file", "preserve_throttles", "timeout"}, "list": set()}
_REQUIRED = {"generate": ("topics_to_move_json_file", "broker_list"), "execute": ("reassignment_json_file",),
             "verify": ("reassignment_json_file",), "cancel": ("reassignment_json_file",), "list": ()}


class TerseError(CommandError):
    """Printed as its message alone (Kafka's TerseException); other errors get ``Error: ``."""


def tp_str(tp: TP) -> str:
    return f"{tp[0]}-{tp[1]}"  # Kafka's TopicPartition.toString


def _ints(xs: Iterable[int]) -> str:
    return ",".join(map(str, xs))


def _java_list(xs: Iterable[Any]) -> str:
    return "[" + ", ".join(map(str, xs)) + "]"


# --- the JSON files ----------------------------------------------------------------------------


def _load_json(text: str) -> dict:
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise CommandError(f"The input string is not a valid JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise CommandError(f"Expected JSON object, received {json.dumps(doc)}")
    version = doc.get("version", 1)
    if version != 1 or isinstance(version, bool):
        raise CommandError(f"Not supported version field value {json.dumps(version)}")
    return doc


def _field(obj: Any, name: str, kind: type, label: str) -> Any:
    if not isinstance(obj, dict):
        raise CommandError(f"Expected JSON object, received {json.dumps(obj)}")
    if name not in obj:
        raise CommandError(f"No such field exists: `{name}`")
    value = obj[name]
    if not isinstance(value, kind) or isinstance(value, bool):
        raise CommandError(f"Expected `{label}` value, received {json.dumps(value)}")
    return value


def _list_of(value: Any, kind: type, label: str) -> list:
    if not isinstance(value, list):
        raise CommandError(f"Expected JSON array, received {json.dumps(value)}")
    for v in value:
        if not isinstance(v, kind) or isinstance(v, bool):
            raise CommandError(f"Expected `{label}` value, received {json.dumps(v)}")
    return value


def parse_topics_json(text: str) -> list[str]:
    """The topics of a --topics-to-move-json-file: ``{"version":1,"topics":[{"topic":"t"}]}``."""
    doc = _load_json(text)
    items = _list_of(doc.get("topics", []), dict, "Object")
    return [_field(item, "topic", str, "String") for item in items]


def parse_reassignment_json(text: str) -> tuple[list[tuple[TP, list[int]]], dict[TPR, str]]:
    """A --reassignment-json-file: the (partition, target replicas) in file order (duplicates
    kept, to be refused by --execute) and the log dir of each replica not placed ``any``."""
    doc = _load_json(text)
    parts: list[tuple[TP, list[int]]] = []
    log_dirs: dict[TPR, str] = {}
    for item in _list_of(doc.get("partitions", []), dict, "Object"):
        topic = _field(item, "topic", str, "String")
        partition = _field(item, "partition", int, "Int")
        replicas = _list_of(_field(item, "replicas", list, "Array"), int, "Int")
        dirs = _list_of(item["log_dirs"], str, "String") if "log_dirs" in item else [ANY_LOG_DIR] * len(replicas)
        if len(dirs) != len(replicas):
            raise CommandError(f"Size of replicas list {_java_list(replicas)} is different from size of log dirs "
                               f"list {_java_list(dirs)} for partition {topic}-{partition}")
        parts.append(((topic, partition), replicas))
        for broker, d in zip(replicas, dirs, strict=True):
            if d != ANY_LOG_DIR:
                log_dirs[(topic, partition, broker)] = d
    return parts, log_dirs


def _by_topic(items: Iterable[tuple[TP, Any]]) -> dict[str, list[Any]]:
    """(topic, partition) -> value pairs grouped by topic, in partition order."""
    out: dict[str, list[Any]] = {}
    for (t, _), v in sorted(items, key=lambda item: item[0]):
        out.setdefault(t, []).append(v)
    return out


def _duplicates(xs: Iterable[Any]) -> list[Any]:
    seen: set[Any] = set()
    dup: list[Any] = []
    for x in xs:
        if x in seen and x not in dup:
            dup.append(x)
        seen.add(x)
    return dup


def check_execute_json(parts: list[tuple[TP, list[int]]]) -> dict[TP, list[int]]:
    """ReassignPartitionsCommand.parseExecuteAssignmentArgs' checks."""
    if not parts:
        raise CommandError("Partition reassignment list cannot be empty")
    if any(not replicas for _, replicas in parts):
        raise CommandError("Partition replica list cannot be empty")
    dup = _duplicates(tp for tp, _ in parts)
    if dup:
        raise CommandError("Partition reassignment contains duplicate topic partitions: "
                           + ",".join(tp_str(tp) for tp in dup))
    dup_replicas = [(tp, d) for tp, replicas in parts if (d := _duplicates(replicas))]
    if dup_replicas:
        raise CommandError("Partition replica lists may not contain duplicate entries: " + ". ".join(
            f"{tp_str(tp)} contains multiple entries for {_ints(d)}" for tp, d in dup_replicas))
    return dict(parts)


def format_assignment_json(assignment: dict[TP, list[int]], log_dirs: dict[TPR, str] | None = None) -> str:
    """Kafka's reassignment JSON (formatAsReassignmentJson), partitions sorted."""
    log_dirs = log_dirs or {}
    partitions = [{"topic": t, "partition": p, "replicas": list(replicas),
                   "log_dirs": [log_dirs.get((t, p, r), ANY_LOG_DIR) for r in replicas]}
                  for (t, p), replicas in sorted(assignment.items())]
    return json.dumps({"version": 1, "partitions": partitions}, separators=(",", ":"))


# --- talking to the cluster --------------------------------------------------------------------


class ReassignmentClient:
    """AlterPartitionReassignments and ListPartitionReassignments at the controller, over an
    :class:`AdminClient` (which finds the controller through Metadata); NOT_CONTROLLER
    (the controller moved) is retried with fresh metadata, as Kafka's admin client does."""

    def __init__(self, admin: AdminClient, timeout: float) -> None:
        self.admin, self.timeout = admin, timeout
        self._checked: set[tuple[int, int]] = set()

    def _to_controller(self, api_key: int, **fields: Any) -> Any:
        deadline = time.monotonic() + self.timeout
        while True:
            self.admin.metadata([])  # where the controller is now
            if self.admin.controller_id < 0:
                resp = None
            else:
                conn = self.admin.controller()
                self._check_supported(conn, api_key)
                resp = conn.request(api_key, 0, timeout=int(self.timeout * 1000), **fields)
                if resp.error_code != ErrorCode.not_controller:
                    check(resp.error_code, resp.error_message)
                    return resp
            if time.monotonic() >= deadline:
                if resp is None:
                    raise KafkaError(ErrorCode.not_controller, "The cluster has no active controller.")
                check(resp.error_code, resp.error_message)
            time.sleep(0.2)

    def _check_supported(self, conn: WireClient, api_key: int) -> None:
        # without this, a broker that does not serve the API closes the connection
        if (id(conn), api_key) not in self._checked:
            resp = conn.request(ApiKey.API_VERSIONS, conn.version(ApiKey.API_VERSIONS))
            if not any(k.api_key == api_key and k.min_version <= 0 <= k.max_version for k in resp.api_keys):
                raise KafkaError(ErrorCode.unsupported_version, f"The broker at {conn.host}:{conn.port} does not "
                                 f"support partition reassignment ({apis.api_name(api_key)} v0).")
            self._checked.add((id(conn), api_key))

    def list(self, partitions: Iterable[TP] | None = None) -> dict[TP, tuple[list[int], list[int], list[int]]]:
        """Ongoing reassignments: (topic, partition) -> (replicas, adding, removing)."""
        topics = None if partitions is None else [
            dict(name=t, partition_indexes=ps) for t, ps in _by_topic((tp, tp[1]) for tp in set(partitions)).items()]
        resp = self._to_controller(ApiKey.LIST_PARTITION_REASSIGNMENTS, topics=topics)
        return {(str(t.name), int(p.partition_index)): ([int(r) for r in p.replicas],
                                                         [int(r) for r in p.adding_replicas],
                                                         [int(r) for r in p.removing_replicas])
                for t in resp.topics for p in t.partitions}

    def alter(self, targets: dict[TP, list[int] | None]) -> dict[TP, KafkaError]:
        """Start (replicas) or cancel (None) reassignments; the partitions that failed."""
        by_topic = _by_topic((tp, dict(partition_index=tp[1], replicas=r)) for tp, r in targets.items())
        resp = self._to_controller(ApiKey.ALTER_PARTITION_REASSIGNMENTS,
                                   topics=[dict(name=t, partitions=ps) for t, ps in by_topic.items()])
        answers = {(str(t.name), int(p.partition_index)): p for t in resp.responses for p in t.partitions}
        errors = {tp: kafka_error(p.error_code, p.error_message) for tp, p in answers.items() if p.error_code}
        errors.update((tp, ClientError("The controller did not answer for this partition."))
                      for tp in set(targets) - set(answers))
        return errors


def current_assignment(admin: AdminClient, topics: Iterable[str]) -> dict[TP, list[int]]:
    """The replicas of every partition of ``topics`` (Metadata); an unknown topic is an error."""
    out: dict[TP, list[int]] = {}
    names = sorted(set(topics))
    if not names:
        return out
    for t in admin.metadata(names):
        if t.error_code == ErrorCode.unknown_topic_or_partition:
            raise KafkaError(ErrorCode.unknown_topic_or_partition, f"Topic {t.name} not found.")
        check(t.error_code, context=f"topic {t.name}")
        for p in t.partitions:
            out[(t.name, p.partition)] = list(p.replicas)
    return out


def _replicas_of(admin: AdminClient, partitions: Iterable[TP]) -> dict[TP, list[int]]:
    wanted = set(partitions)
    found = {tp: r for tp, r in current_assignment(admin, {t for t, _ in wanted}).items() if tp in wanted}
    missing = wanted - set(found)
    if missing:
        raise KafkaError(ErrorCode.unknown_topic_or_partition,
                         "Unable to find partition: " + ", ".join(tp_str(tp) for tp in sorted(missing)))
    return found


# --- log dirs ---------------------------------------------------------------------------------


def _log_dir_states(admin: AdminClient, targets: dict[TPR, str]) -> dict[TPR, tuple[str, str | None, str | None]]:
    """(target dir, current dir, future dir) of each replica (DescribeLogDirs per broker)."""
    out: dict[TPR, tuple[str, str | None, str | None]] = {}
    for broker in sorted({b for _, _, b in targets}):
        mine = {(t, p): d for (t, p, b), d in targets.items() if b == broker}
        dirs = admin.describe_log_dirs(broker, _by_topic((tp, tp[1]) for tp in mine))
        for (t, p), target in mine.items():
            found = {info.is_future: d.path for d in dirs if not d.error_code and (info := d.replicas.get((t, p)))}
            out[(t, p, broker)] = (target, found.get(False), found.get(True))
    return out


def _replica_str(r: TPR) -> str:
    return f"{r[0]}-{r[1]}-{r[2]}"  # Kafka's TopicPartitionReplica.toString


def _replica_order(r: TPR) -> tuple[int, str, int]:
    return r[2], r[0], r[1]  # Kafka's compareTopicPartitionReplicas


def format_move_states(states: dict[TPR, tuple[str, str | None, str | None]]) -> list[str]:
    """Kafka's replicaMoveStatesToString lines (sorted by broker, topic, partition)."""
    lines = []
    for r in sorted(states, key=_replica_order):
        target, current, future = states[r]
        name = f"{r[0]}-{r[1]}"
        if current is None:
            lines.append(f"Partition {name} is not found in any live log dir on broker {r[2]}. "
                         "There is likely an offline log directory on the broker.")
        elif future is None and current == target:
            lines.append(f"Reassignment of replica {_replica_str(r)} completed successfully.")
        elif future is None:
            lines.append(f"Partition {name} on broker {r[2]} is not being moved from log dir {current} to {target}.")
        elif future == target:
            lines.append(f"Reassignment of replica {_replica_str(r)} is still in progress.")
        else:
            lines.append(f"Partition {name} on broker {r[2]} is being moved to log dir {future} instead of {target}.")
    return lines


def execute_moves(admin: AdminClient, moves: dict[TPR, str], timeout_ms: int, out: TextIO) -> None:
    """AlterReplicaLogDirs until each replica's move has started (REPLICA_NOT_AVAILABLE: the
    replica is not on its new broker yet, try again), as Kafka's executeMoves."""
    pending = dict(moves)
    deadline = time.monotonic() + timeout_ms / 1000
    while pending:
        started = []
        for broker in sorted({b for _, _, b in pending}):
            mine = {(t, p): d for (t, p, b), d in pending.items() if b == broker}
            for (t, p), err in admin.alter_replica_log_dirs(broker, mine).items():
                if err is None:
                    started.append((t, p, broker))
                elif err.error_code != ErrorCode.replica_not_available:
                    raise CommandError(f"Failed to alter dir for {_replica_str((t, p, broker))}: {describe(err)}")
        for r in sorted(started, key=_replica_order):
            print(f"Successfully started moving log directory to {pending[r]} for replica {r[0]}-{r[1]} "
                  f"with broker {r[2]} ", file=out)
            del pending[r]
        if pending and time.monotonic() >= deadline:
            raise TerseError("Timed out before log directory move{} could be started for: {}".format(
                "" if len(pending) == 1 else "s", ",".join(map(_replica_str, sorted(pending, key=_replica_order)))))
        if pending:
            time.sleep(0.1)


# --- the actions ------------------------------------------------------------------------------


def parse_generate_args(topics_json: str, broker_list: str) -> tuple[list[int], list[str]]:
    """The brokers and topics of --generate (Kafka's parseGenerateAssignmentArgs)."""
    try:
        brokers = [int(b) for b in broker_list.split(",")]
    except ValueError:
        raise UsageError(f"--broker-list expects broker ids such as 0,1,2, got {broker_list!r}") from None
    dup = _duplicates(brokers)
    if dup:
        raise CommandError(f"Broker list contains duplicate entries: {_java_list(dup)}")
    topics = parse_topics_json(topics_json)
    dup_topics = _duplicates(topics)
    if dup_topics:
        raise CommandError(f"List of topics to reassign contains duplicate entries: {_java_list(dup_topics)}")
    return brokers, topics


def generate(admin: AdminClient, topics_json: str, broker_list: str, out: TextIO) -> dict[TP, list[int]]:
    brokers, topics = parse_generate_args(topics_json, broker_list)
    current = current_assignment(admin, topics)
    live = set(admin.node_ids())
    usable = sorted(b for b in set(brokers) if b in live)  # Kafka leaves unknown brokers out
    proposed: dict[TP, list[int]] = {}
    for topic in sorted({t for t, _ in current}):
        parts = sorted(p for t, p in current if t == topic)
        rf = len(current[(topic, parts[0])])
        for p, replicas in assign_replicas(usable, len(parts), rf).items():
            proposed[(topic, p)] = list(replicas)
    print(f"Current partition replica assignment\n{format_assignment_json(current)}\n", file=out)
    print(f"Proposed partition reassignment configuration\n{format_assignment_json(proposed)}", file=out)
    return proposed


def execute(admin: AdminClient, client: ReassignmentClient, text: str, additional: bool, timeout_ms: int,
            out: TextIO) -> None:
    parts, log_dirs = parse_reassignment_json(text)
    proposed = check_execute_json(parts)
    if not additional and client.list():
        raise TerseError(CANNOT_EXECUTE_BECAUSE_OF_EXISTING)
    live = set(admin.node_ids())
    unknown = [b for replicas in proposed.values() for b in replicas if b not in live]
    if unknown:
        raise CommandError(f"Unknown broker id {unknown[0]}")
    current = _replicas_of(admin, proposed)
    print(f"Current partition replica assignment\n\n{format_assignment_json(current)}\n\n"
          "Save this to use as the --reassignment-json-file option during rollback", file=out)
    errors = client.alter(dict(proposed))
    if errors:
        raise TerseError("Error reassigning partition(s):\n" + "\n".join(
            f"{tp_str(tp)}: {describe(errors[tp])}" for tp in sorted(errors)))
    print("Successfully started partition reassignment{} for {}".format(
        "" if len(proposed) == 1 else "s", ",".join(tp_str(tp) for tp in sorted(proposed))), file=out)
    if log_dirs:
        execute_moves(admin, log_dirs, timeout_ms, out)


def format_reassignment_states(states: dict[TP, tuple[list[int], list[int], bool]]) -> list[str]:
    """Kafka's partitionReassignmentStatesToString: (current replicas, target, done) per partition."""
    lines = ["Status of partition reassignment:"]
    for tp in sorted(states):
        current, target, done = states[tp]
        if not done:
            lines.append(f"Reassignment of partition {tp_str(tp)} is still in progress.")
        elif current == target:
            lines.append(f"Reassignment of partition {tp_str(tp)} is completed.")
        else:
            lines.append(f"There is no active reassignment of partition {tp_str(tp)}, but replica set is "
                         f"{_ints(current)} rather than {_ints(target)}.")
    return lines


def reassignment_states(admin: AdminClient, client: ReassignmentClient, targets: list[tuple[TP, list[int]]],
                        ) -> tuple[dict[TP, tuple[list[int], list[int], bool]], bool]:
    """Each target partition's state, and whether any reassignment (listed or not) is ongoing."""
    ongoing = client.list()
    settled = {tp for tp, _ in targets if tp not in ongoing}
    found: dict[TP, list[int]] = {}
    for t in (admin.metadata(sorted({t for t, _ in settled})) if settled else []):
        for p in t.partitions if t.error_code == 0 else ():
            found[(t.name, p.partition)] = list(p.replicas)
    # a partition that does not exist has no replicas
    states = {tp: (ongoing[tp][0], target, False) if tp in ongoing else (found.get(tp, []), target, True)
              for tp, target in targets}
    return states, bool(ongoing)


def clear_all_throttles(admin: AdminClient, targets: list[tuple[TP, list[int]]], out: TextIO) -> None:
    brokers = sorted(set(admin.node_ids()) | {b for _, replicas in targets for b in replicas})
    print(f"Clearing broker-level throttles on broker{'' if len(brokers) == 1 else 's'} {_ints(brokers)}", file=out)
    for b in brokers:
        admin.incremental_alter_configs(RESOURCE_BROKER, str(b), delete_configs=BROKER_LEVEL_THROTTLES)
    topics = sorted({t for (t, _), _ in targets})
    print(f"Clearing topic-level throttles on topic{'' if len(topics) == 1 else 's'} {','.join(topics)}", file=out)
    for t in topics:
        admin.incremental_alter_configs(RESOURCE_TOPIC, t, delete_configs=TOPIC_LEVEL_THROTTLES)


def verify(admin: AdminClient, client: ReassignmentClient, text: str, preserve_throttles: bool,
           out: TextIO) -> bool:
    """Print each partition's state; True when nothing (in the file or not) is still moving."""
    targets, log_dirs = parse_reassignment_json(text)
    states, parts_ongoing = reassignment_states(admin, client, targets)
    print("\n".join(format_reassignment_states(states)), file=out)
    moves = _log_dir_states(admin, log_dirs) if log_dirs else {}
    for line in format_move_states(moves):
        print(line, file=out)
    moves_ongoing = any(not (future is None and current == target) for target, current, future in moves.values())
    if not parts_ongoing and not moves_ongoing and not preserve_throttles:
        clear_all_throttles(admin, targets, out)
    return not parts_ongoing and not moves_ongoing


def cancel(admin: AdminClient, client: ReassignmentClient, text: str, preserve_throttles: bool, timeout_ms: int,
           out: TextIO) -> None:
    targets, log_dirs = parse_reassignment_json(text)
    active = sorted(tp for tp, (_, adding, removing) in client.list([tp for tp, _ in targets]).items()
                    if adding or removing)
    if active:
        errors = client.alter(dict.fromkeys(active))
        if errors:
            raise TerseError("Error cancelling partition reassignment{} for:\n{}".format(
                "" if len(errors) == 1 else "s",
                "\n".join(f"{tp_str(tp)}: {describe(errors[tp])}" for tp in sorted(errors))))
        print("Successfully cancelled partition reassignment{} for: {}".format(
            "" if len(active) == 1 else "s", ",".join(map(tp_str, active))), file=out)
    else:
        print("None of the specified partition reassignments are active.", file=out)
    # a log dir move under way is cancelled by moving the replica back to the dir it is in
    moving = {r: current for r, (_, current, future) in _log_dir_states(admin, log_dirs).items()
              if future is not None and current is not None} if log_dirs else {}
    if moving:
        execute_moves(admin, moving, timeout_ms, out)
    else:
        print("None of the specified partition moves are active.", file=out)
    if not preserve_throttles:
        clear_all_throttles(admin, targets, out)


def format_ongoing(ongoing: dict[TP, tuple[list[int], list[int], list[int]]]) -> str:
    """Kafka's curReassignmentsToString."""
    lines = [f"{tp_str(tp)}: replicas: {_ints(replicas)}." + (f" adding: {_ints(adding)}." if adding else "")
             + (f" removing: {_ints(removing)}." if removing else "")
             for tp, (replicas, adding, removing) in sorted(ongoing.items())]
    return "Current partition reassignments:\n" + "\n".join(lines) if lines else "No partition reassignments found."


# --- the command ------------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    p = Parser(prog="krait reassign-partitions",
               description="This tool helps to move topic partitions between replicas (like kafka-reassign-partitions.sh).")
    p.add_argument("--bootstrap-server", metavar="HOST:PORT", help="the server(s) to use for bootstrapping")
    p.add_argument("--generate", action="store_true", help="generate a candidate partition reassignment "
                   "configuration (it is not executed)")
    p.add_argument("--execute", action="store_true", help="kick off the reassignment of --reassignment-json-file")
    p.add_argument("--verify", action="store_true", help="verify whether the reassignment of "
                   "--reassignment-json-file completed; clears the throttle configs once it has")
    p.add_argument("--cancel", action="store_true", help="cancel an active reassignment")
    p.add_argument("--list", action="store_true", help="list all active partition reassignments")
    p.add_argument("--reassignment-json-file", metavar="FILE", help='{"version":1,"partitions":[{"topic":"foo",'
                   '"partition":1,"replicas":[1,2,3],"log_dirs":["any","any","any"]}]} ("log_dirs" optional: '
                   '"any" or an absolute log dir of the broker)')
    p.add_argument("--topics-to-move-json-file", metavar="FILE",
                   help='for --generate: {"version":1,"topics":[{"topic":"foo"},{"topic":"foo1"}]}')
    p.add_argument("--broker-list", metavar="0,1,2", help="for --generate: the brokers to reassign the partitions to")
    p.add_argument("--disable-rack-aware", action="store_true", help="accepted for compatibility (Krait "
                   "brokers have no rack: the assignment is always rack-unaware)")
    p.add_argument("--additional", action="store_true",
                   help="execute this reassignment in addition to any other ongoing ones")
    p.add_argument("--preserve-throttles", action="store_true", help="do not modify broker or topic throttles")
    p.add_argument("--timeout", type=int, metavar="MS", help="the maximum time in ms to wait for log directory "
                   "replica assignment to begin (default 10000)")
    for option in ("--throttle", "--replica-alter-log-dirs-throttle"):
        p.add_argument(option, metavar="BYTES_PER_SEC", help="not supported: Krait does not throttle replication")
    return p


def _check_args(args: argparse.Namespace) -> str:
    chosen = [a for a in _ACTIONS if getattr(args, a)]
    if len(chosen) != 1:
        raise UsageError("Command must include exactly one action: " + ", ".join(f"--{a}" for a in _ACTIONS))
    action = chosen[0]
    if not args.bootstrap_server:
        raise UsageError("Please specify --bootstrap-server")
    if args.throttle is not None or args.replica_alter_log_dirs_throttle is not None:
        raise UsageError("Krait does not throttle replication: --throttle and --replica-alter-log-dirs-throttle "
                         "are not supported")
    for attr in _REQUIRED[action]:
        if getattr(args, attr) is None:
            raise UsageError(f'Missing required argument "[{attr.replace("_", "-")}]"')
    for attr in ("reassignment_json_file", "topics_to_move_json_file", "broker_list", "disable_rack_aware",
                 "additional", "preserve_throttles", "timeout"):
        if getattr(args, attr) not in (None, False) and attr not in _PERMITTED[action]:
            raise UsageError(f'Option "[{attr.replace("_", "-")}]" can\'t be used with action "[{action}]"')
    return action


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError as exc:
        raise CommandError(f"cannot read {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise CommandError(f"The input string is not a valid JSON: {path}: {exc}") from None


def _body(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    action = _check_args(args)
    timeout_ms = 10000 if args.timeout is None else args.timeout
    path = args.topics_to_move_json_file if action == "generate" else args.reassignment_json_file
    text = _read(path) if path is not None else ""
    # a bad file is refused before connecting
    if action == "generate":
        parse_generate_args(text, args.broker_list)
    elif action == "execute":
        check_execute_json(parse_reassignment_json(text)[0])
    elif action in ("verify", "cancel"):
        parse_reassignment_json(text)
    try:
        with AdminClient(args.bootstrap_server, timeout=30.0, client_id="reassign-partitions-tool") as admin:
            client = ReassignmentClient(admin, 30.0)
            if action == "generate":
                generate(admin, text, args.broker_list, out)
            elif action == "execute":
                execute(admin, client, text, args.additional, timeout_ms, out)
            elif action == "verify":
                verify(admin, client, text, args.preserve_throttles, out)
            elif action == "cancel":
                cancel(admin, client, text, args.preserve_throttles, timeout_ms, out)
            else:
                print(format_ongoing(client.list()), file=out)
    except TerseError as exc:
        print(exc, file=err)
        return 1
    return 0


def main(argv: list[str]) -> int:
    """``krait reassign-partitions ...``; returns the exit code."""
    return run("krait reassign-partitions", "Error: ", _parser, _body, argv)
