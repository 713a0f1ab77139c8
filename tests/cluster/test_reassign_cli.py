"""``krait reassign-partitions`` (kafka-reassign-partitions.sh) run as a subprocess through
the real entry point against a real three-broker cluster on a real ZooKeeper: a partition
moved off its only broker with its records, an in-progress reassignment listed, verified
and cancelled, --generate's proposal, and bad input files refused."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from broker.tools.wire import WireClient
from protocol.apis import ApiKey
from tests.cluster.cluster_harness import Cluster, wait_for
from tests.krait_harness import REPO, free_port


def krait(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """``krait reassign-partitions ...`` in a process of its own (broker/cli.py's main)."""
    return subprocess.run([sys.executable, "-m", "broker.cli", "reassign-partitions", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=timeout)


def reassign(cl: Cluster, *args: str) -> subprocess.CompletedProcess:
    return krait("--bootstrap-server", cl.bootstrap, *args)


def write_json(path: Path, doc: object) -> str:
    path.write_text(json.dumps(doc))
    return str(path)


def create_on(cl: Cluster, topic: str, assignment: list[list[int]]) -> None:
    """A topic with explicit replica assignments (partition i on assignment[i])."""
    with WireClient("127.0.0.1", cl.brokers[1].port) as c:
        r = c.request(ApiKey.CREATE_TOPICS, topics=[dict(
            name=topic, num_partitions=-1, replication_factor=-1, configs=[],
            assignments=[dict(partition_index=i, broker_ids=b) for i, b in enumerate(assignment)])],
            timeout=30000, validate_only=False)
    assert r.topics[0].error_code == 0, r.topics[0].error_message
    for p, replicas in enumerate(assignment):
        cl.wait_isr(topic, p, len(replicas))


def produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 5})
    errors: list = []
    for v in values:
        p.produce(topic, v, partition=0, on_delivery=lambda err, _msg: err and errors.append(err))
    assert p.flush(60) == 0 and not errors, errors


def read_all(bootstrap: str, topic: str, expected: int, timeout: float = 60) -> list[bytes]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{topic}", "enable.auto.commit": False,
                  "enable.partition.eof": True})
    c.assign([TopicPartition(topic, 0, 0)])
    out: list[bytes] = []

    def poll() -> bool:
        for m in c.consume(500, 0.5):
            if m.error() is None:
                out.append(m.value())
            elif m.error().code() != KafkaError._PARTITION_EOF:
                raise KafkaException(m.error())
        return len(out) >= expected

    try:
        wait_for(poll, timeout, interval=0, what=f"{expected} records of {topic}")
    finally:
        c.close()
    return out


def replicas_everywhere(cl: Cluster, topic: str) -> set[tuple[int, ...]]:
    """The replicas of partition 0 as each broker's Metadata gives them."""
    return {tuple(cl.metadata(b, [topic]).topics[0].partitions[0].replica_nodes) for b in cl.brokers}


def test_execute_then_verify_moves_a_partition_off_its_broker(tmp_path, zk_connect):
    with Cluster(tmp_path, zk_connect) as cl:
        create_on(cl, "moving", [[1]])
        values = [f"record-{i}".encode() for i in range(500)]
        produce(cl.bootstrap, "moving", values)
        plan = write_json(tmp_path / "plan.json",
                          {"version": 1, "partitions": [{"topic": "moving", "partition": 0, "replicas": [2, 3]}]})

        r = reassign(cl, "--execute", "--reassignment-json-file", plan)
        assert r.returncode == 0, r.stderr
        # the current assignment first, for a rollback, then what was started (Kafka's text)
        assert r.stdout == (
            "Current partition replica assignment\n\n"
            '{"version":1,"partitions":[{"topic":"moving","partition":0,"replicas":[1],"log_dirs":["any"]}]}\n\n'
            "Save this to use as the --reassignment-json-file option during rollback\n"
            "Successfully started partition reassignment for moving-0\n")

        def verified():
            v = reassign(cl, "--verify", "--reassignment-json-file", plan)
            assert v.returncode == 0, v.stderr  # in progress or not, as in Kafka
            return "Reassignment of partition moving-0 is completed." in v.stdout and v

        v = wait_for(verified, 60, interval=0.5, what="reassignment completed")
        assert v.stdout.splitlines() == [
            "Status of partition reassignment:", "Reassignment of partition moving-0 is completed.",
            "Clearing broker-level throttles on brokers 1,2,3", "Clearing topic-level throttles on topic moving"]

        # every broker, ZooKeeper and the disks agree: the partition lives on 2 and 3 only
        wait_for(lambda: replicas_everywhere(cl, "moving") == {(2, 3)}, what="Metadata replicas [2, 3]")
        assert cl.assignment("moving") == {0: [2, 3]}
        state = wait_for(lambda: (s := cl.state("moving", 0)) and sorted(s["isr"]) == [2, 3] and s,
                         what="ISR [2, 3]")
        assert state["leader"] in (2, 3)
        wait_for(lambda: not (tmp_path / "broker-1" / "moving-0").exists(), what="broker 1's replica deleted")
        assert (tmp_path / "broker-2" / "moving-0").is_dir() and (tmp_path / "broker-3" / "moving-0").is_dir()
        # all the records, from the new replicas
        assert read_all(cl.bootstrap, "moving", len(values)) == values
        assert reassign(cl, "--list").stdout == "No partition reassignments found.\n"
        # Kafka's word for a settled partition whose replicas are not the ones in the file
        back = write_json(tmp_path / "back.json",
                          {"version": 1, "partitions": [{"topic": "moving", "partition": 0, "replicas": [1]}]})
        v = reassign(cl, "--verify", "--preserve-throttles", "--reassignment-json-file", back)
        assert v.returncode == 0 and v.stdout.splitlines() == [
            "Status of partition reassignment:",
            "There is no active reassignment of partition moving-0, but replica set is 2,3 rather than 1."]


