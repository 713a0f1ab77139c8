"""Keystores Kafka's brokers take beyond a PEM file: PKCS12 (ssl.keystore.type=PKCS12 with
ssl.keystore.password) and inline PEM (ssl.keystore.certificate.chain + ssl.keystore.key);
and KIP-684's rule that a broker-wide ssl.client.auth applies to SSL listeners, not SASL_SSL
ones. A real broker, librdkafka verifying the server against the test CA."""

from __future__ import annotations

import ssl
import subprocess
from pathlib import Path

import pytest
from confluent_kafka import Producer

from broker.config import BrokerConfig
from broker.security.listeners import listener_security
from tests.krait_harness import BrokerProcess
from tests.security.tls_ca import make_cert_files


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return make_cert_files(tmp_path_factory.mktemp("ca"))


def _produce_ok(port: int, ca: str) -> bool:
    p = Producer({"bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": "SSL", "ssl.ca.location": ca,
                  "log_level": 0})
    errors = []
    p.produce("keystores", b"v", on_delivery=lambda err, m: errors.append(err))
    p.flush(15)
    return errors == [None]


@pytest.mark.parametrize("kind", ["PKCS12", "inline PEM"])
def test_broker_serves_tls_from_the_keystore(tmp_path, certs, kind):
    if kind == "PKCS12":
        store = tmp_path / "server.p12"
        subprocess.run(["openssl", "pkcs12", "-export", "-inkey", certs.server_key, "-in", certs.server_cert,
                        "-certfile", certs.ca_cert, "-passout", "pass:store-secret", "-out", str(store)], check=True)
        keys = {"ssl.keystore.type": "PKCS12", "ssl.keystore.location": str(store),
                "ssl.keystore.password": "store-secret"}
    else:
        keys = {"ssl.keystore.type": "PEM", "ssl.keystore.key": Path(certs.server_key).read_text(),
                "ssl.keystore.certificate.chain": Path(certs.server_cert).read_text() + Path(certs.ca_cert).read_text()}
    b = BrokerProcess(str(tmp_path / "logs"), keys)
    b.overrides["listeners"] = f"SSL://127.0.0.1:{b.port}"
    b.start()
    try:
        assert _produce_ok(b.port, certs.ca_cert)
    finally:
        b.stop()


def test_wrong_pkcs12_password_stops_startup_naming_the_key(tmp_path, certs):
    store = tmp_path / "server.p12"
    subprocess.run(["openssl", "pkcs12", "-export", "-inkey", certs.server_key, "-in", certs.server_cert,
                    "-passout", "pass:store-secret", "-out", str(store)], check=True)
    b = BrokerProcess(str(tmp_path / "logs"), {"ssl.keystore.type": "PKCS12", "ssl.keystore.location": str(store),
                                               "ssl.keystore.password": "wrong"})
    b.overrides["listeners"] = f"SSL://127.0.0.1:{b.port}"
    with pytest.raises(RuntimeError, match="ssl.keystore.password"):
        b.start()


def test_broker_wide_client_auth_applies_to_ssl_listeners_only(certs):
    cfg = BrokerConfig.from_props({
        "listeners": "SSL://127.0.0.1:19093,SASL_SSL://127.0.0.1:19094",
        "ssl.keystore.type": "PEM", "ssl.keystore.location": certs.server_keystore,
        "ssl.truststore.type": "PEM", "ssl.truststore.location": certs.ca_cert, "ssl.client.auth": "required",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512"})
    sec = listener_security(cfg)
    assert sec["SSL"].ssl.verify_mode == ssl.CERT_REQUIRED
    assert sec["SASL_SSL"].ssl.verify_mode == ssl.CERT_NONE
    cfg = BrokerConfig.from_props({**cfg.originals, "listener.name.sasl_ssl.ssl.client.auth": "requested"})
    assert listener_security(cfg)["SASL_SSL"].ssl.verify_mode == ssl.CERT_OPTIONAL
