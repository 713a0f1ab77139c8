"""Online migration between the classic and the consumer protocol with real librdkafka
members (Kafka's group.consumer.migration.policy=bidirectional, the default): a classic
group upgrades when a member with group.protocol=consumer joins it, its classic members
keep consuming inside the consumer group, and it downgrades to classic when that member
leaves; nothing produced is missed and no committed record is delivered again."""

from __future__ import annotations

from broker.tools.wire import WireClient
from protocol.apis import ApiKey

from .members import (
    Member,
    SteadyProducer,
    all_seen,
    committed_redeliveries,
    create_topic,
    exact_cover,
    name,
    wait_for,
)


def _group_type(kb, group: str) -> str | None:
    with WireClient("127.0.0.1", kb.port, timeout=10) as w:
        r = w.request(ApiKey.LIST_GROUPS, 5, states_filter=[], types_filter=[])
    return {g.group_id: g.group_type for g in r.groups}.get(group)


def test_classic_group_upgrades_and_downgrades_online(kb, members):
    topic = create_topic(kb.bootstrap, name("mig"), 6)
    group = name("g-mig")
    producer = SteadyProducer(kb.bootstrap, topic, 6, interval=0.01).start()
    classic = [Member(kb.bootstrap, group, f"c{i}", "classic", topics=[topic]) for i in range(2)]
    members += classic
    wait_for(lambda: exact_cover(classic, 6, per_member=3), 30, "two classic members with three partitions each")
    assert _group_type(kb, group) == "classic"

    joiner = Member(kb.bootstrap, group, "n1", "consumer", topics=[topic])
    members.append(joiner)
    wait_for(lambda: _group_type(kb, group) == "consumer", 30, "the group upgraded to the consumer protocol")
    everyone = [*classic, joiner]
    wait_for(lambda: exact_cover(everyone, 6, per_member=2) and joiner.records(), 45,
             "classic and consumer members sharing the partitions")
    t0 = max(t for t, *_ in joiner.records())
    wait_for(lambda: all(any(r[0] > t0 for r in m.records()) for m in classic), 20,
             "the classic members consuming inside the consumer group")

    joiner.close()
    wait_for(lambda: _group_type(kb, group) == "classic", 30, "the group downgraded to classic")
    wait_for(lambda: exact_cover(classic, 6, per_member=3), 45, "the classic members own everything again")
    produced = producer.stop()
    wait_for(lambda: produced <= all_seen(everyone), 30, "every produced record consumed")
    assert not committed_redeliveries(everyone)
