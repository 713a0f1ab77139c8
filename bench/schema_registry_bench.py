"""The built-in Schema Registry's speed on one Krait broker subprocess:

    .venv/bin/python bench/schema_registry_bench.py [--schemas 2000] [--clients 4] [--rounds 3]
        [--results FILE | --no-results-file]

Each round, on a fresh broker:
1. register     --schemas new Avro schemas (a record gaining a field with a default per
                version, 20 versions per subject, so each one is checked BACKWARD against
                the subject's latest) from --clients threads: registrations/s. Each is a
                compatibility check, one append to _schemas with acks=all and the answer
                once it is committed;
2. re-register  the same requests again: the registry finds each version and answers its
                id without writing (what every serializer does at start-up): requests/s;
3. get by id    GET /schemas/ids/{id} for every id (what every deserializer does once per
                id): requests/s.
The client is Python's http.client with one keep-alive connection per thread; broker and
client CPU seconds are reported so that the bound shows. The median of --rounds is printed
and appended to bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import http.client
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from txn_bench import client_cpu, cpu_seconds  # noqa: E402

from tests.krait_harness import BrokerProcess, free_port  # noqa: E402

CT = "application/vnd.schemaregistry.v1+json"


def schema(subject: int, version: int) -> str:
    fields = [{"name": "id", "type": "long"}] + [
        {"name": f"f{j}", "type": "string", "default": ""} for j in range(version)]
    return json.dumps({"type": "record", "name": f"Event{subject}", "namespace": "bench", "fields": fields})


def run_phase(port: int, requests: list[tuple[str, str, str | None]], clients: int) -> float:
    """Run the requests from ``clients`` threads, each on one keep-alive connection; seconds."""
    chunks = [requests[i::clients] for i in range(clients)]
    errors: list[str] = []

    def worker(chunk: list[tuple[str, str, str | None]]) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        for method, path, body in chunk:
            conn.request(method, path, body=body, headers={"Content-Type": CT} if body else {})
            resp = conn.getresponse()
            data = resp.read()
            if resp.status != 200:
                errors.append(f"{method} {path}: {resp.status} {data[:200]!r}")
        conn.close()

    threads = [threading.Thread(target=worker, args=(c,)) for c in chunks]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - t0
    if errors:
        raise SystemExit(f"{len(errors)} requests failed, e.g. {errors[0]}")
    return elapsed


def one_round(n: int, clients: int) -> dict[str, tuple[float, float, float]]:
    port = free_port()
    b = BrokerProcess(overrides={"krait.schema.registry.listener": f"127.0.0.1:{port}"}).start()
    try:
        per_subject = 20
        regs = [("POST", f"/subjects/bench-{i // per_subject}-value/versions",
                 json.dumps({"schema": schema(i // per_subject, i % per_subject)})) for i in range(n)]
        # versions of one subject must go in order (each extends the last): one thread per subject
        by_subject: dict[str, list] = {}
        for r in regs:
            by_subject.setdefault(r[1], []).append(r)
        ordered = [r for group in zip(*by_subject.values(), strict=False) for r in group]
        out = {}
        for name, reqs in (("register", ordered), ("re-register", ordered),
                           ("get by id", [("GET", f"/schemas/ids/{i}", None) for i in range(1, n + 1)])):
            b0, c0 = cpu_seconds(b.proc.pid), client_cpu()
            secs = run_phase(port, reqs, clients if name != "register" else 1)
            out[name] = (len(reqs) / secs, cpu_seconds(b.proc.pid) - b0, client_cpu() - c0)
        return out
    finally:
        b.stop()


def commit() -> str:
    try:
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout
        dirty = subprocess.run(["git", "status", "--porcelain"], cwd=ROOT, capture_output=True, text=True).stdout
    except OSError:
        return "?"
    return rev.strip() + (" (+ uncommitted changes)" if dirty.strip() else "")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--schemas", type=int, default=2000)
    p.add_argument("--clients", type=int, default=4)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--results", default=str(ROOT / "bench" / "RESULTS.md"))
    p.add_argument("--no-results-file", action="store_true")
    args = p.parse_args()
    rounds = [one_round(args.schemas, args.clients) for _ in range(args.rounds)]
    lines = [f"## {_dt.datetime.now():%Y-%m-%d %H:%M} — Schema Registry (`bench/schema_registry_bench.py "
             f"--schemas {args.schemas} --clients {args.clients} --rounds {args.rounds}`), commit {commit()}", "",
             f"One broker, {os.cpu_count()} cores; client: http.client, one keep-alive connection per thread "
             f"(registrations from 1 thread: each subject's versions in order; the other phases from "
             f"{args.clients}). Median of {args.rounds} rounds; CPU seconds per 1,000 requests.", "",
             "| phase | requests/s (median) | runs | broker CPU s / 1k | client CPU s / 1k |",
             "|---|---:|---|---:|---:|"]
    for name in rounds[0]:
        rates = [r[name][0] for r in rounds]
        med = sorted(range(len(rounds)), key=lambda i: rates[i])[len(rounds) // 2]
        rate, bcpu, ccpu = rounds[med][name]
        lines.append(f"| {name} | {statistics.median(rates):,.0f} | {', '.join(f'{x:,.0f}' for x in rates)} | "
                     f"{bcpu / args.schemas * 1000:.2f} | {ccpu / args.schemas * 1000:.2f} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if not args.no_results_file:
        with open(args.results, "a") as f:
            f.write("\n" + text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
