"""/metrics and /readyz of a three-broker cluster: readiness once registered in ZooKeeper,
one active controller, produce counted on the leader only, and a frozen follower showing
as an ISR shrink and an under-replicated partition on the leader, then an expansion."""

from __future__ import annotations

from confluent_kafka import Producer

from tests.broker.test_metrics_http import _get, scrape, value
from tests.cluster.cluster_harness import Cluster, wait_for
from tests.krait_harness import free_port


def test_cluster_metrics_and_readiness(tmp_path, zk_connect):
    # the leader notices the frozen follower (replica.lag.time.max.ms) well before ZooKeeper
    # expires its session (after which the controller, not the leader, would shrink the ISR)
    cl = Cluster(tmp_path, zk_connect, **{"zookeeper.session.timeout.ms": "20000", "replica.lag.time.max.ms": "2000"})
    ports = {}
    for bid, b in cl.brokers.items():
        ports[bid] = free_port()
        b.overrides["krait.http.listener"] = f"127.0.0.1:{ports[bid]}"
    with cl:
        for port in ports.values():
            assert _get(port, "/readyz") == (200, "ready\n")
        wait_for(lambda: sum(value(scrape(p), "kafka_controller_kafkacontroller_activecontrollercount")
                             for p in ports.values()) == 1, what="one active controller")

        cl.create_topic("watched", partitions=1, rf=3)
        cl.wait_isr("watched", 0, 3)
        leader = cl.leader("watched", 0)
        n = 200
        p = Producer({"bootstrap.servers": cl.bootstrap, "acks": "all", "linger.ms": 5})
        for i in range(n):
            p.produce("watched", value=b"x%d" % i)
        assert p.flush(30) == 0
        for bid, port in ports.items():
            s = scrape(port)
            assert value(s, "kafka_server_brokertopicmetrics_messagesin_total", topic="watched") == \
                (n if bid == leader else 0)
            assert value(s, "kafka_server_replicamanager_partitioncount") >= 1
            assert value(s, "kafka_server_replicamanager_underreplicatedpartitions") == 0
        wait_for(lambda: all(value(scrape(port), "kafka_log_log_logendoffset", topic="watched", partition="0") == n
                             for port in ports.values()), what="every replica has the records")
        assert value(scrape(ports[leader]), "kafka_server_replicamanager_leadercount") >= 1
        # the followers' fetches count as Kafka counts them: Fetch and FetchFollower
        s = scrape(ports[leader])
        assert value(s, "kafka_network_requestmetrics_requests_total", request="FetchFollower") >= 1
        assert value(s, "kafka_network_requestmetrics_requests_total", request="Fetch") >= \
            value(s, "kafka_network_requestmetrics_requests_total", request="FetchFollower")

        follower = next(b for b in ports if b != leader)
        cl.freeze(follower)
        try:
            wait_for(lambda: (s := scrape(ports[leader]))
                     and value(s, "kafka_server_replicamanager_isrshrinks_total") >= 1
                     and value(s, "kafka_server_replicamanager_underreplicatedpartitions") >= 1,
                     timeout=15, what="an ISR shrink on the leader")
        finally:
            cl.thaw(follower)
        wait_for(lambda: (s := scrape(ports[leader]))
                 and value(s, "kafka_server_replicamanager_isrexpands_total") >= 1
                 and value(s, "kafka_server_replicamanager_underreplicatedpartitions") == 0,
                 timeout=40, what="the follower back in the ISR")
