"""Re-authentication (KIP-368) with a real client: with connections.max.reauth.ms set, the
broker gives each SASL session a lifetime; librdkafka re-authenticates on the same
connection before it ends, so a producer writing across several lifetimes is never cut
off, and the broker closes no connection for an expired session."""

from __future__ import annotations

import time

from confluent_kafka import Producer

from tests.krait_harness import BrokerProcess
from tests.security.secure_broker import plain_jaas


def test_librdkafka_reauthenticates_before_the_session_ends(tmp_path):
    b = BrokerProcess(str(tmp_path / "logs"), {
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": plain_jaas({"alice": "alice-secret"}, ("alice", "alice-secret")),
        # librdkafka re-authenticates at 90 % of the session's lifetime: 1.5 s left it 150 ms,
        # which a loaded CI machine overran once (the broker then rightly closed the
        # connection); 5 s leaves it half a second
        "connections.max.reauth.ms": "5000"})
    b.overrides["listeners"] = f"SASL_PLAINTEXT://127.0.0.1:{b.port}"
    b.start()
    try:
        errors: list = []
        p = Producer({"bootstrap.servers": b.bootstrap, "security.protocol": "SASL_PLAINTEXT",
                      "sasl.mechanism": "PLAIN", "sasl.username": "alice", "sasl.password": "alice-secret",
                      "error_cb": errors.append, "log_level": 0})
        delivered = []
        deadline = time.monotonic() + 16  # three session lifetimes
        i = 0
        while time.monotonic() < deadline:
            p.produce("reauth", str(i).encode(), on_delivery=lambda err, m: delivered.append(err))
            p.poll(0.05)
            i += 1
        assert p.flush(15) == 0
        assert len(delivered) == i and all(e is None for e in delivered)
        assert not errors, errors
        log = b.log_text()
        assert "SASL session expired" not in log, log[-2000:]
    finally:
        b.stop()
