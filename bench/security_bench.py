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
import socket
import ssl
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))


from security_bench_acls import acl_inprocess, acl_wire  # noqa: E402
from security_bench_common import (  # noqa: E402
    BENCH_PREFIX,
    SCRAM_MECH,
    SCRAM_USER,
    Meter,
    bound,
    bounds,
    create_topic,
    fmt,
    machine_busy,
    med,
    proc_cpu,
    produce,
    self_cpu,
)

from tests.security.secure_broker import (  # noqa: E402
    Credentials,
    SecureBroker,
    create_scram_users,
    librdkafka_config,
    sasl_credentials,
)
from tests.security.tls_ca import make_cert_files  # noqa: E402

# ---------------------------------------------------------------- part 1: PLAINTEXT vs SASL_SSL


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
    done = errors = after_window = 0
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
        else:  # completed, but after the window (a loaded machine): not counted in the rate
            after_window += 1
    if ctx is not None and not info:
        with contextlib.suppress(Exception):
            s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=10),
                                server_hostname="127.0.0.1")
            info = f"{s.version()} {s.cipher()[0]}"
            s.close()
    return {"done": done, "errors": errors, "first_error": first_error, "cpu": self_cpu() - c0, "tls": info,
            "late": time.time() - t_start, "after_window": after_window}


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
                if done == 0 and (errors or not sum(x["after_window"] for x in res)):
                    raise RuntimeError(f"{mode}: no connection completed {res}; first error: "
                                       f"{next((x['first_error'] for x in res if x['first_error']), '')}")
                if done == 0:
                    # every connection took longer than the window (a loaded machine): the rate is
                    # over the time they did take, and the log says so
                    done, wall = sum(x["after_window"] for x in res), max(x["late"] for x in res)
                    log(f"{mode}: connections completed only after the {seconds:.1f} s window (machine too busy)")
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