def test_list_verify_and_cancel_a_reassignment_in_progress(tmp_path, zk_connect):
    with Cluster(tmp_path, zk_connect) as cl:
        create_on(cl, "slow", [[1]])
        produce(cl.bootstrap, "slow", [b"a", b"b", b"c"])
        # a target broker that cannot catch up: frozen, but still registered when --execute runs
        controller = cl.metadata(1).controller_id
        frozen = 3 if controller != 3 else 2
        plan = write_json(tmp_path / "plan.json",
                          {"version": 1, "partitions": [{"topic": "slow", "partition": 0, "replicas": [1, frozen]}]})
        bootstrap = ",".join(cl.brokers[b].bootstrap for b in cl.brokers if b != frozen)
        cl.freeze(frozen)
        try:
            r = krait("--bootstrap-server", bootstrap, "--execute", "--reassignment-json-file", plan)
            assert r.returncode == 0, r.stderr
            assert r.stdout.endswith("Successfully started partition reassignment for slow-0\n")

            r = krait("--bootstrap-server", bootstrap, "--list")
            assert r.returncode == 0, r.stderr
            assert r.stdout == f"Current partition reassignments:\nslow-0: replicas: 1,{frozen}. adding: {frozen}.\n"

            r = krait("--bootstrap-server", bootstrap, "--verify", "--reassignment-json-file", plan)
            assert r.returncode == 0, r.stderr  # Kafka's --verify exits 0 while in progress too
            assert r.stdout == "Status of partition reassignment:\nReassignment of partition slow-0 is still in progress.\n"

            # a second reassignment needs --additional, as in Kafka
            r = krait("--bootstrap-server", bootstrap, "--execute", "--reassignment-json-file", plan)
            assert r.returncode == 1
            assert r.stderr.startswith("Cannot execute because there is an existing partition assignment.")

            r = krait("--bootstrap-server", bootstrap, "--cancel", "--preserve-throttles",
                      "--reassignment-json-file", plan)
            assert r.returncode == 0, r.stderr
            assert r.stdout == ("Successfully cancelled partition reassignment for: slow-0\n"
                                "None of the specified partition moves are active.\n")
            assert cl.assignment("slow") == {0: [1]}
            assert krait("--bootstrap-server", bootstrap, "--list").stdout == "No partition reassignments found.\n"
            r = krait("--bootstrap-server", bootstrap, "--cancel", "--preserve-throttles",
                      "--reassignment-json-file", plan)
            assert r.stdout.startswith("None of the specified partition reassignments are active.\n")
        finally:
            cl.thaw(frozen)
        assert cl.state("slow", 0)["leader"] == 1
        assert read_all(bootstrap, "slow", 3) == [b"a", b"b", b"c"]


