"""Nemeses: faults chosen at random from a seed, each held for a random time, then healed,
and logged with timestamps (Jepsen's nemesis). One fault at a time, so that a violation
points at the schedule that made it; the seed reproduces the schedule.

Kinds (cluster): kill (SIGKILL a broker, restart it on the same log dir), pause
(SIGSTOP/SIGCONT, some pauses longer than the ZooKeeper session: a zombie that wakes up),
zk-kill, zk-pause, isolate (a broker cut from everyone), split (a broker and ZooKeeper
against the other brokers: majority/minority), cut-brokers (a leader cut off from its
followers but not from ZooKeeper or the clients), cut-zk (a leader cut off from ZooKeeper
but not from its followers or clients), one-way (a broker's packets stop reaching the
others, theirs still reach it), disk-full (its log dir's file system filled), io-error
(its log dir remounted read-only). After a disk fault the broker is restarted, as an
operator restarts a Kafka broker whose log dir went offline.
"""

from __future__ import annotations

import json
import random
import subprocess
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from .cluster import ChaosCluster
from .topology import CLIENT

NET_KINDS = ["isolate", "split", "cut-brokers", "cut-zk", "one-way"]
PROCESS_KINDS = ["kill", "pause"]
ZK_KINDS = ["zk-kill", "zk-pause"]
DISK_KINDS = ["disk-full", "io-error"]

#: (min, max) seconds each kind is held
HOLD = {"kill": (3, 12), "pause": (3, 14), "zk-kill": (3, 10), "zk-pause": (3, 10),
        "isolate": (5, 15), "split": (5, 15), "cut-brokers": (5, 15), "cut-zk": (5, 15),
        "one-way": (5, 12), "disk-full": (5, 12), "io-error": (5, 12)}


@dataclass
class Fault:
    kind: str
    #: "leader" (the broker leading most of the workload's partitions when it starts),
    #: "coordinator" (the leader of the group's __consumer_offsets partition), or "any"
    target: str
    hold: float
    gap: float


def kinds_for(cluster: ChaosCluster) -> tuple[list[str], list[str]]:
    """The nemeses this machine and cluster allow, and the reasons for those left out."""
    kinds, skipped = list(PROCESS_KINDS), []
    if not cluster.single:
        kinds += ZK_KINDS
        if cluster.net.can_partition:
            kinds += NET_KINDS
        else:
            skipped.append("network partitions: no network namespaces or no iptables here")
    if all(d.mounted for d in cluster.disks.values()):
        kinds.append("disk-full")
    else:
        skipped.append("full disk: log dirs are not on a file system of their own (needs root to mount)")
    if all(d.can_fail for d in cluster.disks.values()):
        kinds.append("io-error")
    else:
        skipped.append("I/O error: needs loop devices and ext4 (root)")
    return kinds, skipped


def schedule(seed: int, duration: float, kinds: list[str]) -> list[Fault]:
    """Faults filling ``duration`` seconds: every kind once first (in a seeded order, however
    short the duration), then kinds at random."""
    rng = random.Random(seed)
    first = list(kinds)
    rng.shuffle(first)
    out, t = [], 0.0
    while t < duration or first:
        kind = first.pop() if first else rng.choice(kinds)
        lo, hi = HOLD[kind]
        hold = rng.uniform(lo, hi)
        if kind == "pause" and rng.random() < 0.5:
            hold = rng.uniform(8, 16)  # beyond zookeeper.session.timeout.ms (6 s)
        target = "any" if kind.startswith("zk-") else rng.choice(["leader", "coordinator", "any"])
        f = Fault(kind, target, round(hold, 1), round(rng.uniform(2, 6), 1))
        out.append(f)
        t += f.hold + f.gap + 4  # heal and restart time
    return out


