"""The client quota core (broker.security.quotas.QuotaManager) with an injected clock:
Kafka's eight-level precedence, which clients share a rate, Kafka's Rate windows and the
QuotaUtils.throttleTime formula with exact numbers."""

from __future__ import annotations

import asyncio

from broker.security.quotas import FETCH, PRODUCE, REQUEST, QuotaManager, Rate
from broker.security.store import SecurityStore

P = "producer_byte_rate"

LEVELS = [  # Kafka's order, most specific first
    "users/alice/clients/app",
    "users/alice/clients/<default>",
    "users/alice",
    "users/<default>/clients/app",
    "users/<default>/clients/<default>",
    "users/<default>",
    "clients/app",
    "clients/<default>",
]


def test_eight_levels_of_precedence():
    entities = {path: {P: str(1000 * (i + 1))} for i, path in enumerate(LEVELS)}
    qm = QuotaManager()
    for i, path in enumerate(LEVELS):
        qm.update(entities)
        assert qm.quota(PRODUCE, "alice", "app") == 1000 * (i + 1), path
        del entities[path]
    qm.update(entities)
    assert qm.quota(PRODUCE, "alice", "app") is None


def test_user_quota_applies_to_other_users_through_defaults_only():
    qm = QuotaManager()
    qm.update({"users/alice": {P: "100"}, "clients/<default>": {P: "7"}})
    assert qm.quota(PRODUCE, "alice", "x") == 100
    # bob has no user quota: the user levels are skipped, the client default applies
    assert qm.quota(PRODUCE, "bob", "x") == 7
    assert qm.quota(FETCH, "alice", "x") is None  # another key, another quota type


def test_keys_map_to_their_quota_types():
    qm = QuotaManager()
    qm.update({"clients/app": {"producer_byte_rate": "1", "consumer_byte_rate": "2", "request_percentage": "3.5"}})
    assert (qm.quota(PRODUCE, "", "app"), qm.quota(FETCH, "", "app"), qm.quota(REQUEST, "", "app")) == (1, 2, 3.5)


def test_first_request_is_measured_over_the_padded_window():
    # 11 samples of 1 s: a young rate is measured over (11 - 1) s
    qm = QuotaManager(clock=lambda: 0)
    qm.update({"clients/app": {P: "100"}})
    assert qm.record_produce("", "app", 1000, 0) == 0  # 1000 B / 10 s = 100 B/s: at the bound
    # 1500 B / 10 s = 150 B/s: (150 - 100) / 100 * 10000 ms
    assert qm.record_produce("", "app", 500, 0) == 5000


def test_throttle_formula_after_the_window_fills():
    r = Rate(11, 1000)
    r.record(100, 0)
    assert r.window_size_ms(0) == 10_000
    assert r.window_size_ms(10_500) == 10_500  # ten full windows: no padding any more
    qm = QuotaManager()
    qm.update({"clients/app": {P: "100"}})
    for t in range(0, 10_000, 1000):  # 100 B in each of seconds 0..9: 1000 B / 10 s, the bound
        assert qm.record_produce("", "app", 100, t) == 0
    # ten full windows now: 1100 B / 10 s = 110 B/s -> (110 - 100) / 100 * 10000
    assert qm.record_produce("", "app", 100, 10_000) == 1000
    # at 11000 the first sample (last event at 0) expires: samples 1..10 hold 1000 B and
    # start at 1000; 400 more: 1400 B over 10 s = 140 B/s -> (140 - 100) / 100 * 10000
    assert qm.record_produce("", "app", 400, 11_000) == 4000


def test_old_samples_expire():
    qm = QuotaManager()
    qm.update({"clients/app": {P: "100"}})
    assert qm.record_produce("", "app", 3000, 0) == 20_000  # 300 B/s -> (300-100)/100 * 10 s
    # 11 s later nothing is left of it
    assert qm.record_produce("", "app", 100, 11_000) == 0


def test_small_window_config():
    qm = QuotaManager.from_originals({"quota.window.num": "2", "quota.window.size.seconds": "3"})
    qm.update({"clients/app": {P: "100"}})
    # window padded to (2 - 1) * 3 s: 600 B / 3 s = 200 B/s -> (200-100)/100 * 3000
    assert qm.record_produce("", "app", 600, 0) == 3000


