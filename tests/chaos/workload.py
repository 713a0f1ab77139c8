"""The chaos run's clients, each a process of its own (librdkafka through confluent-kafka),
each writing what it did as JSON lines, one flushed line per event, so that a client
killed mid-run still leaves its history:

  produce  an idempotent acks=all producer writing unique values "<name>-<seq>" round-robin
           over the partitions; every acknowledgement (partition, offset, value, latency) and
           every failure is recorded as soon as librdkafka reports it
  txn      a transactional producer committing or aborting at random; records what it
           believes committed or aborted (or "unknown" when the outcome was not learnt)
  consume  a member of a read_committed consumer group that commits its offsets
           synchronously; records assignments, every polled record and every acked commit
  share    a member of a share group (KIP-932, librdkafka's share consumer) in explicit
           acknowledgement mode: accepts most records, releases a deterministic few by value
           (share_ack_for), commits the acknowledgements synchronously after each poll and
           records every delivery: partition, offset, value, delivery count, acknowledgement,
           whether commit_sync confirmed it for its partition, when the poll returned and when
           the commit did
  drain    the final reader: every partition from the start to its end, at read_uncommitted
           and read_committed, and the group's committed offsets
  registry a Schema Registry client (plain HTTP, Confluent's REST API v1) registering Avro
           records at a low rate through the brokers' registries (--registries ID=URL,...), in
           turn: several subjects of its own, each subject's versions BACKWARD compatible
           (version n adds a field with a default to version n-1); a failed request is retried
           on the next broker with the same schema until it is acknowledged (the run has two
           such clients, so that two writers race for ids across the writer's failovers). Records every
           acknowledgement (subject, schema fingerprint, id, latency, and the version and id
           a follow-up lookup on another broker answered), every failure, and the schema
           still unacknowledged when it stops
  registry-read  the registry's final reader: every broker's subjects, versions (id,
           fingerprint) and schemas by id, read again until the brokers agree (a follower
           may be behind for a moment) or --wait seconds pass; records each broker's last
           snapshot

Usage: python -m tests.chaos.workload ROLE BOOTSTRAP TOPIC OUT.jsonl [options]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import signal
import sys
import time
import urllib.parse

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition

from tests.chaos.checker import REGISTRY_SUBJECT_PREFIX, registry_fingerprint

GROUP = "chaos"
SHARE_GROUP = "chaos-share"
_stop = False


def _on_term(*_a) -> None:
    global _stop
    _stop = True


class History:
    def __init__(self, path: str) -> None:
        self.f = open(path, "a", buffering=1)

    def __call__(self, kind: str, **fields) -> None:
        self.f.write(json.dumps({"t": round(time.time(), 4), "k": kind, **fields}) + "\n")


def _common(bootstrap: str, debug: str = "") -> dict:
    conf = {"bootstrap.servers": bootstrap, "topic.metadata.refresh.interval.ms": 2000,
            "reconnect.backoff.max.ms": 1000, "socket.connection.setup.timeout.ms": 5000,
            "log_level": 3}
    # CHAOS_RDKAFKA_DEBUG=eos,... (librdkafka debug contexts; empty: none) to see what a
    # client did, in its history's .stderr, when a run needs explaining
    debug = os.environ.get("CHAOS_RDKAFKA_DEBUG", debug)
    if debug:
        conf.update({"debug": debug, "log_level": 7})
    return conf


def produce(a: argparse.Namespace, h: History) -> None:
    # the idempotent producers log their "eos" context always (about 20 kB a run each): a
    # duplicate's report quotes what the producer did around it (epoch bumps, sequence
    # errors, drains at leader changes), which a failed CI run cannot be asked again
    conf = {**_common(a.bootstrap, "eos"), "acks": "all", "enable.idempotence": True, "linger.ms": 5,
            "message.timeout.ms": 120000, "request.timeout.ms": 10000, "retry.backoff.ms": 100}

    def report(err, msg, sent: float) -> None:
        v = msg.value().decode()
        if err is None:
            h("ack", v=v, p=msg.partition(), o=msg.offset(), lat=round(time.time() - sent, 4))
        else:
            h("fail", v=v, p=msg.partition(), err=err.name(), fatal=err.fatal())

    def make() -> Producer:
        return Producer({**conf, "error_cb": lambda e: h("error", err=e.name(), fatal=e.fatal(), msg=e.str())})

    p, seq, start = make(), 0, time.monotonic()
    while not _stop:
        v = f"{a.name}-{seq}"
        sent = time.time()
        try:
            p.produce(a.topic, v.encode(), partition=seq % a.partitions,
                      on_delivery=lambda err, msg, s=sent: report(err, msg, s))
            seq += 1
            p.poll(max(start + seq / a.rate - time.monotonic(), 0))
            # poll() returns at the first delivery report, so acknowledgements clock the
            # sends above the rate; --paced holds the rate itself (the share producer)
            while a.paced and not _stop and (wait := start + seq / a.rate - time.monotonic()) > 0:
                p.poll(wait)
        except BufferError:
            p.poll(0.1)
        except KafkaException as exc:
            # a fatal idempotence error: what is in flight fails, and only a new producer
            # (a new producer id) can go on
            h("fatal", err=str(exc))
            try:
                p.flush(10)
            except KafkaException:
                pass
            p = make()
    try:
        left = p.flush(60)
    except KafkaException as exc:
        h("fatal", err=str(exc))
        left = -1
    h("done", unflushed=left, sent=seq)


def txn(a: argparse.Namespace, h: History) -> None:
    conf = {**_common(a.bootstrap), "transactional.id": f"chaos-{a.name}", "transaction.timeout.ms": 20000,
            "message.timeout.ms": 20000, "request.timeout.ms": 10000, "linger.ms": 5}

    def make() -> Producer:
        while not _stop:
            p = Producer({**conf, "on_delivery": lambda err, msg: err is None and h(
                "tack", v=msg.value().decode(), p=msg.partition(), o=msg.offset())})
            try:
                p.init_transactions(30)
                return p
            except KafkaException as exc:
                h("error", err=str(exc), where="init")
                time.sleep(1)
        return None

    rng = random.Random(a.seed)
    p, n = make(), 0
    while not _stop and p is not None:
        n += 1
        values = [(f"{a.name}-{n}-{i}", rng.randrange(a.partitions)) for i in range(rng.randint(1, 4))]
        commit = rng.random() < 0.7
        outcome = "unknown"
        try:
            p.begin_transaction()
            for v, part in values:
                p.produce(a.topic, v.encode(), partition=part)
            if commit:
                for _ in range(5):
                    try:
                        p.commit_transaction(30)
                        outcome = "commit"
                        break
                    except KafkaException as exc:
                        if not exc.args[0].retriable():
                            raise
            else:
                p.abort_transaction(30)
                outcome = "abort"
        except KafkaException as exc:
            err: KafkaError = exc.args[0]
            h("error", err=err.name(), fatal=err.fatal(), abortable=err.txn_requires_abort(), msg=err.str())
            if err.txn_requires_abort():
                try:
                    p.abort_transaction(30)
                    outcome = "abort"
                except KafkaException as exc2:
                    h("error", err=exc2.args[0].name(), where="abort")
            if outcome == "unknown":
                p = make()  # a fatal error (or a failed abort): a new instance fences the old
        h("txn", id=n, values=values, outcome=outcome)
        time.sleep(rng.uniform(0.05, 0.3))
    h("done", txns=n)


def consume(a: argparse.Namespace, h: History) -> None:
    c = Consumer({**_common(a.bootstrap), "group.id": GROUP, "isolation.level": "read_committed",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest", "session.timeout.ms": 10000,
                  "heartbeat.interval.ms": 1000, "max.poll.interval.ms": 60000, "client.id": a.name,
                  "error_cb": lambda e: h("error", err=e.name(), msg=e.str())})
    c.subscribe([a.topic], on_assign=lambda _c, ps: h("assign", ps=[tp.partition for tp in ps]),
                on_revoke=lambda _c, ps: h("revoke", ps=[tp.partition for tp in ps]))
    last_commit = time.monotonic()
    while not _stop:
        for m in c.consume(200, 0.5):
            if m.error() is None:
                h("poll", p=m.partition(), o=m.offset(), v=m.value().decode())
            elif m.error().code() != KafkaError._PARTITION_EOF:
                h("error", err=m.error().name(), msg=m.error().str())
        if time.monotonic() - last_commit >= 1.0:
            last_commit = time.monotonic()
            _commit(c, h)
    _commit(c, h)
    c.close()
    h("done")


def _commit(c: Consumer, h: History) -> None:
    # what this commit tries to store: if its answer is lost, the group may hold it anyway
    try:
        tried = {tp.partition: tp.offset for tp in c.position(c.assignment()) if tp.offset >= 0}
    except KafkaException:
        tried = {}
    if tried:
        h("commit_try", offsets=tried)
    try:
        for tp in c.commit(asynchronous=False) or []:
            if tp.error is None and tp.offset >= 0:
                h("commit", p=tp.partition, o=tp.offset)
    except KafkaException as exc:
        if exc.args[0].code() != KafkaError._NO_OFFSET:
            h("commit_fail", err=exc.args[0].name())


def share_ack_for(value: str, delivery: int) -> str:
    """The share members' acknowledgement of a record, by its value "<producer>-<seq>": one in
    50 is released at every delivery (archived once the delivery count limit is reached), one
    in 20 released at its first delivery only (redelivered, then accepted), the rest accepted."""
    seq = int(value.rsplit("-", 1)[1])
    if seq % 50 == 7:
        return "RELEASE"
    if seq % 20 == 3 and delivery <= 1:
        return "RELEASE"
    return "ACCEPT"


def share(a: argparse.Namespace, h: History) -> None:
    from confluent_kafka import AcknowledgeType, ShareConsumer

    c = ShareConsumer({**_common(a.bootstrap), "group.id": a.group, "share.acknowledgement.mode": "explicit",
                       "client.id": a.name, "error_cb": lambda e: h("error", err=e.name(), msg=e.str())})
    c.subscribe([a.topic])
    h("subscribed")
    while not _stop:
        try:
            batch = c.poll(0.5)
        except (KafkaException, RuntimeError) as exc:  # RuntimeError: IllegalStateException
            h("error", err=str(exc), where="poll")
            time.sleep(0.2)
            continue
        polled = round(time.time(), 4)
        got = []
        for m in batch:
            if m.error() is not None:
                h("error", err=m.error().name(), msg=m.error().str())
                continue
            v = m.value().decode()
            d = m.delivery_count()
            ack = share_ack_for(v, d)
            try:
                c.acknowledge(m, getattr(AcknowledgeType, ack))
            except Exception as exc:  # no longer in flight: the broker will not confirm it
                h("error", err=str(exc), where="acknowledge", p=m.partition(), o=m.offset())
            got.append({"p": m.partition(), "o": m.offset(), "v": v, "d": d, "a": ack, "tp": polled})
        if not got:
            continue
        errors: dict[int, str | None] = {}
        try:
            for tp, err in c.commit_sync(15.0).items():
                errors[tp.partition] = None if err is None else str(err)
        except (KafkaException, RuntimeError) as exc:
            errors = {e["p"]: f"commit_sync: {exc}" for e in got}
        for e in got:
            # ok: commit_sync answered None for its partition; a partition missing from the
            # answer was not confirmed either
            err = errors.get(e["p"], "no answer for the partition")
            h("share", **e, ok=err is None, **({"err": err} if err else {}))
    try:
        c.close()
    except (KafkaException, RuntimeError) as exc:
        h("error", err=str(exc), where="close")
    h("done")


def drain(a: argparse.Namespace, h: History) -> None:
    for isolation in ("read_uncommitted", "read_committed"):
        c = Consumer({**_common(a.bootstrap), "group.id": "chaos-drain", "isolation.level": isolation,
                      "enable.auto.commit": False, "enable.partition.eof": True})
        ends = {}
        for p in range(a.partitions):
            ends[p] = c.get_watermark_offsets(TopicPartition(a.topic, p), timeout=30, cached=False)[1]
        c.assign([TopicPartition(a.topic, p, OFFSET_BEGINNING) for p in range(a.partitions)])
        todo = {p for p, end in ends.items() if end > 0}
        deadline = time.monotonic() + 120
        while todo and time.monotonic() < deadline:
            for m in c.consume(1000, 1.0):
                if m.error() is None:
                    h("read", iso=isolation, p=m.partition(), o=m.offset(), v=m.value().decode())
                elif m.error().code() == KafkaError._PARTITION_EOF:
                    if m.offset() >= ends[m.partition()] or isolation == "read_committed":
                        todo.discard(m.partition())
                else:
                    h("error", err=m.error().name(), msg=m.error().str())
        h("ends", iso=isolation, ends=ends, unfinished=sorted(todo))
        c.close()
    c = Consumer({**_common(a.bootstrap), "group.id": GROUP})
    committed = c.committed([TopicPartition(a.topic, p) for p in range(a.partitions)], timeout=30)
    h("committed", offsets={tp.partition: tp.offset for tp in committed})
    c.close()


# --- the Schema Registry -------------------------------------------------------------------
REGISTRY_CT = "application/vnd.schemaregistry.v1+json"


def registry_schema(subject: int, version: int, client: str = "sr") -> str:
    """Version ``version`` of subject ``subject``'s Avro record (of client ``client``): a record
    of its own name, the fields of the version before it and one more, with a default
    (BACKWARD compatible)."""
    fields: list[dict] = [{"name": "seq", "type": "long"}]
    for j in range(1, version):
        kind = j % 3
        if kind == 0:
            fields.append({"name": f"f{j}", "type": ["null", "string"], "default": None})
        elif kind == 1:
            fields.append({"name": f"f{j}", "type": "int", "default": j})
        else:
            fields.append({"name": f"f{j}", "type": "string", "default": f"v{j}"})
    return json.dumps({"type": "record", "name": f"Chaos{subject}", "namespace": f"krait.chaos.{client}",
                       "fields": fields}, separators=(",", ":"))


def registry_call(url: str, method: str, path: str, body: object = None,
                  timeout: float = 10.0, conn: list | None = None) -> tuple[int, object]:
    """(HTTP status, JSON answer) of one request; OSError (http.client's errors included)
    when no answer came. ``conn``: a one-slot list holding a kept-alive connection."""
    u = urllib.parse.urlsplit(url)
    c = conn[0] if conn else None
    if c is None:
        c = http.client.HTTPConnection(u.hostname, u.port, timeout=timeout)
    data = json.dumps(body).encode() if body is not None else None
    try:
        c.request(method, path, body=data, headers={"Content-Type": REGISTRY_CT, "Accept": REGISTRY_CT})
        resp = c.getresponse()
        payload = resp.read()
    except (OSError, http.client.HTTPException) as exc:
        c.close()
        if conn:
            conn[0] = None
        raise OSError(f"{type(exc).__name__}: {exc}") from None
    if conn is not None:
        conn[0] = c
    else:
        c.close()
    try:
        return resp.status, json.loads(payload)
    except ValueError:
        return resp.status, payload.decode(errors="replace")[:300]


def _err(status: int, body: object) -> dict:
    code = body.get("error_code") if isinstance(body, dict) else None
    msg = body.get("message") if isinstance(body, dict) else body
    return {"status": status, "code": code, "msg": str(msg)[:200]}


def _registries(value: str) -> dict[int, str]:
    """--registries "ID=URL,ID=URL..." (or plain URLs, numbered from 1): broker id -> URL."""
    out = {}
    for i, item in enumerate(value.split(","), 1):
        bid, sep, url = item.partition("=")
        out[int(bid) if sep else i] = url if sep else item
    return out


def registry(a: argparse.Namespace, h: History) -> None:
    urls = _registries(a.registries)
    brokers = sorted(urls)
    subjects = [f"{REGISTRY_SUBJECT_PREFIX}{a.name}-{k}-value" for k in range(a.subjects)]
    turn = random.Random(f"{a.seed}-{a.name}").randrange(len(urls))  # which broker is asked next
    seq, acked, due = 0, 0, time.monotonic()
    while not _stop:
        # at most --rate registrations a second, and no burst to make up for a slow one
        due = max(due, time.monotonic()) + 1 / a.rate
        k, version = seq % a.subjects, seq // a.subjects + 1
        subject, schema = subjects[k], registry_schema(k, version, a.name)
        fp = registry_fingerprint(schema)
        attempt = 0
        while not _stop:
            attempt += 1
            b = brokers[turn % len(brokers)]
            turn += 1
            sent = time.time()
            try:
                status, body = registry_call(urls[b], "POST", f"/subjects/{subject}/versions", {"schema": schema},
                                             timeout=a.timeout)
            except OSError as exc:
                status, body = -1, str(exc)
            if status == 200 and isinstance(body, dict) and isinstance(body.get("id"), int):
                ack = {"subject": subject, "n": version, "fp": fp, "id": body["id"], "b": b, "attempts": attempt,
                       "sent": round(sent, 4), "lat": round(time.time() - sent, 4)}
                ack.update(_lookup(urls, brokers[turn % len(brokers)], subject, schema, b))
                h("ack", **ack)
                acked += 1
                break
            h("fail", subject=subject, n=version, fp=fp, b=b, attempt=attempt, lat=round(time.time() - sent, 4),
              **(_err(status, body) if status > 0 else {"status": status, "msg": str(body)[:200]}))
            time.sleep(0.3)  # then the same schema again, on the next broker
        else:
            # stopped before this schema's registration was acknowledged: it may be in or not
            h("pending", subject=subject, n=version, fp=fp, attempts=attempt)
            break
        seq += 1
        while not _stop and (wait := due - time.monotonic()) > 0:
            time.sleep(min(wait, 0.2))
    h("done", acked=acked)


def _lookup(urls: dict[int, str], first: int, subject: str, schema: str, acked_by: int) -> dict:
    """The version (and id) of the registered schema by a lookup (POST /subjects/{subject}):
    on the next broker first (a follower may not have it yet), then on the one that answered."""
    tried = []
    for b in dict.fromkeys([first, acked_by]):
        try:
            status, body = registry_call(urls[b], "POST", f"/subjects/{subject}", {"schema": schema}, timeout=5)
        except OSError as exc:
            status, body = -1, str(exc)
        if status == 200 and isinstance(body, dict):
            return {"v": body.get("version"), "lid": body.get("id"), "lb": b}
        tried.append([b, status, body.get("error_code") if isinstance(body, dict) else None])
    return {"lookup_miss": tried}


def _snapshot(url: str, timeout: float) -> dict:
    """One broker's registry: subject -> [[version, id, fingerprint]], id -> fingerprint."""
    conn: list = [None]

    def get(path: str) -> object:
        reused = conn[0] is not None
        try:
            status, body = registry_call(url, "GET", path, timeout=timeout, conn=conn)
        except OSError:
            if not reused:
                raise
            # a kept-alive connection the server had closed: once more on a new one
            status, body = registry_call(url, "GET", path, timeout=timeout, conn=conn)
        if status != 200:
            raise OSError(f"GET {path}: {json.dumps(_err(status, body))}")
        return body

    try:
        versions: dict[str, list] = {}
        ids: dict[int, str] = {}
        for subject in get("/subjects"):
            q = urllib.parse.quote(subject, safe="")
            versions[subject] = []
            for v in get(f"/subjects/{q}/versions"):
                d = get(f"/subjects/{q}/versions/{v}")
                versions[subject].append([d["version"], d["id"], registry_fingerprint(d["schema"])])
                if d["version"] != v or d["subject"] != subject:
                    versions[subject][-1].append({"asked": [subject, v], "answered": [d["subject"], d["version"]]})
        for schema_id in sorted({e[1] for vs in versions.values() for e in vs}):
            ids[schema_id] = registry_fingerprint(get(f"/schemas/ids/{schema_id}")["schema"])
        return {"ok": True, "versions": versions, "ids": ids}
    finally:
        if conn[0] is not None:
            conn[0].close()


def registry_read(a: argparse.Namespace, h: History) -> None:
    urls = _registries(a.registries)
    start = time.monotonic()
    rounds = 0
    while True:
        rounds += 1
        snaps = {}
        for b, url in urls.items():
            try:
                snaps[b] = _snapshot(url, a.timeout)
            except (OSError, KeyError, TypeError, ValueError) as exc:
                snaps[b] = {"ok": False, "err": str(exc)[:300]}
        views = [json.dumps([s.get("versions"), s.get("ids")], sort_keys=True) for s in snaps.values()]
        agreed = all(s["ok"] for s in snaps.values()) and len(set(views)) == 1
        if agreed or _stop or time.monotonic() - start > a.wait:
            break
        time.sleep(1)
    for b, snap in snaps.items():
        h("snapshot", b=b, url=urls[b], **snap)
    h("read", rounds=rounds, waited=round(time.monotonic() - start, 2), agreed=agreed)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("role", choices=["produce", "txn", "consume", "share", "drain", "registry", "registry-read"])
    ap.add_argument("bootstrap")
    ap.add_argument("topic")
    ap.add_argument("out")
    ap.add_argument("--name", default="c")
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--rate", type=float, default=100.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--group", default=SHARE_GROUP)
    ap.add_argument("--paced", action="store_true", help="produce: never above --rate")
    ap.add_argument("--registries", default="", help="registry, registry-read: the brokers' registry URLs")
    ap.add_argument("--subjects", type=int, default=4, help="registry: how many subjects")
    ap.add_argument("--timeout", type=float, default=12.0, help="registry, registry-read: seconds per request")
    ap.add_argument("--wait", type=float, default=30.0, help="registry-read: seconds to wait for the brokers to agree")
    a = ap.parse_args(argv)
    signal.signal(signal.SIGTERM, _on_term)
    signal.signal(signal.SIGINT, _on_term)
    h = History(a.out)
    {"produce": produce, "txn": txn, "consume": consume, "share": share, "drain": drain, "registry": registry,
     "registry-read": registry_read}[a.role](a, h)


if __name__ == "__main__":
    sys.exit(main())