def test_generate_proposes_an_assignment_over_the_broker_list(tmp_path, zk_connect):
    with Cluster(tmp_path, zk_connect) as cl:
        create_on(cl, "gen", [[1, 2], [2, 3], [3, 1], [1, 3]])
        create_on(cl, "other", [[3]])
        topics = write_json(tmp_path / "topics.json", {"version": 1, "topics": [{"topic": "gen"}, {"topic": "other"}]})
        r = reassign(cl, "--generate", "--topics-to-move-json-file", topics, "--broker-list", "1,2")
        assert r.returncode == 0, r.stderr
        m = re.fullmatch(r"Current partition replica assignment\n(.*)\n\n"
                         r"Proposed partition reassignment configuration\n(.*)\n", r.stdout)
        assert m, r.stdout
        current, proposed = json.loads(m[1]), json.loads(m[2])
        assert m[1] == json.dumps(current, separators=(",", ":"))  # Kafka's compact JSON
        assert current == {"version": 1, "partitions": [
            {"topic": "gen", "partition": 0, "replicas": [1, 2], "log_dirs": ["any", "any"]},
            {"topic": "gen", "partition": 1, "replicas": [2, 3], "log_dirs": ["any", "any"]},
            {"topic": "gen", "partition": 2, "replicas": [3, 1], "log_dirs": ["any", "any"]},
            {"topic": "gen", "partition": 3, "replicas": [1, 3], "log_dirs": ["any", "any"]},
            {"topic": "other", "partition": 0, "replicas": [3], "log_dirs": ["any"]}]}
        parts = proposed["partitions"]
        assert [(p["topic"], p["partition"]) for p in parts] == [("gen", 0), ("gen", 1), ("gen", 2), ("gen", 3),
                                                                 ("other", 0)]
        for p in parts:  # the replication factor kept, only brokers of the list
            assert len(p["replicas"]) == (2 if p["topic"] == "gen" else 1)
            assert set(p["replicas"]) <= {1, 2} and len(set(p["replicas"])) == len(p["replicas"])
            assert p["log_dirs"] == ["any"] * len(p["replicas"])
        # round-robin: the leaders of "gen" alternate over the two brokers
        assert sorted(p["replicas"][0] for p in parts if p["topic"] == "gen") == [1, 1, 2, 2]

        # the proposal is a valid --execute file: the cluster is left as proposed
        plan = write_json(tmp_path / "plan.json", proposed)
        r = reassign(cl, "--execute", "--reassignment-json-file", plan)
        assert r.returncode == 0, r.stderr
        assert r.stdout.endswith("Successfully started partition reassignments for gen-0,gen-1,gen-2,gen-3,other-0\n")
        wait_for(lambda: "in progress" not in reassign(cl, "--verify", "--reassignment-json-file", plan).stdout,
                 60, interval=0.5, what="reassignments completed")
        want = {p["partition"]: p["replicas"] for p in parts if p["topic"] == "gen"}
        wait_for(lambda: cl.assignment("gen") == want, what="gen reassigned")

        dup = reassign(cl, "--generate", "--topics-to-move-json-file", topics, "--broker-list", "1,2,1")
        assert dup.returncode == 1 and dup.stderr == "Error: Broker list contains duplicate entries: [1]\n"
        missing = write_json(tmp_path / "missing.json", {"version": 1, "topics": [{"topic": "nope"}]})
        r = reassign(cl, "--generate", "--topics-to-move-json-file", missing, "--broker-list", "1,2")
        assert r.returncode == 1 and r.stderr == "Error: UNKNOWN_TOPIC_OR_PARTITION: Topic nope not found.\n"
        r = reassign(cl, "--generate", "--topics-to-move-json-file", topics, "--broker-list", "1")
        assert r.returncode == 1 and "Replication factor: 2 larger than available brokers: 1." in r.stderr
        # unknown brokers and partitions are refused before anything is started
        bad = write_json(tmp_path / "bad.json",
                         {"version": 1, "partitions": [{"topic": "other", "partition": 0, "replicas": [7]}]})
        r = reassign(cl, "--execute", "--reassignment-json-file", bad)
        assert r.returncode == 1 and r.stderr == "Error: Unknown broker id 7\n"
        bad = write_json(tmp_path / "bad.json",
                         {"version": 1, "partitions": [{"topic": "other", "partition": 5, "replicas": [1]}]})
        r = reassign(cl, "--execute", "--reassignment-json-file", bad)
        assert r.returncode == 1
        assert r.stderr == "Error: UNKNOWN_TOPIC_OR_PARTITION: Unable to find partition: other-5\n"

        # "log_dirs": the replica is placed in the named dir of its new broker once it exists there
        create_on(cl, "dirs", [[1]])
        log_dir = str(tmp_path / "broker-2")
        plan = write_json(tmp_path / "dirs.json", {"version": 1, "partitions": [
            {"topic": "dirs", "partition": 0, "replicas": [2], "log_dirs": [log_dir]}]})
        r = reassign(cl, "--execute", "--reassignment-json-file", plan)
        assert r.returncode == 0, r.stderr
        assert r.stdout.endswith("Successfully started partition reassignment for dirs-0\n"
                                 f"Successfully started moving log directory to {log_dir} for replica dirs-0 "
                                 "with broker 2 \n")

        def settled():
            v = reassign(cl, "--verify", "--preserve-throttles", "--reassignment-json-file", plan)
            return "in progress" not in v.stdout and v

        v = wait_for(settled, 60, interval=0.5, what="dirs-0 reassigned")
        assert v.stdout.splitlines() == ["Status of partition reassignment:",
                                         "Reassignment of partition dirs-0 is completed.",
                                         "Reassignment of replica dirs-0-2 completed successfully."]