def test_request_percentage_is_capped_at_one_window():
    qm = QuotaManager()
    qm.update({"users/alice": {"request_percentage": "1"}})
    # 50 ms of handling = 5 percent-seconds over 10 s = 0.5 %: within 1 %
    assert qm.record_request_time("alice", "c", 50, 0) == 0
    # 550 ms in all: 5.5 % -> (5.5 - 1) / 1 * 10000 = 45000, capped at the 1 s window
    assert qm.record_request_time("alice", "c", 500, 0) == 1000


def test_user_quota_is_shared_by_the_users_client_ids():
    qm = QuotaManager()
    qm.update({"users/alice": {P: "100"}})
    assert qm.record_produce("alice", "a", 1000, 0) == 0
    assert qm.record_produce("alice", "b", 1000, 0) == 10_000  # one rate: 2000 B / 10 s
    assert qm.record_produce("bob", "a", 5000, 0) == 0  # no quota for bob


def test_default_client_quota_is_per_client_id():
    qm = QuotaManager()
    qm.update({"clients/<default>": {P: "100"}})
    assert qm.record_produce("", "a", 1000, 0) == 0
    assert qm.record_produce("", "b", 1000, 0) == 0  # b has its own rate
    assert qm.record_produce("", "a", 1000, 0) == 10_000


def test_mixed_levels_share_as_kafka_does():
    # with user and client quotas both present (QuotaTypes: custom mix), a client whose
    # quota comes from users/<default> is tracked per (user, client id) pair, one coming
    # from clients/app per client id whatever the user
    qm = QuotaManager()
    qm.update({"users/<default>/clients/<default>": {P: "100"}, "clients/app": {P: "100"}})
    assert qm.quota(PRODUCE, "alice", "app") == 100  # users/<default>/clients/<default> first
    assert qm.record_produce("alice", "x", 1000, 0) == 0
    assert qm.record_produce("bob", "x", 1000, 0) == 0  # another pair, another rate


def test_no_quota_records_nothing():
    qm = QuotaManager()
    assert qm.record_produce("alice", "app", 10**9, 0) == 0
    qm.update({"clients/other": {P: "1"}})
    assert qm.record_produce("alice", "app", 10**9, 0) == 0
    assert qm.quotas[PRODUCE].rates == {}


def test_fetch_unrecord_and_window_cap():
    qm = QuotaManager()
    qm.update({"clients/c": {"consumer_byte_rate": "1000"}})
    assert qm.fetch_max_bytes("", "c") == 10_000  # quota * (11 - 1) * 1 s
    assert qm.fetch_max_bytes("", "other") is None
    assert qm.record_fetch("", "c", 20_000, 0) == 10_000
    qm.unrecord_fetch("", "c", 20_000, 0)
    assert qm.record_fetch("", "c", 10_000, 0) == 0


def test_quota_change_keeps_the_recorded_rate():
    qm = QuotaManager()
    qm.update({"clients/app": {P: "1000"}})
    assert qm.record_produce("", "app", 5000, 0) == 0
    qm.update({"clients/app": {P: "100"}})
    # 5100 B / 10 s = 510 B/s against 100: (510 - 100) / 100 * 10000
    assert qm.record_produce("", "app", 100, 0) == 41_000


def test_rebuilds_from_the_store(tmp_path):
    store = SecurityStore(tmp_path)
    qm = QuotaManager()
    store.listeners.append(lambda: qm.update(store.entities))
    asyncio.run(store.alter_entity("users/alice/clients/app", {P: "250"}))
    assert qm.quota(PRODUCE, "alice", "app") == 250
    asyncio.run(store.alter_entity("users/alice/clients/app", {P: None}))
    assert qm.quota(PRODUCE, "alice", "app") is None
    assert not qm.enabled


def test_sanitized_names_in_paths():
    qm = QuotaManager()
    # a principal name with characters Kafka's Sanitizer encodes
    qm.update({"users/CN%3Da%2CO%3Db": {P: "5"}})
    assert qm.quota(PRODUCE, "CN=a,O=b", "x") == 5
