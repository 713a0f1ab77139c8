"""Parts 2 and 3 of bench/cluster_bench.py: failover and catch-up, on 3-broker clusters.

2. Failover: a producer in its own process (bench/cluster_producer.py: acks=all,
   idempotent, librdkafka defaults otherwise) sends to one rf=3 partition at a fixed rate;
   once acks flow, SIGKILL of the partition's leader. Measured: the time from the kill to
   the new leader in ZooKeeper (/brokers/topics/<t>/partitions/0/state, polled every
   10 ms) and to the first acknowledgement the producer sees after it. Acks reported in the
   first 100 ms after the kill are not counted: responses the old leader sent before it
   died (none can come from a new leader that early: the controller learns of the death
   only when the broker's ZooKeeper session expires). A fresh cluster per run, with a
   leader that is not the controller unless the run is the "leader was the controller" one.
3. Catch-up: a follower (not the controller) is stopped (SIGTERM, controlled shutdown),
   the leader receives --scale x 1 GiB of 1 KiB records (`krait perf produce`, acks=1),
   the other follower catches up, then the stopped one is started again; a kazoo
   DataWatch on each partition's state znode gives the moment it is back in the ISR.
   Rate = bytes of .log segments it was behind / time from its restart to ISR.
"""

from __future__ import annotations

import bisect
import contextlib
import datetime as _dt
import json
import re
import subprocess
import threading
import time
from pathlib import Path

from cluster_common import (
    KAFKA_DEFAULTS,
    PY,
    Sizes,
    WorkloadFailed,
    ZooKeeper,
    broker_env,
    controller_id,
    cpu_seconds,
    create_topic,
    log_bytes,
    pick_leader,
    run_perf,
    spread,
    wait_for,
    wait_quiet,
)

PRODUCER = Path(__file__).resolve().parent / "cluster_producer.py"
GRACE_S = 0.1
MIB = 1 << 20


class _Acks:
    """Reads the producer's report lines in a thread: acks as (t, offset), errors as (t, text)."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.acks: list[tuple[float, int]] = []
        self.times: list[float] = []  # of the acks, in order: bisect finds the first after a moment
        self.errors: list[tuple[float, str]] = []
        self.thread = threading.Thread(target=self._read, args=(proc,), daemon=True)
        self.thread.start()

    def _read(self, proc: subprocess.Popen) -> None:
        for line in proc.stdout:
            kind, _, rest = line.strip().partition(" ")
            t, _, val = rest.partition(" ")
            with contextlib.suppress(ValueError):
                if kind == "A":
                    self.acks.append((float(t), int(val)))
                    self.times.append(float(t))
                elif kind == "E":
                    self.errors.append((float(t), val))

    def first_after(self, t: float) -> float | None:
        times = self.times
        i = bisect.bisect_right(times, t)
        return times[i] if i < len(times) else None


def _failover_trial(zkp: ZooKeeper, s: Sizes, overrides: dict[str, str], kill_controller: bool) -> dict:
    session_s = int(overrides.get("zookeeper.session.timeout.ms", "6000")) / 1000
    with zkp.cluster(3, **overrides) as cl:
        leader = pick_leader(cl, controller=kill_controller)
        create_topic(cl, "fo", [[leader, *(i for i in sorted(cl.brokers) if i != leader)]])
        epoch = cl.state("fo", 0)["leader_epoch"]
        err_path = Path(cl.brokers[leader].log_dir).parent / "producer.log"
        with open(err_path, "w") as err_file:  # librdkafka's own logs (debug=...) can be long: not a pipe
            proc = subprocess.Popen([PY, str(PRODUCER), cl.bootstrap, "fo", "0", str(s.failover_rate),
                                     *s.failover_producer_props], stdout=subprocess.PIPE, stderr=err_file, text=True)
        try:
            acks = _Acks(proc)
            wait_for(lambda: len(acks.acks) >= 2 * s.failover_rate or proc.poll() is not None, 60,
                     what="2 s of acks before the kill")
            if proc.poll() is not None:
                raise WorkloadFailed(f"producer exited: {err_path.read_text(errors='replace')[-500:]}")
            before = len(acks.acks)
            wall_kill, t_kill = time.time(), time.monotonic()
            cl.brokers[leader].kill()
            limit = 3 * session_s + 30
            st = wait_for(lambda: (x := cl.state("fo", 0))["leader"] not in (-1, leader) and x, limit, 0.01,
                          what="a new leader")
            t_leader = time.monotonic()
            wait_for(lambda: acks.first_after(t_kill + GRACE_S), limit, 0.01, what="an ack after the kill")
            t_ack = acks.first_after(t_kill + GRACE_S)
            last_before = max((a for a, _ in acks.acks[:before]), default=None)
            in_grace = sum(1 for a, _ in acks.acks if t_kill < a <= t_kill + GRACE_S)
            errors = list(acks.errors)
            # the brokers' own log lines (wall clock, ms): the controller's decision, the
            # new leader taking over, the other follower following it
            new = st["leader"]
            rest = [i for i in cl.brokers if i not in (leader, new)]
            steps = {"kill_to_decision_s": _logged(cl, list(cl.brokers), rf"krait\.controller: fo-0: leader {leader} ->",
                                                   wall_kill),
                     "kill_to_leading_s": _logged(cl, [new], r"krait\.replication: fo-0: leader at epoch", wall_kill),
                     "kill_to_following_s": _logged(cl, rest, r"krait\.replication: fo-0: follower at epoch",
                                                    wall_kill)}
        finally:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    return {"session_ms": int(session_s * 1000), "leader": leader, "leader_was_controller": kill_controller,
            "new_leader": st["leader"], "epoch": (epoch, st["leader_epoch"]),
            "kill_to_leader_s": t_leader - t_kill, "kill_to_ack_s": t_ack - t_kill, **steps,
            "last_ack_before_kill_ms": None if last_before is None else 1000 * (t_kill - last_before),
            "acks_in_grace": in_grace, "errors": len(errors), "first_error": errors[0][1] if errors else None}


def _logged(cl, brokers: list[int], pattern: str, after: float) -> float | None:
    """Seconds from `after` (wall clock) to the first line matching pattern, logged after it
    by one of these brokers (Python logging's local-time stamp, to the millisecond)."""
    rx = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\] INFO " + pattern)
    found = []
    for i in brokers:
        with contextlib.suppress(OSError):
            for line in cl.brokers[i].log_path.read_text(errors="replace").splitlines():
                m = rx.match(line)
                if m:
                    t = _dt.datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()
                    if t >= after - 0.001:
                        found.append(t - after)
                        break
    return min(found) if found else None


