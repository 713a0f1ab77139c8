"""The Schema Registry on a three-broker ZooKeeper cluster: every broker answers, writes go
through one writer (the leader of ``_schemas``-0; the others forward to it), and a SIGKILL
of that writer in the middle of registrations neither reuses an id, nor gives one schema
two ids, nor loses an acknowledged version: every broker ends with the same subjects,
versions and ids, including those registered before the kill."""

from __future__ import annotations

import json
import threading
import time

from tests.cluster.cluster_harness import Cluster, wait_for
from tests.krait_harness import free_port
from tests.schema_registry.registry_http import call

TOPIC = "_schemas"


def _schema(n: int) -> str:
    # every schema distinct; each subject's versions stay BACKWARD compatible (new fields have defaults)
    return json.dumps({"type": "record", "name": "Event", "fields": [
        {"name": "id", "type": "long"}, *({"name": f"f{n}_{j}", "type": "int", "default": j} for j in range(1))]})


def test_registry_survives_writer_sigkill(tmp_path, zk_connect):
    with Cluster(tmp_path, zk_connect) as cl:
        urls = {}
        for bid, b in cl.brokers.items():
            port = free_port()
            b.overrides["krait.schema.registry.listener"] = f"127.0.0.1:{port}"
            urls[bid] = f"http://127.0.0.1:{port}"
            b.stop()
            b.start()
        wait_for(lambda: len(cl.live_ids()) == 3, what="brokers back")

        # the first write creates _schemas (rf 3) through whichever broker gets it
        assert call(f"{urls[2]}/subjects/warmup/versions", "POST", {"schema": '"string"'})[0] == 200
        writer = cl.leader(TOPIC, 0)
        for bid, url in urls.items():  # every broker reads it, writer or not
            wait_for(lambda u=url: call(f"{u}/subjects")[1] == ["warmup"], 20, what=f"broker {bid} reading")

        acked: dict[tuple[str, int], int] = {}  # (subject, n) -> id acknowledged
        failures: list[tuple[int, object]] = []
        stop = threading.Event()
        lock = threading.Lock()

        def register(worker: int) -> None:
            n = 0
            while not stop.is_set():
                bid = (worker + n) % 3 + 1
                if cl.brokers[bid].proc is None or cl.brokers[bid].proc.poll() is not None:
                    bid = next(b for b in urls if cl.brokers[b].proc.poll() is None)
                subject = f"s{worker}-{n % 4}"
                try:
                    status, body, _ = call(f"{urls[bid]}/subjects/{subject}/versions", "POST",
                                           {"schema": _schema(worker * 10000 + n)}, timeout=20)
                except OSError as exc:  # the broker died under the request: retried elsewhere
                    status, body = -1, str(exc)
                if status == 200:
                    with lock:
                        acked[(subject, worker * 10000 + n)] = body["id"]
                    n += 1
                else:
                    failures.append((status, body))  # retried: the same schema, again
                    time.sleep(0.2)

        threads = [threading.Thread(target=register, args=(w,), daemon=True) for w in range(3)]
        for t in threads:
            t.start()
        wait_for(lambda: len(acked) >= 20, 60, what="registrations before the kill")
        cl.brokers[writer].kill()
        count = len(acked)
        wait_for(lambda: len(acked) >= count + 20, 90, what="registrations after the writer's kill")
        cl.brokers[writer].start()
        count = len(acked)
        wait_for(lambda: len(acked) >= count + 10, 60, what="registrations after the restart")
        stop.set()
        for t in threads:
            t.join(30)

        # no id was given to two schemas, and none to a schema twice
        ids = list(acked.values())
        assert len(set(ids)) == len(ids), "an id was reused"
        # every broker has every acknowledged version, with the id it was acknowledged with
        expected = {}
        for (subject, n), schema_id in acked.items():
            expected[schema_id] = (subject, json.loads(_schema(n)))
        for bid, url in urls.items():
            def caught_up(u=url) -> bool:
                return all(call(f"{u}/schemas/ids/{i}")[0] == 200 for i in list(expected)[-5:])
            wait_for(caught_up, 30, what=f"broker {bid} caught up")
            for schema_id, (subject, schema) in expected.items():
                status, body, _ = call(f"{url}/schemas/ids/{schema_id}")
                assert status == 200 and json.loads(body["schema"]) == schema, (bid, schema_id, body)
                assert subject in call(f"{url}/schemas/ids/{schema_id}/subjects")[1]
        # the versions of each subject are 1..N without a gap, the same on every broker
        subjects = call(f"{urls[1]}/subjects")[1]
        for subject in subjects:
            versions = call(f"{urls[1]}/subjects/{subject}/versions")[1]
            assert versions == list(range(1, len(versions) + 1)), (subject, versions)
            for url in urls.values():
                assert call(f"{url}/subjects/{subject}/versions")[1] == versions
        # ids were handed out in order, each once: no id between two used ones is missing
        # except those of registrations that failed before their record was committed
        print(f"registered {len(ids)} schemas, {len(failures)} refused or failed (retried), "
              f"{max(ids) - min(ids) + 1 - len(ids)} ids unused between the first and the last")
        assert max(ids) - min(ids) + 1 - len(ids) <= len(failures)
