"""The Schema Registry of a secured broker: https with the broker's keystore, HTTP basic
auth against the broker's own SASL users (PLAIN from the JAAS config, SCRAM from
AlterUserScramCredentials), reads for any authenticated user, writes for super.users only
(an authorizer is configured). Confluent's Python client, configured as users configure it
for Confluent's registry (basic.auth.user.info, ssl.ca.location), works unchanged."""

from __future__ import annotations

import json
import ssl
import urllib.error

import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError

from tests.krait_harness import free_port
from tests.security.secure_broker import ADMIN, ALICE, SCRAM_USERS, SecureBroker, create_scram_users, sasl_credentials
from tests.security.tls_ca import CertFiles, make_cert_files

from .registry_http import call

SCHEMA = json.dumps({"type": "record", "name": "Secured", "fields": [{"name": "a", "type": "int"}]})


@pytest.fixture(scope="module")
def certs(tmp_path_factory) -> CertFiles:
    return make_cert_files(tmp_path_factory.mktemp("ca"))


@pytest.fixture(scope="module")
def secured(certs, tmp_path_factory):
    port = free_port()
    b = SecureBroker(certs, str(tmp_path_factory.mktemp("logs") / "logs"), protocols=("SASL_SSL",),
                     extra={"krait.schema.registry.listener": f"https://127.0.0.1:{port}"}).start()
    try:
        create_scram_users(sasl_credentials(b, "SASL_SSL", "PLAIN", ADMIN))
    except BaseException:
        print(b.log_text())
        b.kill()
        raise
    b.url = f"https://127.0.0.1:{port}"
    yield b
    b.stop()


def _ctx(certs: CertFiles) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=certs.ca_cert)


def _user(pair: tuple[str, str]) -> str:
    return f"{pair[0]}:{pair[1]}"


def test_basic_auth_and_write_permission(secured, certs):
    url, ctx = secured.url, _ctx(certs)
    # no credentials, a wrong password, an unknown user: 401 with Confluent's body
    for user in (None, f"{ADMIN[0]}:wrong", "nobody:x"):
        status, body, _ = call(f"{url}/subjects", user=user, context=ctx)
        assert (status, body) == (401, {"error_code": 401, "message": "Unauthorized"}), user
    # the super user writes; a PLAIN user and a SCRAM user read but may not write
    status, body, _ = call(f"{url}/subjects/sec-value/versions", "POST", {"schema": SCHEMA}, user=_user(ADMIN),
                           context=ctx)
    assert status == 200, body
    schema_id = body["id"]
    for reader in (ALICE, *SCRAM_USERS.values()):
        assert call(f"{url}/schemas/ids/{schema_id}", user=_user(reader), context=ctx)[0] == 200, reader
        status, body, _ = call(f"{url}/subjects/sec2-value/versions", "POST", {"schema": SCHEMA},
                               user=_user(reader), context=ctx)
        assert status == 403 and body["error_code"] == 40301, (reader, body)
    assert call(f"{url}/subjects", user=_user(ADMIN), context=ctx)[1] == ["sec-value"]


def test_confluent_client_over_https(secured, certs):
    admin = SchemaRegistryClient({"url": secured.url, "basic.auth.user.info": _user(ADMIN),
                                  "ssl.ca.location": certs.ca_cert})
    schema_id = admin.register_schema("client-value", Schema(SCHEMA, "AVRO"))
    alice = SchemaRegistryClient({"url": secured.url, "basic.auth.user.info": _user(ALICE),
                                  "ssl.ca.location": certs.ca_cert})
    assert json.loads(alice.get_schema(schema_id).schema_str) == json.loads(SCHEMA)
    with pytest.raises(SchemaRegistryError) as err:
        alice.register_schema("client2-value", Schema(SCHEMA, "AVRO"))
    assert err.value.http_status_code == 403
    anonymous = SchemaRegistryClient({"url": secured.url, "ssl.ca.location": certs.ca_cert})
    with pytest.raises(SchemaRegistryError) as err:
        anonymous.get_subjects()
    assert err.value.http_status_code == 401


def test_plain_http_and_untrusted_certificates_are_refused(secured, certs):
    with pytest.raises((urllib.error.URLError, ConnectionError, OSError)):
        call(secured.url.replace("https://", "http://") + "/subjects", user=_user(ADMIN), timeout=5)
    with pytest.raises(urllib.error.URLError):
        call(f"{secured.url}/subjects", user=_user(ADMIN), context=ssl.create_default_context(
            cafile=certs.other_ca_cert))