class Nemesis:
    def __init__(self, cluster: ChaosCluster, topic: str, log_path: Path, seed: int) -> None:
        self.cluster = cluster
        self.topic = topic
        self.log_path = log_path
        self.rng = random.Random(seed ^ 0x5EED)
        self.events: list[dict] = []
        self.stopping = threading.Event()

    def log(self, **ev) -> None:
        ev = {"t": round(time.time(), 3), **ev}
        self.events.append(ev)
        with open(self.log_path, "a") as f:
            f.write(json.dumps(ev) + "\n")

    # --- targets --------------------------------------------------------------------------------
    def _pick(self, target: str) -> int:
        ids = sorted(self.cluster.brokers)
        if len(ids) == 1 or target == "any":
            return self.rng.choice(ids)
        try:
            zk = self.cluster.zk_client()
        except Exception:
            return self.rng.choice(ids)
        try:
            if target == "coordinator":
                st = json.loads(zk.get("/brokers/topics/__consumer_offsets/partitions/0/state")[0])
                if st.get("leader", -1) in ids:
                    return st["leader"]
            counts: dict[int, int] = {}
            for (_t, _p), st in self.cluster.partition_states(zk, [self.topic]).items():
                counts[st["leader"]] = counts.get(st["leader"], 0) + 1
            leaders = [b for b in ids if counts.get(b)]
            return max(leaders, key=lambda b: counts[b]) if leaders else self.rng.choice(ids)
        except Exception:
            return self.rng.choice(ids)
        finally:
            zk.stop()
            zk.close()

    # --- faults -------------------------------------------------------------------------------
    def run(self, faults: list[Fault]) -> None:
        for f in faults:
            if self.stopping.is_set():
                break
            try:
                self.one(f)
            except Exception as exc:  # a fault that could not be applied: heal what it did
                self.log(phase="heal", kind=f.kind, broker=-1, error=f"{type(exc).__name__}: {exc}")
                self.heal_all()
            self.stopping.wait(f.gap)

    def one(self, f: Fault) -> None:
        c = self.cluster
        b = 0 if f.kind.startswith("zk-") else self._pick(f.target)
        others = [i for i in c.brokers if i != b]
        self.log(phase="start", kind=f.kind, broker=b, hold=f.hold)
        if f.kind == "kill":
            c.brokers[b].kill()
        elif f.kind == "pause":
            c.brokers[b].pause()
        elif f.kind == "zk-kill":
            c.zk.kill()
        elif f.kind == "zk-pause":
            c.zk.pause()
        elif f.kind == "isolate":
            for other in [*[f"b{i}" for i in others], "zk", CLIENT]:
                c.net.cut(f"b{b}", other)
                c.net.cut(other, f"b{b}")
        elif f.kind == "split":  # {b, zk} | {others}: the minority keeps ZooKeeper
            for i in others:
                for side in (f"b{b}", "zk"):
                    c.net.cut(side, f"b{i}")
                    c.net.cut(f"b{i}", side)
        elif f.kind == "cut-brokers":
            for i in others:
                c.net.cut(f"b{b}", f"b{i}")
                c.net.cut(f"b{i}", f"b{b}")
        elif f.kind == "cut-zk":
            c.net.cut(f"b{b}", "zk")
            c.net.cut("zk", f"b{b}")
        elif f.kind == "one-way":
            for other in [*[f"b{i}" for i in others], "zk"]:
                c.net.cut(f"b{b}", other)
        elif f.kind == "disk-full":
            c.disks[b].fill()
        elif f.kind == "io-error":
            # the disk fails from now on: what the broker wrote before reaches it (the broker
            # held still meanwhile), so that the fault is a failing disk, not a power loss,
            # which no Kafka setting without a flush per write survives on one node
            c.brokers[b].pause()
            subprocess.run(["sync", "-f", str(c.disks[b].path)], capture_output=True)
            c.disks[b].fail()
            c.brokers[b].resume()
        self.stopping.wait(f.hold)
        self.heal(f.kind, b)

    def heal(self, kind: str, b: int) -> None:
        c = self.cluster
        try:
            if kind in ("kill",):
                c.start_broker(b)
            elif kind == "pause":
                c.brokers[b].resume()
            elif kind == "zk-kill":
                c.start_zk()
            elif kind == "zk-pause":
                c.zk.resume()
            elif kind in NET_KINDS:
                c.net.heal()
            elif kind in DISK_KINDS:
                # an offline log dir comes back only with a restart, as in Kafka
                c.brokers[b].stop(30)
                if kind == "disk-full":
                    c.disks[b].free()
                else:
                    c.disks[b].repair()
                c.start_broker(b)
            self.log(phase="heal", kind=kind, broker=b)
        except Exception as exc:  # a broker that cannot restart is itself a finding
            self.log(phase="heal", kind=kind, broker=b, error=f"{type(exc).__name__}: {exc}")

    def heal_all(self) -> None:
        """Everything back: links, paused processes, dead processes, disks."""
        c = self.cluster
        c.net.heal()
        if c.zk is not None:
            if c.zk.paused:
                c.zk.resume()
            if not c.zk.alive:
                c.start_zk()
        for i, b in c.brokers.items():
            d = c.disks[i]
            if d.mounted:
                d.free()
            if b.paused:
                b.resume()
            if not b.alive:
                try:
                    c.start_broker(i)
                except Exception as exc:
                    self.log(phase="heal", kind="final", broker=i, error=str(exc))


def as_dicts(faults: list[Fault]) -> list[dict]:
    return [asdict(f) for f in faults]
