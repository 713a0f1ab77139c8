"""Security's cost (issue 14), measured side by side in one run:

    .venv/bin/python bench/security_bench.py [--rounds 3] [--records-100 1000000] [--records-1k 300000]
        [--handshake-seconds 3] [--clients 4] [--acls 10000] [--parts tls,handshakes,acls]
        [--quick] [--results FILE]

1. tls         produce then consume, confluent-kafka (librdkafka) in this process, 100 B and
               1 KiB values, over PLAINTEXT and over SASL_SSL (SCRAM-SHA-512, TLS) listeners of
               the same broker process: records/s, MB/s (values), the SASL_SSL/PLAINTEXT ratio,
               broker CPU seconds per million records, and which side was the bound;
2. handshakes  new connections per second from --clients processes (Python's ssl), each
               connection doing its handshake then ApiVersions and closing: TCP on PLAINTEXT
               (the baseline), TLS on an SSL listener, TLS + a full SCRAM-SHA-512 exchange on
               SASL_SSL; broker CPU per connection and the clients' CPU;
3. acls        the broker's Authorizer in this process with --acls ACLs (literal and prefixed,
               over many topics, groups and principals, ALLOW and DENY, some host-bound) against
               10 ACLs: time and index probes per authorize(), per Metadata-like request of
               --metadata-topics topics (DESCRIBE + the authorized-operations bit field per
               topic), and a linear scan of the same ACLs as a reference; then on the wire, a
               SASL_PLAINTEXT principal's produce throughput against a broker with
               StandardAuthorizer and those ACLs and one without an authorizer, in big batches
               and with one record per request.

Every figure is the median of --rounds rounds; within a round the variants run one after
the other (their order alternating between rounds). Broker CPU is user + system time of the
broker process (psutil); client CPU is this process's (librdkafka's threads included) or the
handshake workers'. A process using >= 85 % of one core is called the bound. The tables are
printed; with --results FILE they are also appended to FILE.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as _dt
import multiprocessing as mp
import os
import random
import socket
import ssl
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import psutil  # noqa: E402

from tests.security.secure_broker import (  # noqa: E402
    ADMIN,
    ALICE,
    Credentials,
    SecureBroker,
    create_scram_users,
    librdkafka_config,
    sasl_credentials,
)
from tests.security.tls_ca import make_cert_files  # noqa: E402

#: a process at or above this share of one core is the bound
BOUND_PCT = 85.0
SCRAM_MECH = "SCRAM-SHA-512"
SCRAM_USER = ("bench", "bench-secret")
#: the measured principal of part 3 (a PLAIN user of every SecureBroker)
PRINCIPAL = f"User:{ALICE[0]}"
BENCH_PREFIX = "secbench-"


# ---------------------------------------------------------------- CPU accounting


def proc_cpu(pid: int) -> float:
    """User + system CPU seconds of a process and its children (psutil)."""
    p = psutil.Process(pid)
    total = 0.0
    for q in (p, *p.children(recursive=True)):
        with contextlib.suppress(psutil.Error):
            t = q.cpu_times()
            total += t.user + t.system
    return total


def self_cpu() -> float:
    t = os.times()
    return t.user + t.system


def machine_busy() -> float:
    t = psutil.cpu_times()
    return sum(t) - t.idle - getattr(t, "iowait", 0.0)


@dataclass
class Meter:
    """Wall, broker, client and machine CPU between start() and stop()."""

    broker_pid: int
    client_cpu: Callable[[], float] = self_cpu

    def start(self) -> Meter:
        self.t0, self.b0, self.c0, self.m0 = time.perf_counter(), proc_cpu(self.broker_pid), self.client_cpu(), \
            machine_busy()
        return self

    def stop(self) -> dict[str, float]:
        wall = time.perf_counter() - self.t0
        broker = proc_cpu(self.broker_pid) - self.b0
        client = self.client_cpu() - self.c0
        machine = machine_busy() - self.m0
        return {"wall": wall, "broker_cpu": broker, "client_cpu": client, "broker_pct": 100 * broker / wall,
                "client_pct": 100 * client / wall, "machine_pct": 100 * machine / wall,
                "other_pct": max(0.0, 100 * (machine - broker - client) / wall)}


def bound(run: dict[str, float]) -> str:
    """Which side limited a run: the busier of client and broker if it used >= BOUND_PCT of a
    core, else the machine if it was full (other people's load), else none."""
    side, top = max((("broker", run["broker_pct"]), ("client", run["client_pct"])), key=lambda kv: kv[1])
    if top >= BOUND_PCT:
        return side
    cores = os.cpu_count() or 1
    return "machine" if run["machine_pct"] >= BOUND_PCT * cores else "none"


def bounds(runs: list[dict]) -> str:
    c = Counter(r["bound"] for r in runs)
    return ", ".join(f"{k} ({v})" for k, v in c.most_common())


def med(runs: list[dict], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def fmt(v: float, digits: int = 0) -> str:
    return f"{v:,.{digits}f}"


# ---------------------------------------------------------------- part 1: PLAINTEXT vs SASL_SSL


def create_topic(conf: dict[str, Any], name: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient(conf)
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(30)


def produce(conf: dict[str, Any], topic: str, n: int, size: int, meter: Meter,
            extra: dict[str, Any] | None = None) -> dict[str, float]:
    """Send n records of `size` bytes as fast as librdkafka takes them; connected (one
    record sent to the topic first) before the clock starts."""
    from confluent_kafka import Producer

    p = Producer({**conf, "linger.ms": 5, "batch.size": 1 << 20, "queue.buffering.max.messages": 1_000_000,
                  "queue.buffering.max.kbytes": 1 << 20, **(extra or {})})
    p.produce(topic, b"w")
    if p.flush(30):
        raise RuntimeError(f"warm-up record to {topic} not delivered")
    errors: list[Any] = []

    def on_delivery(err, _msg) -> None:
        if err is not None:
            errors.append(err)

    value = b"x" * size
    meter.start()
    for _ in range(n):
        while True:
            try:
                p.produce(topic, value, on_delivery=on_delivery)
                break
            except BufferError:
                p.poll(0.005)
    if p.flush(300):
        raise RuntimeError(f"{topic}: records still queued after 300 s")
    run = meter.stop()
    if errors:
        raise RuntimeError(f"{topic}: {len(errors)} records failed, first: {errors[0]}")
    return run


def consume(conf: dict[str, Any], topic: str, expected: int, meter: Meter) -> dict[str, float]:
    """Read `expected` records from offset 0 the way `krait perf consume` does: the group
    coordinator found and the first record read before the clock starts, then batches of
    up to 100,000; the run's "records" are those after the first."""
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    # krait perf consume's settings: prefetch deep enough that the fetcher never waits on us
    c = Consumer({**conf, "group.id": f"secbench-{time.monotonic_ns()}", "enable.auto.commit": False,
                  "enable.auto.offset.store": False, "fetch.wait.max.ms": 100, "fetch.max.bytes": 50 << 20,
                  "max.partition.fetch.bytes": 4 << 20, "queued.min.messages": 1_000_000,
                  "queued.max.messages.kbytes": 1 << 20, "socket.nagle.disable": True, "check.crcs": False,
                  "receive.message.max.bytes": 1_000_000_000})
    tps = [TopicPartition(topic, 0, 0)]
    try:
        with contextlib.suppress(KafkaException):
            c.committed(tps, timeout=10)
        c.assign(tps)
        deadline = time.monotonic() + 300
        while not [m for m in c.consume(1, 0.5) if m.error() is None]:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{topic}: nothing to consume")
        got = 1
        meter.start()
        while got < expected and time.monotonic() < deadline:
            msgs = c.consume(min(100_000, expected - got), 0.2)
            got += sum(1 for m in msgs if m.error() is None) if any(m.error() for m in msgs) else len(msgs)
        run = meter.stop()
        if got < expected:
            raise RuntimeError(f"{topic}: consumed {got} of {expected}")
        run["records"] = expected - 1
        return run
    finally:
        c.close()


def part_tls(sb: SecureBroker, sizes: list[tuple[int, int]], rounds: int, log: Callable[[str], None]) -> list[str]:
    plain = {"bootstrap.servers": sb.bootstrap("PLAINTEXT")}
    protocols = {
        "PLAINTEXT": plain,
        "SASL_SSL": librdkafka_config(sasl_credentials(sb, "SASL_SSL", SCRAM_MECH, SCRAM_USER)),
    }
    pid = sb.broker.proc.pid
    rows: dict[tuple[int, str, str], list[dict]] = {}
    for r in range(rounds):
        order = list(protocols) if r % 2 == 0 else list(reversed(protocols))
        for size, n in sizes:
            for proto in order:
                topic = f"{BENCH_PREFIX}{proto.lower()}-{size}-{r}"
                create_topic(plain, topic)
                for direction in ("produce", "consume"):
                    meter = Meter(pid)
                    if direction == "produce":
                        count = n
                        run = produce(protocols[proto], topic, n, size, meter)
                    else:  # the producer's warm-up record too, the first record untimed
                        run = consume(protocols[proto], topic, n + 1, meter)
                        count = run["records"]
                    run.update(records_per_sec=count / run["wall"], mb_per_sec=count * size / run["wall"] / 1e6,
                               broker_s_per_m=run["broker_cpu"] / count * 1e6)
                    run["bound"] = bound(run)
                    rows.setdefault((size, direction, proto), []).append(run)
                    log(f"round {r + 1} {size} B {direction} {proto}: {run['records_per_sec']:,.0f} records/s, "
                        f"broker {run['broker_pct']:.0f}% client {run['client_pct']:.0f}% other "
                        f"{run['other_pct']:.0f}% -> {run['bound']}")
    lines = [
        "### 1. PLAINTEXT against SASL_SSL (SCRAM-SHA-512), same broker process",
        "",
        "| value size | direction | listener | records/s | MB/s | SASL_SSL / PLAINTEXT | broker CPU s / M records "
        "| broker CPU % | client CPU % | other load % | bound (rounds) |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for size, _n in sizes:
        for direction in ("produce", "consume"):
            base = med(rows[(size, direction, "PLAINTEXT")], "records_per_sec")
            for proto in protocols:
                runs = rows[(size, direction, proto)]
                rps = med(runs, "records_per_sec")
                ratio = f"{rps / base:.2f}x" if proto != "PLAINTEXT" else ""
                lines.append(
                    f"| {size} B | {direction} | {proto} | {fmt(rps)} | {fmt(med(runs, 'mb_per_sec'), 1)} | {ratio} | "
                    f"{fmt(med(runs, 'broker_s_per_m'), 2)} | {fmt(med(runs, 'broker_pct'))} | "
                    f"{fmt(med(runs, 'client_pct'))} | {fmt(med(runs, 'other_pct'))} | {bounds(runs)} |")
    lines += ["", f"Records per run: {', '.join(f'{n:,} x {s} B' for s, n in sizes)}; producer linger.ms 5, "
                  "batch.size 1 MiB, acks all, no compression, one partition; the consumer's clock starts at its "
                  "first record (as `krait perf consume`). Client CPU % can pass 100 (librdkafka's threads).", ""]
    return lines


# ---------------------------------------------------------------- part 2: connections per second


_FRAMES: dict[tuple, bytes] = {}


def _frame(api_key: int, version: int, cid: int, **fields: Any) -> bytes:
    """A request frame; the fixed ones (ApiVersions, SaslHandshake) encoded once, so that the
    clients' CPU goes to connecting rather than to Python encoding."""
    key = (api_key, version, cid, tuple(sorted(fields.items())))
    frame = _FRAMES.get(key)
    if frame is None:
        from protocol import apis, framing
        from protocol.build import make

        frame = framing.encode_request(api_key, version, cid, make(apis.request_type(api_key, version), **fields),
                                       client_id="secbench")
        from protocol.apis import ApiKey

        if api_key != ApiKey.SASL_AUTHENTICATE:  # its bytes differ every time
            _FRAMES[key] = frame
    return frame


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("closed by the broker")
        buf += chunk
    return bytes(buf)


def _exchange(sock: socket.socket, api_key: int, version: int, cid: int, **fields: Any) -> bytes:
    """Send one request, return the response frame (size prefix off)."""
    sock.sendall(_frame(api_key, version, cid, **fields))
    size = struct.unpack(">i", _recv_exact(sock, 4))[0]
    return _recv_exact(sock, size)


def _call(sock: socket.socket, api_key: int, version: int, cid: int, **fields: Any) -> Any:
    from protocol import framing

    return framing.decode_response(api_key, version, _exchange(sock, api_key, version, cid, **fields))[1]


def one_connection(mode: str, port: int, ctx: ssl.SSLContext | None, source: str,
                   user: tuple[str, str]) -> None:
    """Connect, handshake (TLS and / or SCRAM by mode), ApiVersions, close with a reset (no
    TIME_WAIT left on either side: thousands of connections a second would use up ports)."""
    from protocol.apis import ApiKey

    sock = socket.create_connection(("127.0.0.1", port), timeout=30, source_address=(source, 0))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    try:
        if ctx is not None:
            sock = ctx.wrap_socket(sock, server_hostname="127.0.0.1")
        # ApiVersions' response header has no tagged fields: correlation id, then error_code
        body = _exchange(sock, ApiKey.API_VERSIONS, 3, 1, client_software_name="secbench",
                         client_software_version="1")
        code = struct.unpack_from(">h", body, 4)[0]
        if code != 0 or len(body) < 64:
            raise RuntimeError(f"ApiVersions error {code}")
        if mode == "scram":
            from scramp import ScramClient

            hs = _call(sock, ApiKey.SASL_HANDSHAKE, 1, 2, mechanism=SCRAM_MECH)
            if hs.error_code != 0:
                raise RuntimeError(f"SaslHandshake error {hs.error_code}")
            client = ScramClient([SCRAM_MECH], user[0], user[1])
            first = _call(sock, ApiKey.SASL_AUTHENTICATE, 2, 3, auth_bytes=client.get_client_first().encode())
            if first.error_code != 0:
                raise RuntimeError(f"SaslAuthenticate error {first.error_code}: {first.error_message}")
            client.set_server_first(first.auth_bytes.decode())
            final = _call(sock, ApiKey.SASL_AUTHENTICATE, 2, 4, auth_bytes=client.get_client_final().encode())
            if final.error_code != 0:
                raise RuntimeError(f"SaslAuthenticate error {final.error_code}: {final.error_message}")
            client.set_server_final(final.auth_bytes.decode())  # verifies the broker's signature
    finally:
        sock.close()


def connect_worker(mode: str, port: int, ca: str | None, t_start: float, seconds: float, source: str,
                   user: tuple[str, str]) -> dict[str, Any]:
    """One client process: connections back to back from wall time t_start for `seconds`;
    those completed in the window, errors, and this process's CPU over the window."""
    ctx = ssl.create_default_context(cafile=ca) if ca else None
    with contextlib.suppress(ValueError):
        time.sleep(t_start - time.time())
    c0 = self_cpu()
    end = t_start + seconds
    done = errors = 0
    first_error = ""
    info = ""
    while time.time() < end:
        try:
            one_connection(mode, port, ctx, source, user)
        except Exception as exc:  # counted and shown: a benchmark must not hide failures
            errors += 1
            first_error = first_error or f"{type(exc).__name__}: {exc}"
            time.sleep(0.01)
            continue
        if time.time() <= end:
            done += 1
    if ctx is not None and not info:
        with contextlib.suppress(Exception):
            s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=10),
                                server_hostname="127.0.0.1")
            info = f"{s.version()} {s.cipher()[0]}"
            s.close()
    return {"done": done, "errors": errors, "first_error": first_error, "cpu": self_cpu() - c0, "tls": info,
            "late": time.time() - t_start}


def _pid_after(seconds: float) -> int:
    time.sleep(seconds)
    return os.getpid()


def part_handshakes(sb: SecureBroker, clients: int, seconds: float, rounds: int,
                    log: Callable[[str], None]) -> list[str]:
    modes = {
        "tcp": ("PLAINTEXT", None, "TCP + ApiVersions"),
        "tls": ("SSL", sb.certs.ca_cert, "TLS handshake + ApiVersions"),
        "scram": ("SASL_SSL", sb.certs.ca_cert, "TLS + ApiVersions + SCRAM-SHA-512 authentication"),
    }
    pid = sb.broker.proc.pid
    rows: dict[str, list[dict]] = {m: [] for m in modes}
    tls_info = ""
    # spawn: this process already runs librdkafka threads, which fork would copy half-way
    with mp.get_context("spawn").Pool(clients) as pool:
        # every worker started and this module imported in it before any clock runs
        deadline = time.monotonic() + 60
        while len(set(pool.map(_pid_after, [0.3] * clients, chunksize=1))) < clients:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{clients} client processes did not all start in 60 s")
        for r in range(rounds):
            order = list(modes) if r % 2 == 0 else list(reversed(modes))
            for mode in order:
                proto, ca, _ = modes[mode]
                t_start = time.time() + 0.5
                # one loopback source address per client process: more (source, port) pairs
                args = [(mode, sb.ports[proto], ca, t_start, seconds, f"127.0.0.{2 + i}", SCRAM_USER)
                        for i in range(clients)]
                pending = pool.starmap_async(connect_worker, args)
                time.sleep(max(0.0, t_start - time.time()))
                b0, m0, w0 = proc_cpu(pid), machine_busy(), time.perf_counter()
                time.sleep(seconds)
                broker, machine, wall = proc_cpu(pid) - b0, machine_busy() - m0, time.perf_counter() - w0
                res = pending.get(timeout=seconds + 120)
                done = sum(x["done"] for x in res)
                errors = sum(x["errors"] for x in res)
                if done == 0:
                    raise RuntimeError(f"{mode}: no connection completed {res}; first error: "
                                       f"{next((x['first_error'] for x in res if x['first_error']), '')}")
                client = sum(x["cpu"] for x in res)
                tls_info = tls_info or next((x["tls"] for x in res if x["tls"]), "")
                run = {"per_sec": done / wall, "broker_ms": 1000 * broker / done, "client_ms": 1000 * client / done,
                       "broker_pct": 100 * broker / wall, "client_pct": 100 * client / wall,
                       "machine_pct": 100 * machine / wall, "errors": errors,
                       "other_pct": max(0.0, 100 * (machine - broker - client) / wall)}
                run["bound"] = bound(run)
                rows[mode].append(run)
                err = f", {errors} errors (first: {next(x['first_error'] for x in res if x['first_error'])})" \
                    if errors else ""
                log(f"round {r + 1} {mode}: {run['per_sec']:,.0f} connections/s, broker {run['broker_pct']:.0f}% "
                    f"clients {run['client_pct']:.0f}% other {run['other_pct']:.0f}% -> {run['bound']}{err}")
    base = med(rows["tcp"], "per_sec")
    lines = [
        "### 2. New connections per second",
        "",
        "| connection | listener | connections/s | vs TCP | broker CPU ms / connection | client CPU ms / connection "
        "| broker CPU % | clients CPU % | other load % | errors | bound (rounds) |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for mode, (proto, _, label) in modes.items():
        runs = rows[mode]
        lines.append(f"| {label} | {proto} | {fmt(med(runs, 'per_sec'))} | {med(runs, 'per_sec') / base:.2f}x | "
                     f"{fmt(med(runs, 'broker_ms'), 2)} | {fmt(med(runs, 'client_ms'), 2)} | "
                     f"{fmt(med(runs, 'broker_pct'))} | {fmt(med(runs, 'client_pct'))} | "
                     f"{fmt(med(runs, 'other_pct'))} | {sum(r['errors'] for r in runs)} | {bounds(runs)} |")
    lines += ["", f"{clients} client processes (Python ssl, one SSLContext each, no session resumption: every "
                  f"connection a full handshake), {seconds:g} s per run; {tls_info or 'TLS'} with the broker's "
                  "RSA-2048 certificate; SCRAM credentials with 4096 iterations (the client's PBKDF2 is in the "
                  "client CPU). Connections closed with a reset (SO_LINGER 0).", ""]
    return lines


# ---------------------------------------------------------------- part 3: ACLs


@dataclass(frozen=True)
class Acl:
    """One ACL in a form both Krait's and confluent-kafka's bindings are made from."""

    resource_type: str   # TOPIC / GROUP / CLUSTER
    name: str
    pattern: str         # LITERAL / PREFIXED
    principal: str
    host: str
    operation: str       # READ / WRITE / DESCRIBE / ALL / ...
    permission: str      # ALLOW / DENY


def topic_name(rng: random.Random) -> str:
    return f"team{rng.randrange(50)}.svc{rng.randrange(20)}.topic{rng.randrange(100)}"


def make_acls(n: int, seed: int = 14) -> list[Acl]:
    """`n` ACLs: the measured principal's (a PREFIXED ALLOW of WRITE and DESCRIBE on the bench
    topics, a few literal ones), then principals User:u0000.. with literal topic ACLs (60 %),
    PREFIXED topic ACLs of many prefix lengths (20 %), group ACLs (10 %), DENYs (5 %) and
    host-bound ALLOWs (5 %). Deterministic."""
    rng = random.Random(seed)
    acls = {
        Acl("TOPIC", BENCH_PREFIX, "PREFIXED", PRINCIPAL, "*", "WRITE", "ALLOW"),
        Acl("TOPIC", BENCH_PREFIX, "PREFIXED", PRINCIPAL, "*", "DESCRIBE", "ALLOW"),
        Acl("TOPIC", "team1.svc1.topic1", "LITERAL", PRINCIPAL, "*", "READ", "ALLOW"),
        Acl("GROUP", "alice-group", "LITERAL", PRINCIPAL, "*", "READ", "ALLOW"),
    }
    principals = [f"User:u{i:04d}" for i in range(max(10, n // 20))]
    ops = ("READ", "WRITE", "DESCRIBE", "ALL")
    acls_list = list(acls)
    while len(acls_list) < n:
        kind = rng.random()
        who = rng.choice(principals)
        if kind < 0.60:
            a = Acl("TOPIC", topic_name(rng), "LITERAL", who, "*", rng.choice(ops), "ALLOW")
        elif kind < 0.80:
            full = topic_name(rng)
            a = Acl("TOPIC", full[:rng.randrange(4, len(full))], "PREFIXED", who, "*", rng.choice(ops), "ALLOW")
        elif kind < 0.90:
            a = Acl("GROUP", f"group{rng.randrange(500)}", rng.choice(("LITERAL", "PREFIXED")), who, "*", "READ",
                    "ALLOW")
        elif kind < 0.95:
            a = Acl("TOPIC", topic_name(rng), "LITERAL", rng.choice((who, "User:*")), "*", rng.choice(ops), "DENY")
        else:
            a = Acl("TOPIC", topic_name(rng), "LITERAL", who, f"10.0.{rng.randrange(256)}.{rng.randrange(256)}",
                    rng.choice(ops), "ALLOW")
        if a not in acls:
            acls.add(a)
            acls_list.append(a)
    return acls_list[:n]


def krait_bindings(acls: Iterable[Acl]) -> list[Any]:
    from broker.security.acls import AclBinding, AclOperation, AclPermissionType, PatternType, ResourceType

    return [AclBinding.of(ResourceType[a.resource_type], a.name, PatternType[a.pattern], a.principal, a.host,
                          AclOperation[a.operation], AclPermissionType[a.permission]) for a in acls]


def confluent_bindings(acls: Iterable[Acl]) -> list[Any]:
    from confluent_kafka import admin as ck

    return [ck.AclBinding(ck.ResourceType[a.resource_type], a.name, ck.ResourcePatternType[a.pattern], a.principal,
                          a.host, ck.AclOperation[a.operation], ck.AclPermissionType[a.permission]) for a in acls]


def make_queries(count: int, seed: int = 41) -> list[tuple[str, str, Any, Any, str]]:
    """authorize() arguments: mostly topics of the ACLs' name space (some allowed, most not),
    a quarter the bench topics, by the measured principal or one of the others."""
    from broker.security.operations import AclOperation, ResourceType

    rng = random.Random(seed)
    out = []
    for i in range(count):
        who = PRINCIPAL if i % 2 == 0 else f"User:u{rng.randrange(500):04d}"
        name = f"{BENCH_PREFIX}acl-{rng.randrange(8)}" if i % 4 == 0 else topic_name(rng)
        op = rng.choice((AclOperation.WRITE, AclOperation.READ, AclOperation.DESCRIBE))
        out.append((who, "127.0.0.1", op, ResourceType.TOPIC, name))
    return out


def scan_authorize(bindings: list[Any], principal: str, host: str, op: Any, rtype: Any, name: str) -> bool:
    """What a check costs without an index: every ACL looked at (a reference, not Kafka's
    rules in full: no super users, no allow-everyone)."""
    from broker.security.acls import AclOperation, AclPermissionType, PatternType

    allowed = False
    for b in bindings:
        p, e = b.pattern, b.entry
        if p.resource_type != rtype:
            continue
        if not (p.name == name or p.name == "*" or (p.pattern_type == PatternType.PREFIXED
                                                    and name.startswith(p.name))):
            continue
        if e.principal not in (principal, "User:*") or e.host not in (host, "*"):
            continue
        if e.operation in (op, AclOperation.ALL):
            if e.permission_type == AclPermissionType.DENY:
                return False
            allowed = True
    return allowed


def _per_call(fn: Callable[[], int], rounds: int) -> float:
    """Seconds per call: fn() runs a batch and returns how many calls it made; median of rounds."""
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        calls = fn()
        times.append((time.perf_counter() - t0) / calls)
    return statistics.median(times)


def acl_inprocess(n_acls: int, calls: int, metadata_topics: int, rounds: int) -> list[str]:
    from broker.security.authorizer import Authorizer
    from broker.security.operations import AclOperation, ResourceType

    big_acls = make_acls(n_acls)
    t0 = time.perf_counter()
    big = Authorizer(super_users=[f"User:{ADMIN[0]}"], bindings=krait_bindings(big_acls))
    build_s = time.perf_counter() - t0
    small = Authorizer(super_users=[f"User:{ADMIN[0]}"], bindings=krait_bindings(make_acls(10)))
    queries = make_queries(calls)
    rng = random.Random(7)
    md_topics = [f"{BENCH_PREFIX}acl-{i}" if i % 5 == 0 else topic_name(rng) for i in range(metadata_topics)]
    scan_bindings = krait_bindings(big_acls)
    scan_queries = queries[:max(20, calls // 500)]

    def checks(auth: Authorizer) -> Callable[[], int]:
        def run() -> int:
            a = auth.authorize
            for q in queries:
                a(*q)
            return len(queries)
        return run

    def metadata(auth: Authorizer) -> Callable[[], int]:
        def run() -> int:
            reps = max(1, calls // (20 * metadata_topics))
            for _ in range(reps):
                for t in md_topics:  # as Metadata with an authorizer: DESCRIBE, then the bit field
                    if auth.authorize(PRINCIPAL, "127.0.0.1", AclOperation.DESCRIBE, ResourceType.TOPIC, t):
                        auth.authorized_operations(PRINCIPAL, "127.0.0.1", ResourceType.TOPIC, t)
            return reps
        return run

    def scan() -> int:
        for q in scan_queries:
            scan_authorize(scan_bindings, *q)
        return len(scan_queries)

    results = {}
    allowed = {}
    for name, auth in (("10", small), (f"{n_acls:,}", big)):
        auth.probes = 0
        for q in queries:
            auth.authorize(*q)
        probes = auth.probes / len(queries)
        allowed[name] = sum(auth.authorize(*q) for q in queries) / len(queries)
        results[name] = {"call": _per_call(checks(auth), rounds), "meta": _per_call(metadata(auth), rounds),
                         "probes": probes}
    scan_s = _per_call(scan, rounds)
    small_r, big_r = results["10"], results[f"{n_acls:,}"]
    lines = [
        f"### 3a. ACL checks in process (broker.security.authorizer.Authorizer), {n_acls:,} ACLs against 10",
        "",
        f"| ACLs | authorize() µs / call | index probes / call | share allowed | Metadata-like request of "
        f"{metadata_topics} topics, µs |",
        "|---:|---:|---:|---:|---:|",
    ]
    for name, r in results.items():
        lines.append(f"| {name} | {r['call'] * 1e6:.2f} | {r['probes']:.1f} | {allowed[name]:.0%} | "
                     f"{fmt(r['meta'] * 1e6)} |")
    lines.append(f"| ratio {n_acls:,} / 10 | {big_r['call'] / small_r['call']:.2f}x | "
                 f"{big_r['probes'] / max(small_r['probes'], 1e-9):.1f}x | | {big_r['meta'] / small_r['meta']:.2f}x |")
    lines.append(f"| {n_acls:,}, linear scan (reference, not the broker's code) | {scan_s * 1e6:,.0f} | "
                 f"{n_acls:,} | | {fmt(scan_s * 1e6 * 2 * metadata_topics)} (estimate) |")
    distinct = len({len(a.name) for a in big_acls if a.pattern == "PREFIXED" and a.resource_type == "TOPIC"})
    lines += ["", f"{len(queries):,} checks per round, cycling over TOPIC checks (WRITE / READ / DESCRIBE) by "
                  f"{PRINCIPAL} and 500 other principals, median of {rounds} round(s). The {n_acls:,} ACLs: "
                  f"{Counter(a.pattern for a in big_acls)['PREFIXED']:,} PREFIXED ({distinct} distinct topic prefix "
                  f"lengths: a check probes one bucket per length), the rest LITERAL, over "
                  f"{len({a.principal for a in big_acls}):,} principals and "
                  f"{len({a.name for a in big_acls}):,} resource names; indexed in {build_s:.2f} s. "
                  "A Metadata-like request: per topic authorize(DESCRIBE) then authorized_operations() "
                  "(the bit field), as the Metadata handler does without its cache.", ""]
    return lines


def acl_wire(certs: Any, tmp: str, n_acls: int, records: int, small_records: int, rounds: int,
             log: Callable[[str], None]) -> list[str]:
    """A PLAIN principal's produce throughput: authorizer with n_acls ACLs vs no authorizer,
    two brokers alike otherwise (SASL_PLAINTEXT only), started together, run in turn."""
    on = SecureBroker(certs, tempfile.mkdtemp(dir=tmp), ("SASL_PLAINTEXT",), authorizer=True,
                      extra={"allow.everyone.if.no.acl.found": "false"})
    off = SecureBroker(certs, tempfile.mkdtemp(dir=tmp), ("SASL_PLAINTEXT",), authorizer=False)
    brokers = {"authorizer off": off, f"authorizer on, {n_acls:,} ACLs": on}
    try:
        for b in brokers.values():
            b.start()
        admin_on = librdkafka_config(sasl_credentials(on, "SASL_PLAINTEXT", "PLAIN", ADMIN))
        from confluent_kafka.admin import AdminClient

        t0 = time.perf_counter()
        ac = AdminClient(admin_on)
        for fut in ac.create_acls(confluent_bindings(make_acls(n_acls)), request_timeout=120).values():
            fut.result(120)
        from confluent_kafka.admin import AclBindingFilter, AclOperation, AclPermissionType, ResourcePatternType
        from confluent_kafka.admin import ResourceType as CkResourceType

        every = AclBindingFilter(CkResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                                 AclPermissionType.ANY)
        held = len(ac.describe_acls(every, request_timeout=120).result(120))
        if held != n_acls:
            raise RuntimeError(f"the broker holds {held} ACLs, not {n_acls}")
        log(f"{n_acls:,} ACLs created through CreateAcls and described back in {time.perf_counter() - t0:.1f} s")
        variants = {"batches (linger.ms 5, up to 1 MiB)": (records, {}),
                    "one record per request": (small_records, {"linger.ms": 0, "batch.num.messages": 1})}
        rows: dict[tuple[str, str], list[dict]] = {}
        runs_done = 0
        for r in range(rounds):
            order = list(brokers) if r % 2 == 0 else list(reversed(brokers))
            for variant, (n, extra) in variants.items():
                for label in order:
                    b = brokers[label]
                    runs_done += 1
                    topic = f"{BENCH_PREFIX}acl-{runs_done}"
                    create_topic(librdkafka_config(sasl_credentials(b, "SASL_PLAINTEXT", "PLAIN", ADMIN)), topic)
                    conf = librdkafka_config(sasl_credentials(b, "SASL_PLAINTEXT", "PLAIN", ALICE))
                    run = produce(conf, topic, n, 100, Meter(b.broker.proc.pid), extra)
                    run.update(records_per_sec=n / run["wall"], broker_us=1e6 * run["broker_cpu"] / n)
                    run["bound"] = bound(run)
                    rows.setdefault((variant, label), []).append(run)
                    log(f"round {r + 1} {variant} / {label}: {run['records_per_sec']:,.0f} records/s, broker "
                        f"{run['broker_pct']:.0f}% client {run['client_pct']:.0f}% -> {run['bound']}")
    finally:
        for b in brokers.values():
            b.stop()
    lines = [
        f"### 3b. On the wire: {PRINCIPAL} producing 100 B records over SASL_PLAINTEXT (PLAIN)",
        "",
        "| produce | broker | records/s | on / off | broker CPU µs / record | broker CPU % | client CPU % | "
        "other load % | bound (rounds) |",
        "|---|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for variant, (n, _) in variants.items():
        base = med(rows[(variant, "authorizer off")], "records_per_sec")
        for label in brokers:
            runs = rows[(variant, label)]
            rps = med(runs, "records_per_sec")
            lines.append(f"| {variant}, {n:,} records | {label} | {fmt(rps)} | {rps / base:.2f}x | "
                         f"{med(runs, 'broker_us'):.1f} | {fmt(med(runs, 'broker_pct'))} | "
                         f"{fmt(med(runs, 'client_pct'))} | {fmt(med(runs, 'other_pct'))} | {bounds(runs)} |")
    lines += ["", "Both brokers run StandardAuthorizer's rules or none, everything else equal; the principal "
                  f"is allowed by a PREFIXED ACL on `{BENCH_PREFIX}` among the others (allow.everyone.if.no.acl."
                  "found false). Each Produce request checks WRITE on its topic.", ""]
    return lines


# ---------------------------------------------------------------- main


def git_describe() -> str:
    try:
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                             timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown commit"
    return f"commit {rev}" + (" (+ uncommitted changes)" if dirty else "")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--records-100", type=int, default=1_000_000, help="records of 100 B per run (part 1)")
    ap.add_argument("--records-1k", type=int, default=300_000, help="records of 1 KiB per run (part 1)")
    ap.add_argument("--handshake-seconds", type=float, default=3.0)
    ap.add_argument("--clients", type=int, default=4, help="client processes of part 2")
    ap.add_argument("--acls", type=int, default=10_000)
    ap.add_argument("--acl-calls", type=int, default=100_000, help="authorize() calls per round (part 3a)")
    ap.add_argument("--metadata-topics", type=int, default=100)
    ap.add_argument("--acl-records", type=int, default=1_000_000, help="records per batched run (part 3b)")
    ap.add_argument("--acl-small-records", type=int, default=40_000, help="records per one-per-request run (3b)")
    ap.add_argument("--parts", default="tls,handshakes,acls")
    ap.add_argument("--quick", action="store_true", help="tiny sizes: checks that everything runs")
    ap.add_argument("--results", help="also append the tables to this file")
    args = ap.parse_args()
    if args.quick:
        args.rounds, args.records_100, args.records_1k = 1, 2000, 500
        args.handshake_seconds, args.clients, args.acls, args.acl_calls = 1.0, 2, 500, 2000
        args.metadata_topics, args.acl_records, args.acl_small_records = 10, 2000, 200
    parts = {p.strip() for p in args.parts.split(",") if p.strip()}
    unknown = parts - {"tls", "handshakes", "acls"}
    if unknown:
        ap.error(f"unknown parts: {', '.join(sorted(unknown))}")

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    started = time.perf_counter()
    import confluent_kafka

    lines = [f"## {_dt.datetime.now():%Y-%m-%d %H:%M} — security (issue 14), `bench/security_bench.py`, "
             f"{git_describe()}", "",
             f"One machine, {os.cpu_count()} cores (shared: other load is reported per run); confluent-kafka "
             f"{confluent_kafka.version()} (librdkafka {confluent_kafka.libversion()[0]}), {ssl.OPENSSL_VERSION}; "
             f"median of {args.rounds} round(s).", ""]
    with tempfile.TemporaryDirectory(prefix="secbench-") as tmp:
        certs = make_cert_files(Path(tmp) / "certs")
        if parts & {"tls", "handshakes"}:
            sb = SecureBroker(certs, tempfile.mkdtemp(dir=tmp), ("PLAINTEXT", "SSL", "SASL_SSL"), authorizer=False)
            sb.start()
            try:
                create_scram_users(Credentials(sb.bootstrap("PLAINTEXT"), "PLAINTEXT"), {SCRAM_MECH: SCRAM_USER})
                if "tls" in parts:
                    lines += part_tls(sb, [(100, args.records_100), (1024, args.records_1k)], args.rounds, log)
                if "handshakes" in parts:
                    lines += part_handshakes(sb, args.clients, args.handshake_seconds, args.rounds, log)
            finally:
                sb.stop()
        if "acls" in parts:
            lines += acl_inprocess(args.acls, args.acl_calls, args.metadata_topics, args.rounds)
            lines += acl_wire(certs, tmp, args.acls, args.acl_records, args.acl_small_records, args.rounds, log)
    lines.append(f"Whole run: {(time.perf_counter() - started) / 60:.1f} min.")
    text = "\n".join(lines)
    print(text, flush=True)
    if args.results:
        with open(args.results, "a") as f:
            f.write("\n" + text + "\n")


if __name__ == "__main__":
    main()

