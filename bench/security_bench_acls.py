"""Part 3 of the security benchmark (bench/security_bench.py): the cost of ACL checks, in
process on the broker's Authorizer (10,000 ACLs against 10, index probes, a linear scan
for reference) and on the wire (a principal's produce throughput with and without the
authorizer)."""

from __future__ import annotations

import random
import statistics
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
sys.path.insert(0, str(ROOT / "bench"))


from security_bench_common import (  # noqa: E402
    BENCH_PREFIX,
    PRINCIPAL,
    Meter,
    bound,
    bounds,
    create_topic,
    fmt,
    med,
    produce,
)

from tests.security.secure_broker import (  # noqa: E402
    ADMIN,
    ALICE,
    SecureBroker,
    librdkafka_config,
    sasl_credentials,
)

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