def failover_part(zkp: ZooKeeper, s: Sizes, log) -> dict:
    """{"fast": [trials], "defaults": [trials], "controller": [trials]}"""
    plan = [("fast", {}, False, s.failover_runs), ("controller", {}, True, s.failover_controller_runs),
            ("defaults", dict(KAFKA_DEFAULTS), False, s.failover_default_runs)]
    out: dict[str, list[dict]] = {}
    for name, overrides, kill_ctrl, runs in plan:
        for i in range(runs):
            t = _failover_trial(zkp, s, overrides, kill_ctrl)
            out.setdefault(name, []).append(t)
            log(f"  failover {name} {i + 1}/{runs}: session {t['session_ms']} ms, leader {t['leader']} -> "
                f"{t['new_leader']}: new leader after {t['kill_to_leader_s']:.2f} s, first ack after "
                f"{t['kill_to_ack_s']:.2f} s ({t['errors']} delivery errors, {t['acks_in_grace']} acks in the "
                f"first {GRACE_S * 1000:.0f} ms)")
    return out


def _start(broker, out: list) -> None:
    try:
        broker.start(timeout=120)
        out.append(time.monotonic())
    except BaseException as exc:  # reported by the caller
        out.append(exc)


def catchup_part(zkp: ZooKeeper, s: Sizes, log) -> dict:
    topic, parts = "catchup", s.catchup_partitions
    with zkp.cluster(3) as cl:
        leader = pick_leader(cl)
        ctrl = controller_id(cl)
        follower = next(i for i in sorted(cl.brokers) if i not in (leader, ctrl))
        other = next(i for i in sorted(cl.brokers) if i not in (leader, follower))
        create_topic(cl, topic, [[leader, follower, other]] * parts)
        if cl.brokers[follower].stop() != 0:
            raise WorkloadFailed(f"broker {follower} did not stop cleanly")
        for p in range(parts):
            wait_for(lambda p=p: follower not in cl.state(topic, p)["isr"], 60, what="the follower out of the ISR")
        start = {p: log_bytes(cl, follower, topic, p) for p in range(parts)}
        n = max(1, s.catchup_bytes // 1024)
        t0 = time.monotonic()
        prod = run_perf("produce", cl.bootstrap, topic, n, 1024, parts, "1", "none", s.timeout)
        log(f"  catch-up: {n:,} records of 1 KiB sent to broker {leader} in {time.monotonic() - t0:.1f} s "
            f"({prod['mb_per_sec']:.0f} MB/s, acks=1) while broker {follower} was down")
        lead = {p: log_bytes(cl, leader, topic, p) for p in range(parts)}
        wait_for(lambda: all(log_bytes(cl, other, topic, p) == lead[p] for p in range(parts)), s.timeout,
                 0.2, what=f"broker {other} level with the leader")
        behind = sum(lead[p] - start[p] for p in range(parts))
        joined: dict[int, float] = {}

        def watch(p: int):
            def cb(data, _stat):
                if data and follower in json.loads(data).get("isr", []) and p not in joined:
                    joined[p] = time.monotonic()
                    return False
                return None
            return cb

        wait_quiet(s.quiet_wait)
        for p in range(parts):
            cl.zk.DataWatch(f"/brokers/topics/{topic}/partitions/{p}/state")(watch(p))
        cpu0 = cpu_seconds(cl)
        # start() returns once the broker listens; the replica may fetch before that
        listening: list[float | BaseException] = []
        starter = threading.Thread(target=_start, args=(cl.brokers[follower], listening), daemon=True)
        t_restart = time.monotonic()
        old_proc = cl.brokers[follower].proc
        with broker_env():  # kept until the new process is spawned
            starter.start()
            wait_for(lambda: cl.brokers[follower].proc is not old_proc or listening, 30, 0.002,
                     what="the broker process spawned")
        t_registered = t_grow = None
        deadline = t_restart + s.timeout
        while len(joined) < parts and time.monotonic() < deadline:
            now = time.monotonic()
            if t_registered is None and follower in cl.live_ids():
                t_registered = now
            if t_grow is None and sum(log_bytes(cl, follower, topic, p) for p in range(parts)) > sum(start.values()):
                t_grow = now
            if listening and isinstance(listening[0], BaseException):
                raise WorkloadFailed(f"broker {follower} did not start again: {listening[0]}")
            time.sleep(0.01)
        starter.join(120)
        t_listen = listening[0] if listening and isinstance(listening[0], float) else float("nan")
        if len(joined) < parts:
            raise WorkloadFailed(f"broker {follower} not back in the ISR of every partition after {s.timeout:.0f} s")
        t_isr = max(joined.values())
        cpu1 = cpu_seconds(cl)
        got = sum(log_bytes(cl, follower, topic, p) for p in range(parts))
        secs = t_isr - t_restart
    res = {"partitions": parts, "leader": leader, "follower": follower, "behind_bytes": behind,
           "records": n, "restart_to_listening_s": t_listen - t_restart,
           "restart_to_registered_s": None if t_registered is None else t_registered - t_restart,
           "restart_to_first_bytes_s": None if t_grow is None else t_grow - t_restart,
           "restart_to_isr_s": secs, "mb_per_sec": behind / MIB / secs,
           "copy_mb_per_sec": behind / MIB / (t_isr - t_grow) if t_grow and t_isr > t_grow else None,
           "follower_bytes_at_end": got, "leader_bytes": sum(lead.values()),
           "leader_cpu_pct": 100 * (cpu1[leader] - cpu0[leader]) / secs,
           "follower_cpu_pct": 100 * (cpu1[follower] - cpu0.get(follower, 0.0)) / secs}
    log(f"  catch-up: {behind / MIB:,.0f} MiB behind; back in the ISR {secs:.1f} s after the restart "
        f"({res['mb_per_sec']:.0f} MB/s; listening after {res['restart_to_listening_s']:.1f} s, first bytes after "
        f"{res['restart_to_first_bytes_s'] or 0:.1f} s; CPU leader {res['leader_cpu_pct']:.0f}%, "
        f"follower {res['follower_cpu_pct']:.0f}%)")
    return res


# --- tables -------------------------------------------------------------------------------------

def failover_table(res: dict) -> str:
    rows = ["| case | zookeeper.session.timeout.ms | runs | kill → controller decides [b] | kill → new leader in ZK | "
            "kill → new leader leads [b] | kill → other follower follows it [b] | kill → first ack | "
            "delivery errors |", "|---|---|---|---|---|---|---|---|---|"]
    names = {"fast": "leader not the controller", "controller": "leader was the controller",
             "defaults": "leader not the controller, Kafka's defaults [a]"}
    for key in ("fast", "controller", "defaults"):
        trials = res.get(key, [])
        if trials:
            cols = [spread([t.get(k) for t in trials]) for k in ("kill_to_decision_s", "kill_to_leader_s",
                                                                  "kill_to_leading_s", "kill_to_following_s",
                                                                  "kill_to_ack_s")]
            rows.append(f"| {names[key]} | {trials[0]['session_ms']} | {len(trials)} | {' | '.join(cols)} | "
                        f"{sum(t['errors'] for t in trials)} |")
    note = ("Seconds, median (min-max). [b] from the brokers' own log lines (millisecond stamps): the controller's "
            "new partition state, the new leader's and the remaining follower's state change.")
    if res.get("defaults"):
        note += (" [a] zookeeper.session.timeout.ms 18000, replica.lag.time.max.ms 30000, replica.fetch.backoff.ms "
                 "1000; the other rows use the test harness's 6000 / 6000 / 200.")
    rows += ["", note]
    return "\n".join(rows)


def catchup_table(res: dict) -> str:
    if not res:
        return ""
    f = res.get("restart_to_first_bytes_s")
    cp = res.get("copy_mb_per_sec")
    return "\n".join([
        "| behind (MiB of .log) | partitions | restart → listening, s | restart → first bytes, s | "
        "restart → in ISR, s | MB/s (restart → ISR) | MB/s (first bytes → ISR) | leader CPU % | follower CPU % |",
        "|---|---|---|---|---|---|---|---|---|",
        f"| {res['behind_bytes'] / MIB:,.0f} | {res['partitions']} | {res['restart_to_listening_s']:.2f} | "
        f"{'n/a' if f is None else f'{f:.2f}'} | {res['restart_to_isr_s']:.2f} | {res['mb_per_sec']:.0f} | "
        f"{'n/a' if cp is None else f'{cp:.0f}'} | {res['leader_cpu_pct']:.0f} | {res['follower_cpu_pct']:.0f} |"])