def test_bad_reassignment_files_are_refused(tmp_path):
    """Refused before connecting: no broker is needed (nothing listens on the port)."""
    bootstrap = f"127.0.0.1:{free_port()}"

    def run(action: str, doc: object | str) -> subprocess.CompletedProcess:
        path = tmp_path / "f.json"
        path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
        flag = "--topics-to-move-json-file" if action == "--generate" else "--reassignment-json-file"
        extra = ["--broker-list", "1,2"] if action == "--generate" else []
        return krait("--bootstrap-server", bootstrap, action, flag, str(path), *extra)

    cases = [
        ("--execute", '{"version":1,"partitions":[{"topic":"t",', "Error: The input string is not a valid JSON: "),
        ("--verify", "not json at all", "Error: The input string is not a valid JSON: "),
        ("--generate", '{"topics": [', "Error: The input string is not a valid JSON: "),
        ("--execute", {"version": 2, "partitions": []}, "Error: Not supported version field value 2\n"),
        ("--execute", {"version": 1, "partitions": [{"partition": 0, "replicas": [1]}]},
         "Error: No such field exists: `topic`\n"),
        ("--cancel", {"partitions": [{"topic": "t", "partition": "0", "replicas": [1]}]},
         'Error: Expected `Int` value, received "0"\n'),
        ("--execute", {"partitions": [{"topic": "t", "partition": 0, "replicas": [1, 2], "log_dirs": ["any"]}]},
         'Error: Size of replicas list [1, 2] is different from size of log dirs list [any] for partition t-0\n'),
        ("--execute", {"version": 1, "partitions": []}, "Error: Partition reassignment list cannot be empty\n"),
        ("--execute", {"partitions": [{"topic": "t", "partition": 0, "replicas": [1, 2, 1]}]},
         "Error: Partition replica lists may not contain duplicate entries: t-0 contains multiple entries for 1\n"),
        ("--execute", {"partitions": [{"topic": "t", "partition": 0, "replicas": [1]},
                                      {"topic": "t", "partition": 0, "replicas": [2]}]},
         "Error: Partition reassignment contains duplicate topic partitions: t-0\n"),
        ("--generate", {"version": 1, "topics": [{"topic": "a"}, {"topic": "a"}]},
         "Error: List of topics to reassign contains duplicate entries: [a]\n"),
    ]
    for action, doc, message in cases:
        r = run(action, doc)
        assert r.returncode == 1, (doc, r.stdout, r.stderr)
        assert r.stdout == "" and r.stderr.startswith(message), (doc, r.stderr)
        assert "Traceback" not in r.stderr

    r = krait("--bootstrap-server", bootstrap, "--execute", "--reassignment-json-file", str(tmp_path / "none.json"))
    assert r.returncode == 1 and r.stderr.startswith("Error: cannot read ") and "No such file" in r.stderr
    # usage errors: exactly one action, the files the action needs, options it takes
    r = krait("--bootstrap-server", bootstrap, "--execute", "--verify", "--reassignment-json-file", "x")
    assert r.returncode == 1 and "Command must include exactly one action" in r.stderr
    r = krait("--bootstrap-server", bootstrap, "--generate", "--broker-list", "1")
    assert r.returncode == 1 and 'Missing required argument "[topics-to-move-json-file]"' in r.stderr
    r = krait("--bootstrap-server", bootstrap, "--list", "--additional")
    assert r.returncode == 1 and 'Option "[additional]" can\'t be used with action "[list]"' in r.stderr
    r = krait("--bootstrap-server", bootstrap, "--execute", "--reassignment-json-file", "x", "--throttle", "1000")
    assert r.returncode == 1 and "Krait does not throttle replication" in r.stderr
